"""The SQLite saver checks a run's fence inside the checkpoint's own write, before its commit."""

from __future__ import annotations

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
from agent_team.exceptions import FencedError

CONFIG: RunnableConfig = {"configurable": {"thread_id": "task-1", "checkpoint_ns": ""}}
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
            saver.put_writes(
                {"configurable": {**CONFIG["configurable"], "checkpoint_id": "c1"}},
                [("title", "late")],
                "task-a",
            )

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
