"""The browser's actions on tasks, in Chromium: submit, cancel, retry, reopen, edit a plan, and
answer from the inbox.

Each goes through the page's own form and script (`fetch` with the signed-in
session's CSRF token) to the JSON API, and so through `TaskRequests` like the
CLI: each test checks the task in the ledger and the audit row naming the
person and `dashboard`. The builder is the `command` one with a build that
fails until a marker file exists, so a failed task can be retried for real.
Every page is also opened at phone width: nothing may be wider than 390 px.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agent_team import db
from tests.e2e.browser_support import (
    LAPTOP,
    PHONE,
    WAIT_MS,
    Live,
    browser,
    live,
    phone_width_fits,
    shot,
    sign_in_at,
    task_waiting_on_plan,
    watched_page,
)
from tests.waiting import wait_for

__all__ = ["browser", "live"]  # fixtures, used by name

ADA = "ada-actions-token-3c9d1e"
SHORT_BODY = "Make login nicer."


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """Where the build's fixture appears once the test 'fixes' the failing build."""
    return tmp_path / "fixture-in-place"


@pytest.fixture
def live_settings(marker: Path) -> dict[str, Any]:
    build = (
        f"test -f {shlex.quote(str(marker))} || {{ echo 'the fixture is missing' >&2; exit 4; }}; "
        "echo built > built.txt"
    )
    return {
        "dashboard_token": None,
        "dashboard_tokens": f"ada:{ADA}",
        "builder": "command",
        "build_command": build,
    }


def audited(live: Live, action: str, target: str) -> db.AuditRow:
    rows = db.list_audit(live.coordinator.ledger, action=action, target=target)
    assert rows, f"no {action} audit row for {target}"
    return rows[0]


def status_of(live: Live, task_id: str) -> str:
    task = db.get_task(live.coordinator.ledger, task_id)
    assert task is not None
    return task.status


def on_phone(browser: Browser, live: Live, path: str, tmp_path: Path, name: str) -> None:
    """The page at 390 px, signed in: no sideways scroll, and a screenshot."""
    phone = watched_page(browser, PHONE, is_mobile=True, has_touch=True)
    sign_in_at(phone.page, live.url, ADA, path)
    expect(phone.page.locator("h1")).to_be_visible()
    shot(phone.page, tmp_path, f"phone-{name}")
    assert phone_width_fits(phone.page), f"{path} is wider than 390 px"
    assert phone.clean(), (phone.errors, phone.refused)
    phone.page.context.close()


def test_submit_a_task_with_a_preview_and_land_on_its_page(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    seen = watched_page(browser, LAPTOP)
    page = seen.page
    page.goto(f"{live.url}/")
    page.get_by_role("navigation", name="Pages").get_by_role("link", name="New task").click()
    expect(page.locator("h1")).to_have_text("New task")
    page.get_by_role("link", name="Sign in to submit a task").click()
    page.get_by_label("Dashboard token").fill(ADA)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/tasks/new$"))

    form = page.get_by_role("form", name="New task")
    form.get_by_label("Title").fill("Greet people by name")
    body = form.get_by_label("Request text")
    body.fill(
        "# Greeting\n\nSay *hello* to the user:\n\n- read the name\n- print **Hello, NAME**\n"
    )
    form.get_by_role("button", name="Preview").click()
    preview = form.locator("[data-preview-out]")
    expect(preview.locator("h3")).to_have_text("Greeting")
    expect(preview.locator("em")).to_have_text("hello")
    expect(preview.locator("li")).to_have_count(2)
    expect(body).to_be_hidden()
    shot(page, tmp_path, "new-task-preview")
    form.get_by_role("button", name="Edit").click()
    expect(body).to_be_visible()

    form.get_by_label("Repository").fill("not a repository at all")
    form.get_by_role("button", name="Submit task").click()
    expect(form.locator(".form-result")).to_contain_text("repo", timeout=WAIT_MS)
    expect(form.get_by_label("Repository")).to_have_attribute("aria-invalid", "true")
    assert db.list_tasks(live.coordinator.ledger) == []  # refused: nothing stored
    form.get_by_label("Repository").fill("")
    form.get_by_role("button", name="Submit task").click()

    expect(page).to_have_url(re.compile(r"/task/t[0-9a-f]+$"), timeout=WAIT_MS)
    expect(page.locator("h1")).to_have_text("Greet people by name")
    task_id = page.url.rsplit("/", 1)[1]
    page.get_by_text("Request text").click()
    expect(page.locator(".request-text em")).to_have_text("hello")  # as the preview showed it
    row = audited(live, "submit", task_id)
    assert (row.actor, row.via) == ("ada", "dashboard")
    (task,) = db.list_tasks(live.coordinator.ledger)
    assert (task.id, task.source) == (task_id, "dashboard")
    assert seen.clean(), (seen.errors, seen.refused)
    on_phone(browser, live, "/tasks/new", tmp_path, "new-task")


def test_cancel_a_task_from_its_page(browser: Browser, live: Live, tmp_path: Path) -> None:
    task_id, _ = task_waiting_on_plan(live.coordinator)
    seen = watched_page(browser, LAPTOP)
    page = seen.page
    page.goto(f"{live.url}/task/{task_id}")
    head = page.locator("[data-live=task-head]")
    expect(head.get_by_role("link", name="Sign in to cancel this task")).to_be_visible()
    sign_in_at(page, live.url, ADA, f"/task/{task_id}")

    head.get_by_text("Cancel this task…").click()
    shot(page, tmp_path, "task-cancel-confirm")
    head.get_by_role("button", name="Yes, cancel the task").click()
    expect(head.locator(".form-result")).to_contain_text("Cancel queued", timeout=WAIT_MS)
    wait_for(lambda: status_of(live, task_id) == "cancelled", "the task to be cancelled")
    page.goto(f"{live.url}/task/{task_id}")  # afresh: the form's reload timer is spent
    expect(head.locator(".chip").first).to_have_text("cancelled")
    expect(head.get_by_text("Cancel this task…")).to_have_count(0)  # nothing left to cancel
    row = audited(live, "cancel", task_id)
    assert (row.actor, row.via) == ("ada", "dashboard")
    assert seen.clean(), (seen.errors, seen.refused)
    on_phone(browser, live, f"/task/{task_id}", tmp_path, "task-cancelled")


def test_retry_a_failed_build_from_its_page(
    browser: Browser, live: Live, tmp_path: Path, marker: Path
) -> None:
    task_id, question_id = task_waiting_on_plan(live.coordinator)
    live.coordinator.answer(question_id, "approve", via="cli:ada")
    wait_for(lambda: status_of(live, task_id) == "failed", "the build to fail", 60)
    seen = watched_page(browser, LAPTOP)
    page = seen.page
    sign_in_at(page, live.url, ADA, f"/task/{task_id}")
    head = page.locator("[data-live=task-head]")
    expect(head).to_contain_text("failed in build")
    shot(page, tmp_path, "task-failed-retry")

    marker.write_text("ready\n")  # the operator fixed the cause
    head.get_by_role("button", name="Retry").click()
    expect(head.locator(".form-result")).to_contain_text("Retry queued", timeout=WAIT_MS)
    wait_for(lambda: status_of(live, task_id) == "done", "the retried task to finish", 60)
    page.goto(f"{live.url}/task/{task_id}")
    expect(head.locator(".chip").first).to_have_text("done")
    expect(head.get_by_role("button", name="Retry")).to_have_count(0)
    links = page.locator(".work-links")
    expect(links).to_contain_text("Branch")
    expect(links).to_contain_text("Commit")
    row = audited(live, "retry", task_id)
    assert (row.actor, row.via, row.detail_dict["status"]) == ("ada", "dashboard", "failed")
    assert seen.clean(), (seen.errors, seen.refused)


def test_reopen_an_expired_question_with_a_deadline(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    task_id, question_id = task_waiting_on_plan(live.coordinator)
    ledger = live.coordinator.ledger
    ledger.execute(  # its deadline has passed; the timers pass expires it and parks the task
        "UPDATE pending_questions SET deadline_at = ? WHERE question_id = ?",
        ("2020-01-01T00:00:00.000000Z", question_id),
    )
    assert live.coordinator.check_deadlines() == 1
    assert status_of(live, task_id) == "parked"
    seen = watched_page(browser, LAPTOP)
    page = seen.page
    sign_in_at(page, live.url, ADA, f"/task/{task_id}")
    card = page.locator(f"[id='q-{question_id}']")
    expect(card.locator(".chip")).to_have_text("expired")
    form = card.locator("form[data-json-form]")
    deadline = form.get_by_label("New deadline, from now")
    expect(deadline).to_have_value("24h")
    deadline.fill("soon")
    form.get_by_role("button", name="Reopen").click()
    expect(form.locator(".form-result")).to_contain_text("deadline", timeout=WAIT_MS)
    question = db.get_question(ledger, question_id)
    assert question is not None and question.status == "expired"  # refused: nothing changed

    deadline.fill("2h")
    shot(page, tmp_path, "task-reopen")
    form.get_by_role("button", name="Reopen").click()
    expect(form.locator(".form-result")).to_contain_text("Reopened", timeout=WAIT_MS)
    page.goto(f"{live.url}/task/{task_id}")
    expect(card.locator(".chip")).to_have_text("open")
    expect(card.locator(".countdown")).to_have_text(re.compile(r"^in 1h 5\dm$"))
    row = audited(live, "reopen", question_id)
    assert (row.actor, row.via) == ("ada", "dashboard")
    assert seen.clean(), (seen.errors, seen.refused)


def test_edit_the_plan_with_a_diff_before_sending(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    task_id, question_id = task_waiting_on_plan(live.coordinator)
    question = db.get_question(live.coordinator.ledger, question_id)
    assert question is not None
    plan = str(question.payload["plan_markdown"])
    seen = watched_page(browser, LAPTOP)
    page = seen.page
    sign_in_at(page, live.url, ADA, f"/task/{task_id}")
    card = page.locator(f"[id='q-{question_id}']")
    card.get_by_text("Edit the plan").click()
    editor = card.locator("form[data-plan-editor]")
    field = editor.get_by_label("Your plan")
    expect(field).to_have_value(plan)  # prefilled with the plan asked about
    expect(editor).to_contain_text("No changes yet.")
    editor.get_by_role("button", name="Send edited plan").click()
    expect(editor.locator(".form-result")).to_contain_text("unchanged")

    added = "Keep the old login form behind a flag for a week"
    edited = plan.rstrip("\n") + f"\n- {added}\n"
    field.fill(edited)
    diff = editor.locator("[data-plan-diff]")
    expect(diff.locator("li.d-add")).to_have_count(1)
    expect(diff.locator("li.d-add")).to_contain_text(added)
    expect(diff.locator("li.d-del")).to_have_count(0)
    shot(page, tmp_path, "plan-editor")
    editor.get_by_role("button", name="Send edited plan").click()
    expect(editor.locator(".form-result")).to_contain_text("Your plan was sent", timeout=WAIT_MS)
    answered = db.get_question(live.coordinator.ledger, question_id)
    assert answered is not None and answered.answered_via == "dashboard:ada"
    assert answered.answer["decision"] == "edit"
    assert added in answered.answer["text"] and "\n" in answered.answer["text"]
    assert seen.clean(), (seen.errors, seen.refused)
    on_phone(browser, live, f"/task/{task_id}", tmp_path, "task-plan-answered")


def test_answer_from_the_inbox_without_opening_the_task(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    plan_task, plan_question = task_waiting_on_plan(live.coordinator)
    vague = live.coordinator.start_task(title="Make login nicer", body=SHORT_BODY)

    def clarify_asked() -> db.Question | None:
        found = db.list_questions(live.coordinator.ledger, status="open", thread_id=vague)
        return found[0] if found and found[0].kind == "clarify" else None

    clarify = wait_for(clarify_asked, "the clarifying question")
    seen = watched_page(browser, LAPTOP)
    page = seen.page
    page.goto(f"{live.url}/inbox")
    row = page.locator(f"tr[data-question='{plan_question}']")
    expect(row.get_by_role("button", name="Approve")).to_have_count(0)  # signed out
    sign_in_at(page, live.url, ADA, "/inbox")
    expect(row.get_by_role("button", name="Approve")).to_be_visible()
    expect(row.get_by_role("button", name="Reject")).to_be_visible()
    reply_row = page.locator(f"tr[data-question='{clarify.question_id}']")
    expect(reply_row).to_contain_text(str(clarify.payload["text"])[:40])
    shot(page, tmp_path, "inbox-signed-in")

    reply = reply_row.get_by_label("Reply")
    reply.fill("The login page of the web app:\nremember the email between visits.")
    reply_row.get_by_role("button", name="Send reply").click()
    expect(reply_row.locator(".form-result")).to_contain_text("Reply sent", timeout=WAIT_MS)
    row.get_by_role("button", name="Approve").click()
    expect(row.locator(".form-result")).to_contain_text("Answered: approve", timeout=WAIT_MS)
    expect(page).to_have_url(re.compile(r"/inbox$"))  # never left the inbox

    ledger = live.coordinator.ledger
    approved = db.get_question(ledger, plan_question)
    assert approved is not None and approved.answered_via == "dashboard:ada"
    assert approved.answer["decision"] == "approve"
    replied = db.get_question(ledger, clarify.question_id)
    assert replied is not None and replied.answered_via == "dashboard:ada"
    assert "remember the email" in replied.answer["text"]
    assert seen.clean(), (seen.errors, seen.refused)
    wait_for(lambda: status_of(live, plan_task) != "waiting", "the approved task to go on")
    on_phone(browser, live, "/inbox", tmp_path, "inbox")


def test_every_page_fits_a_phone_signed_in(browser: Browser, live: Live, tmp_path: Path) -> None:
    task_id, _ = task_waiting_on_plan(live.coordinator)
    phone = watched_page(browser, PHONE, is_mobile=True, has_touch=True)
    page = phone.page
    sign_in_at(page, live.url, ADA, "/")
    for path in ("/", "/tasks/new", "/inbox", "/automations", "/audit", f"/task/{task_id}"):
        page.goto(live.url + path)
        expect(page.locator("h1")).to_be_visible()
        assert phone_width_fits(page), f"{path} is wider than 390 px"
    page.get_by_text("Edit the plan").click()  # the widest part: the plan and its diff
    page.get_by_label("Your plan").press("End")
    page.get_by_label("Your plan").type("\n- a step added on a phone with a long line of text")
    expect(page.locator("[data-plan-diff] li.d-add")).to_have_count(1)
    page.get_by_text("Cancel this task…").click()
    shot(page, tmp_path, "phone-task-editing")
    assert phone_width_fits(page), "the task page with its forms open is wider than 390 px"
    assert phone.clean(), (phone.errors, phone.refused)
    page.context.close()
