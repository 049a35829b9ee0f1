"""Run a child process with a hard deadline that takes its whole family down.

Why a process group: a build command is usually a shell that starts more
processes (`make`, a test runner, `sleep`). Killing only the shell would leave
them running and holding our output pipes open, so on timeout we kill the
group the child leads (`start_new_session=True`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Completed",
    "ProcessTimeout",
    "inherited_env",
    "kill_running_children",
    "run_process",
]

# Process groups of children still running, so a shutdown that cannot wait for them
# can take them down instead of leaving orphans at work in a worktree.
_running_groups: set[int] = set()
_running_lock = threading.Lock()


def kill_running_children() -> int:
    """Kill every child process group `run_process` still waits on; returns how many.

    For a daemon whose stop grace ran out: the cut-off build resumes on the
    next start, so the old one must not go on writing into its worktree.
    """
    with _running_lock:
        groups = list(_running_groups)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(groups)


# Variables that point git at another repository; a build must see its own worktree.
_GIT_LOCATION_VARS = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
        "GIT_CEILING_DIRECTORIES",
    }
)
_AGENT_TEAM_PREFIX = "AGENT_TEAM_"
# After the group is killed, how long we wait for the pipes to close.
_DRAIN_S = 5.0


@dataclass(frozen=True)
class Completed:
    """A finished child: exit code and decoded output."""

    returncode: int
    stdout: str
    stderr: str


class ProcessTimeout(Exception):
    """The child outlived its deadline and was killed with its process group."""

    def __init__(self, timeout_s: float, stdout: str, stderr: str) -> None:
        super().__init__(f"timed out after {timeout_s:g} s")
        self.timeout_s = timeout_s
        self.stdout = stdout
        self.stderr = stderr


def inherited_env() -> dict[str, str]:
    """The daemon's environment as a child should see it.

    Builds run real tools that need `PATH`, `HOME`, proxies and so on, so the
    environment is passed through (this is the one place outside `config.py`
    that reads it, and only to hand it on). Two kinds of variable are dropped:
    `AGENT_TEAM_*` (our own settings, possibly secrets, and they would confuse
    an agent-team run inside the build) and git's repository-location
    variables (set when we run inside a git hook; they would redirect the
    build's git away from its worktree).
    """
    return {
        key: value
        for key, value in os.environ.items()
        if not key.upper().startswith(_AGENT_TEAM_PREFIX) and key not in _GIT_LOCATION_VARS
    }


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # The child leads its own session, so its pid is the group id. It is not
    # reaped yet (we only wait after this), so the id cannot have been reused.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_process(
    args: Sequence[str] | str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    shell: bool = False,
    stdin_text: str | None = None,
    merge_stderr: bool = False,
) -> Completed:
    """Run a child to completion or kill its process group at the deadline.

    Args:
        args: argv, or a command line when `shell` is true.
        cwd: the working folder.
        env: the complete environment of the child.
        timeout_s: seconds before the child and everything it started are killed.
        shell: run `args` with `/bin/sh -c`.
        stdin_text: text for the child's stdin; `None` gives it `/dev/null`.
        merge_stderr: interleave stderr into stdout (one log, in order).

    Returns:
        The exit code and output.

    Raises:
        ProcessTimeout: the deadline passed; the group was killed.
        OSError: the program could not be started (e.g. `FileNotFoundError`).
    """
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env=dict(env),
        shell=shell,
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True,
    )
    with _running_lock:
        _running_groups.add(proc.pid)
    try:
        return _finish(proc, stdin_text, timeout_s)
    finally:
        with _running_lock:
            _running_groups.discard(proc.pid)


def _finish(proc: subprocess.Popen[bytes], stdin_text: str | None, timeout_s: float) -> Completed:
    data = stdin_text.encode("utf-8") if stdin_text is not None else None
    try:
        out, err = proc.communicate(data, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=_DRAIN_S)
        except subprocess.TimeoutExpired:
            # Something left the group (setsid) and still holds our pipes: give up on it.
            proc.kill()
            proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
            out, err = b"", b""
        raise ProcessTimeout(timeout_s, _decode(out), _decode(err)) from None
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    return Completed(proc.returncode, _decode(out), _decode(err))
