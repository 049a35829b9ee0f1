"""Automations, the audit log and the viewer's time zone, in Chromium.

Automations are created, changed, paused, resumed and run from their page, through
`/api/automations` and so `automations.service` (role check, field checks, audit
row). The audit log page filters and pages as `agent-team audit` does and, once
people are set up, is for owners only: a viewer gets a 403 page. Times show in
the browser's zone with UTC on hover, or in UTC when the viewer picks it.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agent_team import db
from agent_team.requests.actors import INTERNAL, Actor
from agent_team.requests.people import PeopleRequests
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

ADA = "ada-admin-token-77b1c4"


@pytest.fixture
def live_settings() -> dict[str, Any]:
    return {"dashboard_token": None, "dashboard_tokens": f"ada:{ADA}"}


def automation(live: Live, name: str) -> db.Automation:
    found = db.get_automation(live.coordinator.ledger, name)
    assert found is not None, f"no automation {name}"
    return found


def actions_by(live: Live, who: str, prefix: str) -> list[str]:
    rows = db.list_audit(live.coordinator.ledger, actor=who, via="dashboard", action=prefix)
    return sorted(row.action for row in rows)


@pytest.mark.slow
def test_automations_from_their_page(browser: Browser, live: Live, tmp_path: Path) -> None:
    seen = watched_page(browser, LAPTOP)
    page = seen.page
    page.goto(f"{live.url}/automations")
    expect(page.get_by_role("link", name="Sign in to add or change automations")).to_be_visible()
    sign_in_at(page, live.url, ADA, "/automations")

    page.get_by_text("New automation").click()
    form = page.get_by_role("form", name="New automation")
    form.get_by_label("Name", exact=True).fill("weekly-bumps")
    form.get_by_label("Task title").fill("Review dependency bumps")
    form.get_by_label("Task body").fill("Look at the open bumps; merge the safe ones.")
    form.get_by_label("Every").fill("5s")
    form.get_by_role("button", name="Create automation").click()
    expect(form.locator(".form-result")).to_contain_text("every", timeout=WAIT_MS)
    expect(form.get_by_label("Every")).to_have_attribute("aria-invalid", "true")
    assert db.list_automations(live.coordinator.ledger) == []  # refused: nothing stored
    form.get_by_label("Every").fill("6h")
    shot(page, tmp_path, "automation-new")
    form.get_by_role("button", name="Create automation").click()

    card = page.locator("section.automation", has_text="weekly-bumps")
    expect(card).to_contain_text("every 6h", timeout=WAIT_MS)
    made = automation(live, "weekly-bumps")
    # Due at once: the daemon's timers claim its first slot (and move the schedule on).
    wait_for(lambda: db.list_runs(live.coordinator.ledger, made.automation_id), "the first run")
    next_run = automation(live, "weekly-bumps").next_run_at
    assert next_run == db.to_iso(db.from_iso(made.first_run_at) + timedelta(hours=6))

    card.get_by_text("Change…").click()
    change = card.get_by_role("form", name="Change weekly-bumps")
    expect(change.get_by_label("Task title")).to_have_value("Review dependency bumps")
    expect(change.get_by_label("Every")).to_have_value("6h")
    change.get_by_role("button", name="Save changes").click()
    expect(change.locator(".form-result")).to_contain_text("Nothing changed")
    change.get_by_label("Task title").fill("Review the week's dependency bumps")
    change.get_by_role("button", name="Save changes").click()
    expect(card).to_contain_text("Review the week's dependency bumps", timeout=WAIT_MS)
    changed = automation(live, "weekly-bumps")
    assert changed.next_run_at == next_run  # only the title was sent: the schedule stands

    card.get_by_role("button", name="Pause").click()
    expect(card.locator("h2 .tag")).to_have_text("paused", timeout=WAIT_MS)
    card.get_by_role("button", name="Resume").click()
    expect(card.locator("h2 .tag")).to_have_text("active", timeout=WAIT_MS)
    card.get_by_role("button", name="Run now").click()
    expect(card.locator("table.runs")).to_contain_text("run now", timeout=WAIT_MS)
    # The first run's task is still open, and the overlap policy is `skip`.
    expect(card.locator("table.runs")).to_contain_text("skipped overlap")
    shot(page, tmp_path, "automations")
    assert actions_by(live, "ada", "automation.") == [
        "automation.create",
        "automation.pause",
        "automation.resume",
        "automation.run_now",
        "automation.update",
    ]
    assert seen.clean(), (seen.errors, seen.refused)

    phone = watched_page(browser, PHONE, is_mobile=True, has_touch=True)
    sign_in_at(phone.page, live.url, ADA, "/automations")
    phone.page.get_by_text("Change…").click()
    shot(phone.page, tmp_path, "phone-automations")
    assert phone_width_fits(phone.page), "/automations is wider than 390 px"
    phone.page.context.close()


def test_the_audit_log_page_filters_pages_and_is_for_owners(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    task_id, _ = task_waiting_on_plan(live.coordinator)
    live.coordinator.requests.note(task_id, "staging is down until 3pm", actor=Actor("bob", "cli"))
    live.coordinator.requests.cancel(task_id, actor=Actor("bob", "cli"))
    seen = watched_page(browser, LAPTOP)
    page = seen.page
    page.goto(f"{live.url}/audit")
    expect(page.locator("h1")).to_have_text("Sign in to read the audit log")
    page.get_by_role("link", name="Sign in", exact=True).last.click()
    page.get_by_label("Dashboard token").fill(ADA)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(r"/audit$"))
    table = page.locator("table.audit")
    expect(table).to_contain_text("cancel")
    expect(table).to_contain_text("staging is down until 3pm")

    filters = page.get_by_role("form", name="Filter the audit log")
    filters.get_by_label("Who").fill("bob")
    filters.get_by_label("Action").fill("canc")  # a prefix, as `agent-team audit --action`
    filters.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"actor=bob"))
    expect(table.locator("tbody tr")).to_have_count(1)
    expect(table.get_by_role("link", name=task_id)).to_be_visible()
    shot(page, tmp_path, "audit-filtered")

    page.goto(f"{live.url}/audit?actor=bob&limit=1")
    expect(table.locator("tbody tr")).to_have_count(1)
    expect(table).to_contain_text("cancel")
    page.get_by_role("link", name="Older →").click()
    expect(table).to_contain_text("note")
    expect(page.get_by_role("link", name="← Newest")).to_be_visible()
    assert seen.clean(), (seen.errors, seen.refused)

    phone = watched_page(browser, PHONE, is_mobile=True, has_touch=True)
    sign_in_at(phone.page, live.url, ADA, "/audit")
    expect(phone.page.locator("table.audit")).to_be_visible()
    shot(phone.page, tmp_path, "phone-audit")
    assert phone_width_fits(phone.page), "/audit is wider than 390 px"
    phone.page.context.close()

    # Once people are set up, the log is for owners: a viewer is told which role it needs.
    people = PeopleRequests(live.coordinator.ledger)
    people.add("ada", "owner", actor=INTERNAL)
    people.add("vi", "viewer", actor=INTERNAL)
    vi_key = people.add_key("vi", actor=INTERNAL).key
    viewer = watched_page(browser, LAPTOP)
    sign_in_at(viewer.page, live.url, vi_key, "/audit")
    expect(viewer.page.locator(".error-page .code")).to_have_text("403")
    expect(viewer.page.locator(".error-page")).to_contain_text("needs owner")
    shot(viewer.page, tmp_path, "audit-refused")
    viewer.page.context.close()
    refusal = db.list_audit(live.coordinator.ledger, actor="vi", action="refused")[0]
    assert (refusal.via, refusal.detail_dict["action"]) == ("dashboard", "audit:read")
    page.goto(f"{live.url}/audit")  # ada is an owner: still reads it
    expect(table).to_contain_text("refused")


def test_times_show_in_the_viewers_zone_with_utc_on_hover(browser: Browser, live: Live) -> None:
    task_id, _ = task_waiting_on_plan(live.coordinator)
    task = db.get_task(live.coordinator.ledger, task_id)
    assert task is not None
    created = db.from_iso(task.created_at)
    in_tokyo = created + timedelta(hours=9)
    seen = watched_page(browser, LAPTOP, timezone_id="Asia/Tokyo")
    page = seen.page
    page.goto(f"{live.url}/task/{task_id}")
    stamp = page.locator(".meta time[data-local]")
    expect(stamp).to_have_text(f"{in_tokyo:%Y-%m-%d %H:%M} GMT+9")
    expect(stamp).to_have_attribute("title", f"{created:%Y-%m-%d %H:%M} UTC")
    expect(page.locator("table.steps time").first).to_have_text(re.compile(r"^\d\d:\d\d GMT\+9$"))

    zone = page.get_by_label("Times in")
    expect(zone.locator("option").first).to_have_text("your time zone (Asia/Tokyo)")
    zone.select_option("UTC")
    expect(stamp).to_have_text(f"{created:%Y-%m-%d %H:%M} UTC")
    page.reload()  # the choice is the viewer's, kept in this browser
    expect(stamp).to_have_text(f"{created:%Y-%m-%d %H:%M} UTC")
    expect(page.get_by_label("Times in")).to_have_value("UTC")
    assert seen.clean(), (seen.errors, seen.refused)
