"""A daemon paused (SIGSTOP) past its lease: another instance takes the task over, and the
paused one's writes are refused once it runs again (SIGCONT). On both backends.

SQLite allows one daemon per file, so there the second instance is an `agent-team tick`
process beside the paused daemon; on PostgreSQL it is a second daemon on the same
database. The paused daemon is stopped while its build command runs, and only at a
moment when it holds no write transaction (a stopped SQLite writer would block every
process; a stopped PostgreSQL writer would hold the lease row's lock).
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from agent_team import db
from agent_team.requests import inbox
from tests.e2e.conftest import LONG_BODY
from tests.e2e.daemon_process import daemon_env, free_port, reap, start_agent_team, start_daemon
from tests.waiting import wait_for

LEASE_S = "2"


@dataclass
class Backend:
    name: str
    target: str | Path
    env: dict[str, str]

    def ledger(self) -> db.Ledger:
        return db.open_ledger(self.target)

    def write_lock_free(self) -> bool:
        """True when no transaction holds what a takeover needs (probed without waiting)."""
        if self.name == "sqlite":
            conn = sqlite3.connect(self.target, timeout=0.2, isolation_level=None)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
                return True
            except sqlite3.OperationalError:
                return False
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(str(self.target), autocommit=False) as conn:
            try:
                conn.execute("SELECT name FROM leases FOR UPDATE NOWAIT").fetchall()
                conn.rollback()
                return True
            except psycopg.errors.LockNotAvailable:
                conn.rollback()
                return False


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "agent-team.db"
        db.init_db(path)
        yield Backend("sqlite", path, {})
        return
    url = request.getfixturevalue("pg_url")
    db.init_db(url)
    yield Backend("postgres", url, {"AGENT_TEAM_DATABASE_URL": url})


def instance_env(tmp_path: Path, backend: Backend, name: str, build: str) -> dict[str, str]:
    env = daemon_env(tmp_path, free_port())
    env.update(backend.env)
    env.update(
        AGENT_TEAM_STATE_DIR=str(tmp_path / f"state-{name}"),  # as on its own host
        AGENT_TEAM_BUILDER="command",
        AGENT_TEAM_BUILD_COMMAND=build,
        AGENT_TEAM_LEASE_S=LEASE_S,
        AGENT_TEAM_LOG_LEVEL="info",
    )
    return env


def stop_outside_a_transaction(proc: subprocess.Popen[str], backend: Backend) -> None:
    for _ in range(50):
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.05)
        if backend.write_lock_free():
            return
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("the daemon always held a write transaction")


def lapsed(ledger: db.Ledger, task_id: str) -> bool:
    lease = db.get_lease(ledger, db.task_lease_name(task_id))
    return lease is not None and (lease.lease_until or "") < db.to_iso(db.utc_now())


@pytest.mark.slow
def test_a_paused_daemon_is_fenced_after_another_instance_takes_its_task(
    tmp_path: Path, backend: Backend
) -> None:
    go, started = tmp_path / "go", tmp_path / "build-started"
    slow = f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; echo slow > slow.txt"
    paused_env = instance_env(tmp_path, backend, "paused", slow)
    other_env = instance_env(tmp_path, backend, "other", "echo quick > quick.txt")
    ledger = backend.ledger()
    paused_log, other_log = tmp_path / "paused.log", tmp_path / "other.log"
    paused = start_daemon(env=paused_env, cwd=tmp_path, output=paused_log)
    other: subprocess.Popen[str] | None = None
    try:
        task_id = inbox.submit_task(ledger, title="Remember the email", body=LONG_BODY)
        wait_for(
            lambda: bool(db.list_questions(ledger, status="open", thread_id=task_id)),
            what="the plan question",
            timeout_s=30,
        )
        (question,) = db.list_questions(ledger, status="open", thread_id=task_id)
        inbox.submit_answer(ledger, question.question_id, "approve", via="cli:t", now=db.utc_now())
        wait_for(started.exists, what="the paused daemon's build to start", timeout_s=30)
        (first,) = db.list_leases(ledger, prefix=f"task:{task_id}")
        assert first.owner is not None and f":{paused.pid}:" in first.owner

        stop_outside_a_transaction(paused, backend)
        wait_for(
            lambda: lapsed(ledger, task_id), what="the paused daemon's lease to lapse", timeout_s=30
        )
        taken_at = db.to_iso(db.utc_now())
        if backend.name == "sqlite":
            other = start_agent_team(
                "tick", "--until-idle", env=other_env, cwd=tmp_path, output=other_log
            )
            assert other.wait(timeout=120) == 0, other_log.read_text()
        else:
            other = start_daemon(env=other_env, cwd=tmp_path, output=other_log)
        wait_for(
            lambda: (t := db.get_task(ledger, task_id)) is not None and t.status == "done",
            timeout_s=90,
            what="the other instance to finish the task",
        )
        (second,) = db.list_leases(ledger, prefix=f"task:{task_id}")
        assert second.epoch == first.epoch + 1 and second.takeovers == 1
        history_at_takeover = db.list_transitions(ledger, task_id)

        go.touch()
        paused.send_signal(signal.SIGCONT)
        wait_for(
            lambda: "was taken over" in paused_log.read_text(),
            timeout_s=60,
            what="the resumed daemon to be fenced",
        )
        paused_url = f"http://127.0.0.1:{paused_env['AGENT_TEAM_DASHBOARD_PORT']}"
        metrics = httpx.get(f"{paused_url}/metrics", timeout=10).text
        refused_writes = [
            float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("agent_team_fenced_writes_refused_total ")
        ]
        assert refused_writes and refused_writes[0] >= 1, metrics
        health = httpx.get(f"{paused_url}/healthz", timeout=10).json()
        assert f":{paused.pid}:" in health["facts"]["instance"]
        loops = {loop["name"] for loop in health["loops"]}
        assert ("command-wakeups" in loops) == (backend.name == "postgres"), loops
        paused.send_signal(signal.SIGTERM)
        assert paused.wait(timeout=60) == 0, paused_log.read_text()
    finally:
        for proc in (paused, other):
            if proc is not None:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGCONT)
                reap(proc)

    refused = paused_log.read_text().count("was taken over")
    assert refused >= 1, paused_log.read_text()
    # Nothing of the old epoch after the takeover; the history is what the new owner left.
    rows = db.list_transitions(ledger, task_id)
    assert rows == history_at_takeover
    assert all(row.epoch == second.epoch for row in rows if row.entered_at > taken_at)
    assert [row.to_phase for row in rows].count("done") == 1
    task = db.get_task(ledger, task_id)
    assert task is not None and task.status == "done"
    ledger.close()
