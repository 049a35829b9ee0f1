"""The pull request's questions on the dashboard: the PR gate waits on GitHub (no form,
not among the questions waiting on people), a PR decision offers its three choices.

Over the seeded ledger of `conftest.py`, with task tR waiting in `pr_open`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from agent_team import db
from agent_team.requests.answers import PR_DECISION_HELP, PULL_REQUEST_HELP
from tests.integration.dashboard.conftest import NOW, Seeded, auth, sign_in

PR_URL = "https://github.com/acme/app/pull/12"


def _pr_task(path: Path, kind: str, payload: dict[str, Any]) -> str:
    """tR, waiting in `pr_open` on one open question of `kind`; returns the question id."""
    conn = db.open_ledger(path)
    try:
        db.create_task(conn, task_id="tR", kind="code", title="Remember the email")
        db.set_task_status(conn, "tR", "waiting", phase="pr_open")
        db.ensure_question(
            conn,
            question_id="tR:q3",
            thread_id="tR",
            turn=3,
            kind=kind,
            transport="local",
            deadline_at=NOW + timedelta(hours=72) if kind == "pr_decision" else None,
            payload_json=json.dumps({"title": "Remember the email", **payload}),
        )
        db.record_delivery(conn, question_id="tR:q3", channel_ref="local:tR:q3", posted_at=NOW)
    finally:
        conn.close()
    return "tR:q3"


def pr_gate(path: Path) -> str:
    text = f"Draft pull request #12 is open: {PR_URL}"
    return _pr_task(path, "pull_request", {"text": text, "url": PR_URL, "number": 12, "round": 0})


def pr_decision(path: Path, **changes: Any) -> str:
    payload = {
        "text": f"CI is red on the pull request's head: lint. What should I do on {PR_URL}?",
        "reason": "ci_failed",
        "url": PR_URL,
        "checks": [
            {
                "name": "lint",
                "conclusion": "failure",
                "url": "javascript:alert(1)",
                "excerpt": "app.py:3: E501 <script>x</script>",
            }
        ],
        "items": [{"user": "reviewer", "body": "Name the <b>test</b> file."}],
        "help": PR_DECISION_HELP,
    }
    return _pr_task(path, "pr_decision", {**payload, **changes})


def card(html: str, question_id: str) -> str:
    start = html.index(f'id="q-{question_id}"')
    return html[start : html.index("</article>", start)]


def test_the_pr_gate_waits_on_github_with_no_answer_form(
    seeded: Seeded, client: TestClient
) -> None:
    question_id = pr_gate(seeded.path)
    assert sign_in(client, next_path="/task/tR").status_code == 303

    html = client.get("/task/tR").text
    shown = card(html, question_id)

    assert "pull request gate" in shown
    assert f'Waiting on GitHub: <a href="{PR_URL}" rel="noopener noreferrer">{PR_URL}</a>' in shown
    assert "<form" not in shown and 'name="answer"' not in shown, "GitHub answers it, not a form"
    assert "due" not in shown
    assert "<dt>Open questions</dt><dd>0</dd>" in html
    overview = client.get("/").text
    waiting = overview[overview.index('id="h-questions"') : overview.index('id="h-tasks"')]
    assert "tR" not in waiting, "not among the questions waiting on people"


def test_a_pr_decision_offers_its_three_choices_and_shows_the_check(
    seeded: Seeded, client: TestClient
) -> None:
    question_id = pr_decision(seeded.path)
    assert sign_in(client, next_path="/task/tR").status_code == 303

    shown = card(client.get("/task/tR").text, question_id)

    assert "pull request decision" in shown
    assert [f for f in ("fix", "ignore", "take over") if f'data-fill="{f}"' in shown] == [
        "fix",
        "ignore",
        "take over",
    ]
    assert 'placeholder="fix [note], ignore, take over"' in shown
    assert f'<a href="{PR_URL}" rel="noopener noreferrer">{PR_URL}</a>' in shown
    assert '<span class="tag">ci failed</span>' in shown
    assert "<strong>lint</strong> failure" in shown
    assert "javascript:" not in shown, "a link that is not http(s) is not linked"
    assert '<pre class="excerpt">app.py:3: E501 &lt;script&gt;x&lt;/script&gt;</pre>' in shown
    assert "<strong>reviewer</strong>: Name the &lt;b&gt;test&lt;/b&gt; file." in shown
    assert "<code>take over</code>" in shown  # the help, rendered
    overview = client.get("/").text
    assert 'href="/task/tR#q-tR:q3"' in overview, "a person is needed: it is listed"


def test_the_api_refuses_an_answer_to_the_pr_gate_and_takes_take_over(
    seeded: Seeded, client: TestClient
) -> None:
    gate = pr_gate(seeded.path)
    refused = client.post(
        f"/api/questions/{gate}/answer", json={"answer": "merged", "name": "bob"}, headers=auth()
    )
    assert refused.status_code == 422
    assert refused.json()["accepted"] == PULL_REQUEST_HELP
    conn = db.open_ledger(seeded.path)
    try:
        stored = db.get_question(conn, gate)
        assert stored is not None and (stored.status, stored.answer_json) == ("open", None)
        assert db.get_command(conn, db.resume_command_id(gate)) is None
        # The gate is asked again once the pull request moves on: a decision comes next.
        assert db.supersede_question(conn, question_id=gate)
        db.ensure_question(
            conn,
            question_id="tR:q4",
            thread_id="tR",
            turn=4,
            kind="pr_decision",
            transport="local",
            deadline_at=NOW + timedelta(hours=72),
            payload_json=json.dumps({"text": "Decide", "help": PR_DECISION_HELP}),
        )
    finally:
        conn.close()

    taken = client.post(
        "/api/questions/tR:q4/answer", json={"answer": "take over", "name": "bob"}, headers=auth()
    )

    assert taken.status_code == 200, taken.text
    assert taken.json()["question"]["answer"] == {"decision": "takeover", "text": ""}
