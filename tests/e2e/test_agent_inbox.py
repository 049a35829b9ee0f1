"""LangChain's Agent Inbox, in real Chromium, answering agent-team's questions.

Agent Inbox is someone else's app: we do not ship it, build it or keep a
recipe for it. This test drives one that is already running, at
`AGENT_INBOX_URL` (e.g. `http://127.0.0.1:3100/` from its own `next start`),
and is skipped without it. The daemon is ours and real: the LangGraph API on,
the Inbox's origin allowed, a named token as the Inbox's API key. The Inbox
is pointed at it the way its settings do, through its localStorage keys.

    AGENT_INBOX_URL=http://127.0.0.1:3100/ AGENT_TEAM_SCREENSHOT_DIR=shots \\
        .venv/bin/python -m pytest tests/e2e/test_agent_inbox.py
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from agent_team import db
from agent_team.models.schemas import Plan
from tests.e2e.browser_support import WAIT_MS, browser, shot
from tests.integration.langgraph_api.conftest import ADA_KEY, Live, api_settings
from tests.waiting import wait_for

__all__ = ["browser"]

INBOX_URL = os.environ.get("AGENT_INBOX_URL", "")
pytestmark = pytest.mark.skipif(
    not INBOX_URL,
    reason="set AGENT_INBOX_URL to a running Agent Inbox (its own `next start`) to drive it",
)
REPLY = "Keep it for thirty days; the login form prefills the address from it on the next visit."


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Live]:
    running = Live(api_settings(tmp_path, langgraph_api_origins=_origin(INBOX_URL)))
    try:
        yield running
    finally:
        running.stop()


def _inbox_page(browser: Browser, daemon: Live) -> Page:
    """A page whose Inbox settings point at the daemon (what its Add Inbox + Settings save)."""
    inbox = {
        "id": str(uuid.uuid4()),
        "graphId": "agent-team",
        "deploymentUrl": daemon.url,
        "name": "agent-team",
        "selected": True,
        "createdAt": datetime.now(UTC).isoformat(),
    }
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(
        "(() => {"
        f"localStorage.setItem('inbox:agent_inboxes', {json.dumps(json.dumps([inbox]))});"
        f"localStorage.setItem('inbox:langchain_api_key', {json.dumps(ADA_KEY)});"
        # The Inbox reloads once a day when its list is empty; not in the middle of a test.
        "localStorage.setItem('inbox-refreshed-' + new Date().toDateString(), 'true');"
        "})()"
    )
    return context.new_page()


def _submitted(page: Page) -> None:
    """The Inbox's toast once the run it streamed has ended."""
    expect(page.get_by_text("Response submitted successfully.").first).to_be_visible(
        timeout=WAIT_MS
    )


def test_agent_inbox_lists_and_answers_our_questions(
    browser: Browser, daemon: Live, tmp_path: Path
) -> None:
    (plan_task, clarify_task, resolve_task), (plan_question, clarify_question, _) = (
        daemon.three_waiting(("Remember the email", "Make the cookie better", "An idea for later"))
    )
    page = _inbox_page(browser, daemon)

    page.goto(INBOX_URL)
    expect(page.get_by_text("Review the plan: Remember the email")).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_text("Answer a question: Make the cookie better")).to_be_visible()
    shot(page, tmp_path, "agent-inbox-1-list")
    base = page.url.split("&view_state_thread_id=")[0]

    # The plan: open it (by URL: a row click is lost in this Inbox build), accept it.
    page.goto(f"{base}&view_state_thread_id={plan_task}")
    expect(page.get_by_role("button", name="Mark as Resolved")).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_text("Store the email in a cookie").first).to_be_visible()
    shot(page, tmp_path, "agent-inbox-2-plan")
    page.get_by_role("button", name="Accept").click()
    _submitted(page)
    wait_for(lambda: daemon.task(plan_task).status == "done", "the accepted plan to be built")
    accepted = db.get_question(daemon.conn, plan_question.question_id)
    assert accepted is not None and accepted.answer == {"decision": "approve", "text": ""}
    assert accepted.answered_via == "langgraph-api:ada"

    # The clarify question: a typed response.
    page.goto(f"{base}&view_state_thread_id={clarify_task}")
    page.get_by_placeholder("Your response here...").fill(REPLY)
    shot(page, tmp_path, "agent-inbox-3-clarify")
    page.get_by_role("button", name="Send Response").click()
    _submitted(page)
    wait_for(
        lambda: (
            (q := db.get_question(daemon.conn, clarify_question.question_id)) is not None
            and q.status == "answered"
        ),
        "the clarify answer",
    )
    answered = db.get_question(daemon.conn, clarify_question.question_id)
    assert answered is not None and answered.answer == {"text": REPLY}

    # An idea for later: Mark as Resolved cancels it.
    page.goto(f"{base}&view_state_thread_id={resolve_task}")
    page.get_by_role("button", name="Mark as Resolved").click()
    wait_for(lambda: daemon.task(resolve_task).status == "cancelled", "Mark as Resolved")

    # Back on the list: only the plan of the clarified task is left to decide.
    page.goto(base)
    expect(page.get_by_text("Review the plan: Make the cookie better")).to_be_visible(
        timeout=WAIT_MS
    )
    expect(page.get_by_text("An idea for later")).to_have_count(0)
    shot(page, tmp_path, "agent-inbox-4-after")

    # That plan, edited in the Inbox's text boxes: the steps a person typed are the plan built.
    edited_question = daemon.open_question(clarify_task, "plan_decision")
    page.goto(f"{base}&view_state_thread_id={clarify_task}")
    steps = page.get_by_role("textbox").nth(1)
    expect(steps).to_have_value(re.compile(r"^1\. "), timeout=WAIT_MS)
    steps.fill("1. Set the cookie for thirty days\n2. Prefill the form from it")
    shot(page, tmp_path, "agent-inbox-5-edit")
    page.get_by_role("button", name="Submit").click()
    _submitted(page)
    wait_for(lambda: daemon.task(clarify_task).status == "done", "the edited plan to be built")
    edited = db.get_question(daemon.conn, edited_question.question_id)
    assert edited is not None and edited.answer is not None
    assert edited.answer["decision"] == "edit"
    assert Plan.from_text(edited.answer["text"]).steps == [
        "Set the cookie for thirty days",
        "Prefill the form from it",
    ]
    audit = db.list_audit(daemon.conn, via="langgraph-api")
    assert sorted((row.actor, row.action) for row in audit) == [
        ("ada", "answer"),
        ("ada", "answer"),
        ("ada", "answer"),
        ("ada", "cancel"),
    ]
