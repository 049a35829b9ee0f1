"""Contract: failed model attempts, and tasks parked on their models with growing pauses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_team import db
from agent_team.db.model_failures import DETAIL_CHARS
from agent_team.exceptions import LedgerInputError
from tests.integration.ledger.helpers import counted_writes

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
PAUSES = [timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=15), timedelta(hours=1)]


def _task(ledger: db.Ledger, task_id: str = "t1") -> None:
    assert db.create_task(ledger, task_id=task_id, kind="code", title="Flaky provider")


def _task_of(ledger: db.Ledger, task_id: str = "t1") -> db.Task:
    task = db.get_task(ledger, task_id)
    assert task is not None
    return task


def _failure(ledger: db.Ledger, **overrides: Any) -> None:
    values: dict[str, Any] = {
        "thread_id": "t1",
        "stage": "clarify",
        "model": "anthropic:claude-sonnet-4-5",
        "attempt": 1,
        "outcome": "retried",
        "http_status": 529,
        "detail": "overloaded_error: Overloaded",
        "at": NOW,
    }
    db.record_model_failure(ledger, **{**values, **overrides})


# -- model_failures ----------------------------------------------------------------------------


def test_failures_are_listed_per_task_in_the_order_they_happened(ledger: db.Ledger) -> None:
    _failure(ledger)
    _failure(ledger, thread_id="other")
    _failure(ledger, attempt=2, outcome="fell_back", at=NOW + timedelta(seconds=4))
    _failure(
        ledger,
        model="openai:gpt-4o",
        outcome="gave_up",
        http_status=None,
        detail="ReadTimeout: timed out",
        at=NOW + timedelta(seconds=9),
    )

    failures = db.list_model_failures(ledger, "t1")

    assert [(f.model, f.attempt, f.outcome, f.http_status) for f in failures] == [
        ("anthropic:claude-sonnet-4-5", 1, "retried", 529),
        ("anthropic:claude-sonnet-4-5", 2, "fell_back", 529),
        ("openai:gpt-4o", 1, "gave_up", None),
    ]
    assert failures[0].stage == "clarify" and failures[0].thread_id == "t1"
    assert failures[0].detail == "overloaded_error: Overloaded"
    assert failures[2].recorded_at == db.to_iso(NOW + timedelta(seconds=9))
    assert failures[0].failure_id < failures[1].failure_id < failures[2].failure_id
    assert [f.thread_id for f in db.list_model_failures(ledger, "other")] == ["other"]
    assert db.list_model_failures(ledger, "nobody") == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"outcome": "exploded"}, "model failure outcome"),
        ({"attempt": 0}, "counts from 1"),
        ({"http_status": 99}, "HTTP status"),
        ({"http_status": 600}, "HTTP status"),
        ({"stage": ""}, "a stage"),
        ({"model": ""}, "a model"),
    ],
)
def test_a_failure_with_bad_values_is_refused_and_nothing_stored(
    ledger: db.Ledger, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(LedgerInputError, match=message):
        _failure(ledger, **overrides)
    assert db.list_model_failures(ledger, "t1") == []


def test_a_long_error_is_kept_from_its_start(ledger: db.Ledger) -> None:
    page = "<html>" + "x" * (DETAIL_CHARS * 3)
    _failure(ledger, detail=page)
    (failure,) = db.list_model_failures(ledger, "t1")
    assert failure.detail == page[:DETAIL_CHARS]


def test_a_failure_is_history_that_waits_for_no_flush(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    with counted_writes(ledger, monkeypatch) as flushes:
        _failure(ledger)
    assert flushes == [False]


# -- parking on the models ---------------------------------------------------------------------


def test_each_park_waits_longer_and_the_last_pause_repeats(ledger: db.Ledger) -> None:
    _task(ledger)
    waits = []
    for _ in range(6):
        resume_at = db.park_for_models(ledger, "t1", pauses=PAUSES, now=NOW)
        assert resume_at is not None
        waits.append(resume_at - NOW)
        task = _task_of(ledger)
        assert (task.status, task.parked_reason) == ("parked", "model_unavailable")
        assert task.resume_at == db.to_iso(resume_at)
    assert waits == [*PAUSES, PAUSES[-1], PAUSES[-1]]
    assert _task_of(ledger).model_parks == 6


def test_a_call_that_answered_starts_the_pauses_over(ledger: db.Ledger) -> None:
    _task(ledger)
    for _ in range(3):
        db.park_for_models(ledger, "t1", pauses=PAUSES, now=NOW)
    assert _task_of(ledger).model_parks == 3

    db.reset_model_parks(ledger, "t1")

    assert _task_of(ledger).model_parks == 0
    assert db.park_for_models(ledger, "t1", pauses=PAUSES, now=NOW) == NOW + PAUSES[0]


def test_resetting_a_count_of_zero_writes_nothing(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model caller resets after every call that answered: most of them must cost no commit."""
    _task(ledger)
    before = _task_of(ledger)
    with counted_writes(ledger, monkeypatch) as flushes:
        db.reset_model_parks(ledger, "t1")
        db.reset_model_parks(ledger, "no-such-task")
    assert flushes == []
    assert _task_of(ledger) == before

    db.park_for_models(ledger, "t1", pauses=PAUSES, now=NOW)
    parked = _task_of(ledger)
    with counted_writes(ledger, monkeypatch) as flushes:
        db.reset_model_parks(ledger, "t1")
        db.reset_model_parks(ledger, "t1")
    assert flushes == [False]  # one commit, history only; the second call read 0
    reset = _task_of(ledger)
    assert reset.model_parks == 0
    assert (reset.status, reset.resume_at, reset.updated_at) == (
        parked.status,
        parked.resume_at,
        parked.updated_at,
    )


def test_parking_an_unknown_task_changes_nothing(ledger: db.Ledger) -> None:
    assert db.park_for_models(ledger, "nope", pauses=PAUSES, now=NOW) is None
    assert db.list_tasks(ledger) == []


@pytest.mark.parametrize("pauses", [[], [timedelta(0)], [timedelta(minutes=1), -PAUSES[0]]])
def test_parking_needs_positive_pauses(ledger: db.Ledger, pauses: list[timedelta]) -> None:
    _task(ledger)
    with pytest.raises(LedgerInputError, match="pauses"):
        db.park_for_models(ledger, "t1", pauses=pauses, now=NOW)
    assert _task_of(ledger).status == "queued"


def test_only_a_park_through_park_for_models_has_a_pause(ledger: db.Ledger) -> None:
    _task(ledger)
    with pytest.raises(LedgerInputError, match="park_for_models"):
        db.set_task_status(ledger, "t1", "parked", parked_reason="model_unavailable")
    assert _task_of(ledger).status == "queued"


def test_a_pause_never_outlives_its_parking(ledger: db.Ledger) -> None:
    for task_id in ("t1", "t2", "t3", "t4"):
        _task(ledger, task_id)
        db.park_for_models(ledger, task_id, pauses=PAUSES, now=NOW)

    db.set_task_status(ledger, "t1", "queued")
    db.enter_phase(ledger, task_id="t2", phase="clarify", status="running")
    db.finish_task(ledger, task_id="t3", status="cancelled", phase="done", note="stop")

    for task_id in ("t1", "t2", "t3"):
        task = _task_of(ledger, task_id)
        assert (task.parked_reason, task.resume_at) == (None, None), task_id
        assert task.model_parks == 1, "the count is the model caller's to reset"
    assert _task_of(ledger, "t4").resume_at == db.to_iso(NOW + PAUSES[0])


def test_due_parks_are_those_whose_pause_is_over(ledger: db.Ledger) -> None:
    for task_id in ("early", "late", "budget", "running"):
        _task(ledger, task_id)
    db.park_for_models(ledger, "late", pauses=[timedelta(minutes=5)], now=NOW)
    db.park_for_models(ledger, "early", pauses=[timedelta(minutes=1)], now=NOW)
    db.set_task_status(ledger, "budget", "parked", parked_reason="budget_exhausted")

    def due(at: datetime) -> list[str]:
        return [task.id for task in db.due_model_parks(ledger, now=at)]

    assert due(NOW) == []
    assert due(NOW + timedelta(seconds=59)) == []
    assert due(NOW + timedelta(minutes=1)) == ["early"]
    assert due(NOW + timedelta(hours=1)) == ["early", "late"]


def test_a_due_park_is_queued_once_with_its_start_command(ledger: db.Ledger) -> None:
    _task(ledger)
    db.enter_phase(ledger, task_id="t1", phase="plan", status="running")
    resume_at = db.park_for_models(ledger, "t1", pauses=PAUSES, now=NOW)
    assert resume_at is not None

    early = db.resume_model_park(ledger, task_id="t1", command_id="unpark:t1:a", now=NOW)
    assert early is False and _task_of(ledger).status == "parked"

    assert db.resume_model_park(ledger, task_id="t1", command_id="unpark:t1:b", now=resume_at)
    assert not db.resume_model_park(ledger, task_id="t1", command_id="unpark:t1:c", now=resume_at)

    task = _task_of(ledger)
    assert (task.status, task.phase, task.parked_reason, task.resume_at) == (
        "queued",
        "plan",
        None,
        None,
    )
    assert task.model_parks == 1, "a provider still down makes the next pause longer"
    commands = [c.command_id for c in db.list_commands(ledger, task_id="t1", state="pending")]
    assert commands == ["unpark:t1:b"]
    last = db.list_transitions(ledger, "t1")[-1]
    assert (last.to_phase, last.status, last.note) == (
        "plan",
        "queued",
        "continued by itself after its pause",
    )
    assert db.park_for_models(ledger, "t1", pauses=PAUSES, now=NOW) == NOW + PAUSES[1]


def test_a_park_for_another_reason_is_never_resumed_by_the_timer(ledger: db.Ledger) -> None:
    _task(ledger)
    db.set_task_status(ledger, "t1", "parked", parked_reason="budget_exhausted")
    later = NOW + timedelta(days=1)
    assert not db.resume_model_park(ledger, task_id="t1", command_id="unpark:t1:x", now=later)
    assert _task_of(ledger).status == "parked"


def test_a_retry_clears_the_pause(ledger: db.Ledger) -> None:
    _task(ledger)
    db.park_for_models(ledger, "t1", pauses=PAUSES, now=NOW)

    assert db.requeue_task(ledger, task_id="t1", command_id="retry:t1:1", note="retried")

    task = _task_of(ledger)
    assert (task.status, task.parked_reason, task.resume_at) == ("queued", None, None)
    assert db.due_model_parks(ledger, now=NOW + timedelta(days=1)) == []


# -- the models of a journey step ---------------------------------------------------------------


def test_each_transition_row_names_the_models_of_its_calls(ledger: db.Ledger) -> None:
    _task(ledger)
    first = db.record_transition(ledger, thread_id="t1", to_phase="clarify", status="running")
    second = db.record_transition(ledger, thread_id="t1", to_phase="plan", status="running")
    rows = {t.transition_id: t for t in db.list_transitions(ledger, "t1")}
    plan_entered = db.from_iso(rows[second].entered_at)

    def spend(stage: str, model: str, at: datetime) -> None:
        assert db.record_usage(
            ledger,
            thread_id="t1",
            stage=stage,
            model=model,
            billing_mode="api",
            input_tokens=10,
            output_tokens=5,
            usd_cost=0.5,
            recorded_at=at,
        )

    spend("plan", "openai:gpt-4o", plan_entered + timedelta(seconds=2))
    spend("plan", "anthropic:claude-sonnet-4-5", plan_entered + timedelta(seconds=1))
    spend("plan", "openai:gpt-4o", plan_entered + timedelta(seconds=3))

    costs = db.transition_costs(ledger, "t1")

    assert costs[first] == db.Spend(0.0, 0, ())
    assert costs[second] == db.Spend(1.5, 45, ("anthropic:claude-sonnet-4-5", "openai:gpt-4o")), (
        "each model once, first used first"
    )


def test_a_park_and_its_history_row_are_one_write(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    _task(ledger)
    with counted_writes(ledger, monkeypatch) as writes:
        assert db.park_task(ledger, task_id="t1", reason="repo_unavailable", note="gone; retry")
    assert len(writes) == 1
    task = _task_of(ledger)
    assert (task.status, task.parked_reason, task.resume_at) == ("parked", "repo_unavailable", None)
    last = db.list_transitions(ledger, "t1")[-1]
    assert (last.status, last.note) == ("parked", "gone; retry")
    assert not db.park_task(ledger, task_id="nobody", reason="repo_unavailable", note="x")
    with pytest.raises(LedgerInputError, match="park_for_models"):
        db.park_task(ledger, task_id="t1", reason="model_unavailable", note="x")


def test_a_model_park_writes_its_note_with_the_time_it_continues(ledger: db.Ledger) -> None:
    _task(ledger)
    moment = datetime(2031, 1, 1, tzinfo=UTC)
    resume_at = db.park_for_models(
        ledger,
        "t1",
        pauses=[timedelta(minutes=1)],
        now=moment,
        at_least=timedelta(minutes=15),  # a provider's retry-after outlasts the pause
        note=lambda at: f"down; continues at {db.to_iso(at)}",
    )
    assert resume_at == moment + timedelta(minutes=15)
    last = db.list_transitions(ledger, "t1")[-1]
    assert (last.status, last.note) == ("parked", f"down; continues at {db.to_iso(resume_at)}")
