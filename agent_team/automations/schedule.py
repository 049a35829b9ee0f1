"""When an automation runs: an interval, a cron expression in a time zone, or once.

Slots are instants in UTC. An interval's slots are `first_run_at + k * every`;
a cron schedule's are the expression's times in its time zone (croniter,
daylight-saving changes included), from `first_run_at` on; a one-off has one
slot. After downtime the runner makes one run for the latest slot that has
come and counts the ones it skipped (`due`), so a three-day stop of an hourly
automation is one run that says 71 were missed, not 72 runs. A new automation
stores its first slot even when it has passed (`service._next_run`, the due
rule), so a first run in the past is the same case: one run, due at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from agent_team.common.timefmt import parse_duration
from agent_team.exceptions import InvalidAutomationError
from agent_team.task_model import ScheduleKind

__all__ = [
    "MAX_INTERVAL",
    "MAX_MISSED_COUNTED",
    "MIN_INTERVAL",
    "Due",
    "Schedule",
    "parse_cron",
    "parse_every",
    "parse_moment",
    "parse_timezone",
]

MIN_INTERVAL = timedelta(minutes=1)
MAX_INTERVAL = timedelta(days=366)
# Counting the slots a long stop of a cron schedule skipped walks them one by one; past
# this many the count says "at least".
MAX_MISSED_COUNTED = 10_000


def parse_every(text: str) -> timedelta:
    """`30m`, `1h`, `1d`, `7d`: at least a minute, whole seconds."""
    try:
        every = parse_duration(text)
    except ValueError as exc:
        raise InvalidAutomationError("every", str(exc)) from None
    if every < MIN_INTERVAL:
        raise InvalidAutomationError(
            "every", f"{text!r} is shorter than the shortest interval, 1 minute (1m)"
        )
    if every > MAX_INTERVAL:
        raise InvalidAutomationError("every", f"{text!r} is longer than a year (366d at most)")
    if every.total_seconds() != int(every.total_seconds()):
        raise InvalidAutomationError("every", f"{text!r} is not a whole number of seconds")
    return every


def parse_timezone(name: str) -> ZoneInfo:
    """An IANA time zone name (`Europe/Berlin`, `UTC`)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidAutomationError(
            "timezone", f"{name!r} is not a known IANA time zone (e.g. UTC, Europe/Berlin)"
        ) from None


def parse_cron(expression: str) -> str:
    """Five fields (minute hour day month weekday), names allowed: `0 9 * * MON`."""
    cleaned = " ".join(expression.split())
    if len(cleaned.split(" ")) != 5 or not croniter.is_valid(cleaned):
        raise InvalidAutomationError(
            "cron",
            f"{expression!r} is not a cron expression of five fields "
            "(minute hour day-of-month month day-of-week), e.g. '0 9 * * MON'",
        )
    try:  # valid fields can still name a day that never comes (30 February)
        croniter(cleaned, datetime(2026, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterError:
        raise InvalidAutomationError("cron", f"{expression!r} never comes round") from None
    return cleaned


def parse_moment(text: str, tz: ZoneInfo, *, field: str = "first_run_at") -> datetime:
    """ISO 8601 (`2026-12-07T09:00`, with or without an offset); a bare time is in `tz`."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidAutomationError(
            field, f"{text!r} is not a date and time; use ISO 8601, e.g. 2026-12-07T09:00"
        ) from None
    if not 2000 <= moment.year <= 9000:
        raise InvalidAutomationError(field, f"{text!r} is not between the years 2000 and 9000")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class Due:
    """The slot a run is made for now, how many earlier slots it stands for, and the next."""

    slot: datetime
    missed: int
    following: datetime | None


@dataclass(frozen=True)
class Schedule:
    kind: ScheduleKind
    first_run_at: datetime  # aware UTC
    every: timedelta | None = None
    cron: str | None = None
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if self.kind is ScheduleKind.EVERY and self.every is None:
            raise InvalidAutomationError("every", "an interval schedule needs --every")
        if self.kind is ScheduleKind.CRON and self.cron is None:
            raise InvalidAutomationError("cron", "a cron schedule needs --cron")

    def first_slot(self) -> datetime | None:
        """The first slot at or after `first_run_at`."""
        if self.kind is ScheduleKind.CRON:
            return self._cron_next(self.first_run_at - timedelta(microseconds=1))
        return self.first_run_at

    def next_after(self, moment: datetime) -> datetime | None:
        """The first slot strictly after `moment` (None: a one-off that has had its slot)."""
        if moment < self.first_run_at:
            return self.first_slot()
        if self.kind is ScheduleKind.ONCE:
            return None
        if self.kind is ScheduleKind.EVERY:
            assert self.every is not None
            steps = math.floor((moment - self.first_run_at) / self.every) + 1
            return self.first_run_at + steps * self.every
        return self._cron_next(moment)

    def due(self, next_run_at: datetime, now: datetime) -> Due | None:
        """With the stored next slot at or before `now`: the latest slot that has come, the
        slots between skipped, and the slot after `now`. None if nothing is due."""
        if next_run_at > now:
            return None
        if self.kind is ScheduleKind.ONCE:
            return Due(next_run_at, 0, None)
        if self.kind is ScheduleKind.EVERY:
            assert self.every is not None
            missed = math.floor((now - next_run_at) / self.every)
            slot = next_run_at + missed * self.every
            return Due(slot, missed, slot + self.every)
        assert self.cron is not None
        slots = croniter(self.cron, next_run_at.astimezone(self._zone()))
        slot, missed = next_run_at, 0
        while missed < MAX_MISSED_COUNTED:
            later: datetime = slots.get_next(datetime).astimezone(UTC)
            if later > now:
                return Due(slot, missed, later)
            slot, missed = later, missed + 1
        latest = self._cron_prev(now)  # past the count: jump to the latest slot
        return Due(latest, missed, self._cron_next(now))

    def _zone(self) -> ZoneInfo:
        return parse_timezone(self.timezone)

    def _cron_next(self, moment: datetime) -> datetime:
        assert self.cron is not None
        local = moment.astimezone(self._zone())
        found: datetime = croniter(self.cron, local).get_next(datetime)
        return found.astimezone(UTC)

    def _cron_prev(self, moment: datetime) -> datetime:
        assert self.cron is not None
        local = (moment + timedelta(microseconds=1)).astimezone(self._zone())
        found: datetime = croniter(self.cron, local).get_prev(datetime)
        return found.astimezone(UTC)
