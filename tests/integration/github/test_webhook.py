"""`POST /github/webhook` on a running daemon, and the webhook racing the poller."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_team import db
from agent_team.db.sqlite_ledger import storage_error
from agent_team.integrations.github.intake import issue_source, task_id_for
from agent_team.integrations.github.webhook import WebhookHandler, sign
from agent_team.service.daemon import Daemon
from tests.fakes.github_api import FakeGitHub
from tests.integration.github.conftest import (
    APP,
    TOKEN,
    MakeIntake,
    World,
    github_tasks,
    make_settings,
)
from tests.ledger_rows import Rows, stored_rows

SECRET = "It's a Secret to Everybody"


def issue_event(number: int, *, repo: str = APP, action: str = "opened") -> dict[str, Any]:
    return {
        "action": action,
        "issue": {
            "number": number,
            "title": f"Webhook issue {number}",
            "body": "From the webhook.",
            "state": "open",
            "html_url": f"https://github.example/{repo}/issues/{number}",
            "labels": [{"name": "agent-team"}],
        },
        "repository": {"full_name": repo},
        "sender": {"login": "someone"},
    }


def signed(
    payload: dict[str, Any] | bytes, event: str = "issues", delivery: str | None = None
) -> tuple[bytes, dict[str, str]]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return body, {
        "X-Hub-Signature-256": sign(SECRET, body),
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "Content-Type": "application/json",
    }


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Daemon, FakeGitHub]]:
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_repo(APP)
        settings = make_settings(
            tmp_path,
            fake,
            github_repos=APP,
            github_webhook_secret=SECRET,
            dashboard_port=0,
            github_poll_s=3600,
        )
        service = Daemon(settings)
        thread = threading.Thread(target=service.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while service._server is None or not service._server.started:
            assert time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.02)
        yield service, fake
        service.request_stop()
        thread.join(timeout=30)


def post(service: Daemon, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(service.url + "github/webhook", content=body, headers=headers, timeout=10)


def test_an_opened_issue_becomes_one_task_and_a_redelivery_is_a_duplicate(
    daemon: tuple[Daemon, FakeGitHub],
) -> None:
    service, _ = daemon
    body, headers = signed(issue_event(42))

    first = post(service, body, headers)
    again = post(service, body, headers)  # GitHub's redelivery keeps the delivery id
    other_delivery = post(service, *signed(issue_event(42, action="labeled")))

    assert first.status_code == 201 and first.json() == {"created": True}
    assert again.status_code == 200 and again.json() == {"duplicate": True}
    assert other_delivery.status_code == 200 and other_delivery.json() == {"created": False}
    conn = service.coordinator.ledger
    task = github_tasks(conn)[task_id_for(APP, 42)]
    assert task.title == "Webhook issue 42" and task.source_ref.endswith("/issues/42")
    assert db.event_seen(conn, source="github", event_id=headers["X-GitHub-Delivery"])


def test_bad_signatures_and_bad_bodies_store_nothing(daemon: tuple[Daemon, FakeGitHub]) -> None:
    service, _ = daemon
    conn = service.coordinator.ledger
    body, headers = signed(issue_event(7))
    forged = dict(headers, **{"X-Hub-Signature-256": sign("guess", body)})
    missing = {k: v for k, v in headers.items() if k != "X-Hub-Signature-256"}

    assert post(service, body, forged).status_code == 401
    assert post(service, body, missing).status_code == 401
    assert post(service, body + b" ", headers).status_code == 401  # body changed after signing
    assert not db.event_seen(conn, source="github", event_id=headers["X-GitHub-Delivery"])

    not_json, headers = signed(b"{not json")
    assert post(service, not_json, headers).status_code == 400
    for depth in (100, 5_000):  # signed, so it gets past the signature: still a 400, no 500
        nested, headers = signed(b'{"issue": ' + b"[" * depth + b"]" * depth + b"}")
        reply = post(service, nested, headers)
        assert reply.status_code == 400 and "nested too deeply" in reply.json()["error"]
    surrogate = json.dumps(issue_event(9)).replace("Webhook issue 9", "bad \\ud800").encode()
    reply = post(service, *signed(surrogate))
    assert reply.status_code == 400 and "surrogate" in reply.json()["error"]
    no_title = issue_event(8)
    del no_title["issue"]["title"]
    reply = post(service, *signed(no_title))
    assert reply.status_code == 400 and "issue.title" in reply.json()["error"]
    assert github_tasks(conn) == {}


def test_ping_other_events_and_unknown_repositories(daemon: tuple[Daemon, FakeGitHub]) -> None:
    service, _ = daemon
    assert post(service, *signed({"zen": "Keep it simple."}, event="ping")).status_code == 200
    assert post(service, *signed({"action": "created"}, event="star")).status_code == 202
    unknown = post(service, *signed(issue_event(3, repo="someone/else")))
    assert unknown.status_code == 202 and unknown.json()["ignored"] == "repository not configured"
    unlabelled = issue_event(4)
    unlabelled["issue"]["labels"] = [{"name": "bug"}]
    assert post(service, *signed(unlabelled)).status_code == 202
    closed = post(service, *signed(issue_event(5, action="closed")))
    assert closed.status_code == 202
    assert github_tasks(service.coordinator.ledger) == {}


def test_healthz_reports_the_last_poll(daemon: tuple[Daemon, FakeGitHub]) -> None:
    service, fake = daemon
    deadline = time.monotonic() + 20
    while True:
        facts = httpx.get(service.url + "healthz", timeout=10).json()["facts"]
        if "github_last_poll" in facts:
            break
        assert time.monotonic() < deadline, "no poll reported in /healthz"
        time.sleep(0.05)
    assert facts["github_last_poll"]["polls"] == 1
    assert facts["github_last_poll"]["errors"] == []
    assert facts["intake_polls"] == 1
    assert fake.seen("GET", f"/repos/{APP}/issues")


def test_no_secret_configured_means_503_before_anything(
    make_intake: MakeIntake, world: World
) -> None:
    intake, starter = make_intake()
    body, headers = signed(issue_event(1))
    reply = WebhookHandler(intake, None).handle({k.lower(): v for k, v in headers.items()}, body)
    assert reply.status == 503
    assert not db.event_seen(intake.ledger, source="github", event_id=headers["X-GitHub-Delivery"])
    assert starter.calls == []


def test_the_webhook_racing_the_poller_makes_one_task_per_issue(
    make_intake: MakeIntake, world: World
) -> None:
    poller, poller_starter = make_intake(github_repos=APP)
    hooked, hook_starter = make_intake(github_repos=APP)  # another connection, same ledger
    handler = WebhookHandler(hooked, SECRET)
    # The poller ingests newest first, the webhooks oldest first: they meet in the middle.
    numbers = sorted(world.app_labelled)
    issues = {n: world.fake.repos[APP].issues[n] for n in numbers}
    barrier = threading.Barrier(5)
    ingesting = threading.Event()  # the poller has its pages and starts its first issue
    hook_won = threading.Event()  # a webhook started an issue
    # A quarter of the way in, the poller waits for the webhooks to win one: on a fast
    # machine it could otherwise take every issue before the first webhook is handled.
    quarter = len(numbers) // 4

    def poller_start(**request: Any) -> str:
        ingesting.set()
        if len(poller_starter.calls) == quarter:
            hook_won.wait(timeout=30)
        return poller_starter(**request)

    def hook_start(**request: Any) -> str:
        task_id = hook_starter(**request)
        hook_won.set()
        return task_id

    poller.start_task = poller_start
    hooked.start_task = hook_start
    replies: list[int] = []
    errors: list[BaseException] = []

    def deliver(chunk: list[int]) -> None:
        try:
            barrier.wait(timeout=10)
            assert ingesting.wait(timeout=30)
            for number in chunk:
                event = issue_event(number)
                event["issue"]["title"] = issues[number]["title"]
                event["issue"]["html_url"] = issues[number]["html_url"]
                body, headers = signed(event)
                reply = handler.handle({k.lower(): v for k, v in headers.items()}, body)
                replies.append(reply.status)
        except BaseException as exc:
            errors.append(exc)

    def poll() -> None:
        try:
            barrier.wait(timeout=10)
            poller.poll_once()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=poll)] + [
        threading.Thread(target=deliver, args=(numbers[i::4],)) for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert set(replies) <= {200, 201} and len(replies) == len(numbers)
    calls = poller_starter.calls + hook_starter.calls
    assert len(calls) == len(set(calls))  # no issue was started twice
    assert poller_starter.calls and hook_starter.calls  # both sides won some
    tasks = github_tasks(poller.ledger)
    assert {task_id_for(APP, n) for n in numbers} <= set(tasks)
    assert len(tasks) == len(world.app_labelled)


def hook(handler: WebhookHandler, payload: dict[str, Any], delivery: str) -> Any:
    body, headers = signed(payload, delivery=delivery)
    return handler.handle({k.lower(): v for k, v in headers.items()}, body)


def test_a_failed_start_lets_githubs_redelivery_through(
    make_intake: MakeIntake, world: World
) -> None:
    intake, starter = make_intake(github_repos=APP)
    handler = WebhookHandler(intake, SECRET)
    number = world.app_labelled[0]
    starter.fail_for.add(task_id_for(APP, number))
    delivery = str(uuid.uuid4())

    assert hook(handler, issue_event(number), delivery).status == 500
    assert not db.event_seen(intake.ledger, source="github", event_id=delivery)
    again = hook(handler, issue_event(number), delivery)  # GitHub's redelivery, same id

    assert again.status == 201 and again.body == {"created": True}
    assert task_id_for(APP, number) in github_tasks(intake.ledger)
    assert hook(handler, issue_event(number), delivery).body == {"duplicate": True}


def test_a_ledger_that_cannot_be_written_is_503_in_one_line_and_the_redelivery_acts(
    make_intake: MakeIntake, world: World, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    intake, _ = make_intake(github_repos=APP)
    handler = WebhookHandler(intake, SECRET)
    number = world.app_labelled[0]
    delivery = str(uuid.uuid4())
    body, headers = signed(issue_event(number), delivery=delivery)
    lowered = {k.lower(): v for k, v in headers.items()}
    full = sqlite3.OperationalError("database or disk is full")  # what SQLite says then

    def disk_full(*args: Any, **kwargs: Any) -> bool:
        raise storage_error(full, intake.ledger.path)

    with monkeypatch.context() as patched, caplog.at_level(logging.INFO):
        patched.setattr(db, "claim_event", disk_full)
        reply = handler.reply_to(lowered, body)

    # An outage, like the dashboard API's: 503 and one line, not a 500 with a traceback.
    assert reply.status == 503 and "unavailable" in reply.body["error"]
    (line,) = [r for r in caplog.records if r.name.endswith("webhook")]
    assert line.exc_info is None and "disk is full" in line.getMessage()
    again = handler.reply_to(lowered, body)  # GitHub's redelivery, same id, room again
    assert again.status == 201 and task_id_for(APP, number) in github_tasks(intake.ledger)


def test_a_poll_during_a_failing_webhook_start_does_not_hide_the_issue(
    make_intake: MakeIntake, world: World
) -> None:
    poller, _ = make_intake(github_repos=APP)
    hooked, _ = make_intake(github_repos=APP)
    number = world.app_labelled[0]

    def start_then_fail(**request: Any) -> str:
        poller.poll_once()  # sees the webhook's claim: not new, not failed
        raise RuntimeError("the ledger said no this time")

    hooked.start_task = start_then_fail
    reply = hook(WebhookHandler(hooked, SECRET), issue_event(number), str(uuid.uuid4()))
    assert reply.status == 500
    assert task_id_for(APP, number) not in github_tasks(poller.ledger)
    cursor = db.get_cursor(poller.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.etag is None

    report = poller.poll_once()  # a full read, not a 304 that hides the issue forever

    assert report.not_modified == 0 and report.tasks_created == 1
    assert task_id_for(APP, number) in github_tasks(poller.ledger)


def test_a_webhook_start_failing_while_the_poller_is_mid_pass_does_not_hide_the_issue(
    make_intake: MakeIntake, world: World
) -> None:
    poller, poller_starter = make_intake(github_repos=APP)
    hooked, _ = make_intake(github_repos=APP)
    poller.poll_once()
    older = world.fake.add_issue(APP, labels=("agent-team",))
    newer = world.fake.add_issue(APP, labels=("agent-team",))  # polled first (sort=updated)
    claimed, go = threading.Event(), threading.Event()

    def held_then_fail(**request: Any) -> str:
        claimed.set()
        assert go.wait(timeout=30)
        raise RuntimeError("the ledger said no this time")

    hooked.start_task = held_then_fail
    replies: list[int] = []
    webhook = threading.Thread(
        target=lambda: replies.append(
            hook(WebhookHandler(hooked, SECRET), issue_event(newer), str(uuid.uuid4())).status
        )
    )

    def poller_start(**request: Any) -> str:
        if request["task_id"] == task_id_for(APP, older):
            go.set()  # the poller has passed `newer` (claimed): now the webhook fails
            webhook.join(timeout=30)
        return poller_starter(**request)

    poller.start_task = poller_start
    webhook.start()
    assert claimed.wait(timeout=30)
    poller.poll_once()
    assert replies == [500]

    report = poller.poll_once()

    assert report.not_modified == 0 and report.tasks_created == 1
    assert task_id_for(APP, newer) in github_tasks(poller.ledger)


def test_tasks_the_webhook_creates_count_in_intake_status(
    make_intake: MakeIntake, world: World
) -> None:
    intake, _ = make_intake(github_repos=APP)
    handler = WebhookHandler(intake, SECRET)
    number = world.app_labelled[0]

    assert hook(handler, issue_event(number), str(uuid.uuid4())).status == 201
    assert hook(handler, issue_event(number, action="labeled"), str(uuid.uuid4())).status == 200

    cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.tasks_created == 1
    assert cursor.polls == 0 and cursor.last_poll_at is None  # a webhook is not a poll
    intake.poll_once()  # the poller counts only the tasks it made
    cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.tasks_created == len(world.app_labelled)
    assert cursor.polls == 1


# -- forged and replayed deliveries (#17: nothing stored, the log bounded) -----------------------

MARKER = "Zq9-body-marker"  # in the body: it must never reach the log


def marked_event(number: int) -> dict[str, Any]:
    event = issue_event(number)
    event["issue"]["body"] = f"From the webhook. {MARKER}"
    return event


def forge(case: str, body: bytes, headers: dict[str, str]) -> dict[str, str]:
    """GitHub signs the body only (no timestamp): these are the ways a signature is wrong."""
    good = headers["X-Hub-Signature-256"]
    without = {k: v for k, v in headers.items() if k != "X-Hub-Signature-256"}
    return {
        "wrong secret": {**headers, "X-Hub-Signature-256": sign("guess", body)},
        "no signature": without,
        "empty signature": {**headers, "X-Hub-Signature-256": ""},
        "wrong prefix": {**headers, "X-Hub-Signature-256": "sha1=" + good.split("=", 1)[1]},
        "no prefix": {**headers, "X-Hub-Signature-256": good.split("=", 1)[1]},
        "not hex": {**headers, "X-Hub-Signature-256": "sha256=" + "zz" * 32},
        "other body": {**headers, "X-Hub-Signature-256": sign(SECRET, body + b" ")},
    }[case]


def delivered(service: Daemon, number: int) -> tuple[bytes, dict[str, str], Rows]:
    """One signed delivery of issue `number`, its task run to its question; what is stored."""
    body, headers = signed(marked_event(number))
    assert post(service, body, headers).status_code == 201
    settled(service, number)
    return body, headers, stored_rows(service.coordinator.ledger)


def settled(service: Daemon, number: int) -> None:
    """Wait until the daemon has run the issue's task to its clarify question and delivered it."""
    conn = service.coordinator.ledger
    task_id = task_id_for(APP, number)
    deadline = time.monotonic() + 30
    while not any(q.posted_at for q in db.list_questions(conn, status="open", thread_id=task_id)):
        assert time.monotonic() < deadline, "the task never asked its question"
        time.sleep(0.02)
    assert service.coordinator.wait_idle(30)


def webhook_lines(service: Daemon, caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the webhook and the intake logged on requests' threads.

    The daemon's loops (the poller's first pass among them) log on their own clocks and
    threads. No line of anyone's may carry the body.
    """
    every = [r.getMessage() for r in caplog.records]
    assert not [line for line in every if MARKER in line], every
    loops = {f"agent-team-{loop.name}" for loop in service.loops}
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("agent_team.integrations") and r.threadName not in loops
    ]


@pytest.mark.parametrize(
    "case",
    [
        "wrong secret",
        "no signature",
        "empty signature",
        "wrong prefix",
        "no prefix",
        "not hex",
        "other body",
    ],
)
def test_a_forged_delivery_is_401_stores_nothing_and_logs_one_short_line(
    daemon: tuple[Daemon, FakeGitHub], caplog: pytest.LogCaptureFixture, case: str
) -> None:
    service, _ = daemon
    conn = service.coordinator.ledger
    body, headers = signed(marked_event(11))
    before = stored_rows(conn)
    with caplog.at_level(logging.INFO):
        for _ in range(5):  # a source that keeps trying is summed up, not logged each time
            assert post(service, body, forge(case, body, headers)).status_code == 401
    assert stored_rows(conn) == before
    lines = webhook_lines(service, caplog)
    assert len(lines) <= 1, lines
    assert all(len(line) < 300 for line in lines), lines


def test_a_replayed_delivery_is_a_duplicate_and_changes_nothing(
    daemon: tuple[Daemon, FakeGitHub], caplog: pytest.LogCaptureFixture
) -> None:
    """The exact bytes and headers again, as someone who captured them would send them."""
    service, _ = daemon
    conn = service.coordinator.ledger
    body, headers, before = delivered(service, 12)
    with caplog.at_level(logging.INFO):
        for _ in range(5):
            replay = post(service, body, headers)
            assert (replay.status_code, replay.json()) == (200, {"duplicate": True})
    assert stored_rows(conn) == before
    lines = webhook_lines(service, caplog)
    assert all(len(line) < 300 for line in lines), lines
    assert len(lines) <= 5, lines


def test_a_replayed_body_under_a_new_delivery_id_starts_nothing(
    daemon: tuple[Daemon, FakeGitHub],
) -> None:
    """GitHub's signature does not cover `X-GitHub-Delivery`, so a captured body can come
    back under a fresh id: the issue's claim makes it a no-op; only the id is recorded."""
    service, _ = daemon
    conn = service.coordinator.ledger
    body, headers, before = delivered(service, 13)
    replay = post(service, body, {**headers, "X-GitHub-Delivery": str(uuid.uuid4())})
    assert (replay.status_code, replay.json()) == (200, {"created": False})
    after = stored_rows(conn)
    assert {t: rows for t, rows in after.items() if t != "seen_events"} == {
        t: rows for t, rows in before.items() if t != "seen_events"
    }
    assert len(after["seen_events"]) == len(before["seen_events"]) + 1
