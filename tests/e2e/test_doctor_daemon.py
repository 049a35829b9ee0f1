"""`agent-team doctor` beside a running daemon: our own daemon on the port is not a fault."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import AGENT_TEAM
from tests.e2e.daemon_process import daemon_env, free_port, reap, start_daemon, wait_healthy


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def doctor(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(AGENT_TEAM), "doctor"],
        env={**env, "NO_COLOR": "1", "COLUMNS": "250"},
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def demo_daemon(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    port = free_port()
    env = daemon_env(tmp_path, port)
    proc = start_daemon("--demo", env=env, cwd=tmp_path)
    try:
        wait_healthy(port, proc, timeout_s=30, what="the demo daemon")
        yield proc, env
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        finally:
            reap(proc)


@pytest.mark.slow
def test_doctor_reports_our_running_daemon_and_its_writes(
    tmp_path: Path, demo_daemon: tuple[subprocess.Popen[str], dict[str, str]]
) -> None:
    proc, env = demo_daemon
    port = env["AGENT_TEAM_DASHBOARD_PORT"]

    result = doctor(tmp_path, {**env, "AGENT_TEAM_LOG_LEVEL": "info"})  # the default level

    text = flat(result.stdout)
    assert result.returncode == 0, text
    assert "✓ dashboard port" in text, text
    assert f"127.0.0.1:{port} is in use by the agent-team daemon running on this ledger" in text
    assert f"pid {proc.pid}" in text and "writes enabled" in text, text
    assert "no token" not in text and "not free" not in text, text
    # Asking the daemon is doctor's business, not a line of the HTTP client's (#31, 14).
    assert "HTTP Request" not in result.stdout + result.stderr, result.stderr


@pytest.mark.slow
def test_doctor_fails_the_port_when_a_daemon_of_another_ledger_holds_it(
    tmp_path: Path, demo_daemon: tuple[subprocess.Popen[str], dict[str, str]]
) -> None:
    _proc, env = demo_daemon
    other = {**env, "AGENT_TEAM_DB_PATH": str(tmp_path / "other" / "agent-team.db")}

    result = doctor(tmp_path, other)

    text = flat(result.stdout)
    assert result.returncode == 1, text
    assert "✗ dashboard port" in text and "another agent-team daemon" in text, text
    assert "AGENT_TEAM_DASHBOARD_PORT" in text, text


@pytest.mark.slow
def test_doctor_in_another_shell_finds_the_daemon_of_this_ledger_on_its_own_port(
    tmp_path: Path, demo_daemon: tuple[subprocess.Popen[str], dict[str, str]]
) -> None:
    proc, env = demo_daemon
    port = env["AGENT_TEAM_DASHBOARD_PORT"]
    elsewhere = {**env, "AGENT_TEAM_DASHBOARD_PORT": str(free_port())}  # no port set here

    result = doctor(tmp_path, elsewhere)

    text = flat(result.stdout)
    assert result.returncode == 0, text
    assert f"127.0.0.1:{port} is in use by the agent-team daemon running on this ledger" in text
    assert f"pid {proc.pid}" in text, text
    assert "a second daemon on this ledger is refused" in text, text
