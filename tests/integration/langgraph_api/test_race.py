"""A resume from the LangGraph API racing a Slack click and a dashboard answer on one question.

Three real HTTP requests are released together by a barrier, against one
daemon with Slack (signed `block_actions` to `/slack/events`, questions on
the loopback `FakeSlack`), the dashboard API and the LangGraph API all on.
Exactly one answer is stored and audited, whoever wins; the API losers get a
409, the Slack loser the usual 200 ack and no second answer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from agent_team import db
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.integration.langgraph_api.conftest import ADA_KEY, BOB_KEY, Live, api_settings, wait_for
from tests.integration.slack.conftest import ALICE, CHANNEL, SECRET, block_action, form_body, sign

ROUNDS = 6


@pytest.fixture
def slack_live(tmp_path: Path) -> Iterator[Live]:
    slack = FakeSlack().start()
    running = Live(
        api_settings(
            tmp_path,
            transport="slack",
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SECRET,
            slack_channel=CHANNEL,
            slack_allowed_users=[ALICE],
            slack_api_url=slack.base_url,
        )
    )
    try:
        yield running
    finally:
        running.stop()
        slack.stop()


def delivered_question(live: Live, task_id: str) -> db.Question:
    def found() -> db.Question | None:
        for question in db.list_questions(live.conn, status="open", thread_id=task_id):
            if question.channel_ref is not None:
                return question
        return None

    question: db.Question = wait_for(found, "the plan question posted to Slack")
    return question


def race(live: Live, task_id: str, question: db.Question) -> dict[str, httpx.Response]:
    """Slack, the dashboard and the LangGraph API answer `question` at the same instant."""
    assert question.channel_ref is not None
    body, headers = form_body(
        block_action(question.channel_ref, ALICE, "agent_team.approve", question.question_id)
    )
    calls: dict[str, Callable[[httpx.Client], httpx.Response]] = {
        "slack": lambda c: c.post("slack/events", content=body, headers={**headers, **sign(body)}),
        "dashboard": lambda c: c.post(
            f"api/questions/{question.question_id}/answer",
            json={"answer": "reject"},
            headers={"Authorization": f"Bearer {BOB_KEY}"},
        ),
        "langgraph": lambda c: c.post(
            f"langgraph/threads/{task_id}/runs",
            json={"command": {"resume": [{"type": "response", "args": "Add tests"}]}},
            headers={"x-api-key": ADA_KEY},
        ),
    }
    barrier = threading.Barrier(len(calls))
    results: dict[str, httpx.Response] = {}

    def send(name: str, call: Callable[[httpx.Client], httpx.Response]) -> None:
        with httpx.Client(base_url=live.daemon.url, timeout=30) as client:
            barrier.wait()
            results[name] = call(client)

    threads = [threading.Thread(target=send, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert set(results) == set(calls)
    return results


# Each way of answering sends a different decision, so the stored one names the winner.
DECISIONS = {"approve": "slack", "reject": "dashboard", "revise": "langgraph"}
VIA = {"slack": "slack", "dashboard": "dashboard", "langgraph": "langgraph-api"}


def test_one_of_three_racing_answers_wins_and_is_audited_once(slack_live: Live) -> None:
    live = slack_live
    winners: list[str] = []
    for _ in range(ROUNDS):
        task_id = live.submit(clarify=False)
        question = delivered_question(live, task_id)

        results = race(live, task_id, question)

        stored = db.get_question(live.conn, question.question_id)
        assert stored is not None and stored.status == "answered"
        assert stored.answered_via is not None
        assert len(db.list_audit(live.conn, target=question.question_id)) == 1
        resumes = [
            c
            for c in db.list_commands(live.conn, task_id=task_id)
            if c.command_id == f"resume:{question.question_id}"
        ]
        assert len(resumes) == 1
        won = DECISIONS[stored.answer["decision"]]
        assert stored.answered_via.split(":")[0] == VIA[won]
        assert results["slack"].status_code == 200  # Slack is always acked; the note says more
        for name in ("dashboard", "langgraph"):
            expected = 200 if name == won else 409
            assert results[name].status_code == expected, (name, results[name].text)
        winners.append(won)
        live.daemon.coordinator.cancel(task_id)
    assert len(winners) == ROUNDS
