"""The coordinator in-process: commands, gates, deadlines, budget, recovery and parallel runs.

Each test builds a real `Coordinator` from `load_settings(...)` over a ledger in
`tmp_path` (offline model, offline builder unless said otherwise) and drives it
by calling its methods directly, moving time with the injected clock.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_team import db
from agent_team.coordinator import Coordinator, thread_config
from agent_team.exceptions import QuestionClosedError, TaskRefusedError
from agent_team.task_model import TaskState
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    Clock,
    MakeCoordinator,
    RecordingTransport,
    make_repo,
    open_question,
    task_of,
    usage_calls,
)

APPROVED_JOURNEY = [
    ("intake", "running"),
    ("clarify", "running"),
    ("plan", "running"),
    ("plan_review", "running"),
    ("plan_review", "waiting"),
    ("plan_review", "running"),
    ("build", "running"),
    ("done", "done"),
]


def journey(coordinator: Coordinator, task_id: str) -> list[tuple[str, str]]:
    return [(t.to_phase, t.status) for t in db.list_transitions(coordinator.ledger, task_id)]


def commands(coordinator: Coordinator, task_id: str) -> list[tuple[str, str, str]]:
    return [
        (c.command_id, c.kind, c.state)
        for c in db.list_commands(coordinator.ledger, task_id=task_id)
    ]


def submit(coordinator: Coordinator, title: str = "Remember the email") -> str:
    return coordinator.start_task(title=title, body=LONG_BODY)


def wait_on_plan(coordinator: Coordinator, title: str = "Remember the email") -> tuple[str, str]:
    """Submit a task and tick until it waits on its plan decision; (task_id, question_id)."""
    task_id = submit(coordinator, title)
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "waiting"
    question = open_question(coordinator, task_id)
    assert question.kind == "plan_decision"
    return task_id, question.question_id


def worktree(coordinator: Coordinator, task_id: str) -> Path:
    assert coordinator.settings.state_dir is not None
    return coordinator.settings.state_dir / "worktrees" / task_id


def built_file(coordinator: Coordinator, task_id: str, path: str) -> str | None:
    """`path` as the task's branch holds it, or None if there is no such branch or file.

    The offline builder records on the branch of the default repository without a
    worktree, so what was built is read from git, not from a checkout.
    """
    assert coordinator.settings.state_dir is not None
    repo = coordinator.settings.state_dir / "repos" / "default"
    if not repo.is_dir():
        return None
    done = subprocess.run(
        ["git", "show", f"refs/heads/agent-team/{task_id}:{path}"],
        cwd=repo,
        env={"PATH": os.environ.get("PATH", os.defpath), "GIT_CONFIG_NOSYSTEM": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


def was_built(coordinator: Coordinator, task_id: str) -> bool:
    """Whether the task's branch exists: every build records a commit on it."""
    assert coordinator.settings.state_dir is not None
    repo = coordinator.settings.state_dir / "repos" / "default"
    if not repo.is_dir():
        return False
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/agent-team/{task_id}"],
        cwd=repo,
        env={"PATH": os.environ.get("PATH", os.defpath), "GIT_CONFIG_NOSYSTEM": "1"},
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


# -- the happy path ----------------------------------------------------------------------------


def test_the_approve_path_runs_in_process(make_coordinator: MakeCoordinator) -> None:
    clock = Clock()
    transport = RecordingTransport()
    coordinator = make_coordinator(clock=clock, transport=transport)
    task_id = submit(coordinator)
    assert commands(coordinator, task_id) == [(f"start:{task_id}", "start", "pending")]

    report = coordinator.tick(until_idle=True, timeout_s=60)

    assert report.idle and report.commands == 1
    task = task_of(coordinator, task_id)
    assert (task.status, task.phase) == ("waiting", "plan_review")
    question = open_question(coordinator, task_id)
    assert question.channel_ref == f"local:{question.question_id}"
    assert question.posted_at == db.to_iso(clock.now)
    assert transport.delivered == [question.question_id]

    answered = coordinator.answer(question.question_id, "approve looks right", via="cli:tester")
    assert (answered.status, answered.answer) == (
        "answered",
        {"decision": "approve", "text": "looks right"},
    )
    resume = db.get_command(coordinator.ledger, db.resume_command_id(question.question_id))
    assert resume is not None and (resume.kind, resume.state) == ("resume", "pending")
    coordinator.tick(until_idle=True, timeout_s=60)

    task = task_of(coordinator, task_id)
    assert (task.status, task.phase) == ("done", "done")
    assert journey(coordinator, task_id) == APPROVED_JOURNEY
    rows = db.list_transitions(coordinator.ledger, task_id)
    assert all(row.exited_at for row in rows)
    assert rows[-1].note is not None and rows[-1].note.startswith(f"branch agent-team/{task_id}")
    assert {state for _, _, state in commands(coordinator, task_id)} == {"done"}
    assert usage_calls(coordinator.ledger, task_id) == {"clarify": 1, "plan": 1}
    assert "Store the email in a cookie" in (
        built_file(coordinator, task_id, f"docs/agent-team/{task_id}.md") or ""
    )
    assert not worktree(coordinator, task_id).exists(), "the offline builder needs no checkout"
    events = [event for tid, event, _ in transport.notices if tid == task_id]
    assert events == ["started", "waiting", "done"]
    assert transport.delivered == [question.question_id], "a resume never re-posts"


def test_a_finished_tasks_worktree_is_removed_and_its_branch_kept(
    make_coordinator: MakeCoordinator,
) -> None:
    # The command builder works in a checkout; the coordinator removes it when the task ends.
    coordinator = make_coordinator(builder="command", build_command="echo built > built.txt")
    task_id, question_id = wait_on_plan(coordinator)

    coordinator.answer(question_id, "approve", via="cli:tester")
    coordinator.tick(until_idle=True, timeout_s=60)

    assert task_of(coordinator, task_id).status == "done"
    assert not worktree(coordinator, task_id).exists()
    assert built_file(coordinator, task_id, "built.txt") == "built\n"


# -- resumes the graph no longer waits on ------------------------------------------------------


def test_a_resume_after_cancel_is_superseded_and_runs_nothing(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator = make_coordinator()
    task_id, question_id = wait_on_plan(coordinator)
    coordinator.cancel(task_id)
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "cancelled"
    before = journey(coordinator, task_id)

    db.enqueue_command(
        coordinator.ledger,
        command_id="resume:by-hand",
        kind="resume",
        task_id=task_id,
        payload={"question_id": question_id, "answer": {"decision": "approve", "text": ""}},
    )
    coordinator.tick(until_idle=True, timeout_s=60)

    assert db.get_command(coordinator.ledger, "resume:by-hand").state == "done"  # type: ignore[union-attr]
    assert task_of(coordinator, task_id).status == "cancelled"
    snapshot = coordinator.graph.get_state(thread_config(task_id))
    assert snapshot.next == ("plan_review",) and snapshot.interrupts, "the graph was not resumed"
    question = db.get_question(coordinator.ledger, question_id)
    assert question is not None and question.status == "superseded"
    assert journey(coordinator, task_id) == before
    assert ("build", "running") not in before
    assert not was_built(coordinator, task_id), "nothing was built"


def test_an_answer_to_a_question_the_graph_never_waited_on_is_superseded(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator = make_coordinator()
    task_id, question_id = wait_on_plan(coordinator)
    stray = f"{task_id}:q5"
    db.ensure_question(
        coordinator.ledger,
        question_id=stray,
        thread_id=task_id,
        turn=5,
        kind="plan_decision",
        transport="local",
        deadline_at=None,
        payload_json=None,
    )
    coordinator.answer(stray, "approve")

    coordinator.tick(until_idle=True, timeout_s=60)

    assert db.get_question(coordinator.ledger, stray).status == "superseded"  # type: ignore[union-attr]
    assert task_of(coordinator, task_id).status == "waiting"
    assert open_question(coordinator, task_id).question_id == question_id
    assert not was_built(coordinator, task_id), "the stray approval built nothing"


def test_an_answer_that_lands_behind_a_cancel_is_superseded(
    make_coordinator: MakeCoordinator,
) -> None:
    # One worker: commands should run in the order they were queued (cancel, then the
    # resume). The coordinator's clock here is a moment behind the wall clock, as any
    # clock read before a write lock is behind the commit of a concurrent writer.
    coordinator = make_coordinator(workers=1)
    task_id, question_id = wait_on_plan(coordinator)
    coordinator.cancel(task_id)
    coordinator.answer(question_id, "approve")

    coordinator.tick(until_idle=True, timeout_s=60)

    assert task_of(coordinator, task_id).status == "cancelled"
    question = db.get_question(coordinator.ledger, question_id)
    assert question is not None and question.status == "superseded"
    assert not was_built(coordinator, task_id)
    assert {state for _, _, state in commands(coordinator, task_id)} == {"done"}


def test_an_answer_recorded_while_the_task_is_terminal_is_superseded(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator = make_coordinator()
    task_id, question_id = wait_on_plan(coordinator)
    # The window inside `_finish`: status already terminal, open questions not yet superseded.
    db.set_task_status(coordinator.ledger, task_id, "cancelled")
    coordinator.answer(question_id, "approve")

    coordinator.tick(until_idle=True, timeout_s=60)

    question = db.get_question(coordinator.ledger, question_id)
    assert question is not None and question.status == "superseded"
    assert task_of(coordinator, task_id).status == "cancelled"
    assert ("build", "running") not in journey(coordinator, task_id)
    assert not was_built(coordinator, task_id)


# -- deadlines and reopen ------------------------------------------------------------------------


def test_an_expired_plan_question_parks_and_is_never_approved(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock()
    transport = RecordingTransport()
    coordinator = make_coordinator(clock=clock, transport=transport)
    task_id, question_id = wait_on_plan(coordinator)

    clock.advance(hours=71)
    assert coordinator.check_deadlines() == 0
    clock.advance(hours=2)  # past the 72 h plan deadline
    assert coordinator.check_deadlines() == 1

    task = task_of(coordinator, task_id)
    assert (task.status, task.parked_reason) == ("parked", "question_expired")
    assert db.get_question(coordinator.ledger, question_id).status == "expired"  # type: ignore[union-attr]
    last = db.list_transitions(coordinator.ledger, task_id)[-1]
    assert (last.to_phase, last.status) == ("plan_review", "parked")
    assert last.note is not None and f"agent-team reopen {question_id}" in last.note
    assert (task_id, "parked", last.note) in transport.notices

    clock.advance(days=30)
    report = coordinator.tick(until_idle=True, timeout_s=60)
    assert report.idle and report.commands == 0
    assert task_of(coordinator, task_id).status == "parked"
    assert ("build", "running") not in journey(coordinator, task_id)
    assert not was_built(coordinator, task_id), "no default approval on timeout"
    assert [c.kind for c in db.list_commands(coordinator.ledger, task_id=task_id)] == ["start"]
    assert coordinator.graph.get_state(thread_config(task_id)).interrupts


def test_reopen_sets_a_new_deadline_and_delivers_again(make_coordinator: MakeCoordinator) -> None:
    clock = Clock()
    transport = RecordingTransport()
    coordinator = make_coordinator(clock=clock, transport=transport)
    task_id, question_id = wait_on_plan(coordinator)
    first = db.get_question(coordinator.ledger, question_id)
    assert first is not None
    clock.advance(hours=73)
    coordinator.check_deadlines()
    clock.advance(minutes=5)

    reopened = coordinator.reopen(question_id, deadline=timedelta(hours=2))

    assert reopened.status == "open"
    assert reopened.deadline_at == db.to_iso(clock.now + timedelta(hours=2))
    latest = db.get_question(coordinator.ledger, question_id)
    assert latest is not None
    assert latest.channel_ref == f"local:{question_id}"
    assert latest.posted_at == db.to_iso(clock.now) != first.posted_at
    assert transport.delivered == [question_id, question_id]
    assert task_of(coordinator, task_id).status == "waiting"

    coordinator.answer(question_id, "approve")
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "done"
    rows = db.list_transitions(coordinator.ledger, task_id)
    assert sum(1 for row in rows if row.exited_at is None) == 0


def test_reopen_without_a_window_uses_the_kinds_default(make_coordinator: MakeCoordinator) -> None:
    clock = Clock()
    coordinator = make_coordinator(clock=clock, plan_deadline_h=5)
    _, question_id = wait_on_plan(coordinator)
    clock.advance(hours=6)
    assert coordinator.check_deadlines() == 1

    reopened = coordinator.reopen(question_id)

    assert reopened.deadline_at == db.to_iso(clock.now + timedelta(hours=5))


def test_an_expired_question_of_a_cancelled_task_does_not_reopen(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock()
    transport = RecordingTransport()
    coordinator = make_coordinator(clock=clock, transport=transport)
    task_id, question_id = wait_on_plan(coordinator)
    clock.advance(hours=73)
    assert coordinator.check_deadlines() == 1
    coordinator.cancel(task_id)
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "cancelled"

    with pytest.raises((QuestionClosedError, TaskRefusedError)):
        coordinator.reopen(question_id)

    question = db.get_question(coordinator.ledger, question_id)
    assert question is not None and question.status != "open"
    assert transport.delivered == [question_id], "not posted again"


# -- budget ----------------------------------------------------------------------------------


def test_a_spent_budget_parks_records_nothing_and_unparks_after_midnight(
    make_coordinator: MakeCoordinator,
) -> None:
    today = Clock()
    capped = make_coordinator(clock=today, daily_token_cap=1)
    task_id = submit(capped)

    capped.tick(until_idle=True, timeout_s=60)

    task = task_of(capped, task_id)
    assert (task.status, task.parked_reason) == ("parked", "budget_exhausted")
    assert task.phase == "clarify"
    assert usage_calls(capped.ledger, task_id) == {}
    assert capped.deps.caller.calls == 0, "a refused call is not made"
    last = db.list_transitions(capped.ledger, task_id)[-1]
    assert last.status == "parked"
    assert last.note is not None and "daily token cap reached" in last.note
    assert capped.unpark_budget() == 0, "same UTC day: stays parked"
    capped.tick(until_idle=True, timeout_s=60)
    assert task_of(capped, task_id).status == "parked"

    # A restart two days later (so a real midnight during the test changes nothing).
    later = Clock(today.now + timedelta(days=2))
    coordinator = make_coordinator(clock=later)
    assert coordinator.unpark_budget() == 1
    assert task_of(coordinator, task_id).status == "queued"
    prefix = f"unpark:{task_id}:{db.day_bucket(later.now)}:"
    unparks = [c for c in db.list_commands(coordinator.ledger) if c.command_id.startswith(prefix)]
    assert [c.state for c in unparks] == ["pending"]
    assert coordinator.unpark_budget() == 0, "queued once"

    coordinator.tick(until_idle=True, timeout_s=60)

    assert task_of(coordinator, task_id).status == "waiting"
    assert open_question(coordinator, task_id).kind == "plan_decision"
    assert usage_calls(coordinator.ledger, task_id) == {"clarify": 1, "plan": 1}
    intake_rows = [t for t in journey(coordinator, task_id) if t[0] == "intake"]
    assert intake_rows == [("intake", "running")], "the graph continued, it did not restart"


# -- the recovery sweep --------------------------------------------------------------------------


def test_the_sweep_adds_a_missing_resume_command(make_coordinator: MakeCoordinator) -> None:
    clock = Clock()
    coordinator = make_coordinator(clock=clock)
    task_id, question_id = wait_on_plan(coordinator)
    assert db.answer_question(
        coordinator.ledger,
        question_id=question_id,
        answer_json=json.dumps({"decision": "approve", "text": ""}),
        answered_via="cli:x",
        answered_at=clock.now,
    )
    raw = db.open_ledger(
        coordinator.settings.db_path
    )  # a crash between the two writes, made by hand
    try:
        raw.execute(
            "DELETE FROM commands WHERE command_id = ?", (db.resume_command_id(question_id),)
        )
    finally:
        raw.close()

    report = coordinator.recovery_sweep()

    assert report.resumes_added == 1
    command = db.get_command(coordinator.ledger, db.resume_command_id(question_id))
    assert command is not None and command.state == "pending"
    assert command.payload == {
        "question_id": question_id,
        "answer": {"decision": "approve", "text": ""},
    }
    assert coordinator.recovery_sweep().resumes_added == 0, "added once"
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "done"


def test_the_sweep_continues_a_running_task_that_has_no_command(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator = make_coordinator()
    task_id = "t-cut-short"
    db.create_task(coordinator.ledger, task_id=task_id, kind="code", title="Cut", body=LONG_BODY)
    initial: TaskState = {"task_id": task_id, "kind": "code", "title": "Cut", "body": LONG_BODY}
    # A run that stopped after intake (as if the process died there), leaving no command.
    coordinator.graph.invoke(
        initial, thread_config(task_id), durability="sync", interrupt_after=["intake"]
    )
    assert task_of(coordinator, task_id).status == "running"
    assert db.list_commands(coordinator.ledger, task_id=task_id) == []

    report = coordinator.recovery_sweep()

    assert report.tasks_continued == 1
    (command,) = db.list_commands(coordinator.ledger, task_id=task_id)
    assert (command.kind, command.state) == ("start", "pending")
    assert coordinator.recovery_sweep().tasks_continued == 0, "its command is pending now"
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "waiting"
    assert [t for t in journey(coordinator, task_id) if t[0] == "intake"] == [("intake", "running")]
    assert usage_calls(coordinator.ledger, task_id) == {"clarify": 1, "plan": 1}


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    return child.pid


def test_the_sweep_releases_a_dead_processes_claim_at_once(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator = make_coordinator()
    host = socket.gethostname()
    dead_task = submit(coordinator, "Dead owner")
    live_task = submit(coordinator, "Live owner")
    dead_owner = f"{host}:{dead_pid()}:abc"
    live_owner = f"{host}:{os.getppid()}:abc"
    for owner in (dead_owner, live_owner):
        (claimed,) = db.claim_commands(coordinator.ledger, consumer=owner, limit=1, lease_s=3600)
        assert claimed.claimed_by == owner

    report = coordinator.recovery_sweep()

    assert report.claims_released == 1
    dead_cmd = db.get_command(coordinator.ledger, f"start:{dead_task}")
    live_cmd = db.get_command(coordinator.ledger, f"start:{live_task}")
    assert dead_cmd is not None and (dead_cmd.state, dead_cmd.claimed_by) == ("pending", None)
    assert live_cmd is not None and (live_cmd.state, live_cmd.claimed_by) == (
        "claimed",
        live_owner,
    )
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, dead_task).status == "waiting"
    assert task_of(coordinator, live_task).status == "queued", "a live owner keeps its claim"


def test_the_sweep_delivers_an_open_question_that_was_never_posted(
    make_coordinator: MakeCoordinator,
) -> None:
    transport = RecordingTransport(fail_deliveries=1)
    coordinator = make_coordinator(transport=transport)
    task_id = submit(coordinator)
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "waiting"
    question = open_question(coordinator, task_id)
    assert question.channel_ref is None and transport.delivered == []

    report = coordinator.recovery_sweep()

    assert report.delivered == 1
    latest = db.get_question(coordinator.ledger, question.question_id)
    assert latest is not None and latest.channel_ref == f"local:{question.question_id}"
    assert transport.delivered == [question.question_id]
    assert coordinator.recovery_sweep().delivered == 0, "posted once"


# -- parallel runs -------------------------------------------------------------------------------


class RunRecorder:
    """Wraps the compiled graph: counts runs (`invoke`) in flight, per task and in total."""

    def __init__(self, graph: Any) -> None:
        self._graph = graph
        self._cond = threading.Condition()
        self._active: Counter[str] = Counter()
        self.max_per_task: Counter[str] = Counter()
        self.max_total = 0
        self.runs: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)

    def invoke(self, payload: Any, config: Any, **kwargs: Any) -> Any:
        task_id = config["configurable"]["thread_id"]
        with self._cond:
            self._active[task_id] += 1
            self.runs[task_id] += 1
            self.max_per_task[task_id] = max(self.max_per_task[task_id], self._active[task_id])
            self.max_total = max(self.max_total, self._active.total())
            self._cond.notify_all()
            # Give a sibling run the chance to overlap: a bounded wait on a condition.
            self._cond.wait_for(lambda: self.max_total >= 2, timeout=0.5)
        try:
            return self._graph.invoke(payload, config, **kwargs)
        finally:
            with self._cond:
                self._active[task_id] -= 1


def test_two_workers_never_run_one_task_twice_at_once(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    coordinator = make_coordinator(workers=2)
    recorder = RunRecorder(coordinator.graph)
    coordinator.runner.graph = recorder  # type: ignore[assignment]
    repos: dict[str, str] = {}

    def start(name: str) -> str:
        # One repository per task: builds of different tasks in one repository race in
        # git (see test_failures.py), which is not what this test is about.
        repo = str(make_repo(tmp_path / "repos" / name))
        task_id = coordinator.start_task(title=name, body=LONG_BODY, repo=repo)
        repos[task_id] = repo
        return task_id

    def duplicate(task_id: str, tag: str) -> None:
        # A second command for the same task, claimable in the same batch as the first.
        db.enqueue_command(
            coordinator.ledger,
            command_id=f"{tag}:{task_id}",
            kind="start",
            task_id=task_id,
            payload={"repo": repos[task_id]},
        )

    first, second = start("Task A"), start("Task B")
    others = []
    for name in ("Task C", "Task D", "Task E"):
        task_id = start(name)
        duplicate(task_id, "again")
        others.append(task_id)
    duplicate(first, "again")
    duplicate(second, "again")
    task_ids = [first, second, *others]

    coordinator.tick(until_idle=True, timeout_s=60)
    for task_id in task_ids:
        assert task_of(coordinator, task_id).status == "waiting"
        question = open_question(coordinator, task_id)
        coordinator.answer(question.question_id, "approve")
        duplicate(task_id, "after-answer")
    coordinator.tick(until_idle=True, timeout_s=60)

    for task_id in task_ids:
        assert task_of(coordinator, task_id).status == "done", db.list_transitions(
            coordinator.ledger, task_id
        )[-1].note
        assert [t for t in journey(coordinator, task_id) if t[0] == "build"] == [
            ("build", "running")
        ]
    assert dict(recorder.max_per_task) == dict.fromkeys(task_ids, 1)
    assert 1 <= recorder.max_total <= 2, "never more runs than workers"
    assert sum(recorder.runs.values()) == 2 * len(task_ids), "one start and one resume each"
