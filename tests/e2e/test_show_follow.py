"""`agent-team show ID --follow` through the real console script, on a real slow build.

The build is the `command` builder running a shell script that prints a
line and then blocks reading a fifo the test holds; `tick` runs it in one
process while `show --follow` watches from another, as a person would.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_team import db
from tests.e2e.conftest import LONG_BODY, Cli
from tests.e2e.daemon_process import start_agent_team
from tests.waiting import wait_for

TOKEN = "ghp_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt" * 2
WAIT_S = 60.0


@dataclass
class Watcher:
    """A running `agent-team` process whose stdout lines arrive on a queue."""

    proc: subprocess.Popen[str]
    lines: queue.Queue[str | None]
    seen: list[str]

    def wait_for_line(self, text: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not any(text in line for line in self.seen):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} not printed; got {self.seen}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"exited before printing {text!r}; got {self.seen}")
            self.seen.append(line)

    def finish(self) -> tuple[int, list[str], str]:
        code = self.proc.wait(timeout=WAIT_S)
        while (line := self.lines.get(timeout=WAIT_S)) is not None:
            self.seen.append(line)
        assert self.proc.stderr is not None and self.proc.stdout is not None
        err = self.proc.stderr.read()
        self.proc.stderr.close()
        self.proc.stdout.close()  # read to its end by the pump
        return code, self.seen, err


def watch(cli: Cli, *args: str) -> Watcher:
    proc = start_agent_team(*args, env=cli.env, cwd=cli.home, output="pipes", db=cli.db_path)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return Watcher(proc, lines, [])


@dataclass
class SlowBuild:
    task_id: str
    tick: subprocess.Popen[str]
    gate: Path

    def release(self) -> None:
        with self.gate.open("w") as fifo:
            fifo.write("go\n")

    def finish(self) -> None:
        out, err = self.tick.communicate(timeout=WAIT_S)
        assert self.tick.returncode == 0, (out, err)


@pytest.fixture
def slow_build(cli: Cli, tmp_path: Path) -> Iterator[SlowBuild]:
    """A task approved and building: its script has printed one line and waits on the gate."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    script = tmp_path / "build.sh"
    script.write_text(
        "echo 'step one: compiling'\n"
        f"echo 'using token {TOKEN}' >&2\n"
        f"read line < '{gate}'\n"
        "echo 'step two: tests pass'\n",
        encoding="utf-8",
    )
    cli.env["AGENT_TEAM_BUILDER"] = "command"
    cli.env["AGENT_TEAM_BUILD_COMMAND"] = f"sh '{script}'"
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick()
    cli.answer(cli.open_question(task_id)["question_id"], "approve")
    tick = start_agent_team(
        "tick",
        "--until-idle",
        "--timeout",
        "90",
        env=cli.env,
        cwd=cli.home,
        output="pipes",
        db=cli.db_path,
    )
    build = SlowBuild(task_id, tick, gate)
    log = cli.home / "state" / "build-logs" / f"{task_id}.json"

    def first_line_written() -> bool:
        if log.exists() and "step one" in log.read_text(encoding="utf-8"):
            return True
        assert tick.poll() is None, tick.communicate()
        return False

    wait_for(first_line_written, "the build to print its first line", timeout_s=WAIT_S)
    try:
        yield build
    finally:
        if tick.poll() is None:
            # Unblock the script (the fifo open waits for a writer), then let tick end.
            try:
                fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader: the script is past the gate
                pass
            else:
                os.write(fd, b"go\n")
                os.close(fd)
            tick.communicate(timeout=WAIT_S)


@pytest.mark.slow
def test_follow_prints_the_tail_then_new_lines_until_the_task_is_done(
    cli: Cli, slow_build: SlowBuild
) -> None:
    watcher = watch(cli, "show", slow_build.task_id, "--follow")
    watcher.wait_for_line("step one: compiling")
    assert any(line.startswith("build output (running for ") for line in watcher.seen)
    assert not any("step two" in line for line in watcher.seen)

    slow_build.release()
    slow_build.finish()
    code, lines, err = watcher.finish()

    assert code == 0, err
    output = "\n".join(lines)
    assert TOKEN not in output and "using token [redacted]" in output
    build = lines[lines.index("step one: compiling") :]
    assert build[:3] == ["step one: compiling", "using token [redacted]", "step two: tests pass"]
    assert build[3].startswith("── agent-team: build finished after ")
    assert lines[-1].startswith("-- the task is now done (phase done); the last build finished")
    assert cli.show(slow_build.task_id)["task"]["status"] == "done"


@pytest.mark.slow
def test_ctrl_c_stops_following_cleanly(cli: Cli, slow_build: SlowBuild) -> None:
    watcher = watch(cli, "show", slow_build.task_id, "--follow")
    watcher.wait_for_line("step one: compiling")
    watcher.proc.send_signal(signal.SIGINT)
    code, lines, err = watcher.finish()
    assert code == 0
    assert lines[-1] == "(stopped following; the task goes on)"
    assert "Traceback" not in err
    # The build was not disturbed.
    slow_build.release()
    slow_build.finish()
    assert cli.show(slow_build.task_id)["task"]["status"] == "done"


@pytest.mark.slow
def test_with_nothing_running_follow_prints_the_tail_and_returns(
    cli: Cli, slow_build: SlowBuild
) -> None:
    slow_build.release()
    slow_build.finish()
    done = cli.run("show", slow_build.task_id, "--follow")
    lines = done.stdout.splitlines()
    tail = lines[lines.index("step one: compiling") :]
    assert tail[:3] == ["step one: compiling", "using token [redacted]", "step two: tests pass"]
    assert lines[-1] == "-- the task is done (phase done); nothing is running"
    assert any(line.startswith("build output (the last build finished after ") for line in lines)
    # A task that never built has no output and says so.
    other = cli.submit("Something else entirely", "Make login nicer.")
    lines = cli.run("show", other, "--follow").stdout.splitlines()
    assert "build output (no build output yet):" in lines
    assert lines[-1] == "-- the task is queued (phase intake); nothing is running"


@pytest.mark.slow
def test_follow_with_no_daemon_says_why_it_waits(cli: Cli) -> None:
    # #31 (5): a task left `running` by a daemon that is gone was followed in silence.
    task_id = cli.submit("Remember the email", LONG_BODY)
    with db.open_ledger(cli.db_path) as ledger:
        db.set_task_status(ledger, task_id, "running")

    watcher = watch(cli, "show", task_id, "--follow")
    watcher.wait_for_line("no daemon is running on this ledger: start one with `")
    watcher.wait_for_line("(following anyway: the output comes once `")
    assert not any(" so far" in line for line in watcher.seen)  # nothing counts on
    watcher.proc.send_signal(signal.SIGINT)
    code, lines, err = watcher.finish()

    assert code == 0, err
    assert lines[-1] == "(stopped following; the task goes on)"
