"""`agent-team show`: one task's journey, its questions and answers, the current plan.

Everything comes from `reports.task.read_task_report`, the report the task
page and `/api/task` read too; this module only prints it. Times are shown
to the second in UTC (the ledger keeps microseconds; `--json` prints them as
stored), answers as people wrote them, and a task that nothing runs says so
instead of counting "so far" (`reports.presence`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated

import typer
from rich.table import Table

from agent_team import db
from agent_team.cli.support import (
    context_of,
    deadline_cell,
    hint,
    id_table,
    open_ready,
    out,
    when,
)
from agent_team.common.log_format import escape_controls
from agent_team.common.redact import redact
from agent_team.common.timefmt import relative, span, utc_text
from agent_team.exceptions import AgentTeamError
from agent_team.reports import task as reports
from agent_team.reports.journey import answer_text, who_answered
from agent_team.reports.plandiff import EDIT, PlanVersion, changes_text
from agent_team.reports.presence import daemon_presence
from agent_team.reports.pull_request import PullRequestTimeline
from agent_team.task_model import TERMINAL_STATUSES, TaskStatus

__all__ = ["show"]


def show(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="The task id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="Then print the build output as it comes, until the step ends."
        ),
    ] = False,
) -> None:
    """A task's journey: each step's outcome, duration and cost; questions; the plan."""
    settings = context_of(ctx).settings()
    with open_ready(ctx) as ledger:
        now = context_of(ctx).now()
        report = reports.read_task_report(ledger, task_id, now)
        # Whether anything will move the task: asked only where something still could.
        presence = (
            None
            if as_json or report.task.status in TERMINAL_STATUSES
            else daemon_presence(ledger, settings.ledger_target, now)
        )
    if as_json:
        text = json.dumps(report.to_json(), indent=2, sort_keys=True, ensure_ascii=False)
        sys.stdout.write(text + "\n")
        return
    idle = presence is not None and presence.running is False
    _print_report(report, now=now, idle=idle)
    if presence is not None and presence.running is not True:
        out.print(hint(presence.detail))
    if follow:
        _follow(ctx, task_id, waiting=idle and report.task.status == TaskStatus.RUNNING)


def _print_report(report: reports.TaskReport, *, now: datetime, idle: bool) -> None:
    task = report.task
    out.print(f"{task.id}: {task.title} ({task.kind}, from {task.source})")
    parked = f", parked: {task.parked_reason}" if task.parked_reason else ""
    where = f"stopped in {report.stopped_in}" if report.stopped_in else f"phase {task.phase}"
    out.print(f"status {task.status}, {where}{parked}")
    if task.resume_at:
        resume_at = db.from_iso(task.resume_at)
        out.print(
            hint(
                f"continues by itself at {utc_text(resume_at)} ({relative(resume_at, now)}); "
                f"or now: agent-team retry {task.id}"
            )
        )
    if task.checkpoints_pruned_at:
        out.print(
            f"checkpoints pruned at {when(task.checkpoints_pruned_at)} "
            "(AGENT_TEAM_CHECKPOINT_RETENTION); this is the ledger's own record"
        )
    journey = Table(
        "#",
        "step",
        "outcome",
        "entered (UTC)",
        "duration",
        "USD",
        "model",
        "note",
        title="steps",
    )
    for step in report.steps:
        # A step waiting on a person counts on; one that should be running but that no
        # process runs only seems to (its daemon is gone).
        stalled = idle and step.outcome in (TaskStatus.RUNNING, TaskStatus.QUEUED)
        counting = " (nothing runs it now)" if stalled else " so far"
        journey.add_row(
            str(step.number),
            step.phase,
            step.label,
            when(step.entered_at).removesuffix(" UTC"),
            span(step.duration_s) + (counting if step.is_open else ""),
            f"{step.cost_usd:.4f}",
            ", ".join(step.models),
            hint(step.note or ""),
        )
    out.print(journey)
    if report.failures_by_stage:
        out.print("model calls that failed:")
        for stage in report.failures_by_stage:
            out.print(f"  {stage.line()}", markup=False, highlight=False)
    if report.pull_request is not None:
        _print_pull_request(report.pull_request)
    if report.questions:
        asked = id_table(
            "question",
            "kind",
            "status",
            "deadline",
            "answered",
            "answer",
            ids=("question",),
            title="questions",
        )
        for q in report.questions:
            who = f"{who_answered(q.answered_via)}, {when(q.answered_at)}" if q.answered_at else ""
            asked.add_row(
                q.question_id,
                q.kind,
                q.status,
                deadline_cell(q.deadline_at, now, status=q.status),
                who,
                answer_text(q.answer),
            )
        out.print(asked)
        _print_clarify(report.questions)
    _print_plan(report.plans)
    if report.notes:
        out.print("notes:")
        for note in report.notes:
            out.print(f"  {when(note.at)} {note.who} via {note.via}:")
            out.print("    " + note.text.replace("\n", "\n    "))
    out.print(f"total ${report.totals.cost_usd:.4f}, {report.totals.tokens} tokens")


def _print_clarify(questions: Sequence[reports.QuestionView]) -> None:
    """The clarify exchange so far: each question and its answer."""
    for q in questions:
        if q.kind != "clarify":
            continue
        answer = q.answer.get("text") if isinstance(q.answer, dict) else None
        out.print(f"\nclarify {q.question_id}: {q.text or ''}")
        out.print(f"  answer: {answer}" if answer else f"  ({q.status}, no answer yet)")


def _print_plan(plans: Sequence[PlanVersion]) -> None:
    """The current plan (after an `edit`, the person's: the one built) and what it changed."""
    if not plans:
        return
    current = plans[-1]
    if current.source == EDIT:
        source = f"edited by {who_answered(current.answered_via)} in {current.question_id}"
    else:
        source = f"{current.question_id}, {current.status}"
    out.print(f"\nthe plan ({source}):\n{current.markdown.strip()}")
    if current.base is None:
        return
    base = plans[current.base - 1]
    asked = f"{base.decision or base.status}"
    if base.answered_via:
        asked += f" by {who_answered(base.answered_via)}"
    if base.feedback:
        asked += f": {base.feedback}"
    out.print(f"\nchanged since plan {base.number} ({asked}):")
    out.print(changes_text(current.diff, limit=20_000))


def _print_pull_request(pull: PullRequestTimeline) -> None:
    """The PR and what happened on it, round by round (`reports.pull_request`).

    Review bodies and logins come from GitHub: each line is redacted and its
    control characters made visible, so a review cannot move the terminal's cursor.
    """

    def say(text: str) -> None:
        out.print(escape_controls(redact(text)), markup=False, highlight=False)

    say(f"pull request {pull.headline}: {pull.url or ''}")
    times = [f"opened {when(pull.opened_at)}"]
    if pull.ready_at:
        times.append(f"ready {when(pull.ready_at)}")
    if pull.merged_at:
        times.append(f"merged {when(pull.merged_at)}")
    elif pull.closed_at:
        times.append(f"closed {when(pull.closed_at)}")
    say(
        f"  {', '.join(times)} ({span(pull.open_for_s)}{' so far' if pull.state == 'open' else ''})"
    )
    for part in pull.timeline:
        say(f"  round {part.number}: {part.title}")
        for entry in part.entries:
            link = f"  {entry.url}" if entry.url and entry.source == "event" else ""
            say(f"    {when(entry.at) or 'not yet'}  {entry.summary}{link}")
            if entry.body:
                say(f"      {entry.body}")


def _follow(ctx: typer.Context, task_id: str, *, waiting: bool) -> None:
    """`show --follow`: the build output's tail, then what is added; Ctrl-C ends it quietly.

    `waiting`: the ledger says the task runs but nothing runs it (its daemon is
    gone); it is followed all the same, for the daemon that picks it up, but
    the wait is said rather than silent.
    """
    from agent_team.builders.live_log import read_build_log, state_dir_of
    from agent_team.reports.build_watch import BuildOutput, build_output, follow_build

    settings = context_of(ctx).settings()
    state_dir = state_dir_of(settings)

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    # Ctrl-C anywhere in here ends the following quietly, from the first line on: a
    # person presses it as soon as they read why it waits.
    try:
        if waiting:
            write(
                hint(
                    "(following anyway: the output comes once `agent-team daemon` or "
                    "`agent-team tick` runs the task again; Ctrl-C stops following)\n"
                )
            )
        with db.open_ledger(settings.ledger_target, readonly=True) as ledger:

            def look(after: int | None) -> tuple[str, str, BuildOutput]:
                task = db.get_task(ledger, task_id)  # first the status, then the log
                if task is None:
                    raise AgentTeamError(f"task {task_id} is gone from the ledger")
                tail = read_build_log(state_dir, task_id)
                now = context_of(ctx).now()
                return (
                    task.status,
                    task.phase,
                    build_output(task.id, task.status, tail, now, after=after),
                )

            ending = follow_build(look, write)
    except KeyboardInterrupt:
        write("\n(stopped following; the task goes on)\n")
        return
    write(f"-- {ending}\n")
