"""`agent-team retry` of a failed task: it continues from its last checkpoint.

A real `Coordinator` serving in a thread, with the `command` builder: a build
that fails until its cause is fixed (a marker file) ends the task `failed`;
after the fix, a retry queues it again and the graph re-runs the build node
alone. The answers given before are kept: no question is asked, delivered or
answered again, and no model call is repeated. Done and cancelled tasks are
refused; racing retries queue one command; a failed task whose checkpoints are
gone never starts over.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from agent_team import db
from agent_team.coordinator import Coordinator
from agent_team.coordinator.runner import thread_config
from agent_team.exceptions import TaskRefusedError
from agent_team.requests.actors import Actor
from tests.integration.ledger.test_races import race
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    SHORT_BODY,
    Clock,
    MakeCoordinator,
    RecordingTransport,
    open_question,
    serving,
    status_is,
    task_of,
    usage_calls,
)
from tests.waiting import wait_for

CLARIFICATION = (
    "Remember the email address on the login form so returning users type less; "
    "a test covers the prefilled and the empty field."
)


def failing_until(marker: Path) -> str:
    """A build command that fails until `marker` exists, then writes a file."""
    return (
        f"test -f {shlex.quote(str(marker))} || {{ echo 'the fixture is missing' >&2; exit 4; }}; "
        "echo built > built.txt"
    )


def asked(coordinator: Coordinator, task_id: str, kind: str) -> db.Question:
    def delivered() -> db.Question | None:
        found = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
        return found[0] if found and found[0].channel_ref and found[0].kind == kind else None

    question: db.Question = wait_for(delivered, f"the {kind} question delivered", timeout_s=60)
    return question


def failed_build(coordinator: Coordinator, body: str = LONG_BODY) -> str:
    """A task whose plan was approved and whose build failed."""
    task_id = coordinator.start_task(title="Remember the email", body=body)
    if body == SHORT_BODY:
        clarify = asked(coordinator, task_id, "clarify")
        coordinator.answer(clarify.question_id, CLARIFICATION, via="cli:ada")
    plan = asked(coordinator, task_id, "plan_decision")
    coordinator.answer(plan.question_id, "approve", via="cli:ada")
    wait_for(lambda: status_is(coordinator, task_id, "failed"), "the build to fail", 60)
    return task_id


def test_a_failed_build_is_retried_from_its_checkpoint_and_nothing_is_asked_again(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    marker = tmp_path / "fixture-in-place"
    transport = RecordingTransport()
    coordinator = make_coordinator(
        transport=transport, builder="command", build_command=failing_until(marker)
    )
    with serving(coordinator, poll_s=60.0):
        task_id = failed_build(coordinator, SHORT_BODY)
        failed = task_of(coordinator, task_id)
        assert failed.phase == "build"
        last = db.list_transitions(coordinator.ledger, task_id)[-1]
        assert last.note is not None and "the fixture is missing" in last.note
        # #31 (6): the failed row itself names the command, on a line of its own.
        assert last.note.splitlines()[-1] == (
            f"fix the cause, then continue it: agent-team retry {task_id}"
        )
        assert "run the build again" not in last.note
        questions = db.list_questions(coordinator.ledger, thread_id=task_id)
        assert [(q.kind, q.status) for q in questions] == [
            ("clarify", "answered"),
            ("plan_decision", "answered"),
        ]
        delivered = list(transport.delivered)
        calls = usage_calls(coordinator.ledger, task_id)
        assert set(calls) == {"clarify", "plan"}

        marker.touch()  # the operator fixes the cause
        coordinator.retry(task_id, actor=Actor("ada", "cli"))
        done = wait_for(lambda: status_is(coordinator, task_id, "done"), "the retried task done")
        wait_for(
            lambda: {c.state for c in db.list_commands(coordinator.ledger)} == {"done"},
            "the retry's command completed",
        )

    assert done.phase == "done"
    # The same questions, answered once; none asked, delivered or answered again.
    assert db.list_questions(coordinator.ledger, thread_id=task_id) == questions
    assert transport.delivered == delivered
    assert usage_calls(coordinator.ledger, task_id) == calls, "no model call repeated"
    events = [event for tid, event, _ in transport.notices if tid == task_id]
    assert events == ["started", "waiting", "waiting", "failed", "done"]
    (failed_notice,) = [text for tid, event, text in transport.notices if event == "failed"]
    assert failed_notice.endswith(f"fix the cause, then continue it: agent-team retry {task_id}")
    # The build ran again, with its cause fixed, and is the task's result.
    build = coordinator.graph.get_state(thread_config(task_id)).values["build"]
    assert (build["builder"], build["reused"]) == ("command", False)
    assert build["branch"] == f"agent-team/{task_id}" and build["commit"]
    journey = [
        (t.from_phase, t.to_phase, t.status)
        for t in db.list_transitions(coordinator.ledger, task_id)
    ]
    at = journey.index(("build", "build", "queued"))
    assert journey[at - 1][1:] == ("build", "failed")
    (audit,) = db.list_audit(coordinator.ledger, action="retry")
    assert (audit.actor, audit.via, audit.target) == ("ada", "cli", task_id)
    commands = db.list_commands(coordinator.ledger, task_id=task_id)
    assert [c.command_id.split(":")[0] for c in commands].count("retry") == 1


def test_done_and_cancelled_tasks_are_not_retried(make_coordinator: MakeCoordinator) -> None:
    coordinator = make_coordinator()
    finished = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(open_question(coordinator, finished).question_id, "approve")
    cancelled = coordinator.start_task(title="Not this one", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.cancel(cancelled)
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, finished).status == "done"
    assert task_of(coordinator, cancelled).status == "cancelled"
    commands = db.list_commands(coordinator.ledger)

    for task_id, status in ((finished, "done"), (cancelled, "cancelled")):
        with pytest.raises(TaskRefusedError) as refused:
            coordinator.retry(task_id)
        assert f"task {task_id} is {status}" in str(refused.value)
        assert "only parked and failed tasks are retried" in str(refused.value)
        assert task_of(coordinator, task_id).status == status

    assert db.list_commands(coordinator.ledger) == commands
    assert db.list_audit(coordinator.ledger, action="retry") == []


def test_two_concurrent_retries_queue_one_command(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    coordinator = make_coordinator(
        builder="command", build_command=failing_until(tmp_path / "never")
    )
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(open_question(coordinator, task_id).question_id, "approve")
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "failed"

    def retry(_: int) -> str | None:
        try:
            return coordinator.requests.retry(task_id)
        except TaskRefusedError as refused:
            assert "no longer failed" in str(refused) or f"{task_id} is queued" in str(refused)
            return None

    results = race(2, retry)

    (won,) = [command_id for command_id in results if command_id is not None]
    retries = [
        c.command_id
        for c in db.list_commands(coordinator.ledger, task_id=task_id)
        if c.command_id.startswith("retry:")
    ]
    assert retries == [won]
    assert len(db.list_audit(coordinator.ledger, action="retry")) == 1
    assert task_of(coordinator, task_id).status == "queued"


def test_a_failed_task_past_the_checkpoint_retention_is_refused(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    clock = Clock()
    coordinator = make_coordinator(
        clock=clock, builder="command", build_command=failing_until(tmp_path / "never")
    )
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(open_question(coordinator, task_id).question_id, "approve")
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "failed"

    clock.advance(days=8)  # past the default retention of 7 days, before any prune pass
    with pytest.raises(TaskRefusedError, match="AGENT_TEAM_CHECKPOINT_RETENTION"):
        coordinator.retry(task_id)
    coordinator.tick(until_idle=True, timeout_s=60)  # the prune pass deletes the thread
    task = task_of(coordinator, task_id)
    assert task.status == "failed" and task.checkpoints_pruned_at is not None
    with pytest.raises(TaskRefusedError, match="submit it again"):
        coordinator.retry(task_id)
    assert db.list_audit(coordinator.ledger, action="retry") == []


def test_a_retried_task_whose_checkpoints_vanished_parks_instead_of_starting_over(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    """The retention pass deleting the thread as the retry queued it (a race of instants)."""
    coordinator = make_coordinator(
        builder="command", build_command=failing_until(tmp_path / "never")
    )
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(open_question(coordinator, task_id).question_id, "approve")
    coordinator.tick(until_idle=True, timeout_s=60)
    questions = db.list_questions(coordinator.ledger, thread_id=task_id)
    calls = usage_calls(coordinator.ledger, task_id)
    coordinator.retry(task_id)
    coordinator.runner.checkpointer.delete_thread(task_id)

    coordinator.tick(until_idle=True, timeout_s=60)

    task = task_of(coordinator, task_id)
    assert (task.status, task.parked_reason) == ("parked", "needs_operator")
    assert db.list_questions(coordinator.ledger, thread_id=task_id) == questions
    assert usage_calls(coordinator.ledger, task_id) == calls, "it did not start over"
