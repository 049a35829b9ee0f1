"""A cancel or a time limit reaches a build that is running, on whichever instance runs it."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from agent_team import db
from agent_team.builders.live_log import read_build_log
from agent_team.builders.worktree import task_key
from agent_team.config import load_settings
from agent_team.service.wiring import build_coordinator
from tests.integration.pipeline.conftest import Clock, MakeCoordinator, task_of
from tests.integration.pipeline.test_failures import waiting_on_plan
from tests.waiting import wait_for

# With bubblewrap the build runs in its sandbox, as in production; the stop is the same.
SANDBOX = "bwrap" if shutil.which("bwrap") else "none"


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def printed(state_dir: Path, task_id: str, text: str) -> bool:
    kept = read_build_log(state_dir, task_id)
    return kept is not None and text in kept.text


@pytest.mark.slow
def test_a_cancel_from_another_instance_stops_the_running_build(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    marker = "600.7777"
    running = make_coordinator(
        builder="command", build_command=f"echo BUILD-RUNNING; sleep {marker}", sandbox=SANDBOX
    )
    task_id, question_id = waiting_on_plan(running)
    running.answer(question_id, "approve", via="cli:tester")
    run = threading.Thread(target=running.run_pending)
    run.start()
    other = build_coordinator(
        load_settings(db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state-other"),
        clock=Clock(),
    )
    try:
        wait_for(
            lambda: printed(tmp_path / "state", task_id, "BUILD-RUNNING"), "the build to run", 60
        )
        assert processes_with(marker)
        asked = time.monotonic()
        other.cancel(task_id)  # another instance: only the shared ledger carries it
        run.join(timeout=30)
        took = time.monotonic() - asked
    finally:
        other.close()
    assert not run.is_alive()
    assert took < 5, f"the build was stopped {took:.1f} s after the cancel"

    task = task_of(running, task_id)
    assert task.status == "cancelled"
    last = db.list_transitions(running.ledger, task_id)[-1]
    assert last.note is not None and "cancelled" in last.note and "stopped" in last.note
    assert not processes_with(marker)
    # The task's worktree is gone with the task; nothing of the build was recorded.
    assert not (tmp_path / "state" / "worktrees" / task_key(task_id)).exists()
    # The queued cancel then finds the task ended and changes nothing.
    running.tick(until_idle=True, timeout_s=60)
    assert task_of(running, task_id).status == "cancelled"
    assert {c.state for c in db.list_commands(running.ledger, task_id=task_id)} == {"done"}


@pytest.mark.slow
def test_the_task_time_limit_stops_the_build_and_says_so(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    marker = "600.8888"
    coordinator = make_coordinator(
        builder="command",
        build_command=f"echo BUILD-RUNNING; sleep {marker}",
        sandbox=SANDBOX,
        task_timeout="1",
    )
    task_id, question_id = waiting_on_plan(coordinator)
    coordinator.answer(question_id, "approve", via="cli:tester")

    coordinator.tick(until_idle=True, timeout_s=120)

    task = task_of(coordinator, task_id)
    assert (task.status, task.phase) == ("failed", "build")
    last = db.list_transitions(coordinator.ledger, task_id)[-1]
    assert last.note is not None and "AGENT_TEAM_TASK_TIMEOUT" in last.note
    assert printed(tmp_path / "state", task_id, "BUILD-RUNNING")
    assert not processes_with(marker)
