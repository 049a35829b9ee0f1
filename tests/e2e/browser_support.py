"""What every real-browser test shares: a live coordinator + dashboard, chromium, and waits.

`live` serves a coordinator and the dashboard in threads on an ephemeral port;
a test module overrides the `live_settings` fixture to change the settings
(named tokens, limits). `shot()` saves a screenshot in the test's folder and,
when `AGENT_TEAM_SCREENSHOT_DIR` is set, a copy there for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from playwright.sync_api import Browser, Page, sync_playwright

from agent_team import db
from agent_team.config import load_settings
from agent_team.coordinator import Coordinator
from agent_team.dashboard import DashboardContext, create_app
from agent_team.service.wiring import build_coordinator
from tests.waiting import wait_for

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


@dataclass
class Live:
    url: str
    coordinator: Coordinator


@pytest.fixture
def live_settings() -> dict[str, Any]:
    """Extra settings for `live`; a test module overrides this fixture to change them."""
    return {}


@pytest.fixture
def live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live_settings: dict[str, Any]
) -> Iterator[Live]:
    """A coordinator serving its inbox and a uvicorn server with the dashboard, in threads."""
    for name in list(os.environ):
        if name.startswith("AGENT_TEAM_") and name != "AGENT_TEAM_SCREENSHOT_DIR":  # not a setting
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no developer's `.env` leaks into the settings
    settings = load_settings(
        db_path=tmp_path / "agent-team.db",
        state_dir=tmp_path / "state",
        # Builds unsandboxed, as in every test but the sandbox's (tests/conftest.py).
        **{"dashboard_token": TOKEN, "sandbox": "none", **live_settings},
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
        wait_for(lambda: server.started or not web.is_alive(), "uvicorn to start")
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


def task_waiting_on_plan(coordinator: Coordinator) -> tuple[str, str]:
    """Submit the task and wait until it waits on its plan question; (task id, question id)."""
    task_id = coordinator.start_task(title=TITLE, body=BODY)

    def open_plan_question() -> bool:
        task = db.get_task(coordinator.ledger, task_id)
        if task is None or task.status in ("failed", "cancelled", "done"):
            raise AssertionError(f"task {task_id} ended before its plan question: {task}")
        questions = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
        return task.status == "waiting" and any(q.kind == "plan_decision" for q in questions)

    wait_for(open_plan_question, f"task {task_id} to wait on its plan question")
    (question,) = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
    return task_id, question.question_id


def fits_the_viewport(page: Page) -> bool:
    """No sideways scrolling: not of the page, and not inside any table's box either."""
    return bool(
        page.evaluate(
            """() => document.documentElement.scrollWidth <= window.innerWidth + 1 &&
                [...document.querySelectorAll('.table-wrap')]
                    .every(box => box.scrollWidth <= box.clientWidth + 1)"""
        )
    )


def timeline_fills_its_bar(page: Page) -> bool:
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


def shot(page: Page, tmp_path: Path, name: str) -> None:
    """A full-page screenshot in the test's folder, copied to AGENT_TEAM_SCREENSHOT_DIR if set."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=path, full_page=True)
    keep = os.environ.get("AGENT_TEAM_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(keep) / path.name)


@dataclass
class Watched:
    """A browser page with what went wrong in it: script errors and what the CSP blocked."""

    page: Page
    errors: list[str]
    refused: list[str]

    def clean(self) -> bool:
        return not self.errors and not self.refused


def watched_page(browser: Browser, viewport: dict[str, int], **options: Any) -> Watched:
    """A page in a context of its own (its own cookies), watched for errors and CSP refusals."""
    context = browser.new_context(viewport=viewport, **options)  # type: ignore[arg-type]
    page = context.new_page()
    seen = Watched(page, [], [])
    page.on("pageerror", lambda exc: seen.errors.append(str(exc)))
    page.on(
        "console",
        lambda message: (
            seen.refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return seen


def sign_in_at(page: Page, url: str, token: str, next_path: str) -> None:
    """Sign in on the login page and come back to `next_path`."""
    from playwright.sync_api import expect

    page.goto(f"{url}/login?next={next_path}")
    page.get_by_label("Dashboard token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(".topbar .session")).to_contain_text("signed in as")


def phone_width_fits(page: Page) -> bool:
    """At PHONE size nothing is wider than the 390 px viewport: no sideways scroll."""
    return bool(page.evaluate("() => document.documentElement.scrollWidth <= 390"))
