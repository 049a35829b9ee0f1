"""The SQLite saver's write: fence checked and next phase entered inside the checkpoint's commit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from agent_team import db
from agent_team.db.fenced_savers import FencedSqliteSaver
from agent_team.exceptions import FencedError
from agent_team.graph import enter_next_phase
from tests.integration.ledger.helpers import counted_writes

CONFIG: RunnableConfig = {"configurable": {"thread_id": "task-1", "checkpoint_ns": ""}}


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[db.Ledger]:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as opened:
        db.create_task(opened, task_id="task-1", kind="code", title="Say hello")
        yield opened


@pytest.fixture
def saver(ledger: db.Ledger) -> Iterator[FencedSqliteSaver]:
    made = ledger.checkpointer()
    assert isinstance(made, FencedSqliteSaver)
    made.step_hook = partial(enter_next_phase, ledger)
    yield made
    made.step_hook = None


def _put_next(saver: FencedSqliteSaver, *nodes: str) -> None:
    """A checkpoint whose next step runs `nodes` (their trigger channels hold a value)."""
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"title": "Say hello", **{f"branch:to:{n}": None for n in nodes}}
    saver.put(CONFIG, checkpoint, {"source": "loop", "step": 1}, {})


def _journey(ledger: db.Ledger) -> list[tuple[str, str]]:
    return [(t.to_phase, t.status) for t in db.list_transitions(ledger, "task-1")]


def test_the_next_nodes_phase_is_entered_in_the_checkpoints_commit(
    ledger: db.Ledger, saver: FencedSqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    with counted_writes(ledger, monkeypatch) as commits:
        _put_next(saver, "plan")
        entered = db.enter_phase(ledger, task_id="task-1", phase="plan", status="running")

    assert commits == [], "the entry rode on the checkpoint; the node's own entry wrote nothing"
    assert _journey(ledger) == [("plan", "running")]
    assert entered == db.list_transitions(ledger, "task-1")[0].transition_id
    task = db.get_task(ledger, "task-1")
    assert task is not None and (task.phase, task.status) == ("plan", "running")
    assert saver.get_tuple(CONFIG) is not None


def test_an_entry_is_used_once_and_only_for_its_own_phase(
    ledger: db.Ledger, saver: FencedSqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    _put_next(saver, "plan")
    with counted_writes(ledger, monkeypatch) as commits:
        db.enter_phase(ledger, task_id="task-1", phase="plan_review", status="running")
        db.enter_phase(ledger, task_id="task-1", phase="plan", status="running")

    assert commits == [False, False], "a different phase, then the same one again: both written"
    assert _journey(ledger) == [
        ("plan", "running"),
        ("plan_review", "running"),
        ("plan", "running"),
    ]


@pytest.mark.parametrize("nodes", [(), ("plan", "build"), ("not_a_node",)])
def test_no_single_known_next_node_enters_nothing(
    ledger: db.Ledger, saver: FencedSqliteSaver, nodes: tuple[str, ...]
) -> None:
    _put_next(saver, *nodes)

    assert _journey(ledger) == []
    assert saver.get_tuple(CONFIG) is not None


def test_a_failing_hook_leaves_no_checkpoint_and_no_entry(
    ledger: db.Ledger, saver: FencedSqliteSaver
) -> None:
    def enter_then_fail(tx: db.Transaction, thread_id: str, nodes: tuple[str, ...]) -> Any:
        enter_next_phase(ledger, tx, thread_id, nodes)
        raise RuntimeError("the hook broke after writing")

    saver.step_hook = enter_then_fail
    with pytest.raises(RuntimeError, match="the hook broke"):
        _put_next(saver, "plan")

    assert saver.get_tuple(CONFIG) is None, "the checkpoint was rolled back with the entry"
    assert _journey(ledger) == []
    saver.step_hook = partial(enter_next_phase, ledger)
    _put_next(saver, "plan")  # the connection is usable again
    assert _journey(ledger) == [("plan", "running")]


def test_a_fenced_runs_checkpoint_and_writes_land_nothing(
    ledger: db.Ledger, saver: FencedSqliteSaver
) -> None:
    old = db.acquire_lease(ledger, name="task:task-1", owner="a", lease_s=60)
    assert old is not None
    later = db.utc_now() + timedelta(seconds=120)
    assert db.acquire_lease(ledger, name="task:task-1", owner="b", lease_s=60, now=later)

    with db.fenced(old):
        with pytest.raises(FencedError, match="held by b"):
            _put_next(saver, "plan")
        with pytest.raises(FencedError, match="held by b"):
            saver.put_writes(
                {"configurable": {**CONFIG["configurable"], "checkpoint_id": "c1"}},
                [("title", "late")],
                "task-a",
            )

    assert saver.get_tuple(CONFIG) is None
    assert saver.conn.execute("SELECT COUNT(*) FROM writes").fetchone()[0] == 0
    assert _journey(ledger) == []


def test_what_runs_after_the_commit_runs_only_once_it_committed(
    ledger: db.Ledger, saver: FencedSqliteSaver
) -> None:
    seen: list[bool] = []

    def hook(tx: db.Transaction, thread_id: str, nodes: tuple[str, ...]) -> Callable[[], None]:
        return lambda: seen.append(saver.conn.in_transaction)

    saver.step_hook = hook
    _put_next(saver, "plan")

    assert seen == [False]


def test_an_entry_in_one_ledger_never_stands_for_the_same_task_id_in_another(
    ledger: db.Ledger, saver: FencedSqliteSaver, tmp_path: Path
) -> None:
    other_path = tmp_path / "other" / "agent-team.db"
    db.init_db(other_path)
    with db.open_ledger(other_path) as other:
        db.create_task(other, task_id="task-1", kind="code", title="Another task, same id")
        _put_next(saver, "plan")

        db.enter_phase(other, task_id="task-1", phase="plan", status="running")

        assert [(t.to_phase, t.status) for t in db.list_transitions(other, "task-1")] == [
            ("plan", "running")
        ]
