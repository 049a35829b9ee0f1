"""`agent-team automation ...`: scheduled task templates, and their runs."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from agent_team import db
from agent_team.automations import service
from agent_team.automations.runner import AutomationRunner, runner_for, schedule_of
from agent_team.cli.support import (
    AsOption,
    RepoOption,
    acting_actor,
    context_of,
    id_table,
    open_ready,
    open_writable,
    out,
    print_json,
    when,
)
from agent_team.common.repo_spec import checked_repo
from agent_team.common.timefmt import relative
from agent_team.exceptions import InvalidAutomationError, InvalidRepoError
from agent_team.requests.actors import cli_actor

__all__ = ["automation_app"]

automation_app = typer.Typer(
    help="Recurring work: task templates on a schedule (every 1d, a cron line, once).",
    no_args_is_help=True,
)

NameArg = Annotated[str, typer.Argument(help="The automation's name or id.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _body(body: str | None, body_file: Path | None) -> str | None:
    if body is not None and body_file is not None:
        raise InvalidAutomationError("body", "give --body or --body-file, not both")
    if body_file is not None:
        try:
            return body_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidAutomationError("body", f"cannot read {body_file}: {exc}") from None
    return body


def _repo(repo: str | None) -> str | None:
    """`--repo` with a relative path read against this folder (the service takes absolute)."""
    if not repo or not repo.strip():
        return repo
    try:
        return checked_repo(repo, cwd=Path.cwd())
    except InvalidRepoError as exc:
        raise InvalidAutomationError("repo", str(exc)) from None


def _schedule_text(automation: db.Automation) -> str:
    return service.describe(schedule_of(automation))


def _next_run(automation: db.Automation, ctx: typer.Context) -> str:
    if automation.status != "active":
        return f"- ({automation.status})"
    return _when(automation.next_run_at, ctx)


def _when(stamp: str | None, ctx: typer.Context) -> str:
    if stamp is None:
        return "-"
    moment = relative(db.from_iso(stamp), context_of(ctx).now())
    return f"{stamp[:16].replace('T', ' ')} UTC ({moment})"


def _view(automation: db.Automation, last: db.RunView | None = None) -> dict[str, Any]:
    found = asdict(automation)
    found["schedule"] = _schedule_text(automation)
    if last is not None:
        found["last_run"] = {**asdict(last.run), "task_status": last.task_status}
    return found


def _runner(ctx: typer.Context, ledger: db.Ledger) -> AutomationRunner:
    """`run-now` from the CLI: the daemon's budget gate and task submission, on this ledger."""
    cli = context_of(ctx)
    return runner_for(ledger, cli.settings(), clock=cli.now, owner=f"cli:{cli_actor().name}")


def _print_one(ctx: typer.Context, automation: db.Automation, verb: str) -> None:
    out.print(
        f"{verb} {automation.name} ({automation.automation_id}): {_schedule_text(automation)}, "
        f"{automation.status}; next run {_next_run(automation, ctx)}"
    )


@automation_app.command("add")
def add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A unique name, e.g. dependency-review.")],
    title: Annotated[str, typer.Option("--title", help="The task's title.")],
    body: Annotated[str | None, typer.Option("--body", help="The task's body.")] = None,
    body_file: Annotated[
        Path | None, typer.Option("--body-file", help="Read the body from this file.")
    ] = None,
    every: Annotated[
        str | None, typer.Option("--every", help="An interval: 30m, 1h, 1d, 7d (1m at least).")
    ] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help="A cron line, e.g. '0 9 * * MON'.")
    ] = None,
    timezone: Annotated[
        str | None, typer.Option("--tz", help="The cron line's time zone (default UTC).")
    ] = None,
    first_run_at: Annotated[
        str | None,
        typer.Option(
            "--first-run-at",
            help="ISO 8601 (2026-12-07T09:00, in --tz if no offset); in the past: due at once.",
        ),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="One run, at --first-run-at.")] = False,
    kind: Annotated[str, typer.Option("--kind", help="code or confluence.")] = "code",
    repo: RepoOption = None,
    overlap: Annotated[
        str,
        typer.Option(
            "--overlap", help="skip: no run while the last run's task is open; allow: run anyway."
        ),
    ] = "skip",
    acting_as: AsOption = None,
) -> None:
    """Add an automation: due at once (--every, a past --first-run-at) or at its first slot."""
    request = service.AutomationRequest(
        name=name,
        title=title,
        body=_body(body, body_file),
        kind=kind,
        repo=_repo(repo),
        every=every,
        cron=cron,
        timezone=timezone,
        first_run_at=first_run_at,
        once=once,
        overlap=overlap,
    )
    settings = context_of(ctx).settings()
    with open_writable(ctx) as ledger:
        made = service.create(
            ledger,
            request,
            actor=acting_actor(ledger, acting_as),
            now=context_of(ctx).now(),
            confluence_enabled=settings.confluence_enabled,
        )
    _print_one(ctx, made, "added")


@automation_app.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[
        str | None, typer.Option("--status", help="active, paused or cancelled.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Automations with their schedule, next run and last run."""
    if status is not None and status not in ("active", "paused", "cancelled"):
        raise InvalidAutomationError(
            "status", f"{status!r} is not one of: active, paused, cancelled"
        )
    with open_ready(ctx) as ledger:
        found = db.list_automations(ledger, status=status)
        last = db.last_runs(ledger)
    if as_json:
        print_json([_view(a, last.get(a.automation_id)) for a in found])
        return
    if not found:
        out.print("no automations (add one: agent-team automation add NAME --title ... --every 1d)")
        return
    table = id_table("name", "id", "schedule", "status", "next run", "last run", ids=("id",))
    for automation in found:
        run = last.get(automation.automation_id)
        last_text = "-"
        if run is not None:
            last_text = f"{run.run.slot_at[:16].replace('T', ' ')} {run.run.status}"
            if run.task_status:
                last_text += f" (task {run.run.task_id} {run.task_status})"
        table.add_row(
            automation.name,
            automation.automation_id,
            _schedule_text(automation),
            automation.status,
            _next_run(automation, ctx),
            last_text,
        )
    out.print(table)


@automation_app.command("show")
def show(
    ctx: typer.Context,
    name: NameArg,
    runs: Annotated[int, typer.Option("--runs", help="How many recent runs.", min=1, max=500)] = 20,
    as_json: JsonOpt = False,
) -> None:
    """One automation: its template, schedule and recent runs with their tasks' status."""
    with open_ready(ctx) as ledger:
        automation = service.find(ledger, name)
        recent = db.list_runs(ledger, automation.automation_id, limit=runs)
    if as_json:
        print_json(
            {
                **_view(automation),
                "runs": [{**asdict(v.run), "task_status": v.task_status} for v in recent],
            }
        )
        return
    out.print(f"{automation.name} ({automation.automation_id}), {automation.status}")
    out.print(f"  schedule: {_schedule_text(automation)}; overlap {automation.overlap}")
    out.print(f"  next run: {_next_run(automation, ctx)}")
    out.print(f"  task: [{automation.kind}] {automation.title}")
    if automation.repo:
        out.print(f"  repository: {automation.repo}")
    out.print(f"  created by {automation.created_by} at {when(automation.created_at)}")
    if not recent:
        out.print("no runs yet")
        return
    table = id_table("slot", "run", "missed", "task", "task status", "detail", ids=("task",))
    for view in recent:
        run = view.run
        table.add_row(
            run.slot_at[:16].replace("T", " ") + (" (run-now)" if run.manual else ""),
            run.status,
            str(run.missed) if run.missed else "",
            run.task_id if view.task_status else "",
            view.task_status or "",
            run.detail or "",
        )
    out.print(table)


@automation_app.command("update")
def update(
    ctx: typer.Context,
    name: NameArg,
    new_name: Annotated[str | None, typer.Option("--name", help="A new name.")] = None,
    title: Annotated[str | None, typer.Option("--title")] = None,
    body: Annotated[str | None, typer.Option("--body")] = None,
    body_file: Annotated[Path | None, typer.Option("--body-file")] = None,
    every: Annotated[str | None, typer.Option("--every")] = None,
    cron: Annotated[str | None, typer.Option("--cron")] = None,
    timezone: Annotated[str | None, typer.Option("--tz")] = None,
    first_run_at: Annotated[str | None, typer.Option("--first-run-at")] = None,
    once: Annotated[bool, typer.Option("--once")] = False,
    kind: Annotated[str | None, typer.Option("--kind")] = None,
    repo: Annotated[
        str | None,
        typer.Option(
            "--repo", help="A path, https://host/owner/name, git@host:… or owner/name; '' clears."
        ),
    ] = None,
    overlap: Annotated[str | None, typer.Option("--overlap")] = None,
    acting_as: AsOption = None,
) -> None:
    """Change an automation; a new schedule starts from now (missed slots are not made up)
    unless --first-run-at is given, which is due at once if it has passed."""
    request = service.AutomationRequest(
        name=new_name,
        title=title,
        body=_body(body, body_file),
        kind=kind,
        repo=_repo(repo),
        every=every,
        cron=cron,
        timezone=timezone,
        first_run_at=first_run_at,
        once=once,
        overlap=overlap,
    )
    settings = context_of(ctx).settings()
    with open_ready(ctx) as ledger:
        changed = service.update(
            ledger,
            name,
            request,
            actor=acting_actor(ledger, acting_as),
            now=context_of(ctx).now(),
            confluence_enabled=settings.confluence_enabled,
        )
    _print_one(ctx, changed, "updated")


_STATUS_HELP = {
    "pause": "Pause an automation: no runs until it is resumed.",
    "resume": "Resume a paused automation from its next slot (no catch-up of the pause).",
    "cancel": "Cancel an automation for good (its runs stay; the name is free again).",
}


def _status_command(verb: str) -> None:
    def command(ctx: typer.Context, name: NameArg, acting_as: AsOption = None) -> None:
        with open_ready(ctx) as ledger:
            actor = acting_actor(ledger, acting_as)
            changed = service.change_status(
                ledger, name, verb, actor=actor, now=context_of(ctx).now()
            )
        _print_one(ctx, changed, {"pause": "paused", "resume": "resumed"}.get(verb, "cancelled"))

    command.__doc__ = _STATUS_HELP[verb]
    automation_app.command(verb)(command)


for _verb in service.STATUS_VERBS:
    _status_command(_verb)


@automation_app.command("run-now")
def run_now(ctx: typer.Context, name: NameArg, acting_as: AsOption = None) -> None:
    """Run an automation once now, outside its schedule (budget gate and overlap policy apply)."""
    with open_ready(ctx) as ledger:
        actor = acting_actor(ledger, acting_as)
        run = service.run_now(ledger, name, runner=_runner(ctx, ledger), actor=actor)
    if run.status == "created":
        out.print(f"run {run.run_id}: task {run.task_id} created; the daemon runs it")
    else:
        out.print(f"run {run.run_id}: {run.status}: {run.detail or ''}".rstrip(": "))
        if run.status == "failed":
            raise typer.Exit(1)
