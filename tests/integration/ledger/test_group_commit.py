"""Group commit: answers that arrive together share a commit, each still all or nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_team import db
from agent_team.db.group_commit import GroupCommit
from agent_team.exceptions import LedgerStorageError


def _ask(ledger: db.Ledger, n: int) -> None:
    for i in range(n):
        db.create_task(ledger, task_id=f"t{i}", kind="code", title=f"Task {i}")
        db.ensure_question(
            ledger,
            question_id=f"t{i}:q1",
            thread_id=f"t{i}",
            turn=1,
            kind="clarify",
            transport="local",
            deadline_at=None,
            payload_json="{}",
        )


def _answer(question_id: str, text: str) -> Callable[[Any], bool]:
    """The compare-and-set `answer_question` runs, as a unit of work for a group."""

    def work(tx: Any) -> bool:
        row = tx.execute(
            "UPDATE pending_questions SET status = 'answered', answer_json = ? "
            "WHERE question_id = ? AND status = 'open' RETURNING thread_id",
            (f'"{text}"', question_id),
        ).fetchone()
        if text == "boom":
            raise ValueError("this answer's work fails after its update")
        return row is not None

    return work


class _HeldFirstGroup:
    """`ledger.write`, except that the first group waits until `size` writes are queued."""

    def __init__(self, ledger: db.Ledger, size: int) -> None:
        self.ledger = ledger
        self.size = size
        self.first = True
        self.group: GroupCommit | None = None

    def __call__(self, work: Callable[[Any], Any]) -> Any:
        if self.first:
            self.first = False
            deadline = time.monotonic() + 30
            while len(self.group._queue) < self.size - 1:  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "the other writers never queued"
                time.sleep(0.001)
        return self.ledger.write(work)


def _race(group: GroupCommit, works: list[Callable[[Any], Any]]) -> list[Any]:
    results: list[Any] = [None] * len(works)
    start = threading.Barrier(len(works))

    def one(i: int) -> None:
        start.wait()
        try:
            results[i] = group.run(works[i])
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(works))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_writes_that_arrive_while_one_commits_share_the_next_commit(tmp_path: Path) -> None:
    db.init_db(tmp_path / "l.db")
    with db.open_ledger(tmp_path / "l.db") as ledger:
        _ask(ledger, 32)
        held = _HeldFirstGroup(ledger, 32)
        group = held.group = GroupCommit(held)
        results = _race(group, [_answer(f"t{i}:q1", "yes") for i in range(32)])
        assert results == [True] * 32
        assert group.writes == 32 and group.groups == 2  # the first alone, then the 31 others
        answered = db.list_questions(ledger, status="answered")
        assert len(answered) == 32


def test_a_write_that_fails_is_undone_alone(tmp_path: Path) -> None:
    db.init_db(tmp_path / "l.db")
    with db.open_ledger(tmp_path / "l.db") as ledger:
        _ask(ledger, 8)
        held = _HeldFirstGroup(ledger, 8)
        group = held.group = GroupCommit(held)
        texts = ["boom" if i == 5 else "yes" for i in range(8)]
        results = _race(group, [_answer(f"t{i}:q1", texts[i]) for i in range(8)])
        assert isinstance(results[5], ValueError)
        assert [r for i, r in enumerate(results) if i != 5] == [True] * 7
        assert db.get_question(ledger, "t5:q1").status == "open"  # type: ignore[union-attr]
        assert len(db.list_questions(ledger, status="answered")) == 7


def test_a_commit_that_fails_stores_nothing_of_its_group(tmp_path: Path) -> None:
    db.init_db(tmp_path / "l.db")
    with db.open_ledger(tmp_path / "l.db") as ledger:
        _ask(ledger, 6)
        held = _HeldFirstGroup(ledger, 6)

        def failing_commit(work: Callable[[Any], Any]) -> Any:
            def then_fail(tx: Any) -> Any:
                work(tx)
                raise LedgerStorageError("the disk is full")  # rolls the whole group back

            return held(then_fail)

        group = held.group = GroupCommit(failing_commit)
        results = _race(group, [_answer(f"t{i}:q1", "yes") for i in range(6)])
        assert all(isinstance(r, LedgerStorageError) for r in results), results
        assert db.list_questions(ledger, status="answered") == []
        # Nothing is stuck: the next write leads a group of its own.
        group._write = ledger.write
        assert group.run(_answer("t0:q1", "yes")) is True


def test_many_racing_answers_to_one_question_have_one_winner_and_one_resume(
    tmp_path: Path,
) -> None:
    db.init_db(tmp_path / "l.db")
    with db.open_ledger(tmp_path / "l.db") as ledger:
        _ask(ledger, 1)
        wins: list[bool] = []
        start = threading.Barrier(48)

        def one(i: int) -> None:
            start.wait()
            wins.append(
                db.answer_question(
                    ledger, question_id="t0:q1", answer_json=f'"{i}"', answered_via=f"u{i}"
                )
            )

        threads = [threading.Thread(target=one, args=(i,)) for i in range(48)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(wins) == [False] * 47 + [True]
        assert [c.kind for c in db.list_commands(ledger, task_id="t0")] == ["resume"]


def test_a_fenced_writer_never_joins_a_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.init_db(tmp_path / "l.db")
    with db.open_ledger(tmp_path / "l.db") as ledger:
        _ask(ledger, 1)
        fence = db.acquire_lease(ledger, name="task:t0", owner="me", lease_s=30)
        assert fence is not None
        grouped: list[object] = []
        monkeypatch.setattr(
            ledger._together,
            "run",
            lambda work: grouped.append(work),  # type: ignore[attr-defined]
        )
        with db.fenced(fence):
            assert db.answer_question(
                ledger, question_id="t0:q1", answer_json='"yes"', answered_via="me"
            )
        assert grouped == []
