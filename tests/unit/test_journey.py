"""A task's journey folded into steps, each with its own outcome.

The rows below are the ones the pipeline writes (see `agent-team show --json`
after submit, tick, answer): a node enters its phase `running`, the
coordinator marks a gate `waiting`, the resume re-enters it `running`, and
the end closes the last row with the task's terminal status.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from agent_team import db
from agent_team.reports.journey import answer_text, journey_steps, who_answered

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def iso(offset_s: float) -> str:
    return db.to_iso(T0 + timedelta(seconds=offset_s))


def rows(*journey: tuple[str, str, float, float | None, str | None]) -> list[db.Transition]:
    """(phase, status, entered, exited, note) -> transition records, in order."""
    made = []
    previous = None
    for number, (phase, status, entered, exited, note) in enumerate(journey, start=1):
        made.append(
            db.Transition(
                transition_id=number,
                thread_id="t1",
                from_phase=previous,
                to_phase=phase,
                entered_at=iso(entered),
                exited_at=iso(exited) if exited is not None else None,
                status=status,
                note=note,
            )
        )
        previous = phase
    return made


def question(
    turn: int,
    kind: str,
    *,
    posted: float | None,
    answered: float | None = None,
    decision: str = "approve",
    via: str = "slack:U2",
    status: str | None = None,
) -> db.Question:
    return db.Question(
        question_id=f"t1:q{turn}",
        thread_id="t1",
        turn=turn,
        kind=kind,
        status=status or ("answered" if answered is not None else "open"),
        transport="local",
        channel_ref=None,
        posted_at=iso(posted) if posted is not None else None,
        deadline_at=None,
        answer_json=json.dumps({"decision": decision, "text": ""})
        if answered is not None
        else None,
        answered_at=iso(answered) if answered is not None else None,
        answered_via=via if answered is not None else None,
        payload_json="{}",
    )


# plan -> review (revise) -> plan -> review (approve) -> build -> done, as the pipeline writes it.
REVISED = rows(
    ("intake", "running", 0, 1, None),
    ("clarify", "running", 1, 2, None),
    ("plan", "running", 2, 62, None),
    ("plan_review", "running", 62, 63, None),
    ("plan_review", "waiting", 63, 63 + 7380, None),
    ("plan_review", "running", 63 + 7380, 7444, None),
    ("plan", "running", 7444, 7504, None),
    ("plan_review", "running", 7504, 7505, None),
    ("plan_review", "waiting", 7505, 7805, None),
    ("plan_review", "running", 7805, 7806, None),
    ("build", "running", 7806, 8406, None),
    ("done", "done", 8406, 8406, "branch agent-team/t1 at 0123456"),
)
REVISED_QUESTIONS = [
    question(1, "plan_decision", posted=63, answered=7000, decision="revise", via="cli:ada"),
    question(2, "plan_decision", posted=7505, answered=7800, via="slack:U2"),
]


def test_finished_steps_have_their_own_outcome_and_a_gate_folds_into_one_step() -> None:
    steps = journey_steps(REVISED, REVISED_QUESTIONS, now=T0 + timedelta(days=1))

    assert [(s.phase, s.outcome) for s in steps] == [
        ("intake", "done"),
        ("clarify", "done"),
        ("plan", "done"),
        ("plan_review", "answered"),
        ("plan", "done"),
        ("plan_review", "answered"),
        ("build", "done"),
        ("done", "done"),
    ]
    first_review, second_review = steps[3], steps[5]
    assert first_review.label == "waited 2h 03m · answered by ada via cli: revise"
    assert second_review.label == "waited 5m 00s · answered by U2 via slack: approve"
    assert first_review.transition_ids == (4, 5, 6)
    assert first_review.question_ids == ("t1:q1",) and second_review.question_ids == ("t1:q2",)
    # The folded step lasts from its first row's entry to its last row's exit.
    assert first_review.duration_s == 7444 - 62 and first_review.wait_s == 7380
    assert first_review.entered_at == iso(62) and first_review.exited_at == iso(7444)
    assert [s.number for s in steps] == list(range(1, 9))
    assert not any(s.is_open or s.outcome == "running" for s in steps)
    assert steps[-1].note == "branch agent-team/t1 at 0123456"


def test_the_steps_costs_are_the_sums_of_their_rows() -> None:
    costs = {4: db.Spend(0.5, 100), 5: db.Spend(0.0, 0), 6: db.Spend(0.25, 40)}
    steps = journey_steps(REVISED, REVISED_QUESTIONS, costs=costs, now=T0)
    assert (steps[3].cost_usd, steps[3].tokens) == (0.75, 140)
    assert (steps[0].cost_usd, steps[0].tokens) == (0.0, 0)


def test_only_the_current_step_is_running_or_waiting() -> None:
    now = T0 + timedelta(seconds=400)
    waiting = rows(
        ("intake", "running", 0, 1, None),
        ("clarify", "running", 1, 2, None),
        ("plan", "running", 2, 62, None),
        ("plan_review", "running", 62, 63, None),
        ("plan_review", "waiting", 63, None, None),
    )
    steps = journey_steps(waiting, [question(1, "plan_decision", posted=63)], now=now)
    assert [(s.phase, s.outcome) for s in steps][-2:] == [
        ("plan", "done"),
        ("plan_review", "waiting"),
    ]
    assert steps[-1].is_open and steps[-1].label == "waiting for an answer"
    assert steps[-1].duration_s == 400 - 62 and steps[-1].wait_s == 400 - 63

    running = journey_steps(
        rows(
            ("intake", "running", 0, 1, None),
            ("clarify", "running", 1, 2, None),
            ("plan", "running", 2, None, None),
        ),
        [],
        now=now,
    )
    assert running[-1].outcome == "running" and running[-1].label == "running"
    assert [s.outcome for s in running[:-1]] == ["done", "done"]


def test_a_parked_step_says_why_and_a_retried_one_remembers_it() -> None:
    now = T0 + timedelta(seconds=5000)
    parked = rows(
        ("plan", "running", 0, 10, None),
        ("build", "running", 10, 20, None),
        ("build", "parked", 20, None, "no claude binary; install it"),
    )
    (_, build) = journey_steps(parked, [], parked_reason="builder_unavailable", now=now)
    assert build.outcome == "parked" and build.label == "parked: builder_unavailable"
    assert build.note == "no claude binary; install it" and build.parked_s == 4980

    retried = rows(
        ("plan", "running", 0, 10, None),
        ("build", "running", 10, 20, None),
        ("build", "parked", 20, 3620, "no claude binary; install it"),
        ("build", "queued", 3620, 3621, "retried by an operator (was parked: builder_unavailable)"),
        ("build", "running", 3621, 3700, None),
        ("done", "done", 3700, 3700, None),
    )
    steps = journey_steps(retried, [], now=now)
    assert [(s.phase, s.outcome) for s in steps] == [
        ("plan", "done"),
        ("build", "done"),
        ("done", "done"),
    ]
    assert steps[1].label == "done · parked 1h 00m"
    assert steps[1].note == (
        "no claude binary; install it\nretried by an operator (was parked: builder_unavailable)"
    )


def test_a_park_the_retry_and_the_failure_after_it_stay_three_notes() -> None:
    # #31 (6): the park's reason and the new error were one run-on paragraph.
    journey = rows(
        ("build", "running", 0, 10, None),
        ("build", "parked", 10, 70, "claude was not found; then continue it: agent-team retry t1"),
        ("build", "queued", 70, 71, "retried by an operator (was parked: builder_unavailable)"),
        ("build", "running", 71, 80, None),
        (
            "build",
            "failed",
            80,
            81,
            "BuildError: exit 3\nfix the cause, then continue it: agent-team retry t1",
        ),
    )
    (build,) = journey_steps(journey, [], task_status="failed", now=T0)
    assert build.outcome == "failed"
    assert build.notes == (
        "claude was not found; then continue it: agent-team retry t1",
        "retried by an operator (was parked: builder_unavailable)",
        "BuildError: exit 3\nfix the cause, then continue it: agent-team retry t1",
    )
    assert build.note == "\n".join(build.notes) and " · " not in build.note


def test_a_failed_or_cancelled_step_is_the_one_the_task_ended_in() -> None:
    failed = rows(("plan", "running", 0, 10, None), ("build", "failed", 10, 30, "BuildError: x"))
    steps = journey_steps(failed, [], now=T0)
    assert [(s.phase, s.outcome, s.label) for s in steps] == [
        ("plan", "done", "done"),
        ("build", "failed", "failed"),
    ]
    assert steps[1].note == "BuildError: x" and not steps[1].is_open

    cancelled = rows(
        ("plan_review", "running", 0, 1, None),
        ("plan_review", "waiting", 1, 90, None),
        ("plan_review", "cancelled", 90, 91, None),
    )
    (review,) = journey_steps(cancelled, [question(1, "plan_decision", posted=1)], now=T0)
    assert review.outcome == "cancelled" and review.wait_s == 89


def test_a_task_that_ended_has_no_running_step_even_before_its_last_row_is_closed() -> None:
    # The coordinator marks the task done, then closes its last row: between the two
    # writes a reader sees an open row of a finished task.
    ending = rows(("build", "running", 0, 10, None), ("done", "running", 10, None, None))
    steps = journey_steps(ending, [], task_status="done", now=T0 + timedelta(seconds=11))
    assert [(s.phase, s.outcome) for s in steps] == [("build", "done"), ("done", "done")]
    assert not steps[-1].is_open
    assert journey_steps(ending, [], task_status="running", now=T0)[-1].outcome == "running"


def test_two_clarify_rounds_in_one_step_name_both_answers() -> None:
    journey = rows(
        ("clarify", "running", 0, 1, None),
        ("clarify", "waiting", 1, 61, None),
        ("clarify", "running", 61, 62, None),
        ("clarify", "waiting", 62, 122, None),
        ("clarify", "running", 122, 123, None),
        ("plan", "running", 123, None, None),
    )
    asked = [
        question(1, "clarify", posted=1, answered=50, via="dashboard:ada", decision=""),
        question(2, "clarify", posted=62, answered=100, via="cli:bob", decision=""),
    ]
    clarify, plan = journey_steps(journey, asked, now=T0 + timedelta(seconds=200))
    assert clarify.label == (
        "waited 2m 00s · answered by ada via dashboard · answered by bob via cli"
    )
    assert plan.outcome == "running"


def test_two_clarify_rounds_by_one_person_name_them_once_with_the_count() -> None:
    journey = rows(
        ("clarify", "running", 0, 1, None),
        ("clarify", "waiting", 1, 61, None),
        ("clarify", "running", 61, 62, None),
        ("clarify", "waiting", 62, 122, None),
        ("clarify", "running", 122, 123, None),
        ("plan", "running", 123, None, None),
    )
    asked = [
        question(1, "clarify", posted=1, answered=50, via="cli:root", decision=""),
        question(2, "clarify", posted=62, answered=100, via="cli:root", decision=""),
    ]
    clarify, _ = journey_steps(journey, asked, now=T0 + timedelta(seconds=200))
    assert clarify.label == "waited 2m 00s · answered by root via cli (2 answers)"


def test_answers_read_as_people_wrote_them() -> None:
    assert answer_text({"text": "ok \N{GRINNING FACE}"}) == "ok \N{GRINNING FACE}"
    assert answer_text({"decision": "approve", "text": ""}) == "approve"
    assert answer_text({"decision": "revise", "text": "add\n tests"}) == "revise: add tests"
    assert answer_text({"decision": "edit", "text": "# Plan\n1. a"}).startswith("edit")
    assert answer_text(None) == ""


def test_a_question_goes_to_the_gate_step_that_was_open_when_it_was_answered() -> None:
    # An expired and reopened question stays in the one folded gate step.
    journey = rows(
        ("plan_review", "running", 0, 1, None),
        ("plan_review", "waiting", 1, 100, None),
        ("plan_review", "parked", 100, 700, "question t1:q1 expired"),
        ("plan_review", "waiting", 700, 760, "question t1:q1 reopened"),
        ("plan_review", "running", 760, 761, None),
        ("build", "running", 761, None, None),
    )
    asked = [question(1, "plan_decision", posted=700, answered=750, via="cli:ada")]
    review, build = journey_steps(journey, asked, now=T0 + timedelta(seconds=800))
    assert review.label == "waited 2m 39s · parked 10m 00s · answered by ada via cli: approve"
    assert review.question_ids == ("t1:q1",) and build.question_ids == ()


def test_who_answered_reads_the_transport_and_the_name() -> None:
    assert who_answered("dashboard:alice") == "alice via dashboard"
    assert who_answered("cli") == "cli"
    assert who_answered(None) == "someone"
