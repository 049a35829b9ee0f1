"""The overview's filters and pages, and a build's output arriving live, in a real browser.

The build is the `command` builder running a shell script that prints a
line, then blocks reading a fifo the test holds, so each state the page must
show (one line, two lines, finished) is held by the test, not timed.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agent_team import db
from tests.e2e.browser_support import (
    LAPTOP,
    WAIT_MS,
    Live,
    browser,
    fits_the_viewport,
    live,
    shot,
    task_waiting_on_plan,
)
from tests.waiting import wait_for

__all__ = ["browser", "live", "live_settings"]  # fixtures, used by name

DASH = "\u2013"  # between the first and last row shown


@pytest.fixture
def gates(tmp_path: Path) -> list[Path]:
    """Two fifos the build script waits on in turn (see `open_gates` for the teardown)."""
    paths = [tmp_path / "gate-1", tmp_path / "gate-2"]
    for path in paths:
        os.mkfifo(path)
    return paths


@pytest.fixture
def open_gates(live: Live, gates: list[Path]) -> Iterator[list[Path]]:
    """The gates, opened on teardown before `live` stops: a blocked build would hold it up."""
    yield gates
    # The script may not have reached a gate yet; a writer per gate waits for it (one it
    # never reaches keeps a daemon thread waiting, which ends with the test process).
    for path in gates:
        threading.Thread(target=release, args=(path,), daemon=True).start()


@pytest.fixture
def live_settings(tmp_path: Path, gates: list[Path]) -> dict[str, Any]:
    script = tmp_path / "build.sh"
    script.write_text(
        "echo 'Installing dependencies…'\n"
        "echo 'collected 42 items'\n"
        f"read line < '{gates[0]}'\n"
        "echo 'tests/test_login.py ........ [100%]'\n"
        "echo '42 passed in 3.1s'\n"
        f"read line < '{gates[1]}'\n"
        "echo 'wrote docs/login.md'\n",
        encoding="utf-8",
    )
    return {"builder": "command", "build_command": f"sh '{script}'"}


def release(gate: Path) -> None:
    with gate.open("w") as fifo:
        fifo.write("go\n")


def _tasks(live: Live) -> None:
    """62 tasks written straight into the ledger (none runs: no start command is queued)."""
    ledger = live.coordinator.ledger
    for n in range(62):
        topic = ("Login", "Billing", "Search")[n % 3]
        task_id = f"t-{n:02d}"
        db.create_task(
            ledger,
            task_id=task_id,
            kind="confluence" if n % 5 == 0 else "code",
            title=f"{topic} fix {n:02d}" + (" (100% of users)" if n == 6 else ""),
            source="github" if n % 4 == 0 else "cli",
        )
        status = ("done", "failed", "waiting", "queued")[n % 4]
        db.set_task_status(ledger, task_id, status, phase="done" if status == "done" else "plan")


def _titles(page: Page) -> list[str]:
    return page.locator("[data-live=task-list] a.task-title").all_inner_texts()


def _live_refresh(page: Page) -> None:
    """What the page does every 10 s, asked for now: its visibility handler refreshes."""
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")


def test_filter_and_page_the_overview_in_the_browser(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    _tasks(live)
    page = browser.new_page(viewport=LAPTOP)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(live.url + "/")
    summary = page.locator(".paging-summary")
    expect(summary).to_have_text(f"showing 1{DASH}50 of 62")
    assert len(_titles(page)) == 50

    page.get_by_role("link", name="Older →").click()
    expect(page).to_have_url(live.url + "/?offset=50")
    expect(summary).to_have_text(f"showing 51{DASH}62 of 62")
    assert _titles(page)[-1] == "Login fix 00"
    page.go_back()
    expect(summary).to_have_text(f"showing 1{DASH}50 of 62")

    form = page.locator("form[data-filter-form]")
    form.get_by_label("Status").select_option("failed")
    form.get_by_label("Source").select_option("cli")
    form.get_by_label("Title contains").fill("login")
    form.get_by_role("button", name="Filter").click()
    # Blank fields stay out of the URL, so it is short enough to share.
    expect(page).to_have_url(live.url + "/?status=failed&source=cli&q=login")
    expect(summary).to_have_text(f"showing 1{DASH}5 of 5 matching (62 in all)")
    titles = _titles(page)
    assert titles == [f"Login fix {n:02d}" for n in (57, 45, 33, 21, 9)]
    expect(form.get_by_label("Status")).to_have_value("failed")
    expect(form.get_by_label("Title contains")).to_have_value("login")

    # The live refresh keeps the filters: a new matching task appears, others do not.
    db.create_task(live.coordinator.ledger, task_id="t-new", kind="code", title="LOGIN is slow")
    db.set_task_status(live.coordinator.ledger, "t-new", "failed", phase="plan")
    db.create_task(live.coordinator.ledger, task_id="t-off", kind="code", title="Login, queued")
    _live_refresh(page)
    expect(summary).to_have_text(f"showing 1{DASH}6 of 6 matching (64 in all)")
    assert _titles(page)[0] == "LOGIN is slow" and "Login, queued" not in _titles(page)
    assert fits_the_viewport(page)
    shot(page, tmp_path, "overview-filtered")

    # `%` is a character like any other in a search.
    page.goto(live.url + "/?q=100%25")
    assert _titles(page) == ["Login fix 06 (100% of users)"]

    page.goto(live.url + "/?q=no+such+task&kind=code")
    empty = page.locator("[data-live=task-list] .empty")
    expect(empty).to_contain_text("No tasks match these filters.")
    empty.get_by_role("link", name="Clear filters").click()
    expect(page).to_have_url(live.url + "/")
    expect(summary).to_have_text(f"showing 1{DASH}50 of 64")

    bad = page.goto(live.url + "/?status=sleeping")
    assert bad is not None and bad.status == 400
    expect(page.locator(".error-page")).to_contain_text("status: 'sleeping' is not one of")
    assert errors == []


def test_build_output_arrives_on_the_task_page_while_the_build_runs(
    browser: Browser, live: Live, open_gates: list[Path], tmp_path: Path
) -> None:
    gates = open_gates
    task_id, question_id = task_waiting_on_plan(live.coordinator)
    live.coordinator.answer(question_id, "approve", via="test:ada")
    log = tmp_path / "state" / "build-logs" / f"{task_id}.json"
    wait_for(
        lambda: log.exists() and "collected 42 items" in log.read_text(encoding="utf-8"),
        "the build's first lines in its log",
    )

    page = browser.new_page(viewport=LAPTOP)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live.url}/task/{task_id}")
    card = page.locator("[data-build-log]")
    output = card.locator("[data-log-text]")
    expect(output).to_contain_text("collected 42 items")
    expect(output).not_to_contain_text("42 passed")
    expect(card.locator(".build-log-state")).to_have_text(re.compile(r"^running for \d+ s$"))

    release(gates[0])  # the script prints two more lines and waits again
    expect(output).to_contain_text("42 passed in 3.1s", timeout=WAIT_MS)
    expect(card.locator(".build-log-state")).to_contain_text("running for")
    assert output.inner_text().count("collected 42 items") == 1  # appended, not repeated
    shot(page, tmp_path, "task-build-output-live")

    release(gates[1])  # the build ends; the task is committed and done
    expect(page.locator("[data-live=task-head] .chip")).to_have_text("done", timeout=WAIT_MS)
    expect(card.locator(".build-log-state")).to_contain_text(
        "the last build finished after", timeout=WAIT_MS
    )
    text = output.inner_text()
    assert text.index("collected 42 items") < text.index("42 passed") < text.index("wrote docs")
    assert "build finished after" in text.splitlines()[-1]
    assert errors == []
