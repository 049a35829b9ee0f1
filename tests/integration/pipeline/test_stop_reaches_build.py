"""A cancel or a time limit reaches a build that is running, on whichever instance runs it."""

from __future__ import annotations

import json
import os
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
from tests.integration.builders.helpers import processes_with
from tests.integration.pipeline.conftest import Clock, MakeCoordinator, task_of
from tests.integration.pipeline.test_failures import waiting_on_plan
from tests.waiting import wait_for

# With bubblewrap the build runs in its sandbox, as in production; the stop is the same.
# CI installs it (.ci/run): there, a missing bwrap is a failure, not a quieter test.
if shutil.which("bwrap") is None and os.environ.get("CI"):
    raise RuntimeError("bubblewrap is missing; .ci/run installs it (apt install bubblewrap)")
SANDBOX = "bwrap" if shutil.which("bwrap") else "none"


def printed(state_dir: Path, task_id: str, text: str) -> bool:
    kept = read_build_log(state_dir, task_id)
    return kept is not None and text in kept.text


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_cancel_from_another_instance_stops_the_running_build(
    make_coordinator: MakeCoordinator, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    marker = f"600.7777{len(backend)}"
    # Two daemons on one PostgreSQL database, as in production; or two instances on one file.
    shared = {"database_url": request.getfixturevalue("pg_url")} if backend == "postgres" else {}
    running = make_coordinator(
        builder="command",
        build_command=f"echo BUILD-RUNNING; sleep {marker}",
        sandbox=SANDBOX,
        **shared,
    )
    task_id, question_id = waiting_on_plan(running)
    running.answer(question_id, "approve", via="cli:tester")
    run = threading.Thread(target=running.run_pending)
    run.start()
    other = build_coordinator(
        load_settings(
            db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state-other", **shared
        ),
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


@pytest.mark.slow
def test_a_streamed_cost_past_todays_cap_stops_claude_code_and_parks_the_task(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    marker = "600.9999"
    model = "claude-sonnet-4-5-20250929"  # $3 / $15 per million tokens (models/pricing.py)

    def assistant(message_id: str, input_tokens: int, output_tokens: int) -> str:
        usage = {"input_tokens": input_tokens, "output_tokens": output_tokens}
        line = {"type": "assistant", "message": {"id": message_id, "model": model, "usage": usage}}
        return f"printf '%s\\n' '{json.dumps(line)}'\n"

    fake = tmp_path / "bin" / "claude"
    fake.parent.mkdir()
    # $0.30, then $0.30 + $0.15: $0.75 streamed against $0.50 left; then ten minutes of work.
    fake.write_text(
        "#!/bin/sh\n"
        + assistant("msg_1", 100_000, 0)
        + assistant("msg_2", 100_000, 10_000)
        + f"sleep {marker}\n"
    )
    fake.chmod(0o755)
    coordinator = make_coordinator(
        builder="claude-code", claude_bin=str(fake), sandbox=SANDBOX, daily_budget_usd=0.5
    )
    task_id, question_id = waiting_on_plan(coordinator)
    coordinator.answer(question_id, "approve", via="cli:tester")

    coordinator.tick(until_idle=True, timeout_s=120)

    task = task_of(coordinator, task_id)
    assert (task.status, task.parked_reason, task.phase) == ("parked", "budget_exhausted", "build")
    assert not processes_with(marker)
    (build_row,) = [
        r for r in db.task_usage(coordinator.ledger, thread_id=task_id) if r.stage == "build"
    ]
    assert build_row.usd_cost == pytest.approx(0.75)
    assert (build_row.input_tokens, build_row.output_tokens) == (200_000, 10_000)
