"""The saver flushes only the protocol's durable points when told which channels they are.

Everything else (checkpoints, ordinary node writes) commits under `synchronous =
NORMAL`: it survives `kill -9`, and the next flushed commit makes it durable.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from agent_team import db
from agent_team.db.fenced_savers import FencedSqliteSaver
from agent_team.exceptions import FencedError
from agent_team.graph import DURABLE_CHANNELS
from tests.integration.ledger.saver_commits import SaverCommits, writes_channel

CONFIG: RunnableConfig = {
    "configurable": {"thread_id": "task-1", "checkpoint_ns": "", "checkpoint_id": "c1"}
}


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[db.Ledger]:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as opened:
        yield opened


def _saver(ledger: db.Ledger, **kwargs: object) -> FencedSqliteSaver:
    made = ledger.checkpointer(**kwargs)  # type: ignore[arg-type]
    assert isinstance(made, FencedSqliteSaver)
    return made


def _put(saver: FencedSqliteSaver) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"title": "Say hello"}
    saver.put(CONFIG, checkpoint, {"source": "loop", "step": 1}, {})


def test_only_writes_to_the_durable_channels_wait_for_the_disk(ledger: db.Ledger) -> None:
    saver = _saver(ledger, flush_only=DURABLE_CHANNELS)
    commits = SaverCommits().watch(saver.conn)

    _put(saver)
    saver.put_writes(CONFIG, [("plan", {"steps": ["a"]}), ("branch:to:build", None)], "t1")
    saver.put_writes(CONFIG, [("__interrupt__", {"question_id": "q1"})], "t2")
    saver.put_writes(CONFIG, [("__resume__", "approve"), ("decision", "approve")], "t3")
    saver.put_writes(CONFIG, [("build", {"commit": "abc"})], "t4")
    _put(saver)

    levels = [level for level, _ in commits.done]
    assert levels == ["NORMAL", "NORMAL", "FULL", "FULL", "FULL", "NORMAL"]
    assert writes_channel(commits.done[2][1], "__interrupt__")
    assert writes_channel(commits.done[3][1], "__resume__")
    assert writes_channel(commits.done[4][1], "build")
    # What was stored is all there, flushed or not.
    assert saver.conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0] == 6


def test_without_a_policy_every_write_is_flushed(ledger: db.Ledger) -> None:
    saver = _saver(ledger)
    commits = SaverCommits().watch(saver.conn)

    _put(saver)
    saver.put_writes(CONFIG, [("plan", {"steps": ["a"]})], "t1")

    assert [level for level, _ in commits.done] == ["FULL", "FULL"]


def test_each_thread_flushes_by_what_it_writes_itself(ledger: db.Ledger) -> None:
    """LangGraph writes a step's tasks from several threads at once: one thread's durable
    write must not lend its flush to, or take it from, another's."""
    saver = _saver(ledger, flush_only=DURABLE_CHANNELS)
    commits = SaverCommits().watch(saver.conn)
    start = threading.Barrier(2)

    def write(channel: str) -> None:
        start.wait()
        for number in range(60):
            saver.put_writes(CONFIG, [(channel, {"n": number})], f"{channel}-{number}")

    threads = [threading.Thread(target=write, args=(name,)) for name in ("__interrupt__", "plan")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(commits.done) == 120
    for level, wrote in commits.done:
        assert level == ("FULL" if writes_channel(wrote, "__interrupt__") else "NORMAL"), wrote


def test_a_refused_write_leaves_the_level_for_the_next_one_to_set(ledger: db.Ledger) -> None:
    saver = _saver(ledger, flush_only=DURABLE_CHANNELS)
    commits = SaverCommits().watch(saver.conn)
    old = db.acquire_lease(ledger, name="task:task-1", owner="a", lease_s=60)
    assert old is not None
    assert db.release_lease(ledger, old)
    assert db.acquire_lease(ledger, name="task:task-1", owner="b", lease_s=60)

    with db.fenced(old), pytest.raises(FencedError):
        saver.put_writes(CONFIG, [("__interrupt__", {"question_id": "q1"})], "t1")
    saver.put_writes(CONFIG, [("plan", {"steps": ["a"]})], "t2")

    assert [level for level, _ in commits.done] == ["NORMAL"]
    assert saver.conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0] == 1
