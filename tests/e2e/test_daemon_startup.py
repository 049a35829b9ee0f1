"""The daemon's start-up order: one daemon per ledger, and the port is bound before the ledger."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from agent_team import db
from tests.e2e.conftest import LONG_BODY, Cli
from tests.e2e.daemon_process import (
    daemon_env,
    free_port,
    healthy,
    reap,
    run_daemon,
    start_daemon,
    wait_healthy,
)


def refused(tmp_path: Path, env: dict[str, str]) -> str:
    """Run a daemon that must not start; its one line of error."""
    result = run_daemon(env=env, cwd=tmp_path, timeout_s=120)
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
    first = start_daemon(env=daemon_env(tmp_path, first_port), cwd=tmp_path, output="pipes")
    try:
        wait_healthy(first_port, first, timeout_s=30, what="the first daemon")
        address = f"http://127.0.0.1:{first_port}/"

        line = refused(tmp_path, daemon_env(tmp_path, free_port()))
        assert f"pid {first.pid}" in line and address in line, line
        assert "already runs on the ledger" in line and "agent-team.db" in line, line

        same_port = refused(tmp_path, daemon_env(tmp_path, first_port))
        assert f"pid {first.pid}" in same_port and address in same_port, same_port
        assert healthy(first_port), "the first daemon is unharmed"

        first.send_signal(signal.SIGKILL)  # the kernel releases the lock with the process
        first.wait(timeout=30)
        second_port = free_port()
        second = start_daemon(env=daemon_env(tmp_path, second_port), cwd=tmp_path, output="pipes")
        try:
            wait_healthy(
                second_port, second, timeout_s=30, what="a daemon after the first was killed"
            )
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=60) == 0
        finally:
            reap(second)
    finally:
        reap(first)


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
        env = daemon_env(tmp_path, port)
        # A month later: the recovery sweep would expire the open question.
        env["AGENT_TEAM_CLOCK_OFFSET_S"] = str(30 * 86400)
        line = refused(tmp_path, env)

    assert f"cannot listen on 127.0.0.1:{port}" in line, line
    assert cli.db_path.read_bytes() == before, "the ledger was written"
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    with db.open_ledger(cli.db_path) as conn:
        still = db.get_question(conn, question["question_id"])
    assert still is not None and still.status == "open"


@pytest.mark.slow
def test_a_daemon_whose_builder_cannot_run_says_so_at_start(tmp_path: Path) -> None:
    port = free_port()
    env = daemon_env(tmp_path, port)
    env.update(
        AGENT_TEAM_BUILDER="claude-code",
        AGENT_TEAM_CLAUDE_BIN=str(tmp_path / "no-claude-here"),
        AGENT_TEAM_SANDBOX="none",
    )
    daemon = start_daemon(env=env, cwd=tmp_path, output="pipes")
    try:
        wait_healthy(port, daemon, timeout_s=30)
        daemon.send_signal(signal.SIGTERM)
        _out, err = daemon.communicate(timeout=60)
    finally:
        reap(daemon)
    assert "the builder cannot run: claude-code:" in err, err
    assert "no-claude-here" in err and "every task will park when its build starts" in err
