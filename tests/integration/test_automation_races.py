"""The claim gate under contention from threads and processes, and a kill between claim and task.

Racers (8 threads here and 4 processes, `tests/fixtures/automation_racer.py`)
each run passes of their own `AutomationRunner` on one ledger, on a clock the
test moves one slot at a time through a file (as the budget tests move the
daemon's clock with a test hook). Every slot must become exactly one run and
one task, whoever claims it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_team import db
from agent_team.automations import service
from agent_team.automations.runner import run_id_for
from agent_team.requests.actors import Actor
from tests.integration.test_cli import run_cli

RACER = Path(__file__).resolve().parents[1] / "fixtures" / "automation_racer.py"
T0 = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
SLOTS = 50
BODY = "Look at the open dependency bumps and merge the safe ones, with a test run for each."


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "agent-team.db")
    else:
        yield str(request.getfixturevalue("pg_url"))


def set_clock(clock_file: Path, moment: datetime) -> None:
    """Atomically, so a racer never reads half a timestamp."""
    staged = clock_file.with_suffix(".new")
    staged.write_text(moment.isoformat())
    os.replace(staged, clock_file)


def thread_racer(target: str, clock_file: Path, stop_file: Path, name: str, out: list[int]) -> None:
    from tests.fixtures.automation_racer import race

    out.append(race(target, clock_file, stop_file, name))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_8_threads_and_4_processes_make_exactly_one_run_and_one_task_per_slot(
    target: str, tmp_path: Path
) -> None:
    db.init_db(target)
    clock_file, stop_file = tmp_path / "clock", tmp_path / "stop"
    set_clock(clock_file, T0 - timedelta(minutes=1))
    with db.open_ledger(target) as ledger:
        automation = service.create(
            ledger,
            service.AutomationRequest(
                name="minutely",
                title="Review bumps",
                body=BODY,
                every="1m",
                first_run_at=T0.isoformat(),
                overlap="allow",
            ),
            actor=Actor("ada", "cli"),
            now=T0 - timedelta(minutes=1),
        )
        env = {**os.environ, "PYTHONPATH": str(RACER.parents[2])}
        procs = [
            subprocess.Popen(
                [sys.executable, str(RACER), target, str(clock_file), str(stop_file), f"p{n}"],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for n in range(4)
        ]
        by_threads: list[int] = []
        threads = [
            threading.Thread(
                target=thread_racer,
                args=(target, clock_file, stop_file, f"t{n}", by_threads),
                daemon=True,
            )
            for n in range(8)
        ]
        try:
            for proc in procs:
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            for thread in threads:
                thread.start()
            for k in range(SLOTS):
                slot = T0 + timedelta(minutes=k)
                set_clock(clock_file, slot + timedelta(seconds=1))
                run_id = run_id_for(automation.automation_id, db.to_iso(slot))
                deadline = time.monotonic() + 30
                while (run := db.get_run(ledger, run_id)) is None or run.status == "claimed":
                    assert time.monotonic() < deadline, f"slot {k} was never run"
                    time.sleep(0.005)
        finally:
            stop_file.touch()
            for thread in threads:
                thread.join(timeout=30)
            outputs = [proc.communicate(timeout=30)[0] for proc in procs]
        views = db.list_runs(ledger, automation.automation_id, limit=SLOTS + 10)
        tasks = db.list_tasks(ledger, limit=1000)
    assert all(proc.returncode == 0 for proc in procs), outputs
    assert len(views) == SLOTS
    assert {v.run.status for v in views} == {"created"} and {v.run.missed for v in views} == {0}
    assert len(tasks) == SLOTS
    assert sorted(t.id for t in tasks) == sorted(v.run.task_id for v in views)
    by_processes = [int(out.strip().splitlines()[-1]) for out in outputs]
    assert sum(by_processes) + sum(by_threads) == SLOTS, (by_processes, by_threads)
    claimers = sorted({v.run.claimed_by for v in views})
    print(f"created per process {by_processes}, per thread {by_threads}; claimers {claimers}")


def test_a_kill_between_claim_and_task_is_finished_by_the_next_tick_once(tmp_path: Path) -> None:
    db_path = tmp_path / "agent-team.db"
    env = {"AGENT_TEAM_DB_PATH": str(db_path)}
    added = run_cli(
        tmp_path,
        "automation",
        "add",
        "soon",
        "--title",
        "Soon",
        "--body",
        BODY,
        "--every",
        "1m",
        env=env,
    )
    assert added.returncode == 0, added.stderr
    later = {**env, "AGENT_TEAM_CLOCK_OFFSET_S": "150"}  # three slots have come (due at once)

    killed = run_cli(tmp_path, "tick", env={**later, "AGENT_TEAM_CRASH_AT": "automation:claimed"})

    assert killed.returncode == 137, killed.stderr
    with db.open_ledger(db_path) as ledger:
        (automation,) = db.list_automations(ledger)
        (view,) = db.list_runs(ledger, automation.automation_id)
        assert view.run.status == "claimed" and view.run.missed == 2
        assert db.list_tasks(ledger) == []

    # A minute on (a claim is its claimer's for a minute), the next passes finish it, once.
    swept = {**env, "AGENT_TEAM_CLOCK_OFFSET_S": "215"}
    for _ in range(2):
        again = run_cli(tmp_path, "tick", env=swept)
        assert again.returncode == 0, again.stderr
    with db.open_ledger(db_path) as ledger:
        views = db.list_runs(ledger, automation.automation_id)
        (task,) = db.list_tasks(ledger)
    assert [v.run.status for v in views] == ["skipped_overlap", "created"]
    assert task.id == views[1].run.task_id, "the crashed run's task, made once"
