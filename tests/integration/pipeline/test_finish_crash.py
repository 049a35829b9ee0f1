"""A process killed while it records a task's end leaves nothing half-written behind.

Finishing a task closes its last transition row, sets the task row (done) and
supersedes its open questions, in one transaction. A process that dies inside
it, after every statement but before the commit, must leave the task exactly
unfinished, and the next instance must finish it: the history never keeps an
open row (or a `done` row still saying `running`) under a task that says it
is done.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_team import db
from tests.integration.pipeline.conftest import LONG_BODY, MakeCoordinator, task_of


class Killed(BaseException):
    """Stands for kill -9: nothing of ours catches it, nothing after it runs."""


def test_killed_between_the_two_writes_of_the_end_the_next_instance_finishes_it(
    make_coordinator: MakeCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = make_coordinator()
    task_id = first.start_task(title="Remember the email", body=LONG_BODY)
    first.tick(until_idle=True, timeout_s=60)
    (question,) = db.list_questions(first.ledger, status="open", thread_id=task_id)
    first.answer(question.question_id, "approve", via="cli:tester")

    statements: list[str] = []
    real_write = first.ledger.write
    finishing = False

    def write_then_die(work: Any, **kwargs: Any) -> Any:
        if not finishing:
            return real_write(work, **kwargs)

        def all_but_the_commit(tx: Any) -> Any:
            class Counting:
                def __getattr__(self, name: str) -> Any:
                    return getattr(tx, name)

                def execute(self, sql: str, params: Any = ()) -> Any:
                    statements.append(sql.split()[1])
                    return tx.execute(sql, params)

            work(Counting())
            raise Killed  # every statement ran; the commit never comes

        return real_write(all_but_the_commit, **kwargs)

    finish = first.runner._finish

    def finish_then_die(*args: Any, **kwargs: Any) -> None:
        nonlocal finishing
        finishing = True
        try:
            finish(*args, **kwargs)
        finally:
            finishing = False

    monkeypatch.setattr(first.ledger, "write", write_then_die)
    monkeypatch.setattr(first.runner, "_finish", finish_then_die)
    with pytest.raises(Killed):
        first.tick(until_idle=True, timeout_s=60)
    assert statements == ["task_transitions", "tasks", "pending_questions"]
    monkeypatch.undo()
    assert task_of(first, task_id).status == "running"  # nothing of the end was kept
    assert db.list_transitions(first.ledger, task_id)[-1].exited_at is None

    restarted = make_coordinator()  # another process: its sweep frees the dead one's claim
    restarted.tick(until_idle=True, timeout_s=60)
    assert task_of(restarted, task_id).status == "done"
    rows = db.list_transitions(restarted.ledger, task_id)
    assert [row.to_phase for row in rows].count("done") == 1
    assert rows[-1].to_phase == "done" and rows[-1].status == "done", rows[-1]
    assert all(row.exited_at is not None for row in rows), rows
