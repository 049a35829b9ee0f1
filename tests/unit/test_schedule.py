"""Automation schedules: parsing with field-named errors, slots, catch-up, time zones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_team.automations.schedule import (
    Schedule,
    parse_cron,
    parse_every,
    parse_moment,
    parse_timezone,
)
from agent_team.exceptions import InvalidAutomationError
from agent_team.task_model import ScheduleKind

T0 = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    ("text", "seconds"), [("1m", 60), ("30m", 1800), ("1h", 3600), ("1d", 86400), ("7d", 604800)]
)
def test_intervals(text: str, seconds: int) -> None:
    assert parse_every(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("5x", "is not a duration"),
        ("1 fortnight", "is not a duration"),
        ("", "is not a duration"),
        ("30s", "shorter than the shortest interval"),
        ("0m", "shorter than the shortest interval"),
        ("1.001m", "not a whole number of seconds"),
        ("367d", "longer than a year"),
        ("99999999999d", "too long a duration"),
    ],
)
def test_bad_intervals_name_the_field(text: str, says: str) -> None:
    with pytest.raises(InvalidAutomationError, match=says) as info:
        parse_every(text)
    assert info.value.field == "every" and str(info.value).startswith("every: ")


@pytest.mark.parametrize("text", ["61 * * * *", "* * * *", "* * * * * *", "0 9 * * FOO", "x"])
def test_bad_cron_lines_name_the_field(text: str) -> None:
    with pytest.raises(InvalidAutomationError, match="five fields") as info:
        parse_cron(text)
    assert info.value.field == "cron"


def test_a_cron_line_whose_day_never_comes_is_refused() -> None:
    with pytest.raises(InvalidAutomationError, match="never comes round") as info:
        parse_cron("0 0 30 2 *")
    assert info.value.field == "cron"


@pytest.mark.parametrize("text", ["0001-01-01T00:00+05:00", "9999-12-31T23:59"])
def test_a_first_run_far_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(InvalidAutomationError, match="between the years") as info:
        parse_moment(text, parse_timezone("UTC"))
    assert info.value.field == "first_run_at"


@pytest.mark.parametrize("name", ["Mars/Base", "../../etc/passwd", "", "UTC+3"])
def test_bad_time_zones_name_the_field(name: str) -> None:
    with pytest.raises(InvalidAutomationError) as info:
        parse_timezone(name)
    assert info.value.field == "timezone"


def test_a_moment_without_an_offset_is_in_the_time_zone() -> None:
    berlin = parse_timezone("Europe/Berlin")
    assert parse_moment("2026-12-07T09:00", berlin) == T0
    assert parse_moment("2026-12-07T09:00+00:00", berlin) == T0 + timedelta(hours=1)
    with pytest.raises(InvalidAutomationError, match="ISO 8601") as info:
        parse_moment("next monday", berlin)
    assert info.value.field == "first_run_at"


def test_interval_slots_are_anchored_on_the_first_run() -> None:
    hourly = Schedule(ScheduleKind.EVERY, T0, every=timedelta(hours=1))
    assert hourly.first_slot() == T0
    assert hourly.next_after(T0 - timedelta(days=1)) == T0
    assert hourly.next_after(T0) == T0 + timedelta(hours=1)
    assert hourly.next_after(T0 + timedelta(minutes=59)) == T0 + timedelta(hours=1)


def test_catch_up_after_three_days_is_one_run_that_counts_the_missed_slots() -> None:
    hourly = Schedule(ScheduleKind.EVERY, T0, every=timedelta(hours=1))
    due = hourly.due(T0, T0 + timedelta(days=3, minutes=5))
    assert due is not None
    assert due.slot == T0 + timedelta(days=3)
    assert due.missed == 72  # 08:00 on day 0 .. 07:00 on day 3
    assert due.following == T0 + timedelta(days=3, hours=1)
    assert hourly.due(T0, T0 - timedelta(seconds=1)) is None, "not yet due"
    on_time = hourly.due(T0, T0)
    assert on_time is not None and (on_time.slot, on_time.missed) == (T0, 0)


def test_cron_slots_follow_the_time_zone_across_daylight_saving() -> None:
    weekly = Schedule(
        ScheduleKind.CRON, T0, cron=parse_cron("0 9 * * MON"), timezone="Europe/Berlin"
    )
    first = weekly.first_slot()
    assert first == T0  # 09:00 Berlin in winter is 08:00 UTC
    summer = weekly.next_after(datetime(2027, 4, 1, tzinfo=UTC))
    assert summer == datetime(2027, 4, 5, 7, 0, tzinfo=UTC)  # 09:00 CEST
    due = weekly.due(T0, T0 + timedelta(days=22))
    assert due is not None and due.missed == 3 and due.slot == T0 + timedelta(days=21)


def test_a_one_off_has_one_slot() -> None:
    once = Schedule(ScheduleKind.ONCE, T0)
    assert once.first_slot() == T0
    assert once.next_after(T0) is None
    due = once.due(T0, T0 + timedelta(days=1))
    assert due is not None and (due.slot, due.missed, due.following) == (T0, 0, None)


def test_a_long_stop_of_a_minutely_cron_is_counted_up_to_a_bound() -> None:
    minutely = Schedule(ScheduleKind.CRON, T0, cron=parse_cron("* * * * *"))
    due = minutely.due(T0, T0 + timedelta(days=30))
    assert due is not None
    assert due.slot == T0 + timedelta(days=30)
    assert due.missed == 10_000  # "at least": the count stops there
    assert due.following == T0 + timedelta(days=30, minutes=1)
