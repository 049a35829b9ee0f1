"""A real task through the whole pipeline with the ledger and the checkpoints on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.service.wiring import build_coordinator
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
    pg_url: str, tmp_path: Path
) -> None:
    """Each saver write commits with `synchronous_commit` `on` for the gate's interrupt, the
    answer it consumed and the build's result, and `off` for every other checkpoint and
    write; the level is read at commit time, inside the committing transaction."""
    settings = load_settings(
        database_url=pg_url, db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state"
    )
    coordinator = build_coordinator(settings, transport=RecordingTransport(), clock=Clock())
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            # The test server runs with synchronous_commit = off: the writes must say each.
            conn.execute(COMMIT_LEVELS)
        task_id = submit(coordinator)
        coordinator.tick(until_idle=True, timeout_s=60)
        coordinator.answer(open_question(coordinator, task_id).question_id, "approve")
        coordinator.tick(until_idle=True, timeout_s=60)
        assert task_of(coordinator, task_id).status == "done"
    finally:
        coordinator.close()

    with psycopg.connect(pg_url) as conn:
        seen = conn.execute("SELECT tx, what, level FROM commit_levels ORDER BY seq").fetchall()
    by_commit: dict[int, tuple[str, set[str]]] = {}
    for tx, what, level in seen:
        by_commit.setdefault(int(tx), (str(level), set()))[1].add(str(what))
    flushed = [wrote for level, wrote in by_commit.values() if level == "on"]
    assert flushed == [
        {"__interrupt__"},
        {"__resume__", "decision", "turn", "branch:to:build"},
        {"build", "branch:to:done"},
    ]
    assert all(level in ("on", "off") for level, _ in by_commit.values())
    assert sum(1 for level, wrote in by_commit.values() if level == "off") >= 10


# A deferred trigger runs at commit: it sees the level the committing transaction uses.
COMMIT_LEVELS = """
CREATE TABLE commit_levels (
    seq bigserial PRIMARY KEY, tx bigint NOT NULL, what text NOT NULL, level text NOT NULL
);
CREATE FUNCTION note_commit_level() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO commit_levels (tx, what, level) VALUES (
        txid_current(),
        coalesce(to_jsonb(NEW) ->> 'channel', 'checkpoint'),
        current_setting('synchronous_commit'));
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER writes_level AFTER INSERT ON checkpoint_writes
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_commit_level();
CREATE CONSTRAINT TRIGGER checkpoints_level AFTER INSERT ON checkpoints
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_commit_level();
"""
