"""A process killed while it records a task's end leaves nothing half-written behind.

Finishing a task writes the task row (done) and closes its last transition
row. If the process dies between the two, the next instance must still find
the task unfinished and finish it, so the history never keeps an open row
(or a `done` row still saying `running`) under a task that says it is done.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_team import db
from agent_team.coordinator import runner as runner_module
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

    writes: list[str] = []
    real = {name: getattr(db, name) for name in ("set_task_status", "close_terminal")}
    finishing = False

    def counted(name: str) -> Any:
        def write(*args: Any, **kwargs: Any) -> Any:
            if finishing:
                writes.append(name)
                if len(writes) == 2:
                    raise Killed  # after the first of the end's two writes, before the second
            return real[name](*args, **kwargs)

        return write

    finish = first.runner._finish

    def finish_then_die(*args: Any, **kwargs: Any) -> None:
        nonlocal finishing
        finishing = True
        try:
            finish(*args, **kwargs)
        finally:
            finishing = False

    for name in real:
        monkeypatch.setattr(runner_module.db, name, counted(name))
    monkeypatch.setattr(first.runner, "_finish", finish_then_die)
    with pytest.raises(Killed):
        first.tick(until_idle=True, timeout_s=60)
    assert sorted(writes) == ["close_terminal", "set_task_status"]
    monkeypatch.undo()

    restarted = make_coordinator()  # another process: its sweep frees the dead one's claim
    restarted.tick(until_idle=True, timeout_s=60)
    assert task_of(restarted, task_id).status == "done"
    rows = db.list_transitions(restarted.ledger, task_id)
    assert [row.to_phase for row in rows].count("done") == 1
    assert rows[-1].to_phase == "done" and rows[-1].status == "done", rows[-1]
    assert all(row.exited_at is not None for row in rows), rows
