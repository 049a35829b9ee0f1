"""How many commits one task costs the ledger, pinned so a change that adds some is seen.

Every flushed commit is an fsync on SQLite (about 0.3 ms on the CI disk,
more than the rest of a write); bench/pipeline.py measures what they cost.
History-only commits (a task entering a phase) do not wait for the disk.
"""

from __future__ import annotations

import pytest

from agent_team import db
from agent_team.db.fenced_savers import FencedSqliteSaver
from tests.integration.ledger.helpers import counted_writes
from tests.integration.ledger.saver_commits import SaverCommits, writes_channel
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    MakeCoordinator,
    RecordingTransport,
    open_question,
    task_of,
)

# submit, claim, 2 model calls, the claim done with the lease; then the answer, the
# resume's claim, the claim done with the lease.
FLUSHED_PER_TASK = 8
# intake, clarify, plan, plan_review, the question, waiting, its delivery (the local
# transport posts nothing); plan_review again on resume, build, done, the task's end (each
# made durable by the flushed commit that follows it).
HISTORY_PER_TASK = 11


@pytest.mark.parametrize("posts", [False, True])
def test_one_task_from_submit_to_done_costs_a_known_number_of_commits(
    make_coordinator: MakeCoordinator, monkeypatch: pytest.MonkeyPatch, posts: bool
) -> None:
    transport = RecordingTransport()
    transport.posts = posts  # type: ignore[attr-defined]  # a transport that posts: Slack
    coordinator = make_coordinator(transport=transport)
    warm = coordinator.start_task(title="Warm-up", body=LONG_BODY)  # first-use writes aside
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(
        db.list_questions(coordinator.ledger, thread_id=warm)[0].question_id, "approve"
    )
    coordinator.tick(until_idle=True, timeout_s=60)

    with counted_writes(coordinator.ledger, monkeypatch) as flushes:
        task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
        while coordinator.run_pending():
            pass
        (question,) = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
        coordinator.answer(question.question_id, "approve", via="cli:tester")
        while coordinator.run_pending():
            pass
    assert task_of(coordinator, task_id).status == "done"
    # A delivery that left the process is recorded with a flush of its own.
    expected = (
        (FLUSHED_PER_TASK + 1, HISTORY_PER_TASK - 1)
        if posts
        else (
            FLUSHED_PER_TASK,
            HISTORY_PER_TASK,
        )
    )
    assert (flushes.count(True), flushes.count(False)) == expected


def test_the_saver_flushes_only_the_question_its_answer_and_the_build_of_a_task(
    make_coordinator: MakeCoordinator,
) -> None:
    """The graph's checkpoints wait for the disk only at the protocol's durable points (the
    gate's interrupt, the answer it consumed, the build's result); the ledger's flushed
    commits cover the rest."""
    coordinator = make_coordinator()
    saver = coordinator.ledger.checkpointer()
    assert isinstance(saver, FencedSqliteSaver)
    commits = SaverCommits().watch(saver.conn)

    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    while coordinator.run_pending():
        pass
    asked = list(commits.done)
    coordinator.answer(open_question(coordinator, task_id).question_id, "approve")
    while coordinator.run_pending():
        pass

    assert task_of(coordinator, task_id).status == "done"
    (gate,) = [wrote for level, wrote in asked if level == "FULL"]
    assert writes_channel(gate, "__interrupt__")
    flushed = commits.flushed()
    assert len(flushed) == 3
    assert writes_channel(flushed[1], "__resume__") and writes_channel(flushed[2], "build")
    # The start, each node's writes and each step's checkpoint: none waited for the disk.
    assert len(commits.unflushed()) >= 12
