"""How a stage's failed model attempts read in `show` and on the task page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from agent_team import db
from agent_team.reports.task import StageFailures, failure_label, parked_notice, resume_notice

TIMES = "\N{MULTIPLICATION SIGN}"


def failure(
    detail: str, http_status: int | None = None, outcome: str = "retried"
) -> db.ModelFailure:
    return db.ModelFailure(
        failure_id=1,
        thread_id="t1",
        stage="plan",
        model="anthropic:claude-sonnet-4-5",
        attempt=1,
        outcome=outcome,
        http_status=http_status,
        detail=detail,
        recorded_at="2026-12-07T12:00:00.000000Z",
    )


@pytest.mark.parametrize(
    ("detail", "status", "label"),
    [
        (
            '{"error":{"type":"overloaded_error","message":"Overloaded"}}',
            529,
            "HTTP 529 overloaded_error",
        ),
        ("Service Unavailable", 503, "HTTP 503"),
        ("httpx.ReadTimeout: timed out after 60 s", None, "ReadTimeout"),
        ("openai.RateLimitError: slow down", 429, "HTTP 429 RateLimitError"),
        (
            "the answer did not fit Plan: steps missing",
            None,
            "the answer did not fit Plan: steps miss…",
        ),
        ("", None, "retried"),
    ],
)
def test_a_failed_attempt_reads_as_its_status_and_error_name(
    detail: str, status: int | None, label: str
) -> None:
    assert failure_label(failure(detail, status)) == label


def test_a_stages_line_counts_each_error_and_names_who_answered() -> None:
    answered = StageFailures(
        stage="clarify",
        attempts=3,
        errors=(("HTTP 529 overloaded_error", 2), ("ReadTimeout", 1)),
        answered_by=("openai:gpt-4o",),
        last_outcome="fell_back",
    )
    assert answered.line() == (
        f"clarify: 3 failed attempts (HTTP 529 overloaded_error {TIMES}2, ReadTimeout), "
        "answered by openai:gpt-4o"
    )
    refused = StageFailures("plan", 1, (("HTTP 401", 1),), (), "refused")
    assert refused.line() == "plan: 1 failed attempt (HTTP 401), refused by the provider"
    waiting = StageFailures("plan", 1, (("HTTP 529", 1),), (), "retried")
    assert waiting.line().endswith("no answer yet")


def test_a_model_park_says_when_it_continues_and_how_to_continue_it_now() -> None:
    assert parked_notice("t1", "model_unavailable", "all down") == "all down"
    assert parked_notice("t1", "model_refused", "HTTP 401") == (
        "HTTP 401; then continue it: agent-team retry t1"
    )
    at = datetime(2026, 12, 7, 13, 5, tzinfo=timezone(timedelta(hours=1)))
    assert resume_notice("t1", at) == (
        "it continues by itself at 2026-12-07 12:05:00 UTC, or now with: agent-team retry t1"
    )
    assert resume_notice("t1", at.astimezone(UTC)) == resume_notice("t1", at)
