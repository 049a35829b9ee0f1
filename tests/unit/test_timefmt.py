"""Times as people read them: the CLI and the dashboard share these."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_team.common.timefmt import age_text, deadline_text, relative, span

NOW = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)  # a Thursday


def test_span_reads_like_the_dashboard() -> None:
    assert span(0.85) == "850 ms"
    assert span(12.44) == "12.4 s"
    assert span(185) == "3m 05s"
    assert span(2 * 3600 + 600) == "2h 10m"
    assert span(3 * 86400 + 4 * 3600 + 59) == "3d 4h"


def test_relative_future_past_and_now() -> None:
    assert relative(NOW + timedelta(days=2, hours=23), NOW) == "in 2d 23h"
    assert relative(NOW - timedelta(minutes=5, seconds=2), NOW) == "5m 02s ago"
    assert relative(NOW, NOW) == "just now"


def test_a_deadline_says_how_long_and_when() -> None:
    due = NOW + timedelta(days=2, hours=23)  # Sunday 13:00 UTC
    assert deadline_text(due, NOW) == "in 2d 23h (Sun 13:00 UTC)"
    assert deadline_text(NOW - timedelta(hours=1), NOW) == "1h 00m ago (Thu 13:00 UTC)"
    assert deadline_text(None, NOW) == ""


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(-5, "0s"), (12.9, "12s"), (185, "3m 05s"), (7800, "2h 10m"), (273600, "3d 4h")],
)
def test_an_age_reads_the_same_on_every_surface(seconds: float, said: str) -> None:

    assert age_text(seconds) == said
