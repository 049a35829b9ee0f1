"""A seeded ledger and a dashboard app over it, with every timestamp pinned.

The `db` functions stamp rows with the wall clock, so the seed writes through
them and then pins `entered_at` / `exited_at` / `created_at` / `done_at` with
plain UPDATEs on its own connection; `record_usage`, `record_delivery` and
`answer_question` take their moments directly. With the app's clock fixed
at `NOW`, every duration, age and per-row cost in the API is exact.

The story (offsets in seconds from `T0`):

- `tA` (code, done): clarify, plan, a revise loop (plan entered twice,
  plan_review six times), build, done with a build note. Two answered plan
  questions whose resumes finished 31 s and 94 s after the answers.
  A plan call recorded exactly at the first plan row's exit belongs to no row.
- `tB` (code, waiting): an open clarify question posted at 5020; its last
  transition row is still open.
- `tC` (confluence, queued), newest; `tD` (code, failed) the day before, with
  spend on that day.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.testclient import TestClient

from agent_team import db
from agent_team.config import Settings, load_settings
from agent_team.dashboard import DashboardContext, create_app
from agent_team.requests.task_requests import TaskRequests

T0 = datetime(2026, 3, 2, 10, 0, 0, tzinfo=UTC)
NOW = T0 + timedelta(seconds=7200)
TOKEN = "s3cret-dashboard-token"
BUDGET_USD = 5.0
TOKEN_CAP = 10_000
BUILD_BRANCH = "agent-team/tA"
BUILD_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def at(offset_s: float) -> datetime:
    return T0 + timedelta(seconds=offset_s)


def iso(offset_s: float) -> str:
    return db.to_iso(at(offset_s))


TERMINAL = ("done", "failed", "cancelled")

# (to_phase, status, entered, exited) for tA, in order; None: still open.
TA_JOURNEY: list[tuple[str, str, float, float | None]] = [
    ("intake", "running", 0, 10),
    ("clarify", "running", 10, 70),
    ("plan", "running", 70, 130),
    ("plan_review", "running", 130, 131),
    ("plan_review", "waiting", 131, 1931),
    ("plan_review", "running", 1931, 1932),
    ("plan", "running", 1932, 1992),
    ("plan_review", "running", 1992, 1993),
    ("plan_review", "waiting", 1993, 3793),
    ("plan_review", "running", 3793, 3794),
    ("build", "running", 3794, 4394),
    ("done", "done", 4394, 4394),
]
TB_JOURNEY: list[tuple[str, str, float, float | None]] = [
    ("intake", "running", 5000, 5010),
    ("clarify", "running", 5010, 5020),
    ("clarify", "waiting", 5020, None),
]
# (task, stage, billing mode, at, input tokens, output tokens, usd)
USAGE: list[tuple[str, str, str, float, int, int, float]] = [
    ("tA", "clarify", "api", 20, 100, 50, 0.25),
    ("tA", "plan", "api", 80, 200, 100, 0.5),
    ("tA", "plan", "api", 130, 10, 6, 0.0625),  # at the row's exit: in no window
    ("tA", "plan", "api", 1950, 40, 10, 0.125),
    ("tA", "build", "subscription", 4000, 1000, 500, 1.0),
    ("tB", "clarify", "api", 5015, 20, 5, 0.03125),
    ("tD", "plan", "api", -86400 + 60, 4, 3, 2.0),  # the day before
]


@dataclass
class Seeded:
    path: Path
    transition_ids: dict[str, list[int]] = field(default_factory=dict)


def _journey(
    conn: db.Ledger, task_id: str, rows: list[tuple[str, str, float, float | None]]
) -> list[int]:
    ids: list[int] = []
    for phase, status, _, _ in rows:
        if status in TERMINAL:
            # As the pipeline does: the `done` node enters its phase running, then the
            # coordinator closes that row with the terminal status.
            ids.append(
                db.record_transition(conn, thread_id=task_id, to_phase=phase, status="running")
            )
            assert db.close_terminal(conn, thread_id=task_id, status=status)
        else:
            ids.append(db.record_transition(conn, thread_id=task_id, to_phase=phase, status=status))
    for transition_id, (_, _, entered, exited) in zip(ids, rows, strict=True):
        conn.execute(
            "UPDATE task_transitions SET entered_at = ?, exited_at = ? WHERE transition_id = ?",
            (iso(entered), iso(exited) if exited is not None else None, transition_id),
        )
    return ids


def _task(
    conn: db.Ledger,
    task_id: str,
    *,
    kind: str,
    status: str,
    phase: str,
    created: float,
    updated: float,
    source: str = "cli",
    source_ref: str | None = None,
) -> None:
    db.create_task(
        conn,
        task_id=task_id,
        kind=kind,
        title=f"Task {task_id}",
        body=f"Body of {task_id}",
        source=source,
        source_ref=source_ref,
    )
    conn.execute(
        "UPDATE tasks SET status = ?, phase = ?, created_at = ?, updated_at = ? WHERE id = ?",
        (status, phase, iso(created), iso(updated), task_id),
    )


def _question(
    conn: db.Ledger,
    task_id: str,
    turn: int,
    kind: str,
    *,
    posted: float,
    deadline: float,
    text: str,
    answer: tuple[str, str, float, float] | None = None,
) -> str:
    """An asked question; `answer` = (answer text as JSON, via, answered at, resume done at)."""
    question_id = f"{task_id}:q{turn}"
    db.ensure_question(
        conn,
        question_id=question_id,
        thread_id=task_id,
        turn=turn,
        kind=kind,
        transport="local",
        deadline_at=at(deadline),
        payload_json=json.dumps({"text": text, "title": f"Task {task_id}"}),
    )
    db.record_delivery(
        conn, question_id=question_id, channel_ref=f"local:{question_id}", posted_at=at(posted)
    )
    if answer is not None:
        answer_json, via, answered, done = answer
        assert db.answer_question(
            conn,
            question_id=question_id,
            answer_json=answer_json,
            answered_via=via,
            answered_at=at(answered),
        )
        command_id = db.resume_command_id(question_id)
        assert db.claim_commands(conn, consumer="seed", limit=1, lease_s=60)[0].command_id == (
            command_id
        )
        assert db.complete_command(conn, command_id=command_id)
        conn.execute(
            "UPDATE commands SET done_at = ? WHERE command_id = ?", (iso(done), command_id)
        )
    return question_id


def seed_ledger(path: Path) -> Seeded:
    """Write the story in the module docstring into a fresh ledger at `path`."""
    db.init_db(path)
    conn = db.open_ledger(path)
    try:
        seeded = Seeded(path=path)
        _task(
            conn,
            "tA",
            kind="code",
            status="done",
            phase="done",
            created=0,
            updated=4394,
            source="github:acme/app",
            source_ref="https://github.com/acme/app/issues/7",
        )
        _task(
            conn, "tB", kind="code", status="waiting", phase="clarify", created=5000, updated=5020
        )
        _task(
            conn,
            "tC",
            kind="confluence",
            status="queued",
            phase="intake",
            created=6000,
            updated=6000,
        )
        _task(
            conn,
            "tD",
            kind="code",
            status="failed",
            phase="plan",
            created=-86400,
            updated=-86400 + 70,
        )
        seeded.transition_ids["tA"] = _journey(conn, "tA", TA_JOURNEY)
        conn.execute(
            "UPDATE task_transitions SET note = ? WHERE transition_id = ?",
            (f"branch {BUILD_BRANCH} at {BUILD_COMMIT}", seeded.transition_ids["tA"][-1]),
        )
        seeded.transition_ids["tB"] = _journey(conn, "tB", TB_JOURNEY)
        for task_id, stage, mode, moment, tokens_in, tokens_out, usd in USAGE:
            assert db.record_usage(
                conn,
                thread_id=task_id,
                stage=stage,
                model="anthropic:claude-test",
                billing_mode=mode,
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                usd_cost=usd,
                recorded_at=at(moment),
            )
        _question(
            conn,
            "tA",
            1,
            "plan_decision",
            posted=131,
            deadline=131 + 72 * 3600,
            text="Review the plan for: Task tA",
            answer=('{"decision": "revise", "text": "add tests"}', "cli:alice", 1900, 1931),
        )
        _question(
            conn,
            "tA",
            2,
            "plan_decision",
            posted=1993,
            deadline=1993 + 72 * 3600,
            text="Review the plan for: Task tA",
            answer=('{"decision": "approve", "text": ""}', "slack:U2", 3700, 3794),
        )
        _question(
            conn,
            "tB",
            1,
            "clarify",
            posted=5020,
            deadline=5020 + 24 * 3600,
            text="Which login page?",
        )
    finally:
        conn.close()
    return seeded


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AGENT_TEAM_* variables or `.env` of the developer's shell leak into Settings."""
    for name in list(os.environ):
        if name.startswith("AGENT_TEAM_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def _seed_template(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed_ledger(tmp_path_factory.mktemp("seed") / "agent-team.db")


@pytest.fixture
def seeded(_seed_template: Seeded, tmp_path: Path) -> Seeded:
    """A private copy of the seeded ledger (tests may write to it)."""
    path = tmp_path / "ledger" / "agent-team.db"
    path.parent.mkdir()
    _copy(_seed_template.path, path)
    return Seeded(path=path, transition_ids=_seed_template.transition_ids)


def _copy(source: Path, target: Path) -> None:
    # The SQLite backup API copies a consistent image, WAL content included.
    src = sqlite3.connect(source)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def make_settings(path: Path, *, token: str | None = TOKEN, **overrides: Any) -> Settings:
    return load_settings(
        db_path=path,
        dashboard_token=SecretStr(token) if token is not None else None,
        daily_budget_usd=BUDGET_USD,
        daily_token_cap=TOKEN_CAP,
        billing_mode="api",
        **overrides,
    )


class FakeCoordinator:
    """What `DashboardContext` uses of a coordinator: its ledger, requests and wake event."""

    instance = "host-a:4242:20260302T100000.000000Z"

    def __init__(self, path: Path) -> None:
        self.ledger = db.open_ledger(path)
        self.wake = threading.Event()
        self.requests = TaskRequests(self.ledger, clock=lambda: NOW, wake=self.wake.set)
        self.wakeups = 0
        self.held: list[str] = []

    def loops_held(self) -> list[str]:
        return list(self.held)


@pytest.fixture
def coordinator(seeded: Seeded) -> Iterator[FakeCoordinator]:
    fake = FakeCoordinator(seeded.path)
    yield fake
    fake.ledger.close()


@pytest.fixture
def ctx(seeded: Seeded, coordinator: FakeCoordinator) -> DashboardContext:
    return DashboardContext(
        settings=make_settings(seeded.path),
        coordinator=coordinator,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )


@pytest.fixture
def app(ctx: DashboardContext) -> Starlette:
    return create_app(ctx)


@pytest.fixture
def client(app: Starlette) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sign_in(client: TestClient, token: str = TOKEN, next_path: str = "/") -> Any:
    """Sign in as a browser does: the login page's CSRF cookie and field, then the form."""
    page = client.get(f"/login?next={next_path}")
    assert page.status_code == 200, page.text
    match = re.search(r'name="login_csrf" value="([^"]+)"', page.text)
    assert match, "the login page has no CSRF field"
    return client.post(
        "/login",
        data={"token": token, "next": next_path, "login_csrf": match.group(1)},
        follow_redirects=False,
    )


def csrf_of(html: str) -> str:
    """The CSRF token a signed-in page carries for its forms and fetches."""
    match = re.search(r'<meta name="csrf-token" content="([^"]+)">', html)
    assert match, "the page carries no CSRF token (not signed in?)"
    return match.group(1)


@contextmanager
def team_client(
    seeded: Seeded,
    coordinator: FakeCoordinator,
    roster: tuple[tuple[str, str, str | None, str | None], ...],
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """A dashboard with no token configured and these people (name, role, Slack id, GitHub
    login), each with a key: the client and every person's key by name."""
    from agent_team.requests.actors import INTERNAL
    from agent_team.requests.people import PeopleRequests

    people = PeopleRequests(coordinator.ledger)
    keys = {}
    for name, role, slack, github in roster:
        people.add(name, role, slack_id=slack, github_login=github, actor=INTERNAL)
        keys[name] = people.add_key(name, actor=INTERNAL).key
    ctx = DashboardContext(
        make_settings(seeded.path, token=None),
        coordinator=coordinator,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    with TestClient(create_app(ctx)) as client:
        yield client, keys
