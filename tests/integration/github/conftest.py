"""Fixtures for the GitHub intake: a loopback GitHub with two repositories and a real ledger."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_team import db
from agent_team.config import Settings, load_settings
from agent_team.integrations.github.intake import GitHubIntake, make_client, task_id_for
from agent_team.integrations.github.integration import GitHubIntegration
from agent_team.integrations.github.settings import GitHubSettings
from agent_team.requests import inbox
from agent_team.service.wiring import build_runtime
from tests.fakes.github_api import FakeGitHub

TOKEN = "ghp_" + "T0kenForTests" * 3  # token-shaped, so the pattern redaction applies too
APP = "acme/app"
WEBHOOK_SECRET = "hook-secret-for-tests"
LIB = "Acme/Lib"  # mixed case on purpose: GitHub names ignore case
APP_ISSUES = 250
APP_PULLS = 12
LIB_ISSUES = 3


@dataclass
class World:
    """What the fake holds, by kind, so tests can say exactly which tasks should exist."""

    fake: FakeGitHub
    app_labelled: list[int] = field(default_factory=list)
    app_other: list[int] = field(default_factory=list)
    lib_labelled: list[int] = field(default_factory=list)
    lib_docs: list[int] = field(default_factory=list)


@pytest.fixture(autouse=True)
def _no_agent_team_env(isolated_env: Path) -> None:
    """Settings come from the test alone (see tests/conftest.py)."""


@pytest.fixture
def world() -> Iterator[World]:
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_repo(APP)
        fake.add_repo(LIB)
        found = World(fake)
        for n in range(APP_ISSUES + APP_PULLS + 20 + 5):
            if n % 23 == 0 and len(found.app_other) < APP_PULLS:  # PRs mixed in
                pull = fake.add_issue(APP, labels=("agent-team",), pull_request=True)
                found.app_other.append(pull)
            elif n % 17 == 0 and len(found.app_other) < APP_PULLS + 20:
                found.app_other.append(fake.add_issue(APP, labels=("bug",)))
            elif len(found.app_labelled) < APP_ISSUES:
                found.app_labelled.append(fake.add_issue(APP, labels=("agent-team", "x")))
        for _ in range(5):
            found.app_other.append(fake.add_issue(APP, labels=("agent-team",), state="closed"))
        for _ in range(LIB_ISSUES):
            found.lib_labelled.append(fake.add_issue(LIB, labels=("agent-team",)))
        found.lib_docs.append(fake.add_issue(LIB, labels=("agent-team-docs",)))
        yield found


def make_settings(tmp_path: Path, fake: FakeGitHub, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "db_path": tmp_path / "agent-team.db",
        "state_dir": tmp_path / "state",
        "github_repos": f"{APP},{LIB}",
        "github_api_url": fake.url,
        "github_token": TOKEN,
    }
    values.update(overrides)
    return load_settings(**values)


@dataclass
class Starter:
    """`start_task` that submits through the inbox, counts calls and can be told to fail."""

    conn: db.Ledger
    fail_for: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, **request: Any) -> str:
        with self.lock:
            self.calls.append(str(request["task_id"]))
            if request["task_id"] in self.fail_for:
                self.fail_for.discard(request["task_id"])
                raise RuntimeError("the ledger said no this time")
        return inbox.submit_task(self.conn, **request)


MakeIntake = Callable[..., tuple[GitHubIntake, Starter]]


@pytest.fixture
def make_intake(tmp_path: Path, world: World) -> Iterator[MakeIntake]:
    """Factory: a new intake (as a new process would build it) on the same ledger file."""
    opened: list[Any] = []

    def make(*, claim_grace_s: float = 60.0, **overrides: Any) -> tuple[GitHubIntake, Starter]:
        settings = make_settings(tmp_path, world.fake, **overrides)
        db.init_db(settings.db_path)
        conn = db.open_ledger(settings.db_path)
        github = GitHubSettings.from_settings(settings)
        client = make_client(github)
        opened.extend([conn, client])
        starter = Starter(conn)
        intake = GitHubIntake(github, conn, starter, client, claim_grace_s=claim_grace_s)
        return intake, starter

    yield make
    for thing in opened:
        thing.close()


def github_tasks(conn: db.Ledger) -> dict[str, db.Task]:
    return {task.id: task for task in db.list_tasks(conn, limit=10_000) if task.source == "github"}


def git(cwd: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
    }
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def clone_with_bare_origin(tmp_path: Path) -> tuple[Path, Path]:
    """A bare repository (the "GitHub" remote) and a clone of it with one commit on main."""
    bare = tmp_path / "remote.git"
    bare.mkdir()
    git(bare, "init", "-q", "--bare", "-b", "main")
    clone = tmp_path / "clone"
    clone.mkdir()
    git(clone, "init", "-q", "-b", "main")
    git(clone, "commit", "-q", "--allow-empty", "-m", "first")
    git(clone, "remote", "add", "origin", str(bare))
    git(clone, "push", "-q", "origin", "main")
    return clone, bare


# Clear enough for the offline model to plan without a clarifying question.
LONG_BODY = (
    "The login page should remember the user's email address between visits.\n"
    "- Store the email in a cookie after a successful login\n"
    "- Prefill the email field when the cookie is present\n"
    "- Add a test that covers both paths\n"
)


@dataclass
class Setup:
    fake: FakeGitHub
    settings: Settings
    clone: Path
    bare: Path
    number: int

    @property
    def task_id(self) -> str:
        return task_id_for(APP, self.number)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    clone, bare = clone_with_bare_origin(tmp_path)
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_repo(APP, remote=bare)
        number = fake.add_issue(
            APP, labels=("agent-team",), title="Remember the email", body=LONG_BODY
        )
        settings = make_settings(
            tmp_path,
            fake,
            github_repos=APP,
            github_comment=True,
            github_open_pr=True,
            github_checkouts=f"{APP}={clone}",
            github_reviewers="reviewer",
            github_webhook_secret=WEBHOOK_SECRET,
            dashboard_url="http://agent-team.example/",
        )
        yield Setup(fake, settings, clone, bare, number)


class Process:
    """What one agent-team process builds (the composition root): coordinator and GitHub parts."""

    def __init__(self, settings: Settings) -> None:
        self.runtime = build_runtime(settings, only={GitHubIntegration.name})
        self.coordinator = self.runtime.coordinator
        (github,) = self.runtime.integrations
        assert isinstance(github, GitHubIntegration)
        self.github = github

    def close(self) -> None:
        self.runtime.close()


def open_pr_and_stop(setup: Setup) -> None:
    """One process takes the issue to its draft PR (plan approved, built, pushed), then stops."""
    process = Process(setup.settings)
    try:
        assert process.github.poll().tasks_created == 1
        process.coordinator.tick(until_idle=True, timeout_s=60)
        (question,) = db.list_questions(process.coordinator.ledger, status="open")
        process.coordinator.answer(question.question_id, "approve")
        process.coordinator.tick(until_idle=True, timeout_s=60)
    finally:
        process.close()
