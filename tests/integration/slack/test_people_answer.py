"""Once a team's people are set up, they are Slack's allow-list: a Slack user id no person
holds may not answer (even one on AGENT_TEAM_SLACK_ALLOWED_USERS), and what a person may
answer follows their role; reminders mention those who may answer that question.
"""

from __future__ import annotations

from typing import Any

from agent_team import db
from agent_team.requests.actors import INTERNAL
from agent_team.requests.people import PeopleRequests
from tests.integration.slack.conftest import (
    ALICE,
    BOB,
    MALLORY,
    SlackWorld,
    block_action,
    message_event,
)

CAROL = "UCAROL001"  # a contributor


def _team(world: SlackWorld) -> None:
    people = PeopleRequests(world.conn)
    people.add("alice", "maintainer", slack_id=ALICE, actor=INTERNAL)
    people.add("carol", "contributor", slack_id=CAROL, actor=INTERNAL)
    people.add("olga", "owner", actor=INTERNAL)  # no Slack id


def _ephemerals(world: SlackWorld) -> list[tuple[str, str]]:
    world.settle()
    return [(c.params["user"], str(c.params["text"])) for c in world.fake.of("chat.postEphemeral")]


def test_people_decide_who_answers_and_roles_what(world: SlackWorld) -> None:
    question = world.waiting_question()  # a plan: maintainers and above
    _team(world)
    ref = question.channel_ref or ""
    # BOB is on the configured allow-list but is nobody: refused, told how to be added.
    world.send(block_action(ref, BOB, "agent_team.approve", question.question_id), form=True)
    world.send(message_event(ref, MALLORY, "approve"))
    # CAROL is a person, but a contributor: refused by the role table, and told which role.
    world.send(block_action(ref, CAROL, "agent_team.approve", question.question_id), form=True)
    world.send(message_event(ref, CAROL, "approve"))
    assert world.question(question.question_id).status == "open"
    told = _ephemerals(world)
    assert sorted(user for user, _ in told if user in (BOB, MALLORY)) == sorted([BOB, MALLORY])
    for user, text in told:
        if user in (BOB, MALLORY):
            assert "not allowed to answer" in text
            assert f"agent-team people add NAME --role ROLE --slack {user}" in text
    carol = [text for user, text in told if user == CAROL]
    thread = [
        str(c.params["text"])
        for c in world.fake.of("chat.postMessage")
        if c.params.get("thread_ts") == ref.split(":")[1]
    ]
    said = carol + thread
    assert sum("needs maintainer or above" in text for text in said) == 2, said
    refusals = [
        (row.actor, row.detail_dict["action"])
        for row in db.list_audit(world.conn)
        if row.action == "refused"
    ]
    # Strangers are refused by the allow-list, CAROL by the role table: each audited once.
    assert sorted(refusals) == sorted(
        [(who, "answer:plan_decision") for who in (BOB, MALLORY, CAROL, CAROL)]
    )
    # ALICE, a maintainer by her Slack id, wins.
    world.send(block_action(ref, ALICE, "agent_team.approve", question.question_id), form=True)
    answered = world.question(question.question_id)
    assert answered.status == "answered" and answered.answered_via == f"slack:{ALICE}"


def test_reminders_mention_the_people_who_may_answer(world: SlackWorld) -> None:
    question = world.waiting_question()
    _team(world)
    world.clock.advance(hours=72 * 0.5 + 0.01)
    assert world.transport.remind_due() == 1
    ts = (question.channel_ref or "").split(":")[1]
    (reminder,) = [
        str(c.params["text"])
        for c in world.fake.of("chat.postMessage")
        if c.params.get("thread_ts") == ts
    ]
    assert f"<@{ALICE}>" in reminder  # a maintainer may answer a plan
    assert f"<@{CAROL}>" not in reminder and f"<@{BOB}>" not in reminder


def test_with_nobody_with_a_slack_id_nobody_answers_in_slack(make_world: Any) -> None:
    world: SlackWorld = make_world()
    question = world.waiting_question()
    PeopleRequests(world.conn).add("olga", "owner", actor=INTERNAL)
    ref = question.channel_ref or ""
    world.send(block_action(ref, ALICE, "agent_team.approve", question.question_id), form=True)
    assert world.question(question.question_id).status == "open"
    ((user, text),) = _ephemerals(world)
    assert user == ALICE and "people add" in text
