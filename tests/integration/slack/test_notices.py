"""The outbound half: reminders, expiry and escalation, reopen, task notices, 429s, re-delivery.

Time moves with the injected clock; nothing here sleeps.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk.errors import SlackApiError

from agent_team import db
from agent_team.coordinator.loop_lease import LoopLease
from agent_team.requests import inbox
from tests.integration.slack.conftest import (
    ALICE,
    BOB,
    BOSS,
    CHANNEL,
    SlackWorld,
    block_action,
    view_submission,
)


def in_thread(world: SlackWorld, ref: str) -> list[str]:
    ts = ref.split(":")[1]
    return [
        str(c.params["text"])
        for c in world.fake.of("chat.postMessage")
        if c.params.get("thread_ts") == ts
    ]


def test_reminders_fire_once_at_each_fraction_then_expiry_escalates(world: SlackWorld) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    transport = world.transport
    assert transport.remind_due() == 0

    world.clock.advance(hours=72 * 0.5 - 0.01)
    assert transport.remind_due() == 0, "not yet half-way"
    world.clock.advance(hours=0.02)
    assert transport.remind_due() == 1
    assert transport.remind_due() == 0, "each reminder once"
    (first,) = in_thread(world, ref)
    assert f"<@{ALICE}> <@{BOB}>" in first and "expires in 36.0 h" in first

    world.clock.advance(hours=72 * 0.4)
    assert transport.remind_due() == 1
    assert len(in_thread(world, ref)) == 2

    world.clock.advance(hours=72 * 0.1)
    assert transport.remind_due() == 0, "no reminder after the deadline"
    assert world.coordinator.check_deadlines() == 1
    task = db.get_task(world.conn, question.thread_id)
    assert task is not None and (task.status, task.parked_reason) == ("parked", "question_expired")
    expiry = in_thread(world, ref)[-1]
    assert "is parked" in expiry and f"<@{BOSS}>" in expiry and "agent-team reopen" in expiry
    (update,) = world.fake.of("chat.update")
    assert update.params["ts"] == ref.split(":")[1]
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"]
    assert "Expired" in str(update.params["blocks"])

    world.coordinator.tick(until_idle=True, timeout_s=60)  # notices are idempotent
    assert len(in_thread(world, ref)) == 3


def test_reminders_that_fell_due_together_post_only_the_latest(world: SlackWorld) -> None:
    question = world.waiting_question()
    world.clock.advance(hours=72 * 0.95)
    assert world.transport.remind_due() == 1
    assert world.transport.remind_due() == 0
    assert len(in_thread(world, question.channel_ref or "")) == 1
    effects = db.list_effects(world.conn, task_id=question.thread_id, kind="slack.remind")
    assert sorted(e.result is not None and e.result.get("skipped") is True for e in effects) == [
        False,
        True,
    ]


def test_a_reopened_question_is_posted_again_and_the_old_post_says_superseded(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    old_ref = question.channel_ref or ""
    world.clock.advance(hours=73)
    assert world.coordinator.check_deadlines() == 1

    reopened = world.coordinator.reopen(question.question_id)

    new_ref = world.question(question.question_id).channel_ref or ""
    assert reopened.status == "open" and new_ref and new_ref != old_ref
    top_level = [c for c in world.fake.of("chat.postMessage") if "thread_ts" not in c.params]
    assert len(top_level) == 2
    assert world.transport.redraw_superseded() == 1, "the timer pass, after the record"
    assert world.transport.redraw_superseded() == 0, "once"
    updates = world.fake.of("chat.update")
    assert [u.params["ts"] for u in updates] == [old_ref.split(":")[1]] * 2
    assert "Superseded" in str(updates[-1].params["blocks"])

    stale = world.send(
        block_action(old_ref, ALICE, "agent_team.approve", question.question_id), form=True
    )
    assert stale.status_code == 200 and world.question(question.question_id).status == "open"
    world.send(block_action(new_ref, ALICE, "agent_team.approve", question.question_id), form=True)
    assert world.question(question.question_id).status == "answered"


def test_a_button_on_the_old_post_of_a_reopened_undelivered_question_is_refused(
    world: SlackWorld,
) -> None:
    """Reopened but not yet posted again: channel_ref is NULL, and NULL matches no post."""
    question = world.waiting_question()
    old_ref = question.channel_ref or ""
    world.clock.advance(hours=73)
    assert world.coordinator.check_deadlines() == 1
    reopened = inbox.reopen(
        world.conn, question.question_id, deadline_at=world.clock() + timedelta(hours=24)
    )
    assert reopened.status == "open" and reopened.channel_ref is None

    response = world.send(
        block_action(old_ref, ALICE, "agent_team.approve", question.question_id), form=True
    )
    assert response.status_code == 200
    assert world.question(question.question_id).status == "open"
    world.settle()
    (note,) = [c.params for c in world.fake.of("chat.postEphemeral")]
    assert note["user"] == ALICE and "out of date" in note["text"]


def test_a_modal_opened_on_a_post_that_was_since_reopened_is_out_of_date(
    world: SlackWorld,
) -> None:
    """The form names the post it came from; after a reopen that post takes no answers."""
    question = world.waiting_question()
    old_ref = question.channel_ref or ""
    metadata = f"{question.question_id}|{old_ref}"
    world.clock.advance(hours=73)
    assert world.coordinator.check_deadlines() == 1
    inbox.reopen(world.conn, question.question_id, deadline_at=world.clock() + timedelta(hours=24))

    sent = world.send(view_submission(ALICE, metadata, "Use a signed cookie"), form=True)
    assert sent.status_code == 200 and sent.json()["response_action"] == "errors"
    assert "out of date" in sent.json()["errors"]["feedback"]
    assert world.question(question.question_id).status == "open"


def test_the_old_post_is_marked_superseded_only_after_the_new_post_is_recorded(
    world: SlackWorld,
) -> None:
    """`deliver` posts; the coordinator records; only then does the old post say "answer below"."""
    question = world.waiting_question()
    old_ts = (question.channel_ref or "").split(":")[1]
    world.clock.advance(hours=73)
    assert world.coordinator.check_deadlines() == 1
    reopened = inbox.reopen(
        world.conn, question.question_id, deadline_at=world.clock() + timedelta(hours=24)
    )
    task = db.get_task(world.conn, question.thread_id)
    assert task is not None
    expired_redraws = len(world.fake.of("chat.update"))

    new_ref = world.transport.deliver(reopened, task)  # the coordinator has not recorded it yet
    assert world.transport.redraw_superseded() == 0, "nothing recorded, nothing superseded"
    assert len(world.fake.of("chat.update")) == expired_redraws, "the old post is left alone"

    assert world.coordinator.deliver_open(task.id) == 1  # re-delivery reuses the post; records
    assert world.question(question.question_id).channel_ref == new_ref
    assert world.transport.redraw_superseded() == 1
    update = world.fake.of("chat.update")[-1]
    assert update.params["ts"] == old_ts and "Superseded" in str(update.params["blocks"])


def test_notices_go_into_the_task_thread_once_and_quiet_events_post_nothing(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    task = db.get_task(world.conn, question.thread_id)
    assert task is not None
    before = len(world.fake.calls)
    world.transport.notify(task, "started", "agent-team started")
    world.transport.notify(task, "waiting", "waiting on a person")
    assert len(world.fake.calls) == before

    text = "branch agent-team/x at abc123; pull request https://github.test/o/r/pull/7"
    world.transport.notify(task, "done", text)
    world.transport.notify(task, "done", text)
    world.transport.notify(task, "failed", "BuildError: tests failed <!channel>")
    posts = in_thread(world, ref)
    assert len(posts) == 2
    assert "https://github.test/o/r/pull/7" in posts[0]
    assert "tests failed &lt;!channel&gt;" in posts[1], "outside text cannot ping a channel"


def test_a_task_with_no_question_notifies_in_the_channel(world: SlackWorld) -> None:
    task_id = world.coordinator.start_task(title="Nothing asked", body="x")
    task = db.get_task(world.conn, task_id)
    assert task is not None
    world.transport.notify(task, "failed", "ModelError: no model")
    (post,) = world.fake.of("chat.postMessage")
    assert post.params["channel"] == CHANNEL and "thread_ts" not in post.params


def test_a_429_is_retried_after_retry_after(world: SlackWorld) -> None:
    world.fake.rate_limit("chat.postMessage", times=1, retry_after=1)
    question = world.waiting_question()
    assert len(world.fake.of("chat.postMessage", status=429, ok=None)) == 1
    assert len(world.fake.of("chat.postMessage")) == 1
    assert question.channel_ref == f"{CHANNEL}:1700000000.000001"


def test_delivery_is_recorded_so_a_second_pass_never_posts_twice(world: SlackWorld) -> None:
    world.fake.fail("chat.postMessage", "channel_not_found")
    task_id = world.coordinator.start_task(title="Remember", body=LONG)
    world.coordinator.tick(until_idle=True, timeout_s=60)
    (question,) = db.list_questions(world.conn, status="open", thread_id=task_id)
    assert question.channel_ref is None, "the failed post is retried by the next pass"
    (effect,) = db.list_effects(world.conn, task_id=task_id, kind="slack.post")
    assert effect.state == "failed" and effect.error and "channel_not_found" in effect.error

    assert world.coordinator.deliver_open() == 1
    delivered = world.question(question.question_id)
    task = db.get_task(world.conn, task_id)
    assert task is not None
    # A crash after the post but before `record_delivery`: the sweep delivers again.
    assert world.transport.deliver(delivered, task) == delivered.channel_ref
    assert len(world.fake.of("chat.postMessage", ok=None)) == 2  # the failure, the success
    (effect,) = db.list_effects(world.conn, task_id=task_id, kind="slack.post")
    assert (effect.state, effect.result_ref) == ("done", delivered.channel_ref)


def test_a_refused_call_raises_with_slack_error_and_no_token(
    world: SlackWorld, caplog: pytest.LogCaptureFixture
) -> None:
    world.fake.fail("chat.postMessage", "not_in_channel")
    with pytest.raises(SlackApiError):
        world.transport.post(CHANNEL, "hello")
    assert "not_in_channel" in caplog.text
    assert "xoxb-" not in caplog.text


LONG = (
    "The login page should remember the user's email address between visits.\n"
    "- Store the email in a cookie after a successful login\n"
    "- Prefill the email field when the cookie is present\n"
)


def test_a_refused_reminder_is_tried_again_on_the_next_pass(world: SlackWorld) -> None:
    question = world.waiting_question()
    world.clock.advance(hours=40)
    world.fake.fail("chat.postMessage", "service_unavailable")
    assert world.transport.remind_due() == 0, "a Slack error does not break the loop"
    assert world.transport.remind_due() == 1
    assert world.transport.remind_due() == 0
    assert len(in_thread(world, question.channel_ref or "")) == 1


def test_an_answer_from_elsewhere_or_lost_in_a_crash_is_redrawn_by_the_timer(
    world: SlackWorld,
) -> None:
    by_cli = world.waiting_question("Answered in the CLI")
    by_slack = world.waiting_question("Answered in Slack, then a crash")
    world.coordinator.answer(by_cli.question_id, "approve", via="cli")
    # The Slack answer was stored, but the process died before its follow-up ran.
    world.coordinator.answer(by_slack.question_id, "reject", via=f"slack:{ALICE}")

    assert world.transport.reconcile_answered() == 1, "the Slack one gets the listener's grace"
    (update,) = world.fake.of("chat.update")
    assert update.params["ts"] == (by_cli.channel_ref or "").split(":")[1]
    assert "Approved via cli" in update.params["text"]

    world.clock.advance(seconds=61)
    assert world.transport.reconcile_answered() == 1
    assert f"Rejected by <@{ALICE}>" in world.fake.of("chat.update")[-1].params["text"]
    assert world.transport.reconcile_answered() == 0, "once each"


def test_cancelling_a_waiting_task_takes_the_buttons_off_its_question(world: SlackWorld) -> None:
    question = world.waiting_question()
    world.coordinator.cancel(question.thread_id)
    world.coordinator.tick(until_idle=True, timeout_s=60)
    assert world.question(question.question_id).status == "superseded"
    (update,) = world.fake.of("chat.update")
    assert update.params["ts"] == (question.channel_ref or "").split(":")[1]
    assert "No longer needed: the task is cancelled" in update.params["text"]
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"]
    assert any("was cancelled" in t for t in in_thread(world, question.channel_ref or ""))


def test_the_timer_loop_reminds_beats_and_finishes_cleanly_on_stop(world: SlackWorld) -> None:
    question = world.waiting_question()
    world.clock.advance(hours=40)
    stop = threading.Event()
    beats: list[int] = []
    loop = threading.Thread(
        target=world.listener.run_timers, args=(stop, lambda: beats.append(1), 0.01)
    )
    loop.start()
    try:
        world.fake.wait_for(lambda f: len(in_thread(world, question.channel_ref or "")) == 1)
        deadline = time.monotonic() + 10
        while len(beats) < 3:
            assert time.monotonic() < deadline, "the loop should keep beating"
            time.sleep(0.005)
    finally:
        stop.set()
        loop.join(timeout=10)
    assert not loop.is_alive()
    assert len(in_thread(world, question.channel_ref or "")) == 1, "still one reminder"


def test_the_timer_loop_reminds_only_in_the_turns_its_instance_holds(world: SlackWorld) -> None:
    """Several daemons on one database: one reminds; the others beat and wait their turn."""
    question = world.waiting_question()
    world.clock.advance(hours=40)
    other = LoopLease(world.conn, "slack-reminders", owner="other", every_s=0.01, lease_s=30)
    mine = LoopLease(world.conn, "slack-reminders", owner="mine", every_s=0.01, lease_s=30)
    assert other.turn()
    stop = threading.Event()
    beats: list[int] = []
    loop = threading.Thread(
        target=world.listener.run_timers,
        args=(stop, lambda: beats.append(1), 0.01),
        kwargs={"turn": mine.turn},
    )
    loop.start()
    try:
        deadline = time.monotonic() + 10
        while len(beats) < 5:
            assert time.monotonic() < deadline, "the loop should keep beating"
            time.sleep(0.005)
        assert in_thread(world, question.channel_ref or "") == [], "not this instance's turn"
        other.release()  # the other daemon stops
        world.fake.wait_for(lambda f: len(in_thread(world, question.channel_ref or "")) == 1)
        assert mine.held
    finally:
        stop.set()
        loop.join(timeout=10)


def test_a_parked_notice_says_how_to_unpark(world: SlackWorld) -> None:
    question = world.waiting_question()
    db.set_task_status(
        world.conn, question.thread_id, "parked", parked_reason="builder_unavailable"
    )
    task = db.get_task(world.conn, question.thread_id)
    assert task is not None
    world.transport.notify(task, "parked", "claude was not found")
    (post,) = in_thread(world, question.channel_ref or "")
    assert "builder_unavailable" in post and f"`agent-team retry {task.id}`" in post


def test_a_model_park_says_when_it_continues_and_a_refusal_what_to_fix(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    now = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    db.park_for_models(world.conn, question.thread_id, pauses=[timedelta(minutes=5)], now=now)
    task = db.get_task(world.conn, question.thread_id)
    assert task is not None
    world.transport.notify(task, "parked", "anthropic:claude-sonnet-4-5 HTTP 529 overloaded")
    (post,) = in_thread(world, question.channel_ref or "")
    assert "(model_unavailable): anthropic:claude-sonnet-4-5 HTTP 529 overloaded" in post
    assert "continues by itself at 2026-12-07 12:05:00 UTC" in post
    assert f"`agent-team retry {task.id}`" in post

    inbox.retry_task(world.conn, task.id)
    db.set_task_status(world.conn, task.id, "parked", parked_reason="model_refused")
    refused = db.get_task(world.conn, task.id)
    assert refused is not None
    world.transport.notify(refused, "parked", "openai:gpt-4o refused: HTTP 401 invalid api key")
    post = in_thread(world, question.channel_ref or "")[-1]
    assert "(model_refused)" in post and "fix the API key or the model setting" in post
    assert f"`agent-team retry {task.id}`" in post


def test_a_second_identical_parked_notice_after_a_retry_is_posted_again(
    world: SlackWorld,
) -> None:
    """Same task, event and text, but a new occurrence: the operator must see it again.

    The clock does not move, so only the occurrence (the newest transition) tells them apart.
    """
    question = world.waiting_question()
    task_id = question.thread_id

    def park() -> db.Task:
        db.set_task_status(world.conn, task_id, "parked", parked_reason="builder_unavailable")
        db.record_transition(
            world.conn, thread_id=task_id, to_phase="build", status="parked", note="no claude"
        )
        task = db.get_task(world.conn, task_id)
        assert task is not None
        return task

    first = park()
    world.transport.notify(first, "parked", "claude was not found")
    world.transport.notify(first, "parked", "claude was not found")  # the same occurrence
    assert len(in_thread(world, question.channel_ref or "")) == 1
    inbox.retry_task(world.conn, task_id)
    again = park()
    world.transport.notify(again, "parked", "claude was not found")
    world.transport.notify(again, "parked", "claude was not found")
    posts = in_thread(world, question.channel_ref or "")
    assert len(posts) == 2 and posts[0] == posts[1]
