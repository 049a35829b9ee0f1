"""Timestamps as the ledger stores them.

Every time is UTC text in one fixed format, so that SQL can compare and sort
times as plain strings (`deadline_at <= ?`) and every row reads the same way.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from agent_team.exceptions import LedgerInputError

__all__ = ["day_bucket", "from_iso", "to_iso", "utc_now"]

_FORMAT = "-%m-%dT%H:%M:%S.%fZ"  # the year is added padded


def utc_now() -> datetime:
    return datetime.now(UTC)


def to_iso(moment: datetime) -> str:
    """Format an aware datetime as the ledger's UTC text.

    Raises:
        LedgerInputError: for a naive datetime, whose zone we would have to guess.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise LedgerInputError(
            f"timestamp {moment.isoformat()} has no time zone; pass an aware datetime "
            "(e.g. datetime.now(UTC))"
        )
    utc = moment.astimezone(UTC)
    # strftime("%Y") does not pad years before 1000, which would break sorting.
    return f"{utc.year:04d}" + utc.strftime(_FORMAT)


def from_iso(text: str) -> datetime:
    """Parse the ledger's UTC text (or any ISO 8601 string with a zone) back to a datetime."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def day_bucket(moment: datetime | date | str) -> str:
    """The UTC calendar day of a moment as `YYYY-MM-DD`; budget caps are per UTC day."""
    if isinstance(moment, str):
        try:
            return date.fromisoformat(moment).isoformat()
        except ValueError as exc:
            raise LedgerInputError(f"day {moment!r} is not a date; use YYYY-MM-DD") from exc
    if isinstance(moment, datetime):
        return to_iso(moment)[:10]
    return moment.isoformat()
