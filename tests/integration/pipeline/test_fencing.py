"""A run stalled past its lease is fenced: another instance finishes the task; it writes nothing.

Two coordinators on one ledger file stand for two instances. The first one's
build blocks and its lease renewal is stopped (as a paused process would);
once the lease lapses the second takes the task over with the next epoch and
finishes it. Then the first one's build returns: everything it still tries
to write (checkpoints, transitions, the command's completion, notices) must
be refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_team import db
from agent_team.builders.base import BuildResult, BuildTask
from agent_team.config import load_settings
from agent_team.coordinator import Coordinator
from agent_team.exceptions import LedgerStorageError
from agent_team.service.wiring import build_coordinator
from tests.integration.pipeline.conftest import (
    Clock,
    MakeCoordinator,
    RecordingTransport,
    open_question,
    task_of,
)
from tests.integration.pipeline.test_failures import waiting_on_plan
from tests.waiting import wait_for


@pytest.fixture
def other_host(tmp_path: Path) -> Iterator[Callable[..., Coordinator]]:
    """A second instance on the same ledger, with its own state folder (as on another host)."""
    made: list[Coordinator] = []

    def make(tmp: Path, *, build_command: str) -> Coordinator:
        settings = load_settings(
            db_path=tmp / "agent-team.db",
            state_dir=tmp / "state-other-host",
            builder="command",
            build_command=build_command,
            lease_s=1,
        )
        made.append(build_coordinator(settings, clock=Clock()))
        return made[-1]

    yield make
    for coordinator in made:
        coordinator.close()


def lease_lapsed(coordinator: Coordinator, task_id: str) -> bool:
    lease = db.get_lease(coordinator.ledger, db.task_lease_name(task_id))
    return lease is not None and (lease.lease_until or "") < db.to_iso(db.utc_now())


def test_a_stalled_run_is_fenced_and_the_new_owner_finishes_the_task(
    make_coordinator: MakeCoordinator,
    tmp_path: Path,
    other_host: Callable[..., Coordinator],
) -> None:
    go = tmp_path / "go"
    started = tmp_path / "build-started"
    stalled_notices = RecordingTransport()
    stalled = make_coordinator(
        transport=stalled_notices,
        builder="command",
        build_command=f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; echo slow",
        lease_s=1,
    )
    taker = other_host(tmp_path, build_command="echo quick")
    task_id, question_id = waiting_on_plan(stalled)
    stalled.answer(question_id, "approve", via="cli:tester")
    stalled.worker.renew = lambda: set()  # type: ignore[method-assign]  # paused: no renewal

    run = threading.Thread(target=stalled.run_pending)
    run.start()
    try:
        wait_for(started.exists, "the stalled build to start", timeout_s=30)
        (first,) = db.list_leases(stalled.ledger, prefix=f"task:{task_id}")
        wait_for(lambda: lease_lapsed(stalled, task_id), "the stalled lease to lapse", timeout_s=30)

        taken_at = db.to_iso(db.utc_now())
        taker.tick(until_idle=True, timeout_s=60)
        (second,) = db.list_leases(taker.ledger, prefix=f"task:{task_id}")
        assert second.epoch == first.epoch + 1
        done = task_of(taker, task_id)
        assert done.status == "done", done
        notices_before = list(stalled_notices.notices)
    finally:
        go.touch()
        run.join(timeout=60)
    assert not run.is_alive()

    assert stalled.worker.fenced_runs == 1
    assert task_of(taker, task_id).status == "done"
    rows = db.list_transitions(taker.ledger, task_id)
    late = [row for row in rows if row.entered_at > taken_at]
    assert late and all(row.epoch == second.epoch for row in late), rows
    assert all(row.exited_at for row in rows[:-1]) and rows[-1].to_phase == "done"
    # The command was finished by the new owner, once; the stalled run added nothing.
    (resume,) = [c for c in db.list_commands(taker.ledger, task_id=task_id) if c.kind == "resume"]
    assert resume.state == "done" and resume.claimed_by == taker.worker.consumer
    assert stalled_notices.notices == notices_before, "a fenced run told nobody anything"
    # Its graph ends at done: no late checkpoint of the stalled run became the newest.
    assert taker.graph.get_state({"configurable": {"thread_id": task_id}}).values.get(
        "outcome"
    ) not in (None, "cancelled")
    assert open_question_count(taker, task_id) == 0


def open_question_count(coordinator: Coordinator, task_id: str) -> int:
    return len(db.list_questions(coordinator.ledger, status="open", thread_id=task_id))


def test_the_holder_renews_so_nobody_takes_a_long_run_over(
    make_coordinator: MakeCoordinator,
    tmp_path: Path,
    other_host: Callable[..., Coordinator],
) -> None:
    go = tmp_path / "go"
    started = tmp_path / "build-started"
    holder = make_coordinator(
        builder="command",
        build_command=f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done",
        lease_s=1,
    )
    other = other_host(tmp_path, build_command="true")
    task_id, question_id = waiting_on_plan(holder)
    holder.answer(question_id, "approve", via="cli:tester")
    run = threading.Thread(target=holder.run_pending)
    run.start()
    try:
        wait_for(started.exists, "the long build to start", timeout_s=30)
        until = time.monotonic() + 3  # three lease lengths
        while time.monotonic() < until:
            assert other.run_pending() == 0, "the holder's live lease keeps the task"
            time.sleep(0.1)
    finally:
        go.touch()
        run.join(timeout=60)
    assert holder.worker.fenced_runs == 0
    assert task_of(holder, task_id).phase != "plan_review"
    assert open_question(holder, task_id) if task_of(holder, task_id).status == "waiting" else True


def test_a_database_outage_inside_a_node_fails_nothing_and_the_run_is_retried(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator = make_coordinator(lease_s=1)
    original = coordinator.deps.build
    calls: list[str] = []

    def build_during_a_blip(task: BuildTask, plan: str) -> BuildResult:
        calls.append(task.task_id)
        if len(calls) == 1:  # the database went away while the node recorded its work
            raise LedgerStorageError("the ledger failed: server closed the connection")
        return original(task, plan)

    coordinator.deps.build = build_during_a_blip
    task_id, question_id = waiting_on_plan(coordinator)
    coordinator.answer(question_id, "approve", via="cli:tester")
    coordinator.run_pending()

    task = task_of(coordinator, task_id)
    assert task.status == "running" and coordinator.worker.outages == 1
    assert "failed" not in {row.status for row in db.list_transitions(coordinator.ledger, task_id)}
    wait_for(  # once the claim has lapsed
        lambda: coordinator.tick().commands > 0, "the run to be claimed again", timeout_s=30
    )
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "done" and len(calls) == 2
