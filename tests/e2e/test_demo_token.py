"""The demo dashboard token through the real console script: kept, found and announced."""

from __future__ import annotations

import signal
import socket
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Cli
from tests.e2e.daemon_process import reap, start_daemon
from tests.waiting import wait_for

RUNNING = "agent-team is running"


@contextmanager
def daemon(cli: Cli, port: int, *args: str) -> Iterator[Path]:
    """`agent-team daemon ARGS` until it says it runs; yields its output file, stops it after."""
    log = cli.home / f"daemon-{time.monotonic_ns()}.log"
    proc = start_daemon(
        *args,
        env={**cli.env, "AGENT_TEAM_DASHBOARD_PORT": str(port)},
        cwd=cli.home,
        output=log,
        db=cli.db_path,
    )
    try:
        wait_for(
            lambda: RUNNING in log.read_text() or proc.poll() is not None, "the daemon's start"
        )
        assert RUNNING in log.read_text(), log.read_text()
        yield log
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        reap(proc)


@pytest.mark.slow
def test_a_failed_first_demo_start_keeps_the_token_and_every_start_says_where(cli: Cli) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    path = cli.home / "state" / "dashboard-token"
    try:
        first = cli.run(
            "daemon", "--demo", check=False, extra_env={"AGENT_TEAM_DASHBOARD_PORT": str(port)}
        )
    finally:
        holder.close()
    assert first.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in first.stderr
    token = path.read_text(encoding="utf-8").strip()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # Not a terminal: the new token is not printed (it would land in a log), its file is.
    assert f"a new dashboard token was written to {path}" in first.stdout
    assert token not in first.stdout + first.stderr

    where = f"dashboard writes are on: the demo token in {path}"
    with daemon(cli, port, "--demo") as log:
        second = log.read_text()
        assert where in second and token not in second
        assert f"Sign in on http://127.0.0.1:{port}/login" in second
    assert path.read_text(encoding="utf-8").strip() == token  # the same token, kept

    with daemon(cli, port) as log:  # no --demo this time: writes stay on with the same token
        assert where in log.read_text() and token not in log.read_text()
        base = f"http://127.0.0.1:{port}"
        created = httpx.post(
            f"{base}/api/tasks",
            json={"title": "Written after a restart without --demo"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        assert "Dashboard token" in httpx.get(f"{base}/login", timeout=30).text


def test_without_a_token_the_start_says_writes_are_off(cli: Cli) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with daemon(cli, port) as log:
        assert "dashboard writes are off: no token" in log.read_text()
    assert not (cli.home / "state" / "dashboard-token").exists()


@pytest.mark.slow
def test_the_first_run_instructions_are_printed_until_a_task_exists(cli: Cli) -> None:
    # #31 (14): they were printed again on every restart.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with daemon(cli, port, "--demo") as log:
        first = log.read_text()
    cli.submit("Remember the email", "Add a greeting to the README.")
    with daemon(cli, port, "--demo") as log:
        again = log.read_text()

    assert "In another terminal:" in first and "submit --title" in first
    assert "In another terminal:" not in again and "submit --title" not in again
    assert f"Sign in on http://127.0.0.1:{port}/login" in again  # still where to sign in
