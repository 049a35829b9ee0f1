"""The dashboard in a real browser: see a task, open it, approve its plan, watch it finish.

Runs Debian's chromium (`/usr/bin/chromium`) through Playwright against a real
uvicorn server and a real coordinator serving in threads, so the page's
JavaScript (countdowns, live refresh, the answer form's `fetch` with the
bearer token) is exercised end to end. Screenshots of each page at laptop
and phone widths land in the test's `tmp_path` for a person to look at.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import Browser, Page, expect, sync_playwright

from agent_team import db
from agent_team.config import load_settings
from agent_team.coordinator import Coordinator
from agent_team.dashboard import DashboardContext, create_app
from agent_team.wiring import build_coordinator

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "t0k3n"
TITLE = "Remember the email on the login page"
BODY = (
    "The login page should remember the user's email address between visits.\n"
    "- Store the email in a cookie after a successful login\n"
    "- Prefill the email field when the cookie is present\n"
    "- Add a test that covers both paths\n"
)
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# Playwright's own waits (expect) poll; this bounds each of them.
WAIT_MS = 30_000


def wait_for(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached before the deadline")
        time.sleep(0.02)


@dataclass
class Live:
    url: str
    coordinator: Coordinator


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    """A coordinator serving its inbox and a uvicorn server with the dashboard, in threads."""
    for name in list(os.environ):
        if name.startswith("AGENT_TEAM_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no developer's `.env` leaks into the settings
    settings = load_settings(
        db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state", dashboard_token=TOKEN
    )
    coordinator = build_coordinator(settings)
    stop = threading.Event()
    worker = threading.Thread(
        target=coordinator.serve, args=(stop,), kwargs={"poll_s": 0.2}, daemon=True
    )
    worker.start()
    app = create_app(DashboardContext(settings, coordinator=coordinator))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # an ephemeral port, handed to uvicorn already bound
    port = sock.getsockname()[1]
    # log_config=None: leave the test process's logging alone.
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off"))
    web = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    web.start()
    try:
        wait_for(lambda: server.started or not web.is_alive())
        assert server.started, "uvicorn did not start"
        yield Live(url=f"http://127.0.0.1:{port}", coordinator=coordinator)
    finally:
        server.should_exit = True
        web.join(timeout=30)
        stop.set()
        coordinator.wake.set()
        worker.join(timeout=60)
        coordinator.close()
        sock.close()
    assert not web.is_alive() and not worker.is_alive()


@pytest.fixture
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"no chromium at {CHROMIUM}; install Debian's: apt-get install chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _task_waiting_on_plan(coordinator: Coordinator) -> tuple[str, str]:
    """Submit the task and wait until it waits on its plan question; (task id, question id)."""
    task_id = coordinator.start_task(title=TITLE, body=BODY)

    def open_plan_question() -> bool:
        task = db.get_task(coordinator.ledger, task_id)
        if task is None or task.status in ("failed", "cancelled", "done"):
            raise AssertionError(f"task {task_id} ended before its plan question: {task}")
        questions = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
        return task.status == "waiting" and any(q.kind == "plan_decision" for q in questions)

    wait_for(open_plan_question)
    (question,) = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
    return task_id, question.question_id


def _fits_the_viewport(page: Page) -> bool:
    """No sideways scrolling: not of the page, and not inside any table's box either."""
    return bool(
        page.evaluate(
            """() => document.documentElement.scrollWidth <= window.innerWidth + 1 &&
                [...document.querySelectorAll('.table-wrap')]
                    .every(box => box.scrollWidth <= box.clientWidth + 1)"""
        )
    )


def _timeline_fills_its_bar(page: Page) -> bool:
    """The drawn steps span the whole bar, each at least a few pixels wide."""
    return bool(
        page.evaluate(
            """() => {
                const bar = document.querySelector('.timeline');
                const segs = [...bar.querySelectorAll('.seg')].map(s => s.getBoundingClientRect());
                const box = bar.getBoundingClientRect();
                return segs.every(r => r.width >= 8) &&
                    Math.abs(segs[0].left - box.left) < 1 &&
                    Math.abs(segs[segs.length - 1].right - box.right) < 1;
            }"""
        )
    )


def test_approve_a_plan_in_the_browser_and_watch_the_task_finish(
    browser: Browser, live: Live, tmp_path: Path
) -> None:
    task_id, question_id = _task_waiting_on_plan(live.coordinator)
    page = browser.new_page(viewport=LAPTOP)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(live.url + "/")
    tasks_table = page.locator("table")
    expect(tasks_table.get_by_role("link", name=TITLE)).to_be_visible()
    expect(tasks_table.locator(".chip-waiting")).to_have_text("waiting")
    open_questions = page.locator(".qlist")
    expect(open_questions).to_contain_text(TITLE)
    expect(open_questions.locator(".countdown")).to_have_text(re.compile(r"^in \d+(d|h)"))
    page.screenshot(path=tmp_path / "overview.png", full_page=True)

    tasks_table.get_by_role("link", name=TITLE).click()
    expect(page).to_have_url(re.compile(rf"/task/{task_id}$"))
    expect(page.locator("h1")).to_have_text(TITLE)
    expect(page.locator(".plan")).to_contain_text("Steps")
    expect(page.locator(".timeline .seg.ph-plan_review.st-waiting")).to_have_count(1)
    assert _timeline_fills_its_bar(page)
    form = page.locator("form[data-answer-form]")
    form.get_by_label("Answer").fill("approve")
    form.get_by_label("Your name").fill("Ada")
    form.get_by_label("Dashboard token").fill(TOKEN)
    page.screenshot(path=tmp_path / "task-waiting.png", full_page=True)

    form.get_by_role("button", name="Send answer").click()
    expect(form.locator(".form-result")).to_contain_text("Accepted", timeout=WAIT_MS)
    # The page reloads, then its live refresh shows the run going on to the end.
    expect(page.locator("[data-live=task-head] .chip")).to_have_text("done", timeout=WAIT_MS)
    questions = page.locator("[data-live=questions]")
    expect(questions).to_contain_text("answered by Ada via dashboard")
    expect(questions.locator("form")).to_have_count(0)
    expect(page.locator(".timeline .seg.ph-build")).to_have_count(1)
    page.screenshot(path=tmp_path / "task-done.png", full_page=True)

    answered = db.get_question(live.coordinator.ledger, question_id)
    assert answered is not None and answered.answered_via == "dashboard:Ada"
    # The token is remembered for the next answer, in this browser only.
    assert page.evaluate("localStorage.getItem('agent-team.dashboard-token')") == TOKEN
    assert errors == []

    phone = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
    for name, path in (("overview", "/"), ("task", f"/task/{task_id}")):
        phone.goto(live.url + path)
        expect(phone.locator("h1")).to_be_visible()
        phone.screenshot(path=tmp_path / f"phone-{name}.png", full_page=True)
        assert _fits_the_viewport(phone), f"the {name} page scrolls sideways at 390 px"
    phone.close()
    page.close()


def test_typing_survives_a_refresh_and_a_wrong_token_is_reported_inline(
    browser: Browser, live: Live
) -> None:
    task_id, question_id = _task_waiting_on_plan(live.coordinator)
    page = browser.new_page(viewport=LAPTOP)
    page.clock.install()  # so the test can move the 10 s refresh timer on instead of waiting
    page.goto(f"{live.url}/task/{task_id}")
    form = page.locator("form[data-answer-form]")
    answer = form.get_by_label("Answer")
    answer.fill("revise split the cookie step in two")
    form.get_by_label("Your name").fill("Ada")
    form.get_by_label("Dashboard token").fill("not-the-token")

    page.locator("h1").click()  # focus leaves the form: only its typed text protects it now
    stamp = page.locator(".live-label")
    expect(stamp).to_contain_text("live")
    page.clock.run_for(11_000)
    expect(stamp).to_contain_text("updated")  # a refresh happened...
    expect(answer).to_have_value("revise split the cookie step in two")  # ...around the form

    form.get_by_role("button", name="Send answer").click()
    result = form.locator(".form-result")
    expect(result).to_contain_text("the bearer token is wrong", timeout=WAIT_MS)
    expect(result).to_have_class(re.compile(r"\berror\b"))
    expect(answer).to_have_value("revise split the cookie step in two")
    assert page.evaluate("localStorage.getItem('agent-team.dashboard-token')") is None
    question = db.get_question(live.coordinator.ledger, question_id)
    assert question is not None and question.status == "open"

    # The deadline counts down in the browser, from the ISO time in `data-deadline`.
    countdown = page.locator("[data-live=questions] .countdown")
    expect(countdown).to_have_text(re.compile(r"^in 2d 23h$"))
    page.clock.fast_forward(73 * 3600 * 1000)  # ms: past the 72 h plan deadline
    expect(countdown).to_have_text(re.compile(r"^overdue by 1h 0\dm$"))
    expect(countdown).to_have_class(re.compile(r"\boverdue\b"))
    page.close()
