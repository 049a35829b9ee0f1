"""The daemon on its default sandbox (`auto`): a build runs in bubblewrap, or the start stops."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from agent_team import db
from agent_team.builders.live_log import read_build_log
from agent_team.builders.sandbox import SandboxPolicy
from agent_team.builders.sandbox_container import ContainerSandbox
from agent_team.requests import inbox
from tests.e2e.conftest import LONG_BODY
from tests.e2e.daemon_process import (
    daemon_env,
    free_port,
    reap,
    run_daemon,
    start_daemon,
    wait_healthy,
)
from tests.fakes.container_runtime import install_fake_runtime
from tests.waiting import wait_for

SECRET = "ghp_" + "S" * 36


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("bwrap") is None and not os.environ.get("CI"),
    reason="bubblewrap is not installed (CI installs it)",
)
def test_the_default_sandbox_runs_the_build_in_bubblewrap() -> None:
    # Outside /tmp: the sandbox's /tmp is its own, so a ledger under /tmp is out of
    # its sight anyway; here only the sandbox can hide it.
    tmp_path = Path(tempfile.mkdtemp(prefix="agent-team-e2e-sandbox-", dir="/var/tmp"))
    try:
        _run_default_sandbox(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _run_default_sandbox(tmp_path: Path) -> None:
    port = free_port()
    env = daemon_env(tmp_path, port)
    env.update(
        AGENT_TEAM_SANDBOX="auto",
        AGENT_TEAM_BUILDER="command",
        AGENT_TEAM_BUILD_COMMAND=(
            "echo built > out.txt; echo HOST=$(hostname); echo TOKEN=${GITHUB_TOKEN:-none}; "
            f"ls {tmp_path}/agent-team.db 2>&1 || true"
        ),
        GITHUB_TOKEN=SECRET,
        AGENT_TEAM_LOG_LEVEL="info",
    )
    ledger = tmp_path / "agent-team.db"
    db.init_db(ledger)
    conn = db.open_ledger(ledger)
    try:
        task_id = inbox.submit_task(conn, title="Remember the email", body=LONG_BODY)
        proc = start_daemon(env=env, cwd=tmp_path, output=tmp_path / "daemon.log")
        try:
            wait_for(
                lambda: bool(db.list_questions(conn, status="open", thread_id=task_id)),
                what="the plan question",
                timeout_s=60,
            )
            facts = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()
            assert str(facts["facts"]["sandbox"]).startswith("bwrap"), facts
            (question,) = db.list_questions(conn, status="open", thread_id=task_id)
            inbox.submit_answer(
                conn, question.question_id, "approve", via="cli:t", now=db.utc_now()
            )
            wait_for(
                lambda: (t := db.get_task(conn, task_id)) is not None and t.status == "done",
                what="the sandboxed build to finish",
                timeout_s=60,
            )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        finally:
            reap(proc)
    finally:
        conn.close()
    kept = read_build_log(tmp_path / "state", task_id)
    assert kept is not None
    assert "HOST=agent-team-sandbox" in kept.text and "TOKEN=none" in kept.text
    assert SECRET not in kept.text and "No such file" in kept.text  # the ledger is hidden
    assert "builds run in: bwrap" in (tmp_path / "daemon.log").read_text()


def test_a_sandbox_that_cannot_run_stops_the_start_with_one_line(tmp_path: Path) -> None:
    env = daemon_env(tmp_path, free_port())
    # A PATH without bwrap (git and sh stay reachable by their absolute paths in the code).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env.update(
        AGENT_TEAM_SANDBOX="bwrap", AGENT_TEAM_BUILDER="command", AGENT_TEAM_BUILD_COMMAND="true"
    )
    env["PATH"] = f"{bin_dir}:{os.path.dirname(sys.executable)}"

    done = run_daemon(env=env, cwd=tmp_path)

    assert done.returncode == 2, done
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "apt install bubblewrap" in lines[0], done.stderr


def test_a_restarted_daemon_removes_the_containers_a_killed_one_left(tmp_path: Path) -> None:
    records = tmp_path / "runtime"
    install_fake_runtime(tmp_path / "bin", records)
    state = tmp_path / "state"
    ours = ContainerSandbox(
        SandboxPolicy(state_dir=state), kind="podman", runtime="podman", image="x:1"
    )
    (records / "containers").mkdir(parents=True, exist_ok=True)
    for name, label in (("agent-team-t1-dead0001", ours.label), ("someone-elses", "other")):
        (records / "containers" / f"{name}.json").write_text(
            json.dumps({"label": label, "pid": None})
        )
    port = free_port()
    env = daemon_env(tmp_path, port)
    env.update(
        AGENT_TEAM_SANDBOX="podman",
        AGENT_TEAM_SANDBOX_IMAGE="registry.example/builder:1",
        AGENT_TEAM_BUILDER="command",
        AGENT_TEAM_BUILD_COMMAND="true",
    )
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    proc = start_daemon(env=env, cwd=tmp_path, output=tmp_path / "daemon.log")
    try:
        wait_healthy(port, proc, log=tmp_path / "daemon.log")
        facts = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).json()["facts"]
        assert str(facts["sandbox"]).startswith("podman"), facts
        assert [p.stem for p in (records / "containers").iterdir()] == ["someone-elses"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        reap(proc)
