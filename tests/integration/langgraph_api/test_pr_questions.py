"""The pull request's questions through the LangGraph API: the PR gate read-only, a PR
decision answered with Agent Inbox's choices.

The questions are asked the way `nodes/pull_request.py` asks them (same kinds and
payloads), in the live daemon's ledger, and read and answered over HTTP.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_team import db
from agent_team.requests.answers import PR_DECISION_HELP
from tests.integration.langgraph_api.conftest import Live

PR_URL = "https://github.com/acme/app/pull/12"


def waiting_on(live: Live, task_id: str, kind: str, payload: dict[str, Any]) -> db.Question:
    """A task waiting in `pr_open` on one open question of `kind`."""
    db.create_task(live.conn, task_id=task_id, kind="code", title="Remember the email")
    db.set_task_status(live.conn, task_id, "waiting", phase="pr_open")
    question_id = f"{task_id}:q3"
    db.ensure_question(
        live.conn,
        question_id=question_id,
        thread_id=task_id,
        turn=3,
        kind=kind,
        transport="local",
        deadline_at=datetime.now(UTC) + timedelta(hours=72) if kind == "pr_decision" else None,
        payload_json=json.dumps({"title": "Remember the email", "url": PR_URL, **payload}),
    )
    question = db.get_question(live.conn, question_id)
    assert question is not None
    return question


def test_the_pr_gate_is_shown_read_only_and_a_resume_is_refused(live: Live) -> None:
    text = f"Draft pull request #12 is open: {PR_URL}"
    question = waiting_on(live, "t-gate", "pull_request", {"text": text, "number": 12, "round": 0})

    state = live.client.threads.get_state("t-gate")
    [task] = state["tasks"]
    assert task["name"] == "pr_gate" and state["next"] == ["pr_gate"]
    [interrupt] = task["interrupts"][0]["value"]
    assert not any(interrupt["config"].values()), "no accept, respond, edit or ignore"
    assert "I follow its reviews and CI; it ends when merged or closed" in interrupt["description"]

    for resume in ([{"type": "accept", "args": None}], "merged", {question.question_id: "x"}):
        response = live.http.post(
            "threads/t-gate/runs",
            json={"assistant_id": "agent-team", "command": {"resume": resume}},
            headers=live.key(),
        )
        assert response.status_code == 422, response.text
        assert "this gate is answered by GitHub" in response.json()["detail"]
    now = db.get_question(live.conn, question.question_id)
    assert now is not None and (now.status, now.answer_json) == ("open", None)
    assert db.list_audit(live.conn, target=question.question_id) == []
    assert not [c for c in db.list_commands(live.conn) if c.kind == "resume"]


def test_take_over_on_a_pr_decision_is_an_edit_of_its_decision(live: Live) -> None:
    question = waiting_on(
        live,
        "t-decide",
        "pr_decision",
        {
            "text": "CI is red on the pull request's head: lint.",
            "reason": "ci_failed",
            "checks": [{"name": "lint", "conclusion": "failure", "excerpt": "E501"}],
            "items": [],
            "help": PR_DECISION_HELP,
        },
    )
    [interrupt] = live.client.threads.get_state("t-decide")["tasks"][0]["interrupts"][0]["value"]
    assert interrupt["action_request"]["args"] == {"decision": "fix", "note": ""}
    edited = {**interrupt["action_request"], "args": {"decision": "take over", "note": ""}}

    response = live.http.post(
        "threads/t-decide/runs",
        json={"command": {"resume": [{"type": "edit", "args": edited}]}},
        headers=live.key(),
    )

    assert response.status_code == 200, response.text
    answered = db.get_question(live.conn, question.question_id)
    assert answered is not None and answered.status == "answered"
    assert answered.answer == {"decision": "takeover", "text": ""}
    assert answered.answered_via == "langgraph-api:ada"
