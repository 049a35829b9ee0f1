"""Every printed hint names agent-team the way that works from the folder the person is in."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import AGENT_TEAM
from tests.e2e.daemon_process import daemon_env, free_port, reap, start_daemon

PLAIN_PATH = "/usr/local/bin:/usr/bin:/bin"  # agent-team is not on it


def env_without_agent_team(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = daemon_env(tmp_path, free_port())
    env.update(PATH=PLAIN_PATH, NO_COLOR="1", COLUMNS="250")
    env.update(extra)
    return env


def venv_in(folder: Path) -> None:
    """A checkout's `.venv/bin/agent-team` in `folder` (the real script, linked)."""
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / ".venv" / "bin" / "agent-team").symlink_to(AGENT_TEAM)


def missing_ledger_hint(cwd: Path, exe: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [exe, "--db", str(cwd / "nothing.db"), "tasks"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, (result.stdout, result.stderr)
    return result.stderr


def test_cli_hints_use_the_venv_path_from_the_checkout(tmp_path: Path) -> None:
    venv_in(tmp_path)
    line = missing_ledger_hint(tmp_path, ".venv/bin/agent-team", env_without_agent_team(tmp_path))
    assert "run `.venv/bin/agent-team migrate --db" in line, line


def test_cli_hints_use_the_full_path_from_another_folder(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    line = missing_ledger_hint(elsewhere, str(AGENT_TEAM), env_without_agent_team(tmp_path))
    assert f"run `{AGENT_TEAM} migrate --db" in line, line


def test_cli_hints_say_agent_team_when_it_is_on_the_path(tmp_path: Path) -> None:
    env = env_without_agent_team(tmp_path, PATH=f"{AGENT_TEAM.parent}{os.pathsep}{PLAIN_PATH}")
    line = missing_ledger_hint(tmp_path, str(AGENT_TEAM), env)
    assert "run `agent-team migrate --db" in line, line


def banner(cwd: Path, exe: str, env: dict[str, str]) -> list[str]:
    """The demo daemon's first-run lines, up to "Stop with Ctrl-C"; then it is stopped."""
    proc = start_daemon(
        "--demo", env=env, cwd=cwd, output="merged", program=exe, db=cwd / "agent-team.db"
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # ends if the daemon dies; the test timeout bounds a hang
            lines.append(line.rstrip("\n"))
            if line.startswith("Stop with Ctrl-C"):
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        finally:
            reap(proc)
    assert lines and lines[-1].startswith("Stop with Ctrl-C"), lines
    return lines


def commands_in(lines: list[str]) -> list[str]:
    return [line.split()[0] for line in lines if line.startswith("  ") and "--db" in line]


@pytest.mark.slow
def test_the_demo_banner_uses_the_venv_path_from_the_checkout(tmp_path: Path) -> None:
    venv_in(tmp_path)
    lines = banner(tmp_path, ".venv/bin/agent-team", env_without_agent_team(tmp_path))
    assert commands_in(lines) == [".venv/bin/agent-team"] * 4, lines


@pytest.mark.slow
def test_the_demo_banner_uses_the_full_path_from_another_folder(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lines = banner(elsewhere, str(AGENT_TEAM), env_without_agent_team(tmp_path))
    assert commands_in(lines) == [str(AGENT_TEAM)] * 4, lines
