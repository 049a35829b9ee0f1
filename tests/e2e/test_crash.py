"""Crash tests: the worker dies like `kill -9` at chosen points, then restarts.

After every restart the task must finish, the builder must have run once per
approved plan, each answer must have been applied once, and no task may have
more than one open transition row.
"""

from __future__ import annotations

import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_team import db
from agent_team.requests import inbox
from tests.e2e.conftest import LONG_BODY, Cli
from tests.e2e.daemon_process import start_agent_team

# Every case here kills and restarts agent-team processes: several seconds each.
pytestmark = pytest.mark.slow

CRASHED = 137
BEFORE_APPROVAL = [
    "intake:after",
    "clarify:after",
    "plan:before",
    "plan:after",
    "plan_review:before",
]
AFTER_APPROVAL = ["plan_review:after", "build:before", "build:after", "done:before"]


def tick(cli: Cli, crash_at: str | None = None) -> int:
    env = {"AGENT_TEAM_CRASH_AT": crash_at} if crash_at else {}
    return cli.run("tick", "--until-idle", "--timeout", "60", check=False, extra_env=env).returncode


def build_records(cli: Cli, task_id: str) -> int:
    # The offline builder records on the task's branch of the default repository (no worktree).
    repo = cli.home / "state" / "repos" / "default"
    if not repo.exists():
        return 0
    log = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "log",
            "--ignore-missing",
            "--format=%(trailers:key=Agent-Team-Plan,valueonly)",
            f"refs/heads/agent-team/{task_id}",
            "--",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(1 for line in log.splitlines() if line.strip())


def assert_finished_once(cli: Cli, task_id: str) -> None:
    conn = db.open_ledger(cli.db_path)
    try:
        task = db.get_task(conn, task_id)
        assert task is not None and task.status == "done", task
        rows = db.list_transitions(conn, task_id)
        assert all(row.exited_at for row in rows), "no open row is left behind"
        questions = db.list_questions(conn, thread_id=task_id)
        assert [(q.kind, q.status) for q in questions] == [("plan_decision", "answered")]
        resumes = [c for c in db.list_commands(conn, task_id=task_id) if c.kind == "resume"]
        assert [(c.command_id, c.state) for c in resumes] == [
            (db.resume_command_id(questions[0].question_id), "done")
        ]
        entered_build = [row for row in rows if row.to_phase == "build"]
        journey = [(row.to_phase, row.status, row.note) for row in rows]
        assert len(entered_build) == 1, f"the approved plan was acted on once: {journey}"
    finally:
        conn.close()
    assert build_records(cli, task_id) == 1


def submit_and_approve(cli: Cli, crash_before: str | None, crash_after: str | None) -> str:
    conn = db.open_ledger(cli.db_path) if cli.db_path.exists() else None
    if conn is None:
        db.init_db(cli.db_path)
        conn = db.open_ledger(cli.db_path)
    try:
        task_id = inbox.submit_task(conn, title="Remember the email", body=LONG_BODY)
        if crash_before:
            assert tick(cli, crash_before) == CRASHED
        assert tick(cli) == 0
        (question,) = db.list_questions(conn, status="open", thread_id=task_id)
        inbox.submit_answer(
            conn, question.question_id, "approve", via="cli:test", now=datetime.now(UTC)
        )
        if crash_after:
            assert tick(cli, crash_after) == CRASHED
        assert tick(cli) == 0
    finally:
        conn.close()
    return task_id


@pytest.mark.parametrize("crash_at", BEFORE_APPROVAL)
def test_crash_before_the_approval(cli: Cli, crash_at: str) -> None:
    task_id = submit_and_approve(cli, crash_at, None)
    assert_finished_once(cli, task_id)


@pytest.mark.parametrize("crash_at", AFTER_APPROVAL)
def test_crash_after_the_approval(cli: Cli, crash_at: str) -> None:
    task_id = submit_and_approve(cli, None, crash_at)
    assert_finished_once(cli, task_id)


def test_sigkill_at_an_arbitrary_moment_loses_nothing(cli: Cli, tmp_path: Path) -> None:
    """A real SIGKILL from outside while several tasks run, twice, then a clean finish."""
    db.init_db(cli.db_path)
    conn = db.open_ledger(cli.db_path)
    try:
        ids = [inbox.submit_task(conn, title=f"Task {n}", body=LONG_BODY) for n in range(6)]
        for phase in ("plan", "build"):
            proc = start_agent_team(
                "tick",
                "--until-idle",
                "--timeout",
                "60",
                env={**cli.env, "AGENT_TEAM_WORKERS": "3"},
                cwd=cli.home,
                db=cli.db_path,
            )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                entered = [
                    r for t in ids for r in db.list_transitions(conn, t) if r.to_phase == phase
                ]
                if entered:
                    break
                time.sleep(0.01)  # poll interval, not a wait for a condition
            proc.kill()  # SIGKILL: no handler, no cleanup
            proc.wait(timeout=30)
            assert tick(cli) == 0
            if phase == "plan":
                for task_id in ids:
                    for question in db.list_questions(conn, status="open", thread_id=task_id):
                        inbox.submit_answer(
                            conn,
                            question.question_id,
                            "approve",
                            via="cli:test",
                            now=datetime.now(UTC),
                        )
        assert tick(cli) == 0
    finally:
        conn.close()
    for task_id in ids:
        assert_finished_once(cli, task_id)
    assert not [p for p in os.listdir(cli.home) if p.endswith(".jsonl")], "no budget row was lost"
