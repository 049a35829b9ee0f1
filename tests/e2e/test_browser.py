"""The dashboard in a real browser: see a task, open it, approve its plan, watch it finish.

Runs Debian's chromium (`/usr/bin/chromium`) through Playwright against a real
uvicorn server and a real coordinator serving in threads, so the page's
JavaScript (countdowns, live refresh, the answer form's `fetch` with the
signed-in session's CSRF token) is exercised end to end. Screenshots of each page at laptop
and phone widths land in the test's `tmp_path` for a person to look at.
"""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Browser, expect

from agent_team import db
from tests.e2e.browser_support import (
    LAPTOP,
    PHONE,
    TITLE,
    TOKEN,
    WAIT_MS,
    Live,
    browser,
    fits_the_viewport,
    live,
    live_settings,
    shot,
    task_waiting_on_plan,
    timeline_fills_its_bar,
)

__all__ = ["browser", "live", "live_settings"]  # fixtures, used by name


def test_approve_a_plan_in_the_browser_and_watch_the_task_finish(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    task_id, question_id = task_waiting_on_plan(live.coordinator)
    page = browser.new_page(viewport=LAPTOP)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    refused: list[str] = []  # what the Content-Security-Policy blocked: must be nothing
    page.on(
        "console",
        lambda message: (
            refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )

    page.goto(live.url + "/")
    tasks_table = page.locator("table")
    expect(tasks_table.get_by_role("link", name=TITLE)).to_be_visible()
    expect(tasks_table.locator(".chip-waiting")).to_have_text("waiting")
    open_questions = page.locator(".qlist")
    expect(open_questions).to_contain_text(TITLE)
    expect(open_questions.locator(".countdown")).to_have_text(re.compile(r"^in \d+(d|h)"))
    shot(page, tmp_path, "overview")

    tasks_table.get_by_role("link", name=TITLE).click()
    expect(page).to_have_url(re.compile(rf"/task/{task_id}$"))
    expect(page.locator("h1")).to_have_text(TITLE)
    expect(page.locator(".plan")).to_contain_text("Steps")
    expect(page.locator(".timeline .seg.ph-plan_review.st-waiting")).to_have_count(1)
    assert timeline_fills_its_bar(page)
    assert refused == []
    # Signed out, the question offers a sign-in that comes back here.
    page.get_by_role("link", name="Sign in to answer").click()
    page.get_by_label("Dashboard token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(rf"/task/{task_id}$"))
    form = page.locator("form[data-answer-form]")
    expect(form.get_by_label("Dashboard token")).to_have_count(0)
    form.get_by_label("Answer").fill("approve")
    form.get_by_label("Your name").fill("Ada")  # the unnamed token does not say who you are
    shot(page, tmp_path, "task-waiting")

    form.get_by_role("button", name="Send answer").click()
    expect(form.locator(".form-result")).to_contain_text("Accepted", timeout=WAIT_MS)
    # The page reloads, then its live refresh shows the run going on to the end.
    expect(page.locator("[data-live=task-head] .chip")).to_have_text("done", timeout=WAIT_MS)
    questions = page.locator("[data-live=questions]")
    expect(questions).to_contain_text("answered by Ada via dashboard")
    expect(questions.locator("form")).to_have_count(0)
    expect(page.locator(".timeline .seg.ph-build")).to_have_count(1)
    shot(page, tmp_path, "task-done")

    answered = db.get_question(live.coordinator.ledger, question_id)
    assert answered is not None and answered.answered_via == "dashboard:Ada"
    # The token stays out of the page's reach: no storage, and the cookie is HttpOnly.
    assert page.evaluate("localStorage.getItem('agent-team.dashboard-token')") is None
    assert TOKEN not in page.evaluate("document.cookie")
    assert errors == []

    phone = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
    for name, path in (("overview", "/"), ("task", f"/task/{task_id}")):
        phone.goto(live.url + path)
        expect(phone.locator("h1")).to_be_visible()
        shot(phone, tmp_path, f"phone-{name}")
        assert fits_the_viewport(phone), f"the {name} page scrolls sideways at 390 px"
    phone.close()
    page.close()


def test_typing_survives_a_refresh_and_a_lost_sign_in_is_reported_inline(
    browser: Browser, live: Live
) -> None:
    task_id, question_id = task_waiting_on_plan(live.coordinator)
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    page.clock.install()  # so the test can move the 10 s refresh timer on instead of waiting
    page.goto(f"{live.url}/login?next=/task/{task_id}")
    page.get_by_label("Dashboard token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(rf"/task/{task_id}$"))
    form = page.locator("form[data-answer-form]")
    answer = form.get_by_label("Answer")
    answer.fill("revise split the cookie step in two")
    form.get_by_label("Your name").fill("Ada")

    page.locator("h1").click()  # focus leaves the form: only its typed text protects it now
    stamp = page.locator(".live-label")
    expect(stamp).to_contain_text("live")
    page.clock.run_for(11_000)
    expect(stamp).to_contain_text("updated")  # a refresh happened...
    expect(answer).to_have_value("revise split the cookie step in two")  # ...around the form

    other = context.new_page()  # signing out in another tab ends this tab's sign-in too
    other.goto(f"{live.url}/")
    other.get_by_role("button", name="Sign out").click()
    expect(other.get_by_role("link", name="Sign in")).to_be_visible()
    other.close()
    form.get_by_role("button", name="Send answer").click()
    result = form.locator(".form-result")
    expect(result).to_contain_text("sign in again to answer", timeout=WAIT_MS)
    expect(result).to_have_class(re.compile(r"\berror\b"))
    expect(answer).to_have_value("revise split the cookie step in two")
    question = db.get_question(live.coordinator.ledger, question_id)
    assert question is not None and question.status == "open"

    # The deadline counts down in the browser, from the ISO time in `data-deadline`.
    countdown = page.locator("[data-live=questions] .countdown")
    expect(countdown).to_have_text(re.compile(r"^in 2d 23h$"))
    page.clock.fast_forward(73 * 3600 * 1000)  # ms: past the 72 h plan deadline
    expect(countdown).to_have_text(re.compile(r"^overdue by 1h 0\dm$"))
    expect(countdown).to_have_class(re.compile(r"\boverdue\b"))
    context.close()


def test_the_inbox_and_the_automations_pages_in_the_browser(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    from agent_team.automations import service
    from agent_team.requests.actors import Actor

    task_id, question_id = task_waiting_on_plan(live.coordinator)
    ledger = live.coordinator.ledger
    service.create(
        ledger,
        service.AutomationRequest(
            name="weekly-bumps",
            title="Review dependency bumps",
            body="Look at the open bumps and merge the safe ones, each with a test run.",
            cron="0 9 * * MON",
            timezone="Europe/Berlin",
        ),
        actor=Actor("ada", "cli"),
        now=live.coordinator.clock(),
    )
    page = browser.new_page(viewport=LAPTOP)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(live.url + "/")
    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Inbox").click()
    expect(page).to_have_url(re.compile(r"/inbox$"))
    expect(page.locator("h1")).to_have_text("Inbox")
    row = page.locator("tr.inbox-question")
    expect(row).to_contain_text(TITLE)
    expect(row.locator("code")).to_have_text(f"agent-team answer {question_id} ...")
    expect(row.locator(".countdown")).to_have_text(re.compile(r"^in \d+(d|h)"))
    shot(page, tmp_path, "inbox")
    row.get_by_role("link", name=TITLE).click()
    expect(page).to_have_url(re.compile(rf"/task/{task_id}#q-{re.escape(question_id)}$"))

    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Automations").click()
    card = page.locator("section.card", has_text="weekly-bumps")
    expect(card).to_contain_text("cron '0 9 * * MON' Europe/Berlin")
    expect(card).to_contain_text("next run")
    expect(card).to_contain_text("No runs yet.")
    shot(page, tmp_path, "automations")
    assert errors == []

    phone = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
    for name in ("inbox", "automations"):
        phone.goto(f"{live.url}/{name}")
        expect(phone.locator("h1")).to_be_visible()
        assert fits_the_viewport(phone), f"the {name} page scrolls sideways at 390 px"
    phone.close()
    page.close()
