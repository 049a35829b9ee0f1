"""The daemon as a process: systemd notify, SIGTERM during a run, health of its loops."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.requests import inbox
from agent_team.service.daemon import Daemon, Loop
from tests.e2e.conftest import LONG_BODY

AGENT_TEAM = Path(sys.executable).with_name("agent-team")


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached before the deadline: {what}")
        time.sleep(0.02)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (its parent, the daemon, is gone; init reaps it).
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def base_env(tmp_path: Path, port: int) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENT_TEAM_", "NOTIFY_", "WATCHDOG_"))
    }
    env.update(
        AGENT_TEAM_DB_PATH=str(tmp_path / "agent-team.db"),
        AGENT_TEAM_STATE_DIR=str(tmp_path / "state"),
        AGENT_TEAM_DASHBOARD_PORT=str(port),
        AGENT_TEAM_POLL_S="0.1",
        AGENT_TEAM_LOG_LEVEL="warning",
    )
    return env


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(30)
    yield sock, path
    sock.close()


def receive_until(sock: socket.socket, wanted: str) -> list[str]:
    seen: list[str] = []
    while True:
        message = sock.recv(4096).decode()
        seen.append(message)
        if wanted in message.splitlines():
            return seen


def test_systemd_notify_ready_watchdog_stopping(
    tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, path = notify_socket
    port = free_port()
    env = base_env(tmp_path, port)
    env.update(NOTIFY_SOCKET=path, WATCHDOG_USEC="200000")  # feed every 0.1 s
    proc = subprocess.Popen(
        [str(AGENT_TEAM), "daemon"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = receive_until(sock, "READY=1")
        assert any(
            line.startswith("STATUS=running 0 / waiting 0")
            for m in ready
            for line in m.splitlines()
        )
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
        receive_until(sock, "WATCHDOG=1")
        proc.send_signal(signal.SIGTERM)
        receive_until(sock, "STOPPING=1")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


@pytest.mark.slow
def test_sigterm_during_a_build_exits_0_and_the_task_resumes(tmp_path: Path) -> None:
    port = free_port()
    go = tmp_path / "go"
    started = tmp_path / "build-started"
    env = base_env(tmp_path, port)
    env.update(
        AGENT_TEAM_BUILDER="command",
        AGENT_TEAM_BUILD_COMMAND=(
            f"echo $$ > {tmp_path / 'build.pid'}; touch {started}; "
            f"while [ ! -f {go} ]; do sleep 0.05; done; echo built > out.txt"
        ),
        AGENT_TEAM_STOP_GRACE_S="0.5",
    )
    ledger = tmp_path / "agent-team.db"
    db.init_db(ledger)
    conn = db.open_ledger(ledger)
    try:
        task_id = inbox.submit_task(conn, title="Remember the email", body=LONG_BODY)
        log_file = (tmp_path / "daemon-1.log").open("w")
        proc = subprocess.Popen(
            [str(AGENT_TEAM), "daemon"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(
                lambda: bool(db.list_questions(conn, status="open", thread_id=task_id)),
                what="the plan question",
            )
            (question,) = db.list_questions(conn, status="open", thread_id=task_id)
            inbox.submit_answer(
                conn, question.question_id, "approve", via="cli:t", now=db.utc_now()
            )
            wait_for(started.exists, what="the build command to start")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, (tmp_path / "daemon-1.log").read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            log_file.close()
        task = db.get_task(conn, task_id)
        assert task is not None and task.status == "running" and task.phase == "build"
        # The cut-off build command did not outlive the daemon.
        build_pid = int((tmp_path / "build.pid").read_text())
        wait_for(lambda: not pid_alive(build_pid), what="the build command to be killed")

        go.touch()
        restarted = subprocess.Popen(
            [str(AGENT_TEAM), "daemon"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(
                lambda: (t := db.get_task(conn, task_id)) is not None and t.status == "done",
                what="the task to finish after the restart",
            )
            restarted.send_signal(signal.SIGTERM)
            assert restarted.wait(timeout=30) == 0
        finally:
            if restarted.poll() is None:
                restarted.kill()
                restarted.wait(timeout=10)
        rows = db.list_transitions(conn, task_id)
        assert all(row.exited_at for row in rows)
        assert [row.to_phase for row in rows].count("done") == 1
    finally:
        conn.close()


def test_a_dying_loop_is_restarted_and_reported(tmp_path: Path) -> None:
    settings = load_settings(
        db_path=tmp_path / "agent-team.db",
        state_dir=tmp_path / "state",
        dashboard_port=0,
        poll_s=0.1,
    )
    daemon = Daemon(settings)
    calls: list[int] = []

    def flaky(stop: threading.Event, first: bool) -> None:
        calls.append(1)
        raise RuntimeError("the flaky loop broke with token ghp_" + "a" * 36)

    daemon.loops.append(Loop("flaky", flaky))
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(daemon.run()), daemon=True)
    thread.start()
    try:
        wait_for(lambda: daemon.bound is not None, what="the HTTP server")
        url = daemon.url + "readyz"
        wait_for(lambda: len(calls) >= 2, what="a restart of the flaky loop")
        response = httpx.get(url, timeout=10)
        assert response.status_code == 503
        body = response.text
        assert "flaky" in body and "the flaky loop broke" in body
        assert "ghp_" + "a" * 36 not in body, "errors in /readyz are redacted"
        live = httpx.get(daemon.url + "healthz", timeout=10)
        assert live.status_code == 200 and live.json()["status"] == "degraded"
        assert "ghp_" + "a" * 36 not in live.text, "errors in /healthz are redacted"
    finally:
        daemon.request_stop()
        thread.join(timeout=60)
    assert codes == [0]
