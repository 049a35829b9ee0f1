"""The `agent-team` command line.

Commands stay thin: parse, load settings, call `db`, print. Every error we
raise on purpose becomes one line on stderr and a non-zero exit, never a
traceback: 2 for bad input (configuration, an argument we do not take, an id
that names nothing: `BAD_INPUT`), 3 for a role below the action's, 1 for
everything else (a refusal given the task's state, the ledger, a failure).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import asdict
from datetime import date, timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from agent_team import __version__, db
from agent_team.cli.automation import automation_app
from agent_team.cli.daemons import daemons as daemons_command
from agent_team.cli.help_format import OrderedGroup, hide_flag_types
from agent_team.cli.inbox import audit_app
from agent_team.cli.inbox import inbox as inbox_command
from agent_team.cli.people import key_app, people_app
from agent_team.cli.questions import questions as questions_command
from agent_team.cli.show import show as show_command
from agent_team.cli.support import (
    AsOption,
    CliContext,
    RepoOption,
    acting_actor,
    age,
    context_of,
    deadline_cell,
    err,
    id_table,
    open_ready,
    open_writable,
    out,
    print_json,
    when,
)
from agent_team.common.invocation import command, localize
from agent_team.common.redact import redact
from agent_team.common.repo_spec import checked_repo
from agent_team.common.timefmt import parse_duration
from agent_team.config import Settings
from agent_team.exceptions import (
    AccessDeniedError,
    AgentTeamError,
    ConfigError,
    InvalidAnswerError,
    InvalidAutomationError,
    InvalidRepoError,
    LedgerInputError,
    TaskTooLargeError,
    UnknownAutomationError,
    UnknownTaskError,
)
from agent_team.reports.journey import answer_text
from agent_team.requests.task_requests import TaskRequests
from agent_team.task_model import QuestionKind, TaskKind, TaskStatus

__all__ = ["BAD_INPUT", "app", "main"]

# Errors that mean the input was wrong (exit 2, like a usage error): settings, a value
# we do not take, an id that names nothing. Nothing was stored for any of them.
BAD_INPUT: tuple[type[AgentTeamError], ...] = (
    ConfigError,
    InvalidAutomationError,
    InvalidRepoError,
    InvalidAnswerError,
    LedgerInputError,
    TaskTooLargeError,
    UnknownTaskError,
    UnknownAutomationError,
)

hide_flag_types()
app = typer.Typer(
    name="agent-team",
    help="Run an LLM agent pipeline per task, with human gates that survive crashes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OrderedGroup,
)
ledger_app = typer.Typer(help="Maintain the ledger.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")
intake_app = typer.Typer(help="Outside work coming in (GitHub issues).", no_args_is_help=True)
app.add_typer(intake_app, name="intake")
app.add_typer(automation_app, name="automation")
app.add_typer(audit_app, name="audit")
app.add_typer(people_app, name="people")
app.add_typer(key_app, name="key")
app.command("inbox")(inbox_command)
app.command("questions")(questions_command)
app.command("show")(show_command)
app.command("daemons")(daemons_command)


def _show_version(value: bool) -> None:
    if value:
        out.print(f"agent-team {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    db_path: Annotated[
        Path | None,
        typer.Option("--db", help="The ledger file (AGENT_TEAM_DB_PATH).", dir_okay=False),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="A TOML settings file.", dir_okay=False)
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_show_version, is_eager=True
        ),
    ] = False,
) -> None:
    ctx.obj = CliContext(db_override=db_path, config_file=config)


def _requests(ctx: typer.Context, ledger: db.Ledger) -> TaskRequests:
    """This command's requests: no worker here, the daemon (or `tick`) picks them up."""
    cli = context_of(ctx)
    return TaskRequests.of(ledger, cli.settings(), clock=cli.now)


@app.command()
def migrate(ctx: typer.Context) -> None:
    """Create the ledger or bring it up to the current schema, then show its state."""
    settings = context_of(ctx).settings()
    path = settings.ledger_target
    before = 0
    if not isinstance(path, Path) or path.exists():
        with db.open_ledger(path) as ledger:
            before = db.schema_version(ledger)
    version = db.init_db(path)
    db.assert_ready(path)
    with db.open_ledger(path) as ledger:
        counts = db.table_counts(ledger)
        where = ledger.location
    step = f"v{before} -> v{version}" if before != version else f"v{version}, already current"
    out.print(f"ledger {where}: schema {step}")
    table = Table("table", "rows")
    for name, count in counts.items():
        table.add_row(name, str(count))
    out.print(table)


@app.command("migrate-to-postgres")
def migrate_to_postgres(
    ctx: typer.Context,
    source: Annotated[
        Path,
        typer.Option("--from", help="The SQLite ledger to copy (it is only read).", dir_okay=False),
    ],
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="postgresql://user@host:5432/dbname (default: AGENT_TEAM_DATABASE_URL when it "
            "is a PostgreSQL URL); a password is better kept in ~/.pgpass or the variable.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check and count everything; write nothing.")
    ] = False,
    reverse: Annotated[
        bool,
        typer.Option(
            "--reverse",
            help="The way back: copy the database into a new file --from; every task must "
            "be finished and every daemon stopped.",
        ),
    ] = False,
) -> None:
    """Copy a SQLite ledger into PostgreSQL: every table, and the live tasks' checkpoints.

    Stop the daemon on the file first. Safe to run again: what is already there is skipped.
    """
    named = "--to"
    if to is None:
        target = context_of(ctx).settings().ledger_target
        if not isinstance(target, str):
            raise ConfigError(
                "--to: give the PostgreSQL URL (postgresql://user@host:5432/dbname), "
                "or set AGENT_TEAM_DATABASE_URL to one"
            )
        to, named = target, "AGENT_TEAM_DATABASE_URL"
    if reverse:
        report = db.transfer_to_sqlite(to, source, dry_run=dry_run, named=named)
    else:
        report = db.transfer_to_postgres(source, to, dry_run=dry_run, named=named)
    _print_transfer(report)


def _print_transfer(report: db.TransferReport) -> None:
    step = (
        f"v{report.target_before} -> v{report.target_after}"
        if report.target_before != report.target_after
        else f"v{report.target_after}"
    )
    if report.dry_run and report.target_before != db.SCHEMA_VERSION:
        step = f"v{report.target_before}, would be migrated to v{db.SCHEMA_VERSION}"
    out.print(
        f"{'dry run: ' if report.dry_run else ''}from {report.source} "
        f"(schema v{report.source_version}) to {report.target} (schema {step})"
    )
    copied = "would copy" if report.dry_run else "copied"
    table = Table("table", "in database" if report.reverse else "in file", copied, "already there")
    for row in report.tables:
        table.add_row(
            row.table,
            str(row.source_rows),
            "?" if row.copied is None else str(row.copied),
            "?" if row.already_there is None else str(row.already_there),
        )
    out.print(table)
    if report.reverse:
        if report.dry_run:
            out.print("dry run: nothing was written")
            return
        out.print(f"copied {report.rows_copied} row(s) in one transaction")
        out.print(
            f"next: remove AGENT_TEAM_DATABASE_URL, set AGENT_TEAM_DB_PATH={report.target} "
            "and start the daemon on the file"
        )
        return
    out.print(
        f"checkpoints of {report.live_tasks} live task(s): {copied} {report.checkpoints_copied}, "
        f"already there {report.checkpoints_present} (finished tasks' checkpoints stay behind)"
    )
    if report.released_claims:
        out.print(
            f"{report.released_claims} command(s) the stopped daemon had claimed are "
            f"{'to be ' if report.dry_run else ''}copied as pending, to run at once"
        )
    if report.dry_run:
        if any(row.copied is None for row in report.tables):
            out.print("(? : the database is compared once it is migrated)")
        out.print("dry run: nothing was written")
        return
    if report.rows_copied == 0 and report.checkpoints_copied == 0:
        out.print(
            f"nothing new to copy: all {report.rows_in_source} row(s) and "
            f"{report.checkpoints_present} checkpoint(s) were already there"
        )
        return
    out.print(
        f"copied {report.rows_copied} row(s) in one transaction"
        + (", id sequences set past the copied ids" if report.sequences else "")
    )
    out.print(
        f"next: point the daemon at it (AGENT_TEAM_DATABASE_URL={report.target}) and start "
        "it; keep the file as it is, as the way back"
    )


@app.command()
def schema(
    ctx: typer.Context,
    write: Annotated[
        Path | None, typer.Option("--write", help="Write to this file instead of printing.")
    ] = None,
    dialect: Annotated[
        str,
        typer.Option(
            "--dialect",
            help="sqlite (schema.sql) or postgres (schema.postgres.sql: migrates a scratch "
            "schema in the AGENT_TEAM_DATABASE_URL database, then drops it).",
        ),
    ] = "sqlite",
) -> None:
    """Print the ledger's DDL (what schema.sql holds); `--write schema.sql` regenerates it."""
    if dialect == "postgres":
        text = db.dump_fresh_postgres_schema(context_of(ctx).settings().ledger_target)
    elif dialect == "sqlite":
        text = db.dump_schema()
    else:
        raise ConfigError(f"--dialect {dialect!r}: use sqlite or postgres")
    if write is None:
        sys.stdout.write(text)
    else:
        write.parent.mkdir(parents=True, exist_ok=True)
        write.write_text(text, encoding="utf-8")
        out.print(f"wrote {write}")


def _parse_day(value: str | None) -> str:
    if value is None:
        return db.day_bucket(db.utc_now())
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a date; use YYYY-MM-DD") from None


@app.command()
def budget(
    ctx: typer.Context,
    day: Annotated[
        str | None, typer.Option("--day", help="UTC day, YYYY-MM-DD (default: today).")
    ] = None,
) -> None:
    """Spend on one UTC day per billing mode, model and stage."""
    bucket = _parse_day(day)
    with open_ready(ctx) as ledger:
        rows = db.usage_summary(ledger, day=bucket)
    if not rows:
        out.print(f"no model calls recorded on {bucket}")
        return
    table = Table(
        "billing",
        "model",
        "stage",
        "calls",
        "input tok",
        "output tok",
        "USD",
        title=f"budget {bucket} (UTC)",
    )
    totals: dict[str, float] = {}
    for row in rows:
        table.add_row(
            row.billing_mode,
            row.model,
            row.stage,
            str(row.calls),
            str(row.input_tokens),
            str(row.output_tokens),
            f"{row.usd_cost:.4f}",
        )
        totals[row.billing_mode] = totals.get(row.billing_mode, 0.0) + row.usd_cost
    out.print(table)
    for mode, total in totals.items():
        out.print(f"total {mode}: ${total:.4f}")


@ledger_app.command("replay")
def ledger_replay(
    ctx: typer.Context,
    outbox: Annotated[
        Path | None,
        typer.Option(
            "--outbox",
            help="The outbox file (default: AGENT_TEAM_LEDGER_OUTBOX, "
            "else budget_ledger_failures.jsonl beside the database).",
        ),
    ] = None,
) -> None:
    """Write budget rows that could not be recorded back into the ledger."""
    with open_ready(ctx) as ledger:
        path = outbox or context_of(ctx).settings().ledger_outbox or db.default_outbox_path(ledger)
        report = db.replay_outbox(path, ledger)
    out.print(
        f"outbox {path}: replayed {report['replayed']}, failed {report['failed']}, "
        f"bad lines {report['bad_lines']}, remaining {report['remaining']}"
    )
    if report["remaining"]:
        raise typer.Exit(code=1)


def _parse_duration(value: str) -> timedelta:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


@app.command()
def submit(
    ctx: typer.Context,
    title: Annotated[str, typer.Option("--title", help="One line saying what is wanted.")],
    body: Annotated[str, typer.Option("--body", help="The details (or use --body-file).")] = "",
    body_file: Annotated[
        Path | None, typer.Option("--body-file", help="Read the body from this file.", exists=True)
    ] = None,
    kind: Annotated[TaskKind, typer.Option("--kind", help="code or confluence.")] = TaskKind.CODE,
    repo: RepoOption = None,
    acting_as: AsOption = None,
) -> None:
    """Submit a task; prints its id. A running daemon or `agent-team tick` runs it."""
    if not title.strip():
        raise typer.BadParameter("--title must not be empty")
    # A relative path is this folder's; a bad repository is one line, exit 2 (`main`).
    where = checked_repo(repo, cwd=Path.cwd()) if repo else None
    text = body_file.read_text(encoding="utf-8") if body_file else body
    with open_writable(ctx) as ledger:
        task_id = _requests(ctx, ledger).submit(
            title=title.strip(),
            body=text,
            kind=kind.value,
            source="cli",
            actor=acting_actor(ledger, acting_as),
            repo=where,
        )
    sys.stdout.write(task_id + "\n")


@app.command()
def tick(
    ctx: typer.Context,
    until_idle: Annotated[
        bool, typer.Option("--until-idle", help="Repeat until nothing is left to do.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Stop after this many seconds.", min=0.1)
    ] = 300.0,
) -> None:
    """One pass of the daemon's work (GitHub intake, sweep, commands, deadlines), then exit."""
    from agent_team.integrations.github.integration import GitHubIntegration
    from agent_team.service.wiring import build_runtime  # the graph stack loads only when needed

    settings = context_of(ctx).settings()
    with build_runtime(settings, only={GitHubIntegration.name}) as runtime:
        coordinator = runtime.coordinator
        github = next((i for i in runtime.integrations if isinstance(i, GitHubIntegration)), None)
        if github is not None:  # cron mode: one intake pass, then run what it started
            intake = github.poll()
            out.print(
                f"github intake: {intake.polls} poll(s), {intake.not_modified} not modified, "
                f"{intake.tasks_created} task(s) created, {intake.recovered} recovered"
                + (f", {len(intake.errors)} error(s)" if intake.errors else "")
            )
            for problem in intake.errors[:10]:
                err.print(f"github intake: {problem}", soft_wrap=True)
            watched = github.watch_pulls()
            if watched.checked:
                out.print(
                    f"github pulls: {watched.checked} checked, {watched.unchanged} unchanged, "
                    f"{watched.answered} answered"
                )
            for problem in watched.errors[:10]:
                err.print(f"github pulls: {problem}", soft_wrap=True)
        report = coordinator.tick(until_idle=until_idle, timeout_s=timeout)
    sweep = report.sweep
    out.print(
        f"ran {report.commands} command(s), expired {report.expired}, unparked {report.unparked}; "
        f"sweep: {sweep.describe()}"
        + (
            f"; pruned the checkpoints of {report.checkpoints_pruned} finished task(s)"
            if report.checkpoints_pruned
            else ""
        )
        + ("" if report.idle else " (not idle yet)")
    )
    runs = report.automations
    if runs.created or runs.skipped_budget or runs.skipped_overlap or runs.failed:
        out.print(
            f"automations: {runs.created} task(s) created, {runs.skipped_budget} skipped "
            f"(budget), {runs.skipped_overlap} skipped (overlap), {runs.failed} failed"
        )


@app.command()
def tasks(
    ctx: typer.Context,
    status: Annotated[
        TaskStatus | None,
        typer.Option(
            "--status",
            metavar="<status>",  # the choices in the help: as a type they are cut mid-word
            help="Only tasks in this status: " + ", ".join(s.value for s in TaskStatus) + ".",
        ),
    ] = None,
    kind: Annotated[TaskKind | None, typer.Option("--kind", help="code or confluence.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List tasks, newest first, with phase, age and cost."""
    with open_ready(ctx) as ledger:
        rows = db.list_tasks(
            ledger,
            status=status.value if status else None,
            kind=kind.value if kind else None,
            limit=limit,
        )
        costs = {tid: cost.usd for tid, cost in db.task_costs(ledger, [t.id for t in rows]).items()}
        cancelled = [t.id for t in rows if t.status == TaskStatus.CANCELLED]
        stopped = db.stopped_phases(ledger, cancelled) if cancelled else {}
    if as_json:
        print_json([{**asdict(t), "cost_usd": costs.get(t.id, 0.0)} for t in rows])
        return
    if not rows:
        out.print("no tasks")
        return
    now = context_of(ctx).now()
    table = id_table("task", "status", "phase", "age", "USD", "title", ids=("task",))
    for t in rows:
        status_text = f"{t.status} ({t.parked_reason})" if t.parked_reason else t.status
        table.add_row(
            t.id,
            status_text,
            f"stopped in {stopped[t.id]}" if t.id in stopped else t.phase,
            age(t.created_at, now),
            f"{costs.get(t.id, 0.0):.4f}",
            t.title,
        )
    out.print(table)


@app.command()
def answer(
    ctx: typer.Context,
    question_id: Annotated[str, typer.Argument(help="The question id (see `questions`).")],
    words: Annotated[
        list[str],
        typer.Argument(
            help="The answer: the rest of the line, quoted or not, e.g. approve, "
            "or revise add tests (put -- before words that start with a dash).",
            show_default=False,
        ),
    ],
    acting_as: AsOption = None,
) -> None:
    """Answer a gate question. The first answer wins; the task resumes on the next pass."""
    text = " ".join(words)
    with open_ready(ctx) as ledger:
        responder = acting_actor(ledger, acting_as)
        try:
            answered = _requests(ctx, ledger).answer(
                question_id, text, via=f"cli:{responder.name}", actor=responder
            )
        except InvalidAnswerError:
            asked = db.get_question(ledger, question_id)
            if asked is None or asked.kind != QuestionKind.PULL_REQUEST:
                raise
            # Say which pull request moves the task on, and how to stop it instead.
            url = asked.payload.get("url") if isinstance(asked.payload, dict) else None
            raise InvalidAnswerError(
                f"question {question_id} waits on GitHub ({url or 'its pull request'}), not on "
                "an answer: review the pull request, merge it or close it; to stop the task: "
                f"`agent-team cancel {asked.thread_id}`; nothing was stored"
            ) from None
    out.print(f"answered {answered.question_id}: {answer_text(answered.answer)}")


@app.command()
def note(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="The task id.")],
    words: Annotated[
        list[str],
        typer.Argument(help="The note: the rest of the line, quoted or not.", show_default=False),
    ],
    acting_as: AsOption = None,
) -> None:
    """Leave a note on a task for the people who look at it (its page, `show`)."""
    with open_ready(ctx) as ledger:
        actor = acting_actor(ledger, acting_as)
        try:
            written = _requests(ctx, ledger).note(task_id, " ".join(words), actor=actor)
        except LedgerInputError as exc:  # empty or too long: bad input
            err.print(f"agent-team: {exc}; nothing was stored", soft_wrap=True)
            raise typer.Exit(2) from None
    out.print(f"noted on {task_id} (audit row {written.seq})")


@app.command()
def reopen(
    ctx: typer.Context,
    question_id: Annotated[str, typer.Argument(help="An expired question id.")],
    deadline: Annotated[
        str, typer.Option("--deadline", help="How long from now, e.g. 24h, 90m, 2d.")
    ] = "24h",
    acting_as: AsOption = None,
) -> None:
    """Reopen an expired question with a new deadline; it is delivered again."""
    window = _parse_duration(deadline)
    with open_ready(ctx) as ledger:
        actor = acting_actor(ledger, acting_as)
        reopened = _requests(ctx, ledger).reopen(question_id, deadline=window, actor=actor)
    now = context_of(ctx).now()
    out.print(
        f"reopened {reopened.question_id}; deadline {deadline_cell(reopened.deadline_at, now)}"
    )


@app.command()
def cancel(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="The task id.")],
    acting_as: AsOption = None,
) -> None:
    """Cancel a task: open questions are superseded; its branch keeps any build commits."""
    with open_ready(ctx) as ledger:
        _requests(ctx, ledger).cancel(task_id, actor=acting_actor(ledger, acting_as))
    out.print(f"cancel queued for {task_id}")


@app.command()
def retry(
    ctx: typer.Context,
    task_id: Annotated[str, typer.Argument(help="The id of the parked or failed task.")],
    acting_as: AsOption = None,
) -> None:
    """Continue a parked or failed task from where it stopped, after fixing the cause.

    Answers already given are kept: nothing is asked again. A failed task can be
    retried until its checkpoints are pruned (AGENT_TEAM_CHECKPOINT_RETENTION).
    """
    with open_ready(ctx) as ledger:
        _requests(ctx, ledger).retry(task_id, actor=acting_actor(ledger, acting_as))
    out.print(localize(f"{task_id} queued again; the daemon (or `agent-team tick`) continues it"))


@app.command()
def daemon(
    ctx: typer.Context,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="First-run mode: create the demo dashboard token when no token is configured "
            "(shown once on a terminal) and print how to submit and answer a task.",
        ),
    ] = False,
) -> None:
    """Run agent-team as a service: worker, timers, dashboard and API, until SIGTERM."""
    from agent_team.requests.access import DashboardTokens, demo_token_path, ensure_demo_token
    from agent_team.service.daemon import Daemon

    settings = context_of(ctx).settings()
    db.ensure_writable_folder(settings.db_path)  # before anything is written beside it
    created = ensure_demo_token(settings) if demo else None
    tokens = DashboardTokens(settings)
    _token_lines(tokens.describe(), created, demo_token_path(settings))
    legacy = tokens.legacy_warning()
    if legacy is not None:
        logging.getLogger(__name__).warning("%s", legacy)
    if settings.github_sign_in:
        role = settings.github_signin_default_role
        out.print(
            f"Sign in with GitHub is on ({settings.github_oauth_url}); a login no person holds "
            + (f"becomes a {role}" if role else "is refused")
        )
    service = Daemon(settings, announce=lambda line: out.print(line), say=out.print)
    if demo:
        # How to submit and answer, for a ledger no task has been submitted to yet (or a
        # token just made); a restart of a ledger in use says where to sign in, no more.
        first_run = created is not None or sum(service.coordinator.counts().values()) == 0
        service.announce = lambda line: _demo_banner(line, settings, first_run=first_run)
    code = service.run()
    if service.cut_short:
        os._exit(code)  # runs that did not stop cannot hold the exit up; see Daemon._shutdown
    raise typer.Exit(code)


def _token_lines(where: str, created: str | None, path: Path) -> None:
    """Where the dashboard's tokens come from, on every start; a new demo token once.

    Printed before the server binds, so a start that fails (a busy port) still says where
    the token is. The token itself is shown only on a terminal, never into a log.
    """
    out.print(where)
    if created is None:
        return
    if sys.stdout.isatty():
        out.print(f"dashboard token (new; shown once, kept in {path}): {created}")
    else:
        out.print(f"a new dashboard token was written to {path}; read it there to sign in")


def _demo_banner(line: str, settings: Settings, *, first_run: bool) -> None:
    cli = command()
    db_flag = f" --db {settings.db_path}" if settings.db_path != Path("agent-team.db") else ""
    out.print(line)
    url = line.split()[-1]
    out.print(f"Sign in on {url}login with the dashboard token to answer in the browser.")
    if not first_run:
        out.print(f"Stop with Ctrl-C; `{cli}{db_flag} inbox` lists what needs you.")
        return
    out.print("In another terminal:")
    out.print(
        f'  {cli}{db_flag} submit --title "Try agent-team" --body "Add a short greeting to the '
        'README so new readers know what the project does and how to start it."'
    )
    out.print("  (it prints the task id; the daemon plans it within a second or two)")
    out.print(f"  {cli}{db_flag} questions --status open      # the plan waits: <task id>:q1")
    out.print(f"  {cli}{db_flag} questions <task id>:q1        # the plan in full")
    out.print(f"  {cli}{db_flag} answer <task id>:q1 approve   # then watch it finish on {url}")
    out.print(
        "Stop with Ctrl-C (twice to stop a running build at once): answers and finished steps "
        "are kept, and the next start carries on (a build cut off starts again)."
    )


@intake_app.command("status")
def intake_status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per repository and label: last poll, ETag hit rate, rate limit left, tasks created."""
    with open_ready(ctx) as ledger:
        cursors = db.list_cursors(ledger)
    rows = [
        {
            "source": c.source,
            "label": c.label,
            "last_poll_at": c.last_poll_at,
            "last_status": c.last_status,
            "polls": c.polls,
            "not_modified": c.not_modified,
            "etag_hit_rate": round(c.not_modified / c.polls, 3) if c.polls else None,
            "rate_remaining": c.rate_remaining,
            "rate_reset_at": c.rate_reset_at,
            "tasks_created": c.tasks_created,
            "next_poll_at": c.next_poll_at,
            "failures": c.failures,
            "last_error": redact(c.last_error) if c.last_error else None,
        }
        for c in cursors
    ]
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no intake polls recorded yet (set AGENT_TEAM_GITHUB_REPOS and run the daemon)")
        return
    table = id_table(
        "repository",
        "label",
        "last poll",
        "status",
        "ETag hits",
        "rate left",
        "tasks",
        "next poll",
        "last error",
    )
    for c, row in zip(cursors, rows, strict=True):
        rate = row["etag_hit_rate"]
        table.add_row(
            str(row["source"]).removeprefix("github:"),
            str(row["label"]),
            when(c.last_poll_at) or "-",
            str(row["last_status"] or "-"),
            f"{row['not_modified']}/{row['polls']} ({rate:.0%})" if rate is not None else "-",
            "-" if row["rate_remaining"] is None else str(row["rate_remaining"]),
            str(row["tasks_created"]),
            when(c.next_poll_at) or "-",
            str(row["last_error"] or ""),
        )
    out.print(table)


@app.command()
def doctor(ctx: typer.Context) -> None:
    """Check the configuration and environment; each failed check says how to fix it."""
    from agent_team.service.doctor import run_checks

    settings = context_of(ctx).settings()
    # The checks call the daemon, GitHub and the model providers over HTTP; the client's
    # "HTTP Request: GET ..." lines at INFO would be printed between the checks' own.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    results = run_checks(settings)
    table = Table("", "check", "detail", "fix")
    for result in results:
        mark = ("!" if result.warn else "✓") if result.ok else "✗"
        table.add_row(mark, result.name, localize(result.detail), localize(result.fix))
    out.print(table)
    if not all(result.ok for result in results):
        raise typer.Exit(1)


@app.command()
def backup(
    ctx: typer.Context,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for the backups (created if missing).")
    ] = Path("backups"),
    keep: Annotated[int, typer.Option("--keep", help="How many backups to keep.", min=1)] = 7,
) -> None:
    """An online backup of the ledger (safe while the daemon runs); keeps the newest N."""
    settings = context_of(ctx).settings()
    if isinstance(settings.ledger_target, str):
        raise ConfigError(
            "agent-team backup copies a SQLite ledger; this one is on PostgreSQL "
            "(AGENT_TEAM_DATABASE_URL): back it up with `pg_dump -Fc` (see deploy/README.md)"
        )
    path = settings.db_path
    db.assert_ready(path)
    made, removed = db.backup_ledger(path, out_dir, keep=keep)
    out.print(f"backup {made} ({made.stat().st_size} bytes); removed {len(removed)} old")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: run the app, turning our errors into one line each."""
    try:
        app(args=argv)
    except BAD_INPUT as exc:  # bad settings, arguments or ids: nothing was stored
        err.print(f"agent-team: {localize(str(exc))}", soft_wrap=True)
        sys.exit(2)
    except AccessDeniedError as exc:  # a role below the action's (audited)
        err.print(f"agent-team: {localize(str(exc))}", soft_wrap=True)
        sys.exit(3)
    except AgentTeamError as exc:
        err.print(f"agent-team: {localize(str(exc))}", soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # a bug: still one line for the operator, details in the log
        logging.getLogger(__name__).debug("unexpected error", exc_info=True)
        err.print(
            f"agent-team: unexpected error: {type(exc).__name__}: {redact(str(exc))} "
            "(AGENT_TEAM_LOG_LEVEL=debug shows the traceback; please report it)",
            soft_wrap=True,
        )
        sys.exit(1)
