"""Slack, for every role: a thread reply and each answer button, by each person's Slack id.

The listener is the daemon's (`SlackListener`, its HTTP endpoint on uvicorn)
against the loopback Slack Web API; requests are signed as Slack signs them.
Each attempt is on a question posted (in the ledger) to a message of its own.
Once people exist they are Slack's allow-list: an id nobody holds is refused even
when `AGENT_TEAM_SLACK_ALLOWED_USERS` lists it, and is told how to be added.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agent_team import db
from agent_team.integrations.slack.ingress import SlackListener
from agent_team.integrations.slack.settings import SlackSettings
from agent_team.integrations.slack.transport import SlackTransport
from agent_team.requests.task_requests import TaskRequests
from agent_team.task_model import QuestionKind, Role
from tests.fakes.slack_api import FakeSlack
from tests.integration.roles.conftest import (
    ANSWERS,
    OFFERED,
    Team,
    Who,
    cases,
    fresh,
    judged,
    module_env,
    open_question,
    status_of,
)
from tests.integration.slack.conftest import (
    CHANNEL,
    SECRET,
    Server,
    block_action,
    form_body,
    json_body,
    message_event,
    sign,
    slack_settings,
)

STRANGER = "U0STRANGER"  # on the configured allow-list, but no person holds the id
_BUTTONS = {
    QuestionKind.PLAN_DECISION.value: "agent_team.approve",
    QuestionKind.CONFLUENCE_APPROVAL.value: "agent_team.publish",
    QuestionKind.PR_DECISION.value: "agent_team.fix",
}


@dataclass
class Slack:
    team: Team
    ledger: db.Ledger
    fake: FakeSlack
    listener: SlackListener
    server: Server
    http: httpx.Client

    def ask(self, kind: str) -> tuple[db.Question, str]:
        """A question of `kind` posted to a message of its own: (question, its ts)."""
        ts = f"1700000000.{fresh(''):0>6}"
        ref = f"{CHANNEL}:{ts}"
        return open_question(self.ledger, kind, channel_ref=ref, transport="slack"), ts

    def send(self, payload: dict[str, Any], *, form: bool) -> None:
        raw, content_type = form_body(payload) if form else json_body(payload)
        response = self.http.post(
            self.server.url, content=raw, headers={**content_type, **sign(raw, secret=SECRET)}
        )
        assert response.status_code == 200, response.text
        assert self.listener.drain(10), "the follow-up Slack calls did not finish"

    def answer(self, op: str, question: db.Question, user: str) -> None:
        """`user` answers `question` the way `op` does: a reply in its thread, or a button."""
        ref = question.channel_ref or ""
        if op == "thread reply":
            self.send(message_event(ref, user, ANSWERS[question.kind]), form=False)
        else:
            button = _BUTTONS[question.kind]
            self.send(block_action(ref, user, button, question.question_id), form=True)

    def said_to(self, user: str, ts: str) -> tuple[list[str], list[str]]:
        """(the ephemerals `user` got under message `ts`, public posts in its thread)."""
        private = [
            str(call.params["text"])
            for call in self.fake.of("chat.postEphemeral")
            if call.params.get("user") == user and call.params.get("thread_ts") == ts
        ]
        public = [
            str(call.params["text"])
            for call in self.fake.of("chat.postMessage")
            if call.params.get("thread_ts") == ts
        ]
        return private, public


@pytest.fixture(scope="module")
def slack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slack]:
    home = tmp_path_factory.mktemp("roles-slack")
    with module_env(home), ExitStack() as stack:
        fake = FakeSlack().start()
        stack.callback(fake.stop)
        # The configured allow-list names the stranger and a person: once people exist,
        # the people decide and this list no longer counts.
        settings = slack_settings(home, fake, slack_allowed_users=[STRANGER, "U0VI"])
        db.init_db(settings.ledger_target)
        ledger = db.open_ledger(settings.ledger_target)
        stack.callback(ledger.close)
        team = Team(ledger)
        config = SlackSettings.from_settings(settings)
        transport = SlackTransport(config, ledger=ledger)
        stack.callback(transport.close)
        # As in the daemon, answers go through the one request path (`Coordinator.answer`).
        listener = SlackListener(config, transport, answer=TaskRequests(ledger).answer)
        stack.callback(listener.close)
        server = Server(Starlette(routes=[listener.route()]))
        stack.callback(server.stop)
        http = stack.enter_context(httpx.Client(timeout=10))
        yield Slack(team, ledger, fake, listener, server, http)


@pytest.mark.parametrize(("op", "action", "role"), cases("slack"))
def test_answers_in_slack_by_each_persons_id(
    slack: Slack, op: str, action: str, role: Role
) -> None:
    member = slack.team[role]
    who = Who(member.slack_id, "slack", role)
    kind = action.removeprefix("answer:")
    question, ts = slack.ask(kind)
    with judged(slack.ledger, who, action, done="answer") as verdict:
        slack.answer(op, question, member.slack_id)
    private, public = slack.said_to(member.slack_id, ts)
    if verdict.allowed:
        found = db.get_question(slack.ledger, question.question_id)
        assert found is not None
        assert (found.status, found.answered_via) == ("answered", f"slack:{member.slack_id}")
        assert private == []
    else:
        assert status_of(slack.ledger, question.question_id) == "open"
        (note,) = private
        assert f"{action} needs {verdict.needed.value} or above" in note
        assert "stays open" in note
        assert public == [], "a refusal is said to the person alone"


@pytest.mark.parametrize("op", OFFERED["slack"])
def test_an_id_no_person_holds_is_refused_though_the_allow_list_names_it(
    slack: Slack, op: str
) -> None:
    action = OFFERED["slack"][op]
    kind = action.removeprefix("answer:")
    question, ts = slack.ask(kind)
    with judged(slack.ledger, Who(STRANGER, "slack", None), action, done=None):
        slack.answer(op, question, STRANGER)
    assert status_of(slack.ledger, question.question_id) == "open"
    private, public = slack.said_to(STRANGER, ts)
    (note,) = private
    assert "not allowed to answer" in note and "stays open" in note
    assert f"agent-team people add NAME --role ROLE --slack {STRANGER}" in note
    assert public == []
