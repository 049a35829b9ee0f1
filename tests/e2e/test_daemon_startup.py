"""The daemon's start-up order: one daemon per ledger, and the port is bound before the ledger."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agent_team import db
from tests.e2e.conftest import LONG_BODY, Cli
from tests.e2e.test_daemon import base_env, free_port, wait_for

AGENT_TEAM = Path(sys.executable).with_name("agent-team")


def start(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(AGENT_TEAM), "daemon"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def refused(tmp_path: Path, env: dict[str, str]) -> str:
    """Run a daemon that must not start; its one line of error."""
    result = subprocess.run(
        [str(AGENT_TEAM), "daemon"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent-team: "), result.stderr
    assert "unexpected error" not in lines[0]
    return lines[0]


@pytest.mark.slow
def test_a_second_daemon_on_one_ledger_is_refused_with_the_first_ones_pid_and_address(
    tmp_path: Path,
) -> None:
    first_port = free_port()
    first = start(tmp_path, base_env(tmp_path, first_port))
    try:
        wait_for(lambda: healthy(first_port), what="the first daemon")
        address = f"http://127.0.0.1:{first_port}/"

        line = refused(tmp_path, base_env(tmp_path, free_port()))
        assert f"pid {first.pid}" in line and address in line, line
        assert "already runs on the ledger" in line and "agent-team.db" in line, line

        same_port = refused(tmp_path, base_env(tmp_path, first_port))
        assert f"pid {first.pid}" in same_port and address in same_port, same_port
        assert healthy(first_port), "the first daemon is unharmed"

        first.send_signal(signal.SIGKILL)  # the kernel releases the lock with the process
        first.wait(timeout=30)
        second_port = free_port()
        second = start(tmp_path, base_env(tmp_path, second_port))
        try:
            wait_for(lambda: healthy(second_port), what="a daemon after the first was killed")
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=60) == 0
        finally:
            if second.poll() is None:
                second.kill()
            second.communicate(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate(timeout=10)


@pytest.mark.slow
def test_a_daemon_on_a_busy_port_exits_before_touching_the_ledger(tmp_path: Path, cli: Cli) -> None:
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick()
    (question,) = [q for q in cli.show(task_id)["questions"] if q["status"] == "open"]
    before = cli.db_path.read_bytes()
    files = sorted(p.name for p in tmp_path.iterdir())

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        env = base_env(tmp_path, port)
        # A month later: the recovery sweep would expire the open question.
        env["AGENT_TEAM_CLOCK_OFFSET_S"] = str(30 * 86400)
        line = refused(tmp_path, env)

    assert f"cannot listen on 127.0.0.1:{port}" in line, line
    assert cli.db_path.read_bytes() == before, "the ledger was written"
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    with db.open_ledger(cli.db_path) as conn:
        still = db.get_question(conn, question["question_id"])
    assert still is not None and still.status == "open"
