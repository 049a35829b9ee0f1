"""Times as people read them, the same on the dashboard and in the CLI.

A ledger timestamp is ISO 8601 UTC; a person wants "in 2d 23h (Fri 14:00
UTC)". One module, so the page's countdowns and the CLI's columns never
disagree about what a deadline means.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["deadline_text", "parse_duration", "relative", "span", "utc_text"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `24h`, `2d` (a number and one unit), as the CLI and the settings take them.

    Raises:
        ValueError: anything else; the caller says where the value came from.
    """
    match = _DURATION.match(text.lower())
    if not match:
        raise ValueError(f"{text!r} is not a duration; use e.g. 90s, 30m, 24h, 2d")
    try:
        return timedelta(seconds=float(match.group(1)) * _UNIT_S[match.group(2)])
    except OverflowError:
        raise ValueError(f"{text!r} is too long a duration") from None


def moment_before(now: datetime, text: str) -> datetime:
    """`now` minus the duration `text` (`--since 7d`).

    Raises:
        ValueError: not a duration, or one reaching back before the calendar's first day.
    """
    window = parse_duration(text)
    try:
        return now - window
    except OverflowError:
        raise ValueError(f"{text!r} reaches back before the calendar's first day") from None


_DAILY = re.compile(r"^\s*([01]?\d|2[0-3]):([0-5]\d)(?:\s+(\S+))?\s*$")


def parse_daily_time(text: str) -> tuple[str, str]:
    """`09:00` or `09:00 Europe/Berlin`: `("09:00", zone)` (UTC when none is given).

    Raises:
        ValueError: not HH:MM, or a time zone that is not an IANA name.
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    match = _DAILY.match(text)
    if not match:
        raise ValueError(f"{text[:40]!r} is not a time of day; use HH:MM or HH:MM Area/City")
    zone = match.group(3) or "UTC"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"{zone[:40]!r} is not a known IANA time zone (e.g. Europe/Berlin)"
        ) from None
    return f"{int(match.group(1)):02d}:{match.group(2)}", zone


def span(seconds: float) -> str:
    """A duration as people read it: `850 ms`, `12.4 s`, `3m 05s`, `2h 10m`, `3d 4h`."""
    s = max(0.0, seconds)
    if s < 1:
        return f"{round(s * 1000)} ms"
    if s < 60:
        return f"{s:.1f} s"
    whole = int(s)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s"


def age_text(seconds: float) -> str:
    """How old something is, the same on every surface: `12s`, `3m 05s`, `2h 10m`, `3d 4h`."""
    whole = max(0, int(seconds))
    return f"{whole}s" if whole < 60 else span(whole)


def relative(moment: datetime, now: datetime) -> str:
    """`in 2d 23h`, `5m 02s ago`, or `just now`."""
    delta = (moment - now).total_seconds()
    if delta > 0:
        return f"in {span(delta)}"
    return f"{span(-delta)} ago" if delta <= -1 else "just now"


def deadline_text(moment: datetime | None, now: datetime) -> str:
    """A deadline for a table cell: `in 2d 23h (Fri 14:00 UTC)`; empty when there is none."""
    if moment is None:
        return ""
    return f"{relative(moment, now)} ({moment:%a %H:%M} UTC)"


def utc_text(moment: datetime) -> str:
    """A moment to the second, in UTC: `2026-12-07 12:05:00 UTC` (when a pause ends)."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
