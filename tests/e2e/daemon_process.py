"""One way for the end-to-end tests to run `agent-team daemon` as a process and wait on it.

`start_daemon` spawns `agent-team [--db DB] daemon ARGS` with a clean stdin and
the output where the test wants it (see `Output`); `wait_healthy` polls its
HTTP endpoint and fails at once, with the end of its output, if the process
exits first; `reap` is for a `finally`: kill it if it still runs, and collect
it. `start_agent_team` is the same for the other long-running commands
(`tick`, `show --follow`), `run_daemon` for a daemon that must exit by itself.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Literal

import httpx

from tests.e2e.conftest import AGENT_TEAM
from tests.waiting import wait_for

__all__ = [
    "Output",
    "clean_env",
    "daemon_env",
    "free_port",
    "healthy",
    "reap",
    "run_daemon",
    "start_agent_team",
    "start_daemon",
    "status_code",
    "wait_healthy",
]

# Where a started process's output goes:
#   "discard": stdout and stderr to /dev/null;
#   "pipes":   stdout and stderr each on its own pipe (read them with `communicate`);
#   "merged":  stderr into stdout, one pipe (to read line by line);
#   a Path:    stdout and stderr into that file (created or emptied).
Output = Literal["discard", "pipes", "merged"] | Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env() -> dict[str, str]:
    """The test's environment without any agent-team or systemd setting.

    But one: builds run unsandboxed (`AGENT_TEAM_SANDBOX=none`), as in
    `tests/conftest.py::isolated_env`; a test of the sandbox sets it itself.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AGENT_TEAM_", "NOTIFY_", "WATCHDOG_"))
    }
    env["AGENT_TEAM_SANDBOX"] = "none"
    return env


def daemon_env(home: Path, port: int) -> dict[str, str]:
    """A daemon's environment: its ledger and state folder in `home`, its dashboard on `port`."""
    env = clean_env()
    env.update(
        AGENT_TEAM_DB_PATH=str(home / "agent-team.db"),
        AGENT_TEAM_STATE_DIR=str(home / "state"),
        AGENT_TEAM_DASHBOARD_PORT=str(port),
        AGENT_TEAM_POLL_S="0.1",
        AGENT_TEAM_LOG_LEVEL="warning",
    )
    return env


def _command(
    args: Sequence[str], program: str | Path, db: Path | None, inside: Sequence[str]
) -> list[str]:
    return [*inside, str(program), *(["--db", str(db)] if db is not None else []), *args]


def start_agent_team(
    *args: str,
    env: Mapping[str, str],
    cwd: Path,
    output: Output = "discard",
    program: str | Path = AGENT_TEAM,
    db: Path | None = None,
    inside: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """`agent-team [--db DB] ARGS` as a process, its stdin /dev/null, its output per `output`.

    `program` is the console script to run (a relative path is looked up from `cwd`);
    `inside` is a command line it runs under (it must exec it, so the pid is the
    daemon's), e.g. `unshare` for a private mount namespace.
    """
    command = _command(args, program, db, inside)
    if isinstance(output, Path):
        with output.open("w") as out:  # the child keeps its own copy of the descriptor
            return _popen(command, env, cwd, out, subprocess.STDOUT)
    if output == "pipes":
        return _popen(command, env, cwd, subprocess.PIPE, subprocess.PIPE)
    if output == "merged":
        return _popen(command, env, cwd, subprocess.PIPE, subprocess.STDOUT)
    return _popen(command, env, cwd, subprocess.DEVNULL, subprocess.DEVNULL)


def _popen(
    command: list[str],
    env: Mapping[str, str],
    cwd: Path,
    stdout: int | IO[str],
    stderr: int,
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command,
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        text=True,
    )


def start_daemon(
    *args: str,
    env: Mapping[str, str],
    cwd: Path,
    output: Output = "discard",
    program: str | Path = AGENT_TEAM,
    db: Path | None = None,
    inside: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """`agent-team [--db DB] daemon ARGS` as a process (see `start_agent_team`)."""
    return start_agent_team(
        "daemon", *args, env=env, cwd=cwd, output=output, program=program, db=db, inside=inside
    )


def run_daemon(
    *args: str, env: Mapping[str, str], cwd: Path, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """`agent-team daemon ARGS` that must exit by itself (refused to start): its exit and output."""
    return subprocess.run(
        _command(["daemon", *args], AGENT_TEAM, None, ()),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def status_code(port: int, path: str = "healthz") -> int:
    """The status of `GET http://127.0.0.1:PORT/PATH`, or 0 when nothing answers."""
    try:
        return httpx.get(f"http://127.0.0.1:{port}/{path}", timeout=5).status_code
    except httpx.HTTPError:
        return 0


def healthy(port: int) -> bool:
    return status_code(port) == 200


def _output_tail(proc: subprocess.Popen[str], log: Path | None) -> str:
    if log is not None:
        return log.read_text(errors="replace")[-2000:]
    if proc.stdout is None and proc.stderr is None:
        return "(its output was discarded)"
    out, err = proc.communicate(timeout=10)  # it has exited: this only reads what is left
    return ((out or "") + (err or ""))[-2000:]


def wait_healthy(
    port: int,
    proc: subprocess.Popen[str],
    *,
    timeout_s: float = 60.0,
    log: Path | None = None,
    path: str = "healthz",
    what: str = "the daemon",
) -> None:
    """Poll `/PATH` on `port` until it answers 200; fail at once if `proc` exits first.

    The failure carries the end of the daemon's output: from `log` when it
    writes to a file, else from its pipes.
    """

    def answers() -> bool:
        if proc.poll() is not None:
            raise AssertionError(
                f"{what} exited with code {proc.returncode} before /{path} answered:\n"
                + _output_tail(proc, log)
            )
        return status_code(port, path) == 200

    wait_for(answers, f"{what} to answer /{path}", timeout_s=timeout_s, step_s=0.05)


def reap(proc: subprocess.Popen[str], timeout_s: float = 10) -> None:
    """For a `finally`: kill the process if it still runs, collect it and close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=timeout_s)
