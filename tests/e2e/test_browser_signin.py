"""Signing in with a named token in a real browser: answer a plan as yourself, then sign out.

The dashboard here has named tokens only (`AGENT_TEAM_DASHBOARD_TOKENS`), so the
answer form asks for neither a token nor a name: the sign-in says who you are.
Screenshots: the sign-in page and the signed-in task page at laptop width.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agent_team import db
from tests.e2e.browser_support import (
    LAPTOP,
    WAIT_MS,
    Live,
    browser,
    live,
    shot,
    task_waiting_on_plan,
)

__all__ = ["browser", "live"]  # fixtures, used by name

ADA_TOKEN = "ada-browser-token-5f2c9e"
BOB_TOKEN = "bob-browser-token-81d0aa"


@pytest.fixture
def live_settings() -> dict[str, Any]:
    return {"dashboard_token": None, "dashboard_tokens": f"ada:{ADA_TOKEN},bob:{BOB_TOKEN}"}


def test_sign_in_answer_a_plan_as_yourself_and_sign_out(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    task_id, question_id = task_waiting_on_plan(live.coordinator)
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(f"{live.url}/task/{task_id}")
    questions = page.locator("[data-live=questions]")
    expect(questions.locator("form[data-answer-form]")).to_have_count(0)
    questions.get_by_role("link", name="Sign in to answer").click()
    expect(page.locator("h1")).to_have_text("Sign in")

    page.get_by_label("Dashboard token").fill("not-a-token-at-all")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not one of the dashboard's tokens")
    assert "not-a-token-at-all" not in page.content()
    shot(page, tmp_path, "signin-login")

    page.get_by_label("Dashboard token").fill(ADA_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(rf"/task/{task_id}$"))  # back where it started
    expect(page.locator(".topbar .session")).to_contain_text("signed in as ada")
    (cookie,) = [c for c in context.cookies() if c["name"] == "agent_team_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert page.evaluate("document.cookie").find("agent_team_session") == -1

    # A note while the plan waits (a finished task takes none); then a fresh page, so the
    # note's reload timer cannot cut into the answer below.
    notes = page.locator("[data-live=notes]")
    expect(notes).to_contain_text("No notes yet.")
    note_form = notes.locator("form[data-note-form]")
    note_form.get_by_label("Note").fill("Deploy after the 3pm freeze lifts")
    note_form.get_by_role("button", name="Add note").click()
    expect(note_form.locator(".form-result")).to_contain_text("Note added", timeout=WAIT_MS)
    (note,) = db.list_task_notes(live.coordinator.ledger, task_id)
    assert (note.actor, note.detail_dict["text"]) == ("ada", "Deploy after the 3pm freeze lifts")
    page.goto(f"{live.url}/task/{task_id}")
    expect(notes).to_contain_text("Deploy after the 3pm freeze lifts")
    expect(notes).to_contain_text("ada via dashboard")

    form = page.locator("form[data-answer-form]")
    expect(form.get_by_label("Answer")).to_be_visible()
    expect(form.get_by_label("Your name")).to_have_count(0)  # the token says who ada is
    expect(form.get_by_label("Dashboard token")).to_have_count(0)
    form.get_by_role("button", name="approve").click()
    shot(page, tmp_path, "signin-task-signed-in")

    form.get_by_role("button", name="Send answer").click()
    expect(form.locator(".form-result")).to_contain_text("Accepted", timeout=WAIT_MS)
    expect(questions).to_contain_text("answered by ada via dashboard", timeout=WAIT_MS)
    answered = db.get_question(live.coordinator.ledger, question_id)
    assert answered is not None and answered.answered_via == "dashboard:ada"
    page.goto(f"{live.url}/task/{task_id}")  # no reload pending behind the sign-out

    page.get_by_role("button", name="Sign out").click()
    expect(page.locator(".topbar").get_by_role("link", name="Sign in")).to_be_visible()
    assert not [c for c in context.cookies() if c["name"] == "agent_team_session"]
    page.goto(f"{live.url}/task/{task_id}")
    expect(page.locator(".topbar")).not_to_contain_text("signed in as")
    assert errors == []
    context.close()
