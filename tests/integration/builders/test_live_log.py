"""A build's live output: streamed from the real process into a bounded, redacted file.

The slow builds here are real shell scripts that print a line and then block
reading a fifo the test controls, so "while it runs" is a state the test
holds, not a moment it sleeps until.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_team.builders import BuildTask, CommandBuilder, run_build
from agent_team.builders.live_log import (
    MAX_CHARS,
    MAX_LINES,
    open_build_log,
    read_build_log,
)
from agent_team.builders.proc import run_process
from agent_team.exceptions import BuildError
from tests.waiting import wait_for

PLAN = "# Plan\n\nPrint slowly.\n"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    """A fifo a script blocks on (`read line < gate`) until the test writes to it."""
    path = tmp_path / "gate"
    os.mkfifo(path)
    yield path


def release(gate: Path) -> None:
    with gate.open("w") as fifo:
        fifo.write("go\n")


def slow_script(tmp_path: Path, gate: Path) -> str:
    script = tmp_path / "slow.sh"
    script.write_text(
        "echo 'step one: warming up'\n"
        f"echo 'pushing with token {TOKEN}' >&2\n"
        f"read line < '{gate}'\n"
        "echo 'step two: done'\n",
        encoding="utf-8",
    )
    return f"sh '{script}'"


def test_run_process_hands_output_over_while_the_child_still_runs(
    tmp_path: Path, gate: Path
) -> None:
    seen: list[bytes] = []
    result: dict[str, object] = {}

    def run() -> None:
        result["done"] = run_process(
            slow_script(tmp_path, gate),
            cwd=tmp_path,
            env=dict(os.environ),
            timeout_s=60,
            shell=True,
            merge_stderr=True,
            on_output=seen.append,
        )

    worker = threading.Thread(target=run)
    worker.start()
    wait_for(lambda: b"step one" in b"".join(seen), "the first line handed over", timeout_s=30)
    assert worker.is_alive() and b"step two" not in b"".join(seen)
    release(gate)
    worker.join(timeout=60)
    done = result["done"]
    assert b"step two" in b"".join(seen)
    assert "step one" in done.stdout and "step two" in done.stdout  # type: ignore[attr-defined]


def test_a_failing_sink_is_dropped_and_the_output_still_collected(tmp_path: Path) -> None:
    calls: list[bytes] = []

    def broken(chunk: bytes) -> None:
        calls.append(chunk)
        raise RuntimeError("viewer went away")

    done = run_process(
        "echo one; echo two",
        cwd=tmp_path,
        env=dict(os.environ),
        timeout_s=30,
        shell=True,
        on_output=broken,
    )
    assert done.returncode == 0 and done.stdout == "one\ntwo\n"
    assert len(calls) == 1


def test_the_command_builders_output_is_in_the_task_log_while_it_runs(
    tmp_path: Path, gate: Path
) -> None:
    state_dir = tmp_path / "state"
    task = BuildTask(task_id="gh:org/repo#7", title="Print slowly")
    builder = CommandBuilder(slow_script(tmp_path, gate), 60)
    worker = threading.Thread(
        target=run_build,
        args=(builder, task, PLAN),
        kwargs={"repo_path": None, "state_dir": state_dir},
    )
    worker.start()

    def tail_text() -> str:
        tail = read_build_log(state_dir, task.task_id)
        return tail.text if tail is not None else ""

    wait_for(
        lambda: "step one: warming up" in tail_text(), "the first line in the log", timeout_s=30
    )
    running = read_build_log(state_dir, task.task_id)
    assert running is not None and running.running and running.ended_at is None
    assert "step two" not in running.text
    assert TOKEN not in running.text and "pushing with token [redacted]" in running.text
    release(gate)
    worker.join(timeout=60)

    finished = read_build_log(state_dir, task.task_id)
    assert finished is not None
    assert not finished.running and finished.outcome == "ok" and finished.ended_at
    lines = finished.text.splitlines()
    assert lines[0].startswith("── agent-team: build started at ")
    assert lines[1:4] == [
        "step one: warming up",
        "pushing with token [redacted]",
        "step two: done",
    ]
    assert lines[-1].startswith("── agent-team: build finished after ")
    assert TOKEN not in (state_dir / "build-logs").joinpath(
        os.listdir(state_dir / "build-logs")[0]
    ).read_text(encoding="utf-8")


def test_a_failed_build_says_so_at_the_end_of_its_log(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    task = BuildTask(task_id="t-fail", title="Fail")
    with pytest.raises(BuildError):
        run_build(
            CommandBuilder("echo about to fail; exit 3", 30),
            task,
            PLAN,
            repo_path=None,
            state_dir=state_dir,
        )
    tail = read_build_log(state_dir, task.task_id)
    assert tail is not None and tail.outcome == "failed" and not tail.running
    assert "about to fail\n" in tail.text
    assert "build failed after" in tail.text and "exited with code 3" in tail.text


def test_the_tail_is_bounded_and_offsets_say_what_is_new(tmp_path: Path) -> None:
    log = open_build_log(tmp_path, "t-big")
    total = 0
    for n in range(3000):
        line = f"line {n:05d} " + "x" * 90 + "\n"
        total += len(line)
        log(line.encode())
    log.close("ok")
    tail = read_build_log(tmp_path, "t-big")
    assert tail is not None
    assert len(tail.text) <= MAX_CHARS and tail.text.count("\n") <= MAX_LINES
    assert "line 02999 " in tail.text and "line 00000 " not in tail.text
    assert tail.end > total and tail.start == tail.end - len(tail.text)
    # A follower that is up to date gets nothing; one that saw some of the tail, the rest.
    assert tail.since(tail.end) == ("", False)
    last_line = tail.text.splitlines(keepends=True)[-1]
    assert tail.since(tail.end - len(last_line)) == (last_line, False)
    # One that fell further behind than the tail reaches gets all of it, flagged.
    assert tail.since(0) == (tail.text, True)
    # Long lines meet the character bound before the line bound.
    wide = open_build_log(tmp_path, "t-wide")
    for n in range(1000):
        wide(f"{n:04d} {'w' * 995}\n".encode())
    wide.close("ok")
    wide_tail = read_build_log(tmp_path, "t-wide")
    assert wide_tail is not None
    assert MAX_CHARS - 1100 < len(wide_tail.text) <= MAX_CHARS
    assert wide_tail.text.count("\n") < MAX_LINES / 4


def test_a_token_split_over_chunks_or_lines_held_back_never_reaches_the_file(
    tmp_path: Path,
) -> None:
    log = open_build_log(tmp_path, "t-secret")
    path = tmp_path / "build-logs" / "t-secret.json"
    log(b"first line\npush token=" + TOKEN[:6].encode())
    wait_for(
        lambda: "first line" in path.read_text(encoding="utf-8"), "the first line", timeout_s=30
    )
    assert "ghp_" not in path.read_text(encoding="utf-8")  # the unfinished line waits
    log(TOKEN[6:].encode() + b"\nlast\n")
    log.close("ok")
    text = path.read_text(encoding="utf-8")
    assert TOKEN[:8] not in text and "push token=[redacted]\nlast\n" in json.loads(text)["text"]


def test_undecodable_bytes_carriage_returns_and_a_huge_line_are_kept_readable(
    tmp_path: Path,
) -> None:
    log = open_build_log(tmp_path, "t-odd")
    log(b"caf\xc3")  # half of an "é"
    log(b"\xa9 \xff\r10%\r20%\r\n")
    log(b"y " * 5000)
    log.close("ok")
    tail = read_build_log(tmp_path, "t-odd")
    assert tail is not None
    lines = tail.text.splitlines()
    assert lines[1:4] == ["café \ufffd", "10%", "20%"]
    assert all(len(line) <= 4096 for line in lines)
    assert sum(line.count("y") for line in lines) == 5000


def test_the_log_survives_a_reopen_and_a_crashed_writer(tmp_path: Path) -> None:
    first = open_build_log(tmp_path, "t-again")
    first(b"run one\n")
    first.close("failed", "exited with code 1")
    before = read_build_log(tmp_path, "t-again")
    assert before is not None

    # A second writer in a process that dies without closing (as under kill -9).
    code = (
        "import os, sys; from pathlib import Path\n"
        "from agent_team.builders.live_log import open_build_log\n"
        "log = open_build_log(Path(sys.argv[1]), 't-again')\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=60)
    crashed = read_build_log(tmp_path, "t-again")
    assert crashed is not None and crashed.running
    assert crashed.text.startswith(before.text) and crashed.start == before.start

    third = open_build_log(tmp_path, "t-again")
    third(b"run three\n")
    third.close("ok")
    after = read_build_log(tmp_path, "t-again")
    assert after is not None and not after.running
    assert after.text.startswith(before.text)
    new, dropped = after.since(before.end)
    assert not dropped
    assert [line.split(" at ")[0].split(" after ")[0] for line in new.splitlines()] == [
        "── agent-team: build started",
        "── agent-team: the previous build stopped without finishing ──",
        "── agent-team: build started",
        "run three",
        "── agent-team: build finished",
    ]


def test_a_log_that_cannot_be_written_never_fails_the_build(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "build-logs").write_text("not a folder", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        log = open_build_log(tmp_path, "t-nowhere")
        log(b"output\n")
        log.close("ok")
    assert read_build_log(tmp_path, "t-nowhere") is None
    warnings = [r for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(warnings) == 1


def test_an_unreadable_or_foreign_file_reads_as_no_log(tmp_path: Path) -> None:
    folder = tmp_path / "build-logs"
    folder.mkdir()
    (folder / "t-junk.json").write_text("{not json", encoding="utf-8")
    (folder / "t-other.json").write_text('{"version": 99}', encoding="utf-8")
    assert read_build_log(tmp_path, "t-junk") is None
    assert read_build_log(tmp_path, "t-other") is None
    assert read_build_log(tmp_path, "t-none") is None
