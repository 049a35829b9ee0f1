"""Checkpoint retention: finished tasks lose their LangGraph thread, and nothing people read.

Each test drives real tasks through the coordinator (offline model, offline
builder) on SQLite and on PostgreSQL, moves the injected clock past the
retention and runs the pass. A pruned task must read exactly as before in
`agent-team show` (text and JSON), `/api/task/<id>` and its dashboard page.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from agent_team import db
from agent_team.cli.main import app
from agent_team.common.timefmt import utc_text
from agent_team.config import load_settings
from agent_team.coordinator import Coordinator, thread_config
from agent_team.dashboard import DashboardContext, create_app
from agent_team.db.storage import INCREMENTAL
from agent_team.service.wiring import build_coordinator
from tests.integration.pipeline.conftest import LONG_BODY, Clock, open_question, task_of

# The tables LangGraph keeps a thread in, per backend.
CHECKPOINT_TABLES = {
    "sqlite": ("checkpoints", "writes"),
    "postgres": ("checkpoints", "checkpoint_blobs", "checkpoint_writes"),
}

Make = Callable[..., Coordinator]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ledger_settings(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where the ledger is for this backend, as `load_settings` overrides."""
    where: dict[str, Any] = {"db_path": tmp_path / "agent-team.db", "state_dir": tmp_path / "state"}
    if backend == "postgres":
        where["database_url"] = request.getfixturevalue("pg_url")
    return where


@pytest.fixture
def make(ledger_settings: dict[str, Any]) -> Iterator[Make]:
    """`make(clock=..., **settings)`: a real coordinator on this backend, closed afterwards."""
    made: list[Coordinator] = []

    def build(*, clock: Clock, **overrides: Any) -> Coordinator:
        settings = load_settings(**ledger_settings, **overrides)
        coordinator = build_coordinator(settings, clock=clock)
        made.append(coordinator)
        return coordinator

    yield build
    for coordinator in made:
        coordinator.close()


def run_to_done(coordinator: Coordinator, title: str = "Remember the email") -> str:
    task_id = coordinator.start_task(title=title, body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(open_question(coordinator, task_id).question_id, "approve", via="cli:ada")
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "done"
    return task_id


def run_to_gate(coordinator: Coordinator, title: str = "Still waiting") -> str:
    task_id = coordinator.start_task(title=title, body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "waiting"
    return task_id


def checkpoint_rows(coordinator: Coordinator, task_id: str) -> dict[str, int]:
    """Rows per LangGraph table for one thread."""
    ledger = coordinator.ledger
    counts: dict[str, int] = {}
    for table in CHECKPOINT_TABLES[ledger.dialect.name]:
        row = ledger.fetch_one(f"SELECT COUNT(*) AS n FROM {table} WHERE thread_id = ?", (task_id,))
        assert row is not None
        counts[table] = int(row["n"])
    return counts


def has_checkpoint(coordinator: Coordinator, task_id: str) -> bool:
    return coordinator.ledger.checkpointer().get_tuple(thread_config(task_id)) is not None


# -- what is pruned and what is not ------------------------------------------------------------


def test_a_finished_task_past_the_retention_loses_its_thread_and_live_ones_keep_theirs(
    make: Make,
) -> None:
    clock = Clock()
    coordinator = make(clock=clock)
    done = run_to_done(coordinator)
    waiting = run_to_gate(coordinator)
    assert all(checkpoint_rows(coordinator, done).values())
    assert has_checkpoint(coordinator, done) and has_checkpoint(coordinator, waiting)

    clock.advance(days=6)  # within the week: kept
    assert coordinator.prune_checkpoints() == 0
    assert has_checkpoint(coordinator, done)

    clock.advance(days=2)
    assert coordinator.prune_checkpoints() == 1

    assert not has_checkpoint(coordinator, done)
    assert set(checkpoint_rows(coordinator, done).values()) == {0}
    assert task_of(coordinator, done).checkpoints_pruned_at == db.to_iso(clock.now)
    # The waiting task is as old, and keeps every row.
    assert has_checkpoint(coordinator, waiting)
    assert all(checkpoint_rows(coordinator, waiting).values())
    assert task_of(coordinator, waiting).checkpoints_pruned_at is None

    # A second pass has nothing to do; a tick expires the old question and parks the
    # waiting task, which is still live: its checkpoints stay.
    assert coordinator.prune_checkpoints() == 0
    report = coordinator.tick()
    assert report.checkpoints_pruned == 0
    assert task_of(coordinator, waiting).status == "parked"
    assert has_checkpoint(coordinator, waiting)
    assert task_of(coordinator, done).checkpoints_pruned_at == db.to_iso(clock.now)


def test_a_kept_thread_still_resumes_after_a_pass(make: Make) -> None:
    clock = Clock()
    coordinator = make(clock=clock, plan_deadline_h=24 * 30)
    pruned = run_to_done(coordinator, "Old and done")
    waiting = run_to_gate(coordinator)
    clock.advance(days=8)

    report = coordinator.tick()

    assert report.checkpoints_pruned == 1
    assert task_of(coordinator, pruned).checkpoints_pruned_at is not None
    coordinator.answer(open_question(coordinator, waiting).question_id, "approve", via="cli:ada")
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, waiting).status == "done"
    assert task_of(coordinator, waiting).checkpoints_pruned_at is None  # finished just now


def test_retention_zero_keeps_every_checkpoint(make: Make) -> None:
    clock = Clock()
    coordinator = make(clock=clock, checkpoint_retention="0")
    done = run_to_done(coordinator)
    clock.advance(days=3650)

    assert coordinator.prune_checkpoints() == 0
    assert coordinator.tick().checkpoints_pruned == 0

    assert has_checkpoint(coordinator, done)
    assert all(checkpoint_rows(coordinator, done).values())
    assert task_of(coordinator, done).checkpoints_pruned_at is None


def test_a_short_retention_prunes_in_bounded_passes(make: Make) -> None:
    clock = Clock()
    coordinator = make(clock=clock, checkpoint_retention="30m")
    tasks = [run_to_done(coordinator, f"Task {n}") for n in range(3)]
    clock.advance(minutes=31)

    assert coordinator.sweeper.prune_checkpoints(limit=2) == 2
    assert coordinator.sweeper.prune_checkpoints(limit=2) == 1
    assert coordinator.sweeper.prune_checkpoints(limit=2) == 0
    assert not any(has_checkpoint(coordinator, task_id) for task_id in tasks)


def test_a_delete_that_fails_stops_the_pass_and_marks_only_what_was_deleted(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    coordinator = make(clock=clock)
    tasks = [run_to_done(coordinator, f"Task {n}") for n in range(3)]
    clock.advance(days=8)
    saver = coordinator.runner.checkpointer
    real_delete = saver.delete_thread
    calls: list[str] = []

    def flaky(thread_id: str) -> None:
        calls.append(thread_id)
        if len(calls) == 2:
            raise ConnectionError("the checkpoint store went away")
        real_delete(thread_id)

    monkeypatch.setattr(saver, "delete_thread", flaky)

    assert coordinator.prune_checkpoints() == 1

    first, second = calls
    assert task_of(coordinator, first).checkpoints_pruned_at is not None
    assert task_of(coordinator, second).checkpoints_pruned_at is None
    assert has_checkpoint(coordinator, second), "nothing is marked that was not deleted"
    assert coordinator.prune_checkpoints() == 2  # the next pass finishes the job
    assert not any(has_checkpoint(coordinator, task_id) for task_id in tasks)


def test_the_daemon_loop_prunes_on_its_own(make: Make) -> None:
    clock = Clock()
    coordinator = make(clock=clock)
    done = run_to_done(coordinator)
    clock.advance(days=8)
    stop = threading.Event()
    loop = threading.Thread(target=coordinator.serve, args=(stop,), kwargs={"poll_s": 0.05})
    loop.start()
    try:
        deadline = time.monotonic() + 30
        while task_of(coordinator, done).checkpoints_pruned_at is None:
            assert time.monotonic() < deadline, "serve never pruned the finished task"
            time.sleep(0.02)
    finally:
        stop.set()
        loop.join(timeout=30)
    assert not has_checkpoint(coordinator, done)


# -- a pruned task reads the same everywhere ---------------------------------------------------


def _without_pruned(report: dict[str, Any]) -> dict[str, Any]:
    return {
        **report,
        "task": {k: v for k, v in report["task"].items() if k != "checkpoints_pruned_at"},
    }


def _views(
    coordinator: Coordinator, task_id: str, runner: CliRunner, env: dict[str, str]
) -> dict[str, Any]:
    """What people read of a task: `show` and `show --json`, the API, the page, plan 1."""
    shown = runner.invoke(app, ["show", task_id], env=env)
    as_json = runner.invoke(app, ["show", task_id, "--json"], env=env)
    assert shown.exit_code == 0 and as_json.exit_code == 0, shown.output + as_json.output
    ctx = DashboardContext(
        settings=coordinator.settings, coordinator=coordinator, clock=coordinator.clock
    )
    with TestClient(create_app(ctx)) as client:
        api = client.get(f"/api/task/{task_id}")
        page = client.get(f"/task/{task_id}")
        plan = client.get(f"/task/{task_id}?plan=1")
    assert api.status_code == page.status_code == plan.status_code == 200
    return {
        "show": shown.stdout,
        "json": json.loads(as_json.stdout),
        "api": api.json(),
        "page": page.text,
        "plan": plan.text,
    }


def test_a_pruned_task_reads_the_same_in_show_the_api_and_the_page(
    make: Make, ledger_settings: dict[str, Any]
) -> None:
    clock = Clock()
    coordinator = make(clock=clock)
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(f"{task_id}:q1", "revise log it", via="cli:ada")
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(open_question(coordinator, task_id).question_id, "approve", via="cli:bob")
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "done"
    clock.advance(days=8)
    env = {
        "AGENT_TEAM_DB_PATH": str(ledger_settings["db_path"]),
        "AGENT_TEAM_STATE_DIR": str(ledger_settings["state_dir"]),
    }
    if "database_url" in ledger_settings:
        env["AGENT_TEAM_DATABASE_URL"] = ledger_settings["database_url"]
    runner = CliRunner()
    before = _views(coordinator, task_id, runner, env)

    ledger = coordinator.ledger
    assert len(db.list_commands(ledger, task_id=task_id, state="done")) == 3  # start, 2 resumes
    assert db.get_lease(ledger, db.task_lease_name(task_id)) is not None
    metrics_before = _answer_resume_metrics(coordinator)

    assert coordinator.prune_checkpoints() == 1
    assert not has_checkpoint(coordinator, task_id)
    # Nothing people read needs its commands or its lease any more: both are gone.
    assert db.list_commands(ledger, task_id=task_id) == []
    assert db.get_lease(ledger, db.task_lease_name(task_id)) is None
    assert _answer_resume_metrics(coordinator) == metrics_before
    after = _views(coordinator, task_id, runner, env)

    pruned_at = task_of(coordinator, task_id).checkpoints_pruned_at
    assert pruned_at is not None
    for view in ("json", "api"):
        assert after[view]["task"]["checkpoints_pruned_at"] == pruned_at
        assert _without_pruned(after[view]) == _without_pruned(before[view])
    report = after["api"]
    assert [s["phase"] for s in report["steps"]][-3:] == ["plan_review", "build", "done"]
    assert [q["answer"]["decision"] for q in report["questions"]] == ["revise", "approve"]
    assert len(report["plans"]) == 2 and report["build"] is not None
    assert report["totals"]["tokens"] > 0

    note = f"checkpoints pruned at {utc_text(db.from_iso(pruned_at))}"
    assert note in after["show"] and note not in before["show"]
    assert [line for line in after["show"].splitlines() if note not in line] == before[
        "show"
    ].splitlines()
    for page in ("page", "plan"):
        assert "checkpoints pruned" in after[page] and "checkpoints pruned" not in before[page]
        assert _strip_pruned(after[page]) == before[page]
    # The page shows the approved plan; `?plan=1` the one ada sent back.
    assert "Address review feedback: log it" in after["page"]
    assert "Address review feedback: log it" not in after["plan"]


def _answer_resume_metrics(coordinator: Coordinator) -> list[str]:
    """The answer -> resume histogram's lines in `/metrics` (it reads the resume commands)."""
    ctx = DashboardContext(
        settings=coordinator.settings, coordinator=coordinator, clock=coordinator.clock
    )
    with TestClient(create_app(ctx)) as client:
        served = client.get("/metrics")
    assert served.status_code == 200
    lines = [
        line
        for line in served.text.splitlines()
        if line.startswith("agent_team_answer_resume_seconds")
    ]
    assert any(line.startswith("agent_team_answer_resume_seconds_count") for line in lines)
    return lines


def test_a_pruned_task_is_not_started_again_by_a_second_submit(make: Make) -> None:
    clock = Clock()
    coordinator = make(clock=clock)
    task_id = run_to_done(coordinator)
    clock.advance(days=8)
    assert coordinator.prune_checkpoints() == 1

    # Its `start:<id>` command is gone, so only the finished status stops a second one.
    assert coordinator.start_task(title="Remember the email", body=LONG_BODY, task_id=task_id) == (
        task_id
    )

    assert db.list_commands(coordinator.ledger, task_id=task_id) == []
    assert coordinator.tick(until_idle=True, timeout_s=60).commands == 0
    assert task_of(coordinator, task_id).status == "done"
    assert db.get_lease(coordinator.ledger, db.task_lease_name(task_id)) is None


def _strip_pruned(html: str) -> str:
    """The page without its "checkpoints pruned" note."""
    note = re.compile(r'<span title="[^"]*">checkpoints pruned <time[^>]*>[^<]*</time></span>')
    stripped, found = note.subn("", html)
    assert found == 1, "the page names the pruning once"
    return stripped


# -- giving the room back on SQLite ------------------------------------------------------------


@pytest.mark.slow
def test_pruning_shrinks_the_sqlite_file(tmp_path: Path) -> None:
    clock = Clock()
    settings = load_settings(db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state")
    coordinator = build_coordinator(settings, clock=clock)
    try:
        assert db.auto_vacuum_mode(coordinator.ledger) == INCREMENTAL
        tasks = [run_to_done(coordinator, f"Task {n}") for n in range(20)]
        page_count = _pages(settings.db_path)
        clock.advance(days=8)

        assert coordinator.prune_checkpoints() == len(tasks)

        with closing(sqlite3.connect(settings.db_path)) as raw:
            for table in CHECKPOINT_TABLES["sqlite"]:
                (rows,) = raw.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
                assert rows == 0, table
            (free,) = raw.execute("PRAGMA freelist_count").fetchone()
        assert free == 0, "the freed pages went back to the file system"
        assert _pages(settings.db_path) < page_count * 0.6
    finally:
        coordinator.close()


def _pages(path: Path) -> int:
    with closing(sqlite3.connect(path)) as raw:
        (pages,) = raw.execute("PRAGMA page_count").fetchone()
    return int(pages)
