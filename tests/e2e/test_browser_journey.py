"""A task's journey and its plan versions in a real browser: plan, revise, approve, done.

The answers go in through `inbox.submit_answer`, as `agent-team answer`
gives them (the answer form has its own browser test), and the coordinator
serving in its thread runs the task on; the page is then read as a person
sees it: the step table with each step's own outcome, the revised plan's
changes against the plan sent back, and the earlier plan one link away.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from agent_team import db
from agent_team.requests import inbox
from tests.e2e.browser_support import (
    LAPTOP,
    PHONE,
    Live,
    browser,
    fits_the_viewport,
    live,
    live_settings,
    shot,
    task_waiting_on_plan,
    timeline_fills_its_bar,
)
from tests.waiting import wait_for

__all__ = ["browser", "live", "live_settings"]  # fixtures, used by name

FEEDBACK = "split the cookie step in two"


def answer(live: Live, question_id: str, text: str) -> None:
    """Answer as the CLI does, and wake the coordinator to run the task on."""
    inbox.submit_answer(live.coordinator.ledger, question_id, text, via="cli:ada", now=db.utc_now())
    live.coordinator.wake.set()


def open_plan_question(live: Live, task_id: str, turn: int) -> str:
    """Wait until the task waits on its `turn`th question; its id."""
    wanted = f"{task_id}:q{turn}"

    def asked() -> bool:
        question = db.get_question(live.coordinator.ledger, wanted)
        task = db.get_task(live.coordinator.ledger, task_id)
        return question is not None and task is not None and task.status == "waiting"

    wait_for(asked, f"question {wanted} to be asked")
    return wanted


def step_rows(page: Page) -> list[tuple[str, str, str]]:
    """(step, outcome chip, outcome words) of each row of the step table."""
    rows: list[tuple[str, str, str]] = page.evaluate(
        """() => [...document.querySelectorAll('table.steps tbody tr:not(.note-row)')].map(tr => [
            tr.querySelector('td.step').textContent.trim(),
            tr.querySelector('td.outcome .chip').textContent.trim(),
            (tr.querySelector('td.outcome .detail') || {textContent: ''}).textContent.trim(),
        ])"""
    )
    return [tuple(row) for row in rows]  # type: ignore[misc]


@pytest.mark.slow
def test_a_revised_plan_shows_its_changes_and_every_step_its_own_outcome(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    task_id, first = task_waiting_on_plan(live.coordinator)
    answer(live, first, f"revise {FEEDBACK}")
    second = open_plan_question(live, task_id, 2)
    page = browser.new_page(viewport=LAPTOP)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(f"{live.url}/task/{task_id}")
    plan = page.locator("[data-live=plan]")
    expect(plan.locator("h2")).to_contain_text(f"2 of 2, from question {second} (open)")
    changes = plan.locator(".plan-changes")
    expect(changes.locator("h3")).to_have_text("Changed since plan 1")
    expect(changes).to_contain_text(f"revise by ada via cli: {FEEDBACK}")
    # The one added step is marked by a visible + inside <ins>, not by colour alone.
    added = changes.locator(".plan-diff ins")
    expect(added).to_have_count(1)
    expect(added).to_have_text(f"+ 4. Address review feedback: {FEEDBACK}")
    expect(changes.locator(".plan-diff del")).to_have_count(0)
    expect(plan.locator(".prose.plan")).to_contain_text(f"Address review feedback: {FEEDBACK}")
    # While it waits, only the step it is in is waiting; the first review is one step.
    assert step_rows(page) == [
        ("intake", "done", ""),
        ("clarify", "done", ""),
        ("plan", "done", ""),
        ("plan_review", "answered", step_rows(page)[3][2]),
        ("plan", "done", ""),
        ("plan_review", "waiting", "waiting for an answer"),
    ]
    assert re.fullmatch(r"waited .+ · answered by ada via cli: revise", step_rows(page)[3][2])
    expect(page.locator(".timeline .seg.ph-plan_review.st-waiting")).to_have_count(1)
    shot(page, tmp_path, "journey-plan-diff")

    # Every earlier plan stays one link away.
    versions = plan.locator("nav.plan-versions")
    expect(versions.locator("[aria-current=page]")).to_have_text("plan 2")
    versions.get_by_role("link", name="plan 1").click()
    expect(page).to_have_url(re.compile(rf"/task/{task_id}\?plan=1#h-plan$"))
    plan = page.locator("[data-live=plan]")
    expect(plan.locator("h2")).to_contain_text(f"1 of 2, from question {first} (answered)")
    expect(plan).to_contain_text("This is an earlier plan.")
    expect(plan.locator(".prose.plan")).to_contain_text("Store the email in a cookie")
    expect(plan.locator(".prose.plan")).not_to_contain_text("Address review feedback")
    expect(plan.locator(".plan-changes")).to_have_count(0)
    shot(page, tmp_path, "journey-earlier-plan")
    plan.get_by_role("link", name="Show the current plan (2)").click()
    expect(page.locator("[data-live=plan] h2")).to_contain_text("2 of 2")

    answer(live, second, "approve")
    wait_for(
        lambda: getattr(db.get_task(live.coordinator.ledger, task_id), "status", "") == "done",
        f"task {task_id} to be done",
    )
    page.reload()
    expect(page.locator("[data-live=task-head] .chip")).to_have_text("done")
    rows = step_rows(page)
    assert [(step, chip) for step, chip, _ in rows] == [
        ("intake", "done"),
        ("clarify", "done"),
        ("plan", "done"),
        ("plan_review", "answered"),
        ("plan", "done"),
        ("plan_review", "answered"),
        ("build", "done"),
        ("done", "done"),
    ]
    assert re.fullmatch(r"waited .+ · answered by ada via cli: approve", rows[5][2])
    # No finished step says running, and each gate's running/waiting/running rows are one step.
    timeline = page.locator("[data-live=timeline]")
    expect(timeline.locator(".chip-running")).to_have_count(0)
    expect(timeline.locator(".seg.st-running")).to_have_count(0)
    expect(timeline.locator(".seg.ph-plan_review.waited")).to_have_count(2)
    expect(timeline.locator("h2 .count")).to_have_text("8 steps")
    assert timeline_fills_its_bar(page)
    shot(page, tmp_path, "journey-steps-done")
    assert errors == []

    phone = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
    phone.goto(f"{live.url}/task/{task_id}?plan=2")
    expect(phone.locator(".plan-diff ins")).to_have_count(1)
    shot(phone, tmp_path, "journey-phone")
    assert fits_the_viewport(phone), "the task page scrolls sideways at 390 px"
    phone.close()
    page.close()
