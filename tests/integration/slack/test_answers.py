"""Answers by thread reply, button and modal; who may answer; what is ignored.

Each test runs a real coordinator to a real plan question posted to the
loopback Slack API, then sends signed requests to the real HTTP endpoint.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pytest

from agent_team import db
from agent_team.exceptions import LedgerBusyError
from tests.fakes.slack_api import BOT_USER
from tests.integration.slack.conftest import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    SlackWorld,
    block_action,
    message_event,
    view_submission,
)


def ephemerals(world: SlackWorld) -> list[dict[str, Any]]:
    return [call.params for call in world.fake.of("chat.postEphemeral")]


def thread_posts(world: SlackWorld, ref: str) -> list[str]:
    ts = ref.split(":")[1]
    return [
        str(call.params["text"])
        for call in world.fake.of("chat.postMessage")
        if call.params.get("thread_ts") == ts
    ]


# -- buttons ---------------------------------------------------------------------------------


def test_the_question_is_posted_with_buttons_and_approve_finishes_the_task(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    (post,) = world.fake.of("chat.postMessage")
    assert post.authorized and post.params["channel"] == CHANNEL
    assert question.channel_ref == f"{CHANNEL}:1700000000.000001"
    (actions,) = [b for b in post.params["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == [
        "agent_team.approve",
        "agent_team.revise",
        "agent_team.reject",
    ]
    assert {e["value"] for e in actions["elements"]} == {question.question_id}
    text = json.dumps(post.params["blocks"])
    assert "Remember the email" in text and "http://dash.test/task/" in text
    assert "<!date^" in text, "the deadline is shown"
    assert "Store the email in a cookie" in text, "the plan is shown"

    ref = question.channel_ref or ""
    response = world.send(
        block_action(ref, ALICE, "agent_team.approve", question.question_id), form=True
    )

    assert response.status_code == 200
    answered = world.question(question.question_id)
    assert (answered.status, answered.answered_via) == ("answered", f"slack:{ALICE}")
    assert answered.answer == {"decision": "approve", "text": ""}
    world.settle()
    (update,) = world.fake.of("chat.update")
    assert (update.params["channel"], update.params["ts"]) == tuple(ref.split(":"))
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"], "buttons removed"
    assert f"Approved by <@{ALICE}>" in update.params["text"]
    assert any("Resuming the task" in text for text in thread_posts(world, ref))
    world.coordinator.tick(until_idle=True, timeout_s=60)
    task = db.get_task(world.conn, question.thread_id)
    assert task is not None and task.status == "done"
    done = [t for t in thread_posts(world, ref) if "is done" in t]
    assert len(done) == 1 and f"branch agent-team/{task.id}" in done[0]


def test_reject_button_cancels_the_task(world: SlackWorld) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    world.send(block_action(ref, BOB, "agent_team.reject", question.question_id), form=True)
    assert world.question(question.question_id).answer == {"decision": "reject", "text": ""}
    world.coordinator.tick(until_idle=True, timeout_s=60)
    task = db.get_task(world.conn, question.thread_id)
    assert task is not None and task.status == "cancelled"


def test_request_changes_opens_a_modal_whose_text_becomes_a_revise_answer(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    response = world.send(
        block_action(ref, ALICE, "agent_team.revise", question.question_id), form=True
    )
    assert response.status_code == 200
    world.settle()
    (opened,) = world.fake.of("views.open")
    view = opened.params["view"]
    assert opened.params["trigger_id"].startswith("trig.")
    assert view["private_metadata"] == f"{question.question_id}|{ref}"
    assert world.question(question.question_id).status == "open", "a click alone answers nothing"

    empty = world.send(view_submission(ALICE, view["private_metadata"], "  "), form=True)
    assert empty.status_code == 200
    assert empty.json()["response_action"] == "errors"
    assert "feedback" in empty.json()["errors"]
    assert world.question(question.question_id).status == "open"

    intruder = world.send(view_submission(MALLORY, view["private_metadata"], "Drop it"), form=True)
    assert intruder.json()["errors"]["feedback"] == "You are not allowed to answer this."
    assert world.question(question.question_id).status == "open"

    sent = world.send(
        view_submission(ALICE, view["private_metadata"], "Use a signed cookie"), form=True
    )
    assert sent.status_code == 200 and not sent.content, "an empty 200 closes the modal"
    answered = world.question(question.question_id)
    assert answered.answer == {"decision": "revise", "text": "Use a signed cookie"}
    world.settle()
    (update,) = world.fake.of("chat.update")
    assert "Changes requested" in update.params["text"]


def test_the_revised_plan_is_posted_with_what_changed_since_the_plan_sent_back(
    world: SlackWorld,
) -> None:
    first = world.waiting_question()
    world.send(message_event(first.channel_ref or "", ALICE, "revise sign the cookie"))
    assert world.question(first.question_id).answer == {
        "decision": "revise",
        "text": "sign the cookie",
    }
    world.settle()
    world.coordinator.tick(until_idle=True, timeout_s=60)

    (second,) = db.list_questions(world.conn, status="open", thread_id=first.thread_id)
    posts = [c for c in world.fake.of("chat.postMessage") if c.params.get("blocks")]
    assert [p.params["blocks"][-1]["type"] for p in posts] == ["context", "context"]
    sections = [b["text"]["text"] for b in posts[-1].params["blocks"] if b["type"] == "section"]
    (changes,) = [s for s in sections if s.startswith("*Changed since the last plan*")]
    assert f"(plan 1, revise by {ALICE} via slack: sign the cookie)" in changes
    assert "+ 4. Address review feedback: sign the cookie" in changes
    assert "\n- " not in changes  # nothing was taken out of the plan
    assert not any("Changed since" in json.dumps(p.params["blocks"]) for p in posts[:-1])
    assert second.turn == 2


def test_a_button_on_an_outdated_message_is_refused(world: SlackWorld) -> None:
    question = world.waiting_question()
    stale = f"{CHANNEL}:1600000000.000009"
    response = world.send(
        block_action(stale, ALICE, "agent_team.approve", question.question_id), form=True
    )
    assert response.status_code == 200
    assert world.question(question.question_id).status == "open"
    world.settle()
    (note,) = ephemerals(world)
    assert note["user"] == ALICE and "out of date" in note["text"]


# -- thread replies --------------------------------------------------------------------------


def test_a_clarify_question_asks_for_a_reply_and_the_reply_is_the_answer(
    world: SlackWorld,
) -> None:
    task_id = world.coordinator.start_task(title="Login", body="Make login nicer.")
    world.coordinator.tick(until_idle=True, timeout_s=60)
    (question,) = db.list_questions(world.conn, status="open", thread_id=task_id)
    assert question.kind == "clarify"
    (post,) = world.fake.of("chat.postMessage")
    assert not [b for b in post.params["blocks"] if b["type"] == "actions"]
    assert "Reply in this thread" in json.dumps(post.params["blocks"])
    ref = question.channel_ref or ""
    world.send(message_event(ref, BOB, "Remember the email & prefill it"))
    answered = world.question(question.question_id)
    assert answered.answer == {"text": "Remember the email & prefill it"}
    world.settle()
    (update,) = world.fake.of("chat.update")
    assert "Answered by" in update.params["text"] and "&amp;" in update.params["text"]


def test_a_thread_reply_is_stored_as_written_not_as_slack_escaped_it(world: SlackWorld) -> None:
    """Slack escapes `& < >` and wraps links in `<...>` ("Escaping text"); we store the text."""
    task_id = world.coordinator.start_task(title="Login", body="Make login nicer.")
    world.coordinator.tick(until_idle=True, timeout_s=60)
    (question,) = db.list_questions(world.conn, status="open", thread_id=task_id)
    assert question.kind == "clarify"
    sent = (
        f"<@{BOT_USER}> only if x &lt; 5 &amp;&amp; y &gt; 2 (not &amp;lt;), see "
        "<https://example.com/a?b=1&amp;c=2|the doc> and <https://example.com/z>"
    )
    response = world.send(message_event(question.channel_ref or "", BOB, sent))
    assert response.status_code == 200
    answered = world.question(question.question_id)
    assert answered.answer == {
        "text": "only if x < 5 && y > 2 (not &lt;), see https://example.com/a?b=1&c=2 "
        "and https://example.com/z"
    }


def test_a_thread_reply_answers(world: SlackWorld) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    response = world.send(message_event(ref, ALICE, f"<@{BOT_USER}> lgtm, ship it"))
    assert response.status_code == 200
    answered = world.question(question.question_id)
    assert answered.status == "answered" and answered.answered_via == f"slack:{ALICE}"
    assert answered.answer == {"decision": "approve", "text": "ship it"}
    (audit,) = db.list_audit(world.conn, action="answer")  # one row, with the answer
    assert (audit.actor, audit.via, audit.target) == (ALICE, "slack", question.question_id)
    assert audit.detail_dict == {"decision": "approve", "task": question.thread_id}


def test_a_bad_reply_gets_the_accepted_forms_and_the_question_stays_open(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    assert world.send(message_event(ref, ALICE, "hmm, not sure")).status_code == 200
    assert world.question(question.question_id).status == "open"
    world.settle()
    (reply,) = thread_posts(world, ref)
    assert reply.startswith(f"<@{ALICE}>") and "approve [comment]" in reply
    assert "stays open" in reply


def test_unauthorized_users_get_an_ephemeral_and_the_question_stays_open(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    assert world.send(message_event(ref, MALLORY, "approve")).status_code == 200
    assert (
        world.send(
            block_action(ref, MALLORY, "agent_team.approve", question.question_id), form=True
        ).status_code
        == 200
    )
    assert world.question(question.question_id).status == "open"
    world.settle()
    notes = ephemerals(world)
    assert [n["user"] for n in notes] == [MALLORY, MALLORY]
    assert all("not allowed to answer" in n["text"] for n in notes)
    assert not world.fake.of("chat.update")


def test_an_empty_allow_list_lets_nobody_answer(
    make_world: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        world: SlackWorld = make_world(slack_allowed_users=[])
    assert "nobody can answer" in caplog.text
    question = world.waiting_question()
    ref = question.channel_ref or ""
    world.send(message_event(ref, ALICE, "approve"))
    world.send(block_action(ref, ALICE, "agent_team.approve", question.question_id), form=True)
    assert world.question(question.question_id).status == "open"
    world.settle()
    assert len(ephemerals(world)) == 2


def test_bot_own_edited_and_deleted_messages_are_ignored(world: SlackWorld) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    calls_before = len(world.fake.calls)
    ignored = [
        message_event(ref, "UOTHERBOT", "approve", bot_id="B0OTHER"),
        message_event(ref, BOT_USER, "approve"),
        message_event(ref, ALICE, "approve", subtype="message_changed"),
        message_event(ref, ALICE, "approve", subtype="message_deleted"),
        message_event(f"{CHANNEL}:1111.2222", ALICE, "approve"),  # not a question's thread
        {
            **message_event(ref, ALICE, "approve"),
            "event": {
                "type": "message",
                "channel": CHANNEL,
                "user": ALICE,
                "text": "approve",
                "ts": "1700000001.000001",
            },
        },  # a top-level message, no thread
    ]
    for payload in ignored:
        assert world.send(payload).status_code == 200
    assert world.question(question.question_id).status == "open"
    world.settle()
    assert [c.method for c in world.fake.calls[calls_before:]] in ([], ["auth.test"])


def test_a_reply_to_a_closed_question_says_who_answered_and_changes_nothing(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    world.send(message_event(ref, ALICE, "approve"))
    world.settle()
    first = world.question(question.question_id)

    assert world.send(message_event(ref, BOB, "reject")).status_code == 200
    assert (
        world.send(message_event(ref, BOB, "thanks for the quick turnaround!")).status_code == 200
    )

    world.settle()
    latest = world.question(question.question_id)
    assert (latest.status, latest.answer_json) == ("answered", first.answer_json)
    (note,) = ephemerals(world)
    assert note["user"] == BOB and f"already answered by slack:{ALICE}" in note["text"]


# -- duplicates and races --------------------------------------------------------------------


def test_the_same_event_delivered_three_times_is_handled_once(world: SlackWorld) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    payload = message_event(ref, ALICE, "approve", event_id="Ev0DUPLICATE")
    retry = {"X-Slack-Retry-Reason": "http_timeout"}
    statuses = [
        world.send(payload).status_code,
        world.send(payload, headers={**retry, "X-Slack-Retry-Num": "1"}).status_code,
        world.send(payload, headers={**retry, "X-Slack-Retry-Num": "2"}).status_code,
    ]
    assert statuses == [200, 200, 200]
    assert world.question(question.question_id).status == "answered"
    assert db.event_seen(world.conn, source="slack", event_id="Ev0DUPLICATE")
    world.settle()
    assert len(world.fake.of("chat.update")) == 1
    assert not ephemerals(world), "a redelivery is not a second (losing) answer"
    assert len([t for t in thread_posts(world, ref) if "Resuming" in t]) == 1


def test_fifty_concurrent_answers_have_one_winner_and_every_request_is_acked_fast(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    qid = question.question_id
    # Two in three click Approve, the rest reply "approve"; Alice and Bob alternate.
    payloads = [
        (block_action(ref, ALICE if i % 2 else BOB, "agent_team.approve", qid), True)
        if i % 3
        else (message_event(ref, ALICE if i % 2 else BOB, "approve"), False)
        for i in range(50)
    ]
    barrier = threading.Barrier(50)
    results: list[tuple[int, float]] = []
    lock = threading.Lock()

    def send(payload: dict[str, Any], form: bool) -> None:
        barrier.wait()
        started = time.monotonic()
        status = world.send(payload, form=form).status_code
        with lock:
            results.append((status, time.monotonic() - started))

    threads = [threading.Thread(target=send, args=pair) for pair in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert len(results) == 50
    assert all(status == 200 for status, _ in results)
    slowest = max(seconds for _, seconds in results)
    assert slowest < 3.0, f"Slack's ack limit is 3 s; slowest ack took {slowest:.2f} s"
    answered = world.question(question.question_id)
    assert answered.status == "answered"
    world.settle()
    assert len(world.fake.of("chat.update")) == 1, "one winner, one redraw"
    notes = ephemerals(world)
    # 49 late answers from two people: one note each (at most one a person and question
    # a minute, issue #17), however many times each clicked or replied.
    assert sorted(n["user"] for n in notes) == sorted([ALICE, BOB])
    assert all("already answered" in n["text"] for n in notes)
    commands = db.list_commands(world.conn, task_id=question.thread_id)
    assert [c.kind for c in commands].count("resume") == 1


def test_a_delivery_that_failed_midway_is_processed_when_slack_retries(
    world: SlackWorld,
) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    real = world.listener.answers._answer_fn
    calls: list[str] = []

    def busy_once(question_id: str, text: str, *, via: str) -> db.Question:
        calls.append(question_id)
        if len(calls) == 1:
            raise LedgerBusyError("the ledger stayed locked")
        return real(question_id, text, via=via)

    world.listener.answers._answer_fn = busy_once
    payload = message_event(ref, ALICE, "approve", event_id="Ev0BUSYONCE")
    # Busy is an outage, not a bug: 503 (Slack retries anything but a 2xx), nothing recorded.
    assert world.send(payload).status_code == 503, "not handled: Slack must retry"
    assert world.question(question.question_id).status == "open"
    assert not db.event_seen(world.conn, source="slack", event_id="Ev0BUSYONCE")
    retried = world.send(payload, headers={"X-Slack-Retry-Num": "1"})
    assert retried.status_code == 200
    assert world.question(question.question_id).status == "answered"


def test_a_claim_that_fails_after_the_winning_answer_still_shows_the_outcome(
    world: SlackWorld, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The answer is committed; only the event id's record failed. That is no 500."""
    question = world.waiting_question()

    def claim_fails(*args: Any, **kwargs: Any) -> bool:
        raise LedgerBusyError("the ledger stayed locked")

    monkeypatch.setattr(db, "claim_event", claim_fails)
    payload = message_event(question.channel_ref or "", ALICE, "approve", event_id="Ev0NOCLAIM")
    with caplog.at_level(logging.WARNING):
        response = world.send(payload)
    assert response.status_code == 200, "the answer is stored: Slack must not retry"
    assert world.question(question.question_id).status == "answered"
    assert "Ev0NOCLAIM" in caplog.text, "the failed claim is logged"
    world.settle()
    (update,) = world.fake.of("chat.update")
    assert "Approved" in update.params["text"]


def test_a_publish_approval_is_answered_with_its_publish_button(world: SlackWorld) -> None:
    db.create_task(world.conn, task_id="tdocs", kind="code", title="Docs page", body="")
    db.ensure_question(
        world.conn,
        question_id="tdocs:q1",
        thread_id="tdocs",
        turn=1,
        kind="confluence_approval",
        transport="slack",
        deadline_at=None,
        payload_json=json.dumps({"text": "Publish this change?", "diff": "+ new line"}),
    )
    assert world.coordinator.deliver_open("tdocs") == 1
    (post,) = world.fake.of("chat.postMessage")
    (actions,) = [b for b in post.params["blocks"] if b["type"] == "actions"]
    assert [e["text"]["text"] for e in actions["elements"]] == [
        "Publish",
        "Request changes",
        "Reject",
    ]
    assert "+ new line" in json.dumps(post.params["blocks"])
    ref = world.question("tdocs:q1").channel_ref or ""
    world.send(block_action(ref, ALICE, "agent_team.publish", "tdocs:q1"), form=True)
    assert world.question("tdocs:q1").answer == {"decision": "publish", "text": ""}
