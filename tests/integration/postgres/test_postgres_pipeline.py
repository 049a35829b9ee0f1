"""A real task through the whole pipeline with the ledger and the checkpoints on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.wiring import build_coordinator
from tests.integration.pipeline.conftest import Clock, RecordingTransport, open_question, task_of
from tests.integration.pipeline.test_coordinator import APPROVED_JOURNEY, journey, submit


@pytest.fixture(autouse=True)
def _no_agent_team_env(isolated_env: Path) -> None:
    """Settings come from the test alone."""


def test_submit_plan_question_answer_done_on_postgres(pg_url: str, tmp_path: Path) -> None:
    settings = load_settings(
        database_url=pg_url, db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state"
    )
    transport = RecordingTransport()
    coordinator = build_coordinator(settings, transport=transport, clock=Clock())
    try:
        assert coordinator.ledger.dialect.name == "postgres"
        assert type(coordinator.ledger.checkpointer()).__name__ == "FencedPostgresSaver"
        task_id = submit(coordinator)
        coordinator.tick(until_idle=True, timeout_s=60)
        assert task_of(coordinator, task_id).status == "waiting"
        question = open_question(coordinator, task_id)
        assert question.kind == "plan_decision"

        coordinator.answer(question.question_id, "approve looks right", via="cli:tester")
        coordinator.tick(until_idle=True, timeout_s=60)

        task = task_of(coordinator, task_id)
        assert (task.status, task.phase) == ("done", "done")
        assert journey(coordinator, task_id) == APPROVED_JOURNEY
        assert {c.state for c in db.list_commands(coordinator.ledger, task_id=task_id)} == {"done"}
        assert transport.delivered == [question.question_id]
    finally:
        coordinator.close()

    with psycopg.connect(pg_url) as conn:
        (checkpoints,) = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id = %s", (task_id,)
        ).fetchone()
    assert checkpoints > 0, "the checkpoints are kept in PostgreSQL"
    assert not (tmp_path / "agent-team.db").exists(), "nothing went to a SQLite file"


def test_checkpoint_setup_runs_once_for_ledgers_opening_together(pg_url: str) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    db.init_db(pg_url)
    starters = 4
    barrier = threading.Barrier(starters)

    def open_saver(_: int) -> str:
        with db.open_ledger(pg_url) as ledger:
            barrier.wait()
            return type(ledger.checkpointer()).__name__

    with ThreadPoolExecutor(max_workers=starters) as pool:
        assert list(pool.map(open_saver, range(starters))) == ["FencedPostgresSaver"] * starters
    with psycopg.connect(pg_url) as conn:
        versions = conn.execute("SELECT v FROM checkpoint_migrations ORDER BY v").fetchall()
    assert [v for (v,) in versions] == list(range(len(versions)))


def test_the_saver_waits_for_the_flush_only_on_the_question_its_answer_and_the_build(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each saver write sets `synchronous_commit` first, in its own pipeline: `on` for the
    gate's interrupt, the answer it consumed and the build's result, `off` for every other
    checkpoint and write."""
    import threading

    events: list[tuple[int, str, Any]] = []  # (cursor, "level" | "writes" | "checkpoint", ...)
    guard = threading.Lock()
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def traced_execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        text = str(query)
        with guard:
            if "set_config('synchronous_commit'" in text:
                events.append((id(self), "level", params[0]))
            elif "INSERT INTO checkpoints" in text:
                events.append((id(self), "checkpoint", None))
        return execute(self, query, params, **kwargs)

    def traced_executemany(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        rows = list(params_seq)
        if "INSERT INTO checkpoint_writes" in str(query):
            with guard:
                events.append((id(self), "writes", {row[6] for row in rows}))
        return executemany(self, query, rows, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", traced_execute)
    monkeypatch.setattr(psycopg.Cursor, "executemany", traced_executemany)
    settings = load_settings(
        database_url=pg_url, db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state"
    )
    coordinator = build_coordinator(settings, transport=RecordingTransport(), clock=Clock())
    try:
        task_id = submit(coordinator)
        coordinator.tick(until_idle=True, timeout_s=60)
        coordinator.answer(open_question(coordinator, task_id).question_id, "approve")
        coordinator.tick(until_idle=True, timeout_s=60)
        assert task_of(coordinator, task_id).status == "done"
    finally:
        coordinator.close()

    level: dict[int, str] = {}
    written: list[tuple[str, set[str] | None]] = []
    for cursor, kind, value in events:
        if kind == "level":
            level[cursor] = value
        else:
            written.append((level[cursor], value))
    flushed = [channels for was, channels in written if was == "on"]
    assert flushed == [
        {"__interrupt__"},
        {"__resume__", "decision", "turn", "branch:to:build"},
        {"build", "branch:to:done"},
    ]
    assert sum(1 for was, channels in written if was == "off" and channels is None) >= 6
