"""Answers by thread reply, button and modal; who may answer; what is ignored."""

from __future__ import annotations

from agent_team import db
from tests.integration.slack.conftest import (
    ALICE,
    SlackWorld,
    block_action,
    message_event,
)


def test_a_question_is_posted_with_buttons_and_a_button_approves_it(world: SlackWorld) -> None:
    question = world.waiting_question()
    (post,) = world.fake.of("chat.postMessage")
    assert post.authorized and post.params["channel"] == "C0QUESTIONS"
    actions = [b for b in post.params["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in actions[0]["elements"]] == [
        "agent_team.approve", "agent_team.revise", "agent_team.reject",
    ]  # fmt: skip
    assert {e["value"] for e in actions[0]["elements"]} == {question.question_id}
    assert question.channel_ref == f"C0QUESTIONS:{post.params and '1700000000.000001'}"

    response = world.send(
        block_action(question.channel_ref or "", ALICE, "agent_team.approve", question.question_id),
        form=True,
    )
    assert response.status_code == 200
    answered = world.question(question.question_id)
    assert (answered.status, answered.answered_via) == ("answered", f"slack:{ALICE}")
    world.settle()
    (update,) = world.fake.of("chat.update")
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"]
    assert f"Approved by <@{ALICE}>" in update.params["text"]
    world.coordinator.tick(until_idle=True, timeout_s=60)
    task = db.get_task(world.conn, question.thread_id)
    assert task is not None and task.status == "done"


def test_a_thread_reply_answers(world: SlackWorld) -> None:
    question = world.waiting_question()
    response = world.send(message_event(question.channel_ref or "", ALICE, "lgtm, ship it"))
    assert response.status_code == 200
    answered = world.question(question.question_id)
    assert answered.status == "answered"
    assert answered.answer == {"decision": "approve", "text": "ship it"}
