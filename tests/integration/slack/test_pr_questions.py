"""The pull request's questions in Slack: the PR gate as a notice, a PR decision with buttons.

The questions are asked the way `nodes/pull_request.py` asks them (same kinds, same
payloads), delivered by the real coordinator to the loopback Slack API, and answered
with signed requests to the real HTTP endpoint.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from agent_team import db
from agent_team.requests.answers import PR_DECISION_HELP
from tests.integration.slack.conftest import (
    ALICE,
    BOB,
    SlackWorld,
    block_action,
    message_event,
)

PR_URL = "https://github.com/acme/app/pull/12"


def thread_posts(world: SlackWorld, ref: str) -> list[str]:
    ts = ref.split(":")[1]
    return [
        str(call.params["text"])
        for call in world.fake.of("chat.postMessage")
        if call.params.get("thread_ts") == ts
    ]


def asked(world: SlackWorld, kind: str, payload: dict[str, Any]) -> db.Question:
    """A task waiting in `pr_open` on one question of `kind`, posted to the fake."""
    task_id = "t-pr"
    db.create_task(world.conn, task_id=task_id, kind="code", title="Remember the email")
    db.set_task_status(world.conn, task_id, "waiting", phase="pr_open")
    deadline = world.clock() + timedelta(hours=72) if kind == "pr_decision" else None
    db.ensure_question(
        world.conn,
        question_id=f"{task_id}:q3",
        thread_id=task_id,
        turn=3,
        kind=kind,
        transport="slack",
        deadline_at=deadline,
        payload_json=json.dumps(payload),
    )
    assert world.coordinator.deliver_open(task_id) == 1
    question = world.question(f"{task_id}:q3")
    assert question.channel_ref is not None
    return question


def pr_gate(world: SlackWorld) -> db.Question:
    text = f"Draft pull request #12 is open: {PR_URL}"
    payload = {"text": text, "title": "Remember the email", "url": PR_URL, "number": 12}
    return asked(world, "pull_request", {**payload, "round": 1})


def pr_decision(world: SlackWorld) -> db.Question:
    return asked(
        world,
        "pr_decision",
        {
            "text": f"CI is red on the pull request's head: lint. What should the agent do on "
            f"{PR_URL}?",
            "title": "Remember the email",
            "reason": "ci_failed",
            "url": PR_URL,
            "checks": [
                {
                    "name": "lint",
                    "conclusion": "failure",
                    "url": "https://github.com/acme/app/actions/runs/9",
                    "excerpt": "app.py:3: E501 line too long",
                    "rerun": True,
                }
            ],
            "items": [],
            "help": PR_DECISION_HELP,
        },
    )


def no_answer_stored(world: SlackWorld, question: db.Question) -> None:
    now = world.question(question.question_id)
    assert (now.status, now.answer_json) == ("open", None)
    assert db.list_audit(world.conn, target=question.question_id) == []
    assert not [c for c in db.list_commands(world.conn) if c.kind == "resume"]


def test_a_pr_decision_is_posted_with_its_check_and_take_over_answers_it(
    world: SlackWorld,
) -> None:
    question = pr_decision(world)
    (post,) = world.fake.of("chat.postMessage")
    blocks = post.params["blocks"]
    text = json.dumps(blocks)
    assert "CI is red on the pull request's head: lint." in text
    assert "```app.py:3: E501 line too long```" in text
    assert f"<{PR_URL}|{PR_URL}>" in text
    (actions,) = [b for b in blocks if b["type"] == "actions"]
    assert [(e["text"]["text"], e["action_id"]) for e in actions["elements"]] == [
        ("Fix", "agent_team.fix"),
        ("Ignore", "agent_team.ignore"),
        ("Take over", "agent_team.takeover"),
    ]

    ref = question.channel_ref or ""
    response = world.send(
        block_action(ref, ALICE, "agent_team.takeover", question.question_id), form=True
    )

    assert response.status_code == 200
    answered = world.question(question.question_id)
    assert (answered.status, answered.answered_via) == ("answered", f"slack:{ALICE}")
    assert answered.answer == {"decision": "takeover", "text": ""}
    world.settle()
    (update,) = world.fake.of("chat.update")
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"], "buttons removed"
    assert f"Taken over by <@{ALICE}>" in update.params["text"]
    assert any("stops working on this pull request" in t for t in thread_posts(world, ref))


def test_a_thread_reply_in_the_grammar_answers_a_pr_decision(world: SlackWorld) -> None:
    question = pr_decision(world)
    ref = question.channel_ref or ""
    world.send(message_event(ref, BOB, "fix: keep the long URL, wrap the rest"))
    answered = world.question(question.question_id)
    assert answered.answer == {"decision": "fix", "text": "keep the long URL, wrap the rest"}


def test_the_pr_gate_is_a_notice_and_a_reply_to_it_is_refused_with_nothing_stored(
    world: SlackWorld,
) -> None:
    question = pr_gate(world)
    (post,) = world.fake.of("chat.postMessage")
    blocks = post.params["blocks"]
    assert not [b for b in blocks if b["type"] == "actions"], "nobody answers it in Slack"
    text = json.dumps(blocks)
    assert (
        f"Draft pull request #12 is open: <{PR_URL}|{PR_URL}>; I follow its reviews and CI; "
        "it ends when merged or closed. Follow-up rounds so far: 1."
    ) in text
    assert "Answer by" not in text

    ref = question.channel_ref or ""
    assert world.send(message_event(ref, ALICE, "merged it, thanks")).status_code == 200
    # A forged button of another kind is refused the same way.
    world.send(block_action(ref, BOB, "agent_team.fix", question.question_id), form=True)

    world.settle()
    no_answer_stored(world, question)
    replies = sorted(thread_posts(world, ref))  # the follow-ups run on a pool: any order
    assert [reply.split(">", 1)[0] for reply in replies] == [f"<@{ALICE}", f"<@{BOB}"]
    for reply in replies:
        assert "> nothing was stored: this gate is answered by GitHub" in reply
        assert "agent-team cancel t-pr" in reply and "stays open" not in reply
    assert world.fake.of("chat.update") == []
