"""Watching a task's build output: what a viewer is told, and following it as it grows.

The tail itself is kept by the builder beside the ledger
(`agent_team.builders.live_log`). `build_output` reads it as a viewer needs
it: the new text since the offset it has, whether a build is running now
(the log's own flag is not enough after a crash, so the task's status
decides), how long it has run, and whether to keep asking. The dashboard's
card and `GET /api/task/{id}/log?after=<end>` use it (so a page polling
every second or two moves a few lines, not the whole tail), and
`follow_build` is `agent-team show ID --follow`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_team import db
from agent_team.builders.live_log import LogTail
from agent_team.common.redact import redact
from agent_team.common.timefmt import span
from agent_team.task_model import TaskStatus

__all__ = ["FOLLOW_POLL_S", "BuildOutput", "build_output", "follow_build", "state_line"]

# A task in these states may still print build output, so a viewer keeps asking.
_ACTIVE = (TaskStatus.QUEUED.value, TaskStatus.RUNNING.value)
FOLLOW_POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class BuildOutput:
    """What a viewer of a task's build output is told."""

    task_id: str
    text: str  # the tail, or only what follows `after`
    start: int  # stream offset of the kept tail's first character
    end: int  # stream offset after the last character: the next `after`
    dropped: bool  # the viewer was so far behind that some lines are gone
    exists: bool  # some build of the task has printed
    running: bool  # a build runs now
    follow: bool  # the task may print more: keep asking
    started_at: str | None
    ended_at: str | None
    elapsed_s: float | None
    outcome: str | None  # ok | failed | stopped (its process ended without closing the log)

    @property
    def elapsed(self) -> str:
        """The elapsed time for people: `12 s`, `3m 05s`."""
        if self.elapsed_s is None:
            return ""
        seconds = max(0, int(self.elapsed_s))
        return f"{seconds} s" if seconds < 60 else span(seconds)

    def as_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "dropped": self.dropped,
            "exists": self.exists,
            "running": self.running,
            "follow": self.follow,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "elapsed_s": self.elapsed_s,
            "outcome": self.outcome,
        }


def build_output(
    task_id: str,
    status: str,
    tail: LogTail | None,
    now: datetime,
    *,
    after: int | None = None,
    secrets: tuple[str, ...] = (),
) -> BuildOutput:
    """The view of a task's build output; `after` (a previous `end`) asks only for what is new.

    Args:
        task_id: the task.
        status: its status now (the ledger's word on whether a build can be running).
        tail: its kept output, if any.
        now: the dashboard's clock, for a running build's elapsed time.
        after: the `end` of the previous answer; None asks for the whole tail.
        secrets: the dashboard's own secrets, never shown.


    The text was redacted when it was written; it is redacted again with the
    dashboard's own secrets, as every text the dashboard shows is.
    """
    follow = status in _ACTIVE
    if tail is None:
        return BuildOutput(
            task_id=task_id,
            text="",
            start=0,
            end=0,
            dropped=False,
            exists=False,
            running=False,
            follow=follow,
            started_at=None,
            ended_at=None,
            elapsed_s=None,
            outcome=None,
        )
    text, dropped = (tail.text, False) if after is None else tail.since(after)
    # The file says "running" until its writer closes it; a writer that died cannot.
    running = tail.running and status == TaskStatus.RUNNING.value
    outcome = tail.outcome if not tail.running else (None if running else "stopped")
    started = db.from_iso(tail.started_at) if tail.started_at else None
    ended = db.from_iso(tail.ended_at) if tail.ended_at else None
    elapsed = None
    if started is not None and (ended is not None or running):
        elapsed = round(max(0.0, ((ended or now) - started).total_seconds()), 1)
    return BuildOutput(
        task_id=task_id,
        text=redact(text, secrets),
        start=tail.start,
        end=tail.end,
        dropped=dropped,
        exists=True,
        running=running,
        follow=follow,
        started_at=tail.started_at,
        ended_at=tail.ended_at,
        elapsed_s=elapsed,
        outcome=outcome,
    )


def state_line(output: BuildOutput) -> str:
    """One line on where the build stands, for people."""
    if output.running:
        return f"running for {output.elapsed}"
    if output.outcome == "ok":
        return f"the last build finished after {output.elapsed}"
    if output.outcome == "failed":
        return f"the last build failed after {output.elapsed}"
    if output.outcome == "stopped":
        return "the last build stopped without finishing (its process ended)"
    return "no build output yet"


def follow_build(
    look: Callable[[int | None], tuple[str, str, BuildOutput]],
    write: Callable[[str], None],
    *,
    poll_s: float = FOLLOW_POLL_S,
    wait: Callable[[float], object] = time.sleep,
) -> str:
    """Print the kept tail, then what is added, while the task stays in the step it is in.

    Args:
        look: reads the task once: `(status, phase, output after the offset given)`;
            None asks for the whole tail. It must read the status before the
            tail: the log is complete before the task leaves the build, so a
            look that sees the task gone also sees the whole log.
        write: prints text as it is (no added newlines).
        poll_s: how often to look again.
        wait: how to pause between looks (tests may step it).

    Returns:
        Why it stopped, for a last line: the status and phase the task reached,
        or that nothing was running.
    """
    status, phase, output = look(None)
    write(f"build output ({state_line(output)}):\n")
    write(output.text)
    offset = output.end
    if status != TaskStatus.RUNNING.value:
        return f"the task is {status} (phase {phase}); nothing is running"
    step = phase
    while True:
        wait(poll_s)
        status, phase, output = look(offset)
        if output.dropped:
            write("… (lines were printed faster than they could be shown; some are left out)\n")
        write(output.text)
        offset = output.end
        if status != TaskStatus.RUNNING.value or phase != step:
            return f"the task is now {status} (phase {phase}); {state_line(output)}"
