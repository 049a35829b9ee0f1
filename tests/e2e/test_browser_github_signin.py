"""Sign in with GitHub in a real browser, against a loopback GitHub on another site.

The dashboard has no token at all: GitHub is the only way in. The loopback
GitHub answers on `localhost` while the dashboard is on `127.0.0.1`, so the
browser treats them as two sites, as it does github.com and your dashboard:
the state cookie must survive the way back from another site, and the session
cookie (`SameSite=Strict`) must be there on the first page after it.
Screenshots: the sign-in page, GitHub's authorize page, the task page signed in.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Request, expect

from agent_team import db
from agent_team.requests.actors import INTERNAL
from agent_team.requests.people import PeopleRequests
from tests.e2e.browser_support import (
    LAPTOP,
    WAIT_MS,
    Live,
    browser,
    live,
    shot,
    task_waiting_on_plan,
)
from tests.fakes.github_oauth import FakeGitHubOAuth

__all__ = ["browser", "live"]  # fixtures, used by name

CLIENT_ID = "Iv1.browser0123456789"
SECRET = "browser-oauth-secret-4c1d8e"


@pytest.fixture
def github() -> Iterator[FakeGitHubOAuth]:
    with FakeGitHubOAuth(
        client_id=CLIENT_ID,
        client_secret=SECRET,
        signed_in_as="Ada-L",
        approval="page",
        host="localhost",
    ) as fake:
        yield fake


@pytest.fixture
def live_settings(github: FakeGitHubOAuth) -> dict[str, Any]:
    return {
        "dashboard_token": None,
        "github_oauth_client_id": CLIENT_ID,
        "github_oauth_client_secret": SECRET,
        "github_oauth_url": github.url,
        "github_api_url": github.api_url,
    }


def _team(live: Live) -> None:
    people = PeopleRequests(live.coordinator.ledger)
    people.add("root", "owner", actor=INTERNAL)
    people.add("ada", "maintainer", github_login="ada-l", actor=INTERNAL)


def test_sign_in_with_github_and_answer_a_plan_as_yourself(
    browser: Browser,
    live: Live,
    github: FakeGitHubOAuth,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    _team(live)
    task_id, question_id = task_waiting_on_plan(live.coordinator)
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    callbacks: list[str] = []

    def note(request: Request) -> None:
        if "/login/github/callback" in request.url:
            callbacks.append(request.url)

    page.on("request", note)

    page.goto(f"{live.url}/task/{task_id}")
    page.locator("[data-live=questions]").get_by_role("link", name="Sign in to answer").click()
    expect(page.locator("h1")).to_have_text("Sign in")
    expect(page.get_by_label("Dashboard token")).to_have_count(0)  # no token: GitHub only
    shot(page, tmp_path, "github-login")
    page.get_by_role("link", name="Sign in with GitHub").click()

    expect(page).to_have_url(re.compile(rf"^{re.escape(github.url)}/login/oauth/authorize\?"))
    expect(page.locator("h1")).to_have_text("Authorize agent-team")
    assert SECRET not in page.url
    shot(page, tmp_path, "github-authorize")
    page.get_by_role("button", name="Authorize").click()

    expect(page).to_have_url(re.compile(rf"/task/{task_id}$"), timeout=WAIT_MS)
    expect(page.locator(".topbar .session")).to_contain_text("signed in as ada")
    (session,) = [c for c in context.cookies() if c["name"] == "agent_team_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert not [c for c in context.cookies() if c["name"] == "agent_team_github_state"]

    form = page.locator("form[data-answer-form]")
    form.get_by_role("button", name="approve").click()
    shot(page, tmp_path, "github-task-signed-in")
    form.get_by_role("button", name="Send answer").click()
    expect(form.locator(".form-result")).to_contain_text("Accepted", timeout=WAIT_MS)
    answered = db.get_question(live.coordinator.ledger, question_id)
    assert answered is not None and answered.answered_via == "dashboard:ada"

    # GitHub's way back, again: refused (its state cookie is gone with its use).
    (callback,) = callbacks
    page.goto(callback)
    expect(page.locator("h1")).to_have_text("Not signed in")
    expect(page.locator(".error-page")).to_contain_text("did not begin that sign-in")

    (token,) = github.tokens
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for secret in (SECRET, token):
        assert secret not in logged and secret not in page.content()
    assert errors == []
    context.close()


def test_a_github_account_nobody_added_is_refused_in_the_browser(
    browser: Browser, live: Live, github: FakeGitHubOAuth
) -> None:
    _team(live)
    github.signed_in_as = "mallory"
    page = browser.new_page(viewport=LAPTOP)

    page.goto(f"{live.url}/login/github?next=/inbox")
    page.get_by_role("button", name="Authorize").click()

    expect(page.locator("h1")).to_have_text("Not signed in")
    expect(page.locator(".error-page")).to_contain_text("mallory is not one of this team's people")
    expect(page.locator(".topbar").get_by_role("link", name="Sign in")).to_be_visible()
    assert db.person_by_github(live.coordinator.ledger, "mallory") is None
    page.close()
