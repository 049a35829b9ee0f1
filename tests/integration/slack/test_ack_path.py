"""The ack path: the answer is stored and acked first; redraws, thread acks and notes come after.

Behaviour, not timing: the loopback Slack API holds `chat.update` (or the
private notes) until the test releases it, and the request must still get its
200 with the answer and its resume command in the ledger.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from slack_bolt import BoltRequest, BoltResponse

from agent_team import db
from agent_team.integrations.slack.followups import FollowUps
from tests.fakes.slack_api import BOT_USER
from tests.integration.slack.conftest import (
    ALICE,
    BOB,
    CHANNEL,
    SlackWorld,
    block_action,
    message_event,
)


def resume_commands(world: SlackWorld, task_id: str) -> list[db.Command]:
    return [c for c in db.list_commands(world.conn, task_id=task_id) if c.kind == "resume"]


def slack_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("agent-team-slack")]


@pytest.mark.parametrize("how", ["button", "thread reply"])
def test_the_answer_is_stored_and_acked_while_the_redraw_is_still_held(
    world: SlackWorld, how: str
) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    release = world.fake.hold("chat.update")
    try:
        if how == "button":
            payload = block_action(ref, ALICE, "agent_team.approve", question.question_id)
            response = world.send(payload, form=True)
        else:
            response = world.send(message_event(ref, ALICE, "approve"))
        assert response.status_code == 200
        answered = world.question(question.question_id)
        assert (answered.status, answered.answered_via) == ("answered", f"slack:{ALICE}")
        assert len(resume_commands(world, question.thread_id)) == 1
        # The redraw starts after the ack and waits in the fake: nothing redrawn yet.
        world.fake.wait_for(lambda fake: fake.held("chat.update") == 1)
        assert not world.fake.of("chat.update")
    finally:
        release.set()
    world.settle()
    (update,) = world.fake.of("chat.update")
    assert (update.params["channel"], update.params["ts"]) == tuple(ref.split(":"))
    assert f"Approved by <@{ALICE}>" in update.params["text"]
    ts = ref.split(":")[1]
    acks = [c for c in world.fake.of("chat.postMessage") if c.params.get("thread_ts") == ts]
    assert any("Resuming the task" in str(c.params["text"]) for c in acks), "the thread ack"


def test_a_redraw_lost_between_ack_and_follow_up_is_made_by_the_timer_pass(
    world: SlackWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process died after the 200, before its queued redraw ran: the timer pass redraws."""
    question = world.waiting_question()
    ref = question.channel_ref or ""
    monkeypatch.setattr(FollowUps, "show_outcome", lambda self, question, user: None)
    payload = block_action(ref, BOB, "agent_team.reject", question.question_id)
    assert world.send(payload, form=True).status_code == 200
    world.settle()
    assert world.question(question.question_id).status == "answered"
    assert not world.fake.of("chat.update"), "the follow-up was lost"

    assert world.transport.reconcile_answered() == 0, "the listener's own redraw has its grace"
    world.clock.advance(seconds=61)
    assert world.transport.reconcile_answered() == 1
    (update,) = world.fake.of("chat.update")
    assert update.params["ts"] == ref.split(":")[1]
    assert f"Rejected by <@{BOB}>" in update.params["text"]


def test_a_burst_of_late_answers_queues_its_notes_on_a_fixed_number_of_threads(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    ref, qid = question.channel_ref or "", question.question_id
    assert world.send(block_action(ref, ALICE, "agent_team.approve", qid), form=True)
    world.settle()
    before = len(slack_threads())
    release = world.fake.hold("chat.postEphemeral")
    burst = 60
    barrier = threading.Barrier(burst)
    statuses: list[int] = []
    lock = threading.Lock()

    def click(i: int) -> None:
        barrier.wait()
        payload = block_action(ref, BOB if i % 2 else ALICE, "agent_team.approve", qid)
        status = world.send(payload, form=True).status_code
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=click, args=(i,)) for i in range(burst)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert statuses == [200] * burst, "every late answer is acked while its note waits"
        world.fake.wait_for(lambda fake: fake.held("chat.postEphemeral") == 1)
        threads_now = slack_threads()
        # 4 dispatch + 4 follow-up + 1 note thread at most, however many requests came.
        assert len(threads_now) <= 9, threads_now
        assert len(threads_now) <= max(before, 9)
    finally:
        release.set()
    world.settle()
    notes = world.fake.of("chat.postEphemeral")
    # One note per person and question a minute, however often each clicked (issue #17).
    assert sorted(n.params["user"] for n in notes) == sorted([ALICE, BOB])
    assert all("already answered" in n.params["text"] for n in notes)
    assert len(resume_commands(world, question.thread_id)) == 1


def test_buttons_and_thread_replies_skip_bolt_and_keep_its_rules(
    world: SlackWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clicks and replies are answered without Bolt's dispatch; Bolt still learns the bot's id.

    The first event goes through Bolt (its authorization tells the bot's user
    id); after that, replies take the hot path and the bot's own messages are
    still ignored there.
    """
    question = world.waiting_question()
    ref = question.channel_ref or ""
    chatter = message_event(f"{CHANNEL}:1111.2222", ALICE, "lunch?")  # not a question's thread
    assert world.send(chatter).status_code == 200
    world.settle()
    calls_before = len(world.fake.calls)

    dispatched: list[Any] = []
    real = world.listener.app.dispatch

    def counting(req: BoltRequest) -> BoltResponse:
        dispatched.append(req.body.get("type"))
        return real(req)

    monkeypatch.setattr(world.listener.app, "dispatch", counting)
    own = message_event(ref, BOT_USER, "approve")  # the bot's own message, no bot_id
    assert world.send(own).status_code == 200
    forged = world.send(message_event(ref, ALICE, "approve"), secret="not-the-signing-secret")
    assert forged.status_code == 401
    world.settle()
    assert world.question(question.question_id).status == "open"
    assert len(world.fake.calls) == calls_before, "nothing said back to the bot or a forger"

    assert world.send(message_event(ref, ALICE, "approve")).status_code == 200
    late = block_action(ref, BOB, "agent_team.approve", question.question_id)
    assert world.send(late, form=True).status_code == 200
    world.settle()
    assert world.question(question.question_id).answered_via == f"slack:{ALICE}"
    assert dispatched == [], "no click or reply went through Bolt's dispatch"
    (note,) = world.fake.of("chat.postEphemeral")
    assert note.params["user"] == BOB and "already answered" in note.params["text"]
