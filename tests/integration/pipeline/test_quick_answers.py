"""Answers that come in while the run that asked is still going (a script, a quick click).

The instance that holds the task's lease then claims the `resume` command at
once (its own lease does not stop it): the resume must run right after the
first run, not be refused by that run's release of the lease and left to wait
until its claim runs out. And when the asking run finds the answer already
stored and uses it itself, the later `resume` finds the task finished: the
answer was applied, so the question stays `answered`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from agent_team import db
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    MakeCoordinator,
    RecordingTransport,
    task_of,
)


@dataclass
class HeldTransport(RecordingTransport):
    """Delivery waits for `go`, so the asking run is still in flight when the answer comes."""

    go: threading.Event = field(default_factory=threading.Event)
    asked: threading.Event = field(default_factory=threading.Event)

    def deliver(self, question: db.Question, task: db.Task) -> str:
        self.asked.set()
        assert self.go.wait(30), "the test never let the delivery go"
        return super().deliver(question, task)


def test_a_resume_claimed_while_the_asking_run_delivers_runs_after_it(
    make_coordinator: MakeCoordinator,
) -> None:
    transport = HeldTransport()
    coordinator = make_coordinator(transport=transport, lease_s=30, workers=2)
    worker = coordinator.worker
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    first = worker.dispatch(2)
    assert transport.asked.wait(30)
    (question,) = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
    coordinator.answer(question.question_id, "approve", via="cli:tester")
    second = worker.dispatch(2)  # this instance holds the lease: it may claim the resume
    assert len(second) == 1
    transport.go.set()
    started = time.monotonic()
    for future in first + second:
        future.result(timeout=60)
    assert worker.fenced_runs == 0, "the resume was fenced by its own instance's release"
    assert task_of(coordinator, task_id).status == "done"
    resume = db.get_command(coordinator.ledger, db.resume_command_id(question.question_id))
    assert resume is not None and resume.state == "done" and resume.attempts == 1
    assert time.monotonic() - started < 30  # not after the claim ran out
    (lease,) = db.list_leases(coordinator.ledger, prefix=f"task:{task_id}")
    assert lease.owner is None and lease.takeovers == 0


def test_an_answer_the_asking_run_used_stays_answered_after_the_task_ends(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator = make_coordinator()
    runner = coordinator.runner
    after_run = runner._after_run
    answered: list[str] = []

    def answer_first(task_id: str) -> None:
        # The person answers between the graph's stop and the run's look at the question.
        for question in db.list_questions(coordinator.ledger, status="open", thread_id=task_id):
            coordinator.answer(question.question_id, "approve", via="cli:tester")
            answered.append(question.question_id)
        after_run(task_id)

    runner._after_run = answer_first  # type: ignore[method-assign]
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)

    assert task_of(coordinator, task_id).status == "done"
    (question_id,) = answered
    question = db.get_question(coordinator.ledger, question_id)
    assert question is not None and question.status == "answered", question
    resume = db.get_command(coordinator.ledger, db.resume_command_id(question_id))
    assert resume is not None and resume.state == "done"


def test_a_timers_pass_while_the_asking_run_delivers_does_not_post_the_question_again(
    make_coordinator: MakeCoordinator,
) -> None:
    transport = HeldTransport()
    coordinator = make_coordinator(transport=transport)
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    runs = coordinator.worker.dispatch(1)
    assert transport.asked.wait(30)  # the run that asked is posting its question now
    timers = threading.Thread(target=coordinator.deliver_open)  # the daemon's timers pass
    timers.start()
    timers.join(timeout=10)
    posting_too = timers.is_alive()  # held in a second `deliver` of the same question
    transport.go.set()
    for future in runs:
        future.result(timeout=60)
    timers.join(timeout=30)

    assert not posting_too, "the timers pass posted the question the run was posting"
    (question,) = db.list_questions(coordinator.ledger, thread_id=task_id)
    assert transport.delivered == [question.question_id], "one post per question"
    assert question.channel_ref == f"local:{question.question_id}"
    assert coordinator.deliver_open() == 0
