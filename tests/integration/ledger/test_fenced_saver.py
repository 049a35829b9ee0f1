"""The SQLite saver checks a run's fence inside the checkpoint's own write, before its commit,
and flushes only the protocol's durable points when told which channels they are.

Everything else (checkpoints, ordinary node writes) commits under `synchronous =
NORMAL`: it survives `kill -9`, and the next flushed commit makes it durable.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from agent_team import db
from agent_team.db.fenced_savers import FencedSqliteSaver
from agent_team.exceptions import FencedError, LedgerError
from agent_team.graph import DURABLE_CHANNELS
from tests.integration.ledger.saver_commits import SaverCommits, writes_channel

CONFIG: RunnableConfig = {"configurable": {"thread_id": "task-1", "checkpoint_ns": ""}}
WRITES_AT: RunnableConfig = {"configurable": {**CONFIG["configurable"], "checkpoint_id": "c1"}}
LATER = timedelta(seconds=120)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[db.Ledger]:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as opened:
        yield opened


@pytest.fixture
def saver(ledger: db.Ledger) -> FencedSqliteSaver:
    made = ledger.checkpointer()
    assert isinstance(made, FencedSqliteSaver)
    return made


def _flushing(ledger: db.Ledger, *, every_write: bool = False) -> FencedSqliteSaver:
    made = ledger.checkpointer(flush_only=None if every_write else DURABLE_CHANNELS)
    assert isinstance(made, FencedSqliteSaver)
    return made


def _put(saver: FencedSqliteSaver) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"title": "Say hello"}
    saver.put(CONFIG, checkpoint, {"source": "loop", "step": 1}, {})


def _stored(saver: FencedSqliteSaver) -> tuple[int, int]:
    checkpoints = saver.conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    writes = saver.conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0]
    return int(checkpoints), int(writes)


def test_a_fenced_runs_checkpoint_and_writes_land_nothing(
    ledger: db.Ledger, saver: FencedSqliteSaver
) -> None:
    old = db.acquire_lease(ledger, name="task:task-1", owner="a", lease_s=60)
    assert old is not None
    assert db.acquire_lease(
        ledger, name="task:task-1", owner="b", lease_s=60, now=db.utc_now() + LATER
    )

    with db.fenced(old):
        with pytest.raises(FencedError, match="held by b"):
            _put(saver)
        with pytest.raises(FencedError, match="held by b"):
            saver.put_writes(WRITES_AT, [("title", "late")], "task-a")

    assert _stored(saver) == (0, 0)
    _put(saver)  # unfenced: the connection is usable again
    assert _stored(saver) == (1, 0)


def test_a_lease_taken_over_while_a_checkpoint_is_on_its_way_lands_nothing(
    ledger: db.Ledger, saver: FencedSqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pause between a check made before the write and the write itself: a takeover
    there once let the late checkpoint land (the check is now inside the write)."""
    old = db.acquire_lease(ledger, name="task:task-1", owner="a", lease_s=60)
    assert old is not None
    on_its_way, go_on = threading.Event(), threading.Event()
    encode = saver.serde.dumps_typed

    def paused(obj: Any) -> tuple[str, bytes]:
        on_its_way.set()
        go_on.wait(10)
        return encode(obj)

    monkeypatch.setattr(saver.serde, "dumps_typed", paused)
    refused: list[BaseException] = []

    def run() -> None:
        with db.fenced(old):
            try:
                _put(saver)
            except FencedError as exc:
                refused.append(exc)

    late = threading.Thread(target=run)
    late.start()
    assert on_its_way.wait(10)
    taken = db.acquire_lease(
        ledger, name="task:task-1", owner="b", lease_s=60, now=db.utc_now() + LATER
    )
    go_on.set()
    late.join(10)

    assert taken is not None and not late.is_alive()
    assert len(refused) == 1 and "held by b" in str(refused[0])
    assert _stored(saver) == (0, 0)


def test_only_writes_to_the_durable_channels_wait_for_the_disk(ledger: db.Ledger) -> None:
    saver = _flushing(ledger)
    commits = SaverCommits().watch(saver.conn)

    _put(saver)
    saver.put_writes(WRITES_AT, [("plan", {"steps": ["a"]}), ("branch:to:build", None)], "t1")
    saver.put_writes(WRITES_AT, [("__interrupt__", {"question_id": "q1"})], "t2")
    saver.put_writes(WRITES_AT, [("__resume__", "approve"), ("decision", "approve")], "t3")
    saver.put_writes(WRITES_AT, [("build", {"commit": "abc"})], "t4")
    _put(saver)

    levels = [level for level, _ in commits.done]
    assert levels == ["NORMAL", "NORMAL", "FULL", "FULL", "FULL", "NORMAL"]
    assert writes_channel(commits.done[2][1], "__interrupt__")
    assert writes_channel(commits.done[3][1], "__resume__")
    assert writes_channel(commits.done[4][1], "build")
    # What was stored is all there, flushed or not.
    assert saver.conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0] == 6


def test_without_a_policy_every_write_is_flushed(ledger: db.Ledger) -> None:
    saver = _flushing(ledger, every_write=True)
    commits = SaverCommits().watch(saver.conn)

    _put(saver)
    saver.put_writes(WRITES_AT, [("plan", {"steps": ["a"]})], "t1")

    assert [level for level, _ in commits.done] == ["FULL", "FULL"]


class _BothDecideFirst:
    """The saver's lock, entered only once both writers have decided how to commit: each
    write's decision is then made while the other's is pending."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self._both = threading.Barrier(2)

    def __enter__(self) -> None:
        try:
            self._both.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass  # the other writer has finished
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_each_thread_flushes_by_what_it_writes_itself(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph writes a step's tasks from several threads at once: one thread's durable
    write must not lend its flush to, or take it from, another's."""
    saver = _flushing(ledger)
    commits = SaverCommits().watch(saver.conn)
    monkeypatch.setattr(saver, "lock", _BothDecideFirst(saver.lock))

    def write(channel: str) -> None:
        for number in range(30):
            saver.put_writes(WRITES_AT, [(channel, {"n": number})], f"{channel}-{number}")

    threads = [threading.Thread(target=write, args=(name,)) for name in ("__interrupt__", "plan")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(commits.done) == 60
    for level, wrote in commits.done:
        assert level == ("FULL" if writes_channel(wrote, "__interrupt__") else "NORMAL"), wrote


class _CommitFailsOnce:
    """The saver's connection, whose next commit fails as a full disk would make it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.failures = 1

    def commit(self) -> None:
        if self.failures:
            self.failures -= 1
            raise sqlite3.OperationalError("database or disk is full")
        self._conn.commit()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_write_whose_commit_failed_leaves_nothing_for_the_next_to_commit(
    ledger: db.Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver = _flushing(ledger)
    real = saver.conn
    commits = SaverCommits().watch(real)
    monkeypatch.setattr(saver, "conn", _CommitFailsOnce(real))

    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        saver.put_writes(WRITES_AT, [("plan", {"steps": ["lost"]})], "t1")
    saver.put_writes(WRITES_AT, [("__interrupt__", {"question_id": "q1"})], "t2")

    assert not real.in_transaction
    assert [level for level, _ in commits.done] == ["FULL"]
    channels = [row[0] for row in real.execute("SELECT channel FROM writes")]
    assert channels == ["__interrupt__"]


def test_a_ledger_keeps_one_flush_policy_for_its_checkpointer(ledger: db.Ledger) -> None:
    saver = _flushing(ledger)
    assert ledger.checkpointer() is saver  # no preference: the saver as it was made
    assert ledger.checkpointer(flush_only=set(DURABLE_CHANNELS)) is saver
    with pytest.raises(LedgerError, match="other durable channels"):
        ledger.checkpointer(flush_only={"plan"})


def test_a_refused_write_leaves_the_level_for_the_next_one_to_set(ledger: db.Ledger) -> None:
    saver = _flushing(ledger)
    commits = SaverCommits().watch(saver.conn)
    old = db.acquire_lease(ledger, name="task:task-1", owner="a", lease_s=60)
    assert old is not None
    assert db.release_lease(ledger, old)
    assert db.acquire_lease(ledger, name="task:task-1", owner="b", lease_s=60)

    with db.fenced(old), pytest.raises(FencedError):
        saver.put_writes(WRITES_AT, [("__interrupt__", {"question_id": "q1"})], "t1")
    saver.put_writes(WRITES_AT, [("plan", {"steps": ["a"]})], "t2")

    assert [level for level, _ in commits.done] == ["NORMAL"]
    assert saver.conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0] == 1
