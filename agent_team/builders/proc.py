"""Run a child process with a hard deadline that takes its whole family down.

Its output is read as it comes (a thread per pipe), so a caller can watch a
long build while it runs (`on_output`) and still gets all of it at the end.

Why a process group: a build command is usually a shell that starts more
processes (`make`, a test runner, `sleep`). Killing only the shell would leave
them running and holding our output pipes open, so on timeout we kill the
group the child leads (`start_new_session=True`).
"""

from __future__ import annotations

import logging
import math
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agent_team.common.stops import request_stop, stop_requested

__all__ = [
    "Completed",
    "OutputSink",
    "ProcessStopped",
    "ProcessTimeout",
    "allowed_env",
    "inherited_env",
    "kill_running_children",
    "run_process",
    "stop_tagged",
]

# Process groups of children still running, so a shutdown that cannot wait for them
# can take them down instead of leaving orphans at work in a worktree.
_running_groups: set[int] = set()
_running_lock = threading.Lock()
# Groups by tag (a task id), and why a tag was told to stop: a cancel or a limit must
# reach a build that is running, and one about to start must not start.
_tagged: dict[str, set[int]] = {}
# What else a stop must do for a child, by its group: a container outlives its client.
_stop_hooks: dict[int, Callable[[], None]] = {}


def stop_tagged(tag: str, reason: str) -> int:
    """Kill the process groups running under `tag` and record `reason`; returns how many.

    Runs under the tag that start later are refused with the same reason until
    `forget_stop(tag)` (`agent_team.common.stops`). The first reason given wins.
    """
    request_stop(tag, reason)
    with _running_lock:
        groups = list(_tagged.get(tag, ()))
    return _kill_groups(groups)


def _kill_groups(groups: list[int]) -> int:
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
        with _running_lock:
            hook = _stop_hooks.pop(group, None)
        if hook is not None:
            threading.Thread(target=_run_hook, args=(hook,), daemon=True).start()
    return len(groups)


def _run_hook(hook: Callable[[], None]) -> None:
    try:
        hook()
    except Exception:
        log.exception("a process stop hook failed")


def kill_running_children() -> int:
    """Kill every child process group `run_process` still waits on; returns how many.

    For a daemon that stops without waiting for its runs (after stopping each
    task's own builds, `stop_tagged`): a cut-off build runs again from its
    beginning on the next start, so the old one must not go on writing into
    its worktree.
    """
    with _running_lock:
        groups = list(_running_groups)
    return _kill_groups(groups)


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
_CHUNK = 65536

log = logging.getLogger(__name__)

# Takes a child's raw output as it is read; a build's goes to `agent_team.builders.live_log`.
OutputSink = Callable[[bytes], None]


@dataclass(frozen=True)
class Completed:
    """A finished child: exit code and decoded output."""

    returncode: int
    stdout: str
    stderr: str


class ProcessStopped(Exception):
    """The child was killed (or never started) because its tag was told to stop."""

    def __init__(self, reason: str, stdout: str = "", stderr: str = "") -> None:
        super().__init__(f"stopped: {reason}")
        self.reason = reason
        self.stdout = stdout
        self.stderr = stderr


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


def allowed_env(
    names: Sequence[str], prefixes: Sequence[str] = (), keys: Sequence[str] = ()
) -> dict[str, str]:
    """The daemon's variables a sandboxed build may see: `names`, `prefixes`, then `keys`.

    The allow-list side of `inherited_env`: a sandbox hands in only what it
    names, so a secret the daemon holds (a GitHub, Slack or database one) never
    reaches the agent unless an operator lists it.
    """
    wanted = set(names) | set(keys)
    return {
        key: value
        for key, value in os.environ.items()
        if key in wanted or any(key.startswith(prefix) for prefix in prefixes)
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
    on_output: OutputSink | None = None,
    on_stdout: OutputSink | None = None,
    tag: str | None = None,
    on_stop: Callable[[], None] | None = None,
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
        on_output: called with each chunk of output (stdout and stderr) as it is
            read, from the reading threads; it must be quick, and if it raises it
            is not called again (the output is still collected).
        on_stdout: like `on_output`, for stdout alone (a parser of what the child
            prints must not see stderr cut into its lines).
        tag: what `stop_tagged` stops this child by (a task id).
        on_stop: what a stop or a shutdown does besides killing the group (run in
            a thread): e.g. remove the container the child is the client of.

    Returns:
        The exit code and output.

    Raises:
        ProcessStopped: `stop_tagged(tag, ...)` killed the group, or had been called
            before (then nothing was started).
        ProcessTimeout: the deadline passed; the group was killed.
        OSError: the program could not be started (e.g. `FileNotFoundError`).
    """
    if tag is not None and (reason := stop_requested(tag)) is not None:
        raise ProcessStopped(reason)
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
        if on_stop is not None:
            _stop_hooks[proc.pid] = on_stop
        if tag is not None:
            _tagged.setdefault(tag, set()).add(proc.pid)
        stopped_early = tag is not None and stop_requested(tag) is not None
    try:
        if stopped_early:  # told to stop between the check above and the start
            _kill_group(proc)
        done = _finish(proc, stdin_text, timeout_s, on_output, on_stdout)
    except ProcessTimeout as exc:
        reason = stop_requested(tag) if tag is not None else None
        if reason is None:
            raise
        raise ProcessStopped(reason, exc.stdout, exc.stderr) from None
    finally:
        with _running_lock:
            _running_groups.discard(proc.pid)
            _stop_hooks.pop(proc.pid, None)
            if tag is not None:
                group = _tagged.get(tag, set())
                group.discard(proc.pid)
                if not group:
                    _tagged.pop(tag, None)
    reason = stop_requested(tag) if tag is not None else None
    if reason is not None:  # the stop wins, even over a run that just ended
        raise ProcessStopped(reason, done.stdout, done.stderr)
    return done


class _Pump(threading.Thread):
    """Reads one pipe to its end as data comes, keeping it all and handing it to the sink."""

    def __init__(self, stream: IO[bytes], sink: _Sink, also: _Sink | None = None) -> None:
        super().__init__(name="proc-output", daemon=True)
        self.stream = stream
        self.sink = sink
        self.also = also
        self.data = bytearray()
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            fd = self.stream.fileno()
            while True:
                try:
                    chunk = os.read(fd, _CHUNK)
                except OSError:
                    return
                if not chunk:
                    return
                with self._lock:
                    self.data += chunk
                self.sink.send(chunk)
                if self.also is not None:
                    self.also.send(chunk)
        finally:
            self.stream.close()

    def collected(self) -> str:
        with self._lock:
            return _decode(bytes(self.data))


class _Sink:
    """The caller's `on_output`, shared by both pumps, dropped after its first failure."""

    def __init__(self, on_output: OutputSink | None) -> None:
        self._on_output = on_output
        self._lock = threading.Lock()

    def send(self, chunk: bytes) -> None:
        with self._lock:
            if self._on_output is None:
                return
            try:
                self._on_output(chunk)
            except Exception:
                log.exception("process output: the live sink failed; it gets no more output")
                self._on_output = None


def _feed_stdin(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
    except (BrokenPipeError, OSError):
        pass  # the child stopped reading; its exit code says what happened
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass


def _finish(
    proc: subprocess.Popen[bytes],
    stdin_text: str | None,
    timeout_s: float,
    on_output: OutputSink | None,
    on_stdout: OutputSink | None = None,
) -> Completed:
    """Wait for the child and for its pipes to close, reading them as they fill.

    Output is read by a thread per pipe (not `communicate`), so each chunk can
    go to `on_output` as soon as it is printed. The deadline covers both the
    child and anything it left holding the pipes, as `communicate` did.
    """
    deadline = time.monotonic() + timeout_s
    sink = _Sink(on_output)
    stdout_sink = _Sink(on_stdout) if on_stdout is not None else None
    pumps = [
        _Pump(stream, sink, stdout_sink if stream is proc.stdout else None)
        for stream in (proc.stdout, proc.stderr)
        if stream is not None
    ]
    helpers: list[threading.Thread] = list(pumps)
    if stdin_text is not None:
        helpers.append(
            threading.Thread(
                target=_feed_stdin, args=(proc, stdin_text.encode("utf-8")), daemon=True
            )
        )
    try:
        for helper in helpers:
            helper.start()
        timed_out = not _wait_exit(proc, deadline - time.monotonic())
        pipes_until = deadline
        if not timed_out and proc.returncode is not None and proc.returncode < 0:
            # Killed (a stop, a shutdown): what else holds its pipes gets the drain's
            # grace, not the rest of the build's deadline.
            pipes_until = min(deadline, time.monotonic() + _DRAIN_S)
        for pump in pumps:
            pump.join(timeout=max(0.0, pipes_until - time.monotonic()))
    except BaseException:
        _kill_group(proc)
        proc.wait()
        _drain(pumps)
        raise
    if timed_out or any(pump.is_alive() for pump in pumps):
        _kill_group(proc)
        proc.wait()
        _drain(pumps)
        raise ProcessTimeout(timeout_s, *_outputs(pumps, proc))
    return Completed(proc.returncode, *_outputs(pumps, proc))


def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Reap the child, or return False once `timeout_s` has passed.

    `Popen.wait(timeout=...)` polls with sleeps that double up to 50 ms, which
    added about 2 ms to every short git call a build makes; a pidfd becomes
    readable the moment the child exits, so nothing sleeps. The child is ours
    and unreaped until `proc.wait()`, so its pid cannot be reused meanwhile.
    """
    if proc.poll() is not None:
        return True
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3: the polling wait
        try:
            proc.wait(timeout=max(0.0, timeout_s))
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        watch = select.poll()
        watch.register(pidfd, select.POLLIN)
        if not watch.poll(max(0, math.ceil(timeout_s * 1000))):
            return False
    finally:
        os.close(pidfd)
    proc.wait()  # it has exited: this only reaps it
    return True


def _drain(pumps: list[_Pump]) -> None:
    """Give the pipes a moment to close after a kill; then stop waiting for them.

    Something that left the group (setsid) may still hold a pipe: its reader
    is a daemon thread and is abandoned, with what it read so far kept.
    """
    stop = time.monotonic() + _DRAIN_S
    for pump in pumps:
        pump.join(timeout=max(0.0, stop - time.monotonic()))


def _outputs(pumps: list[_Pump], proc: subprocess.Popen[bytes]) -> tuple[str, str]:
    by_stream = {id(pump.stream): pump.collected() for pump in pumps}
    out = by_stream.get(id(proc.stdout), "")
    err = by_stream.get(id(proc.stderr), "") if proc.stderr is not None else ""
    return out, err
