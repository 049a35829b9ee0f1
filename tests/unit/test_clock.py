"""The ledger's timestamps: UTC text that sorts as time does."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone, tzinfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_team.db.clock import day_bucket, from_iso, to_iso, utc_now
from agent_team.exceptions import LedgerInputError

# Offsets strictly inside (-24h, +24h), as `timezone` requires, to the minute.
offsets = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
# Years with four digits whatever the offset, as real ledger times have.
aware_datetimes = st.datetimes(
    min_value=datetime(1970, 1, 2),
    max_value=datetime(2999, 12, 30),
    timezones=st.one_of(st.just(UTC), offsets),
)


class _NoOffset(tzinfo):
    """A zone that does not know its offset: still naive as far as Python is concerned."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


# --- to_iso ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "moment",
    [datetime(2024, 5, 1, 12, 0), datetime(2024, 5, 1, 12, 0, tzinfo=_NoOffset())],
    ids=["no-tzinfo", "tzinfo-without-offset"],
)
def test_to_iso_refuses_naive_datetimes(moment: datetime) -> None:
    with pytest.raises(LedgerInputError, match="time zone"):
        to_iso(moment)


def test_to_iso_error_is_also_a_value_error() -> None:
    with pytest.raises(ValueError):
        to_iso(datetime(2024, 5, 1))


def test_to_iso_formats_utc() -> None:
    assert to_iso(datetime(2024, 5, 1, 9, 5, 7, 42, tzinfo=UTC)) == "2024-05-01T09:05:07.000042Z"


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (
            datetime(2024, 1, 1, 1, 30, tzinfo=timezone(timedelta(hours=2))),
            "2023-12-31T23:30:00.000000Z",
        ),
        (
            datetime(2024, 2, 28, 20, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-5))),
            "2024-02-29T01:00:00.123456Z",
        ),
        (
            datetime(2024, 6, 1, 0, 0, tzinfo=timezone(timedelta(hours=5, minutes=45))),
            "2024-05-31T18:15:00.000000Z",
        ),
    ],
    ids=["east-across-year", "west-into-leap-day", "quarter-hour-offset"],
)
def test_to_iso_converts_other_zones_to_utc(moment: datetime, expected: str) -> None:
    assert to_iso(moment) == expected


@given(aware_datetimes)
def test_to_iso_is_fixed_width_utc(moment: datetime) -> None:
    text = to_iso(moment)

    assert len(text) == len("2024-05-01T09:05:07.000042Z")
    assert text.endswith("Z")
    assert text == to_iso(moment.astimezone(UTC))


@given(aware_datetimes, aware_datetimes)
def test_to_iso_strings_compare_as_times_do(first: datetime, second: datetime) -> None:
    a, b = to_iso(first), to_iso(second)

    assert (a < b) == (first < second)
    assert (a == b) == (first == second)


@given(st.lists(aware_datetimes, max_size=20))
def test_sorting_the_strings_sorts_the_times(moments: list[datetime]) -> None:
    assert sorted(to_iso(m) for m in moments) == [to_iso(m) for m in sorted(moments)]


# --- from_iso ----------------------------------------------------------------------------


@given(aware_datetimes)
def test_from_iso_round_trips(moment: datetime) -> None:
    parsed = from_iso(to_iso(moment))

    assert parsed == moment
    assert parsed.utcoffset() == timedelta(0)
    assert to_iso(parsed) == to_iso(moment)


def test_from_iso_reads_the_ledger_format() -> None:
    assert from_iso("2024-05-01T09:05:07.000042Z") == datetime(2024, 5, 1, 9, 5, 7, 42, tzinfo=UTC)


def test_from_iso_keeps_an_explicit_offset() -> None:
    parsed = from_iso("2024-01-01T01:30:00+02:00")

    assert parsed.utcoffset() == timedelta(hours=2)
    assert to_iso(parsed) == "2023-12-31T23:30:00.000000Z"


def test_from_iso_reads_a_zoneless_string_as_utc() -> None:
    parsed = from_iso("2024-05-01T09:05:07")

    assert parsed == datetime(2024, 5, 1, 9, 5, 7, tzinfo=UTC)
    assert parsed.utcoffset() == timedelta(0)


def test_utc_now_is_aware_utc() -> None:
    now = utc_now()

    assert now.utcoffset() == timedelta(0)
    assert from_iso(to_iso(now)) == now


# --- day_bucket --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (datetime(2024, 5, 1, 23, 59, 59, 999999, tzinfo=UTC), "2024-05-01"),
        (datetime(2024, 5, 2, 1, 0, tzinfo=timezone(timedelta(hours=2))), "2024-05-01"),
        (datetime(2024, 5, 1, 22, 0, tzinfo=timezone(timedelta(hours=-3))), "2024-05-02"),
        (date(2024, 2, 29), "2024-02-29"),
        ("2024-05-01", "2024-05-01"),
        ("2024-12-31", "2024-12-31"),
    ],
    ids=["utc-datetime", "east-of-utc", "west-of-utc", "date", "str", "str-year-end"],
)
def test_day_bucket(moment: datetime | date | str, expected: str) -> None:
    assert day_bucket(moment) == expected


@given(aware_datetimes)
def test_day_bucket_is_the_utc_date(moment: datetime) -> None:
    assert day_bucket(moment) == moment.astimezone(UTC).date().isoformat()


@pytest.mark.parametrize("text", ["yesterday", "2024-13-01", "2024-02-30", "", "01/05/2024"])
def test_day_bucket_refuses_a_bad_string(text: str) -> None:
    with pytest.raises(LedgerInputError, match="YYYY-MM-DD"):
        day_bucket(text)


def test_day_bucket_refuses_a_naive_datetime() -> None:
    with pytest.raises(LedgerInputError):
        day_bucket(datetime(2024, 5, 1, 12, 0))
