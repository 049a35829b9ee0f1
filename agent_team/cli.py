"""The `agent-team` command line.

Commands stay thin: parse, load settings, call `db`, print. Every error we
raise on purpose becomes one line on stderr and a non-zero exit (2 for bad
configuration or arguments, 1 otherwise), never a traceback.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from agent_team import __version__, db
from agent_team.config import Settings, load_settings
from agent_team.exceptions import AgentTeamError, ConfigError
from agent_team.task_model import QuestionStatus

__all__ = ["app", "main"]

app = typer.Typer(
    name="agent-team",
    help="Run an LLM agent pipeline per task, with human gates that survive crashes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
ledger_app = typer.Typer(help="Maintain the ledger.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)


@dataclass
class _Context:
    db_override: Path | None
    config_file: Path | None
    _settings: Settings | None = field(default=None, init=False)

    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_file, db_path=self.db_override)
            logging.basicConfig(
                level=self._settings.log_level.upper(),
                format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                stream=sys.stderr,
            )
        return self._settings


def _ctx(ctx: typer.Context) -> _Context:
    obj = ctx.find_root().obj
    assert isinstance(obj, _Context)
    return obj


def _open_ready(ctx: typer.Context) -> db.LedgerConnection:
    """Open an existing, current ledger; never creates one as a side effect of reading."""
    path = _ctx(ctx).settings().db_path
    db.assert_ready(path)
    return db.connect(path)


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
        typer.Option("--version", help="Print the version and exit.", callback=_show_version,
                     is_eager=True),
    ] = False,
) -> None:  # fmt: skip
    ctx.obj = _Context(db_override=db_path, config_file=config)


@app.command()
def migrate(ctx: typer.Context) -> None:
    """Create the ledger or bring it up to the current schema, then show its state."""
    path = _ctx(ctx).settings().db_path
    before = 0
    if path.exists():
        conn = db.connect(path)
        try:
            before = db.schema_version(conn)
        finally:
            conn.close()
    version = db.init_db(path)
    db.assert_ready(path)
    conn = db.connect(path)
    try:
        counts = db.table_counts(conn)
    finally:
        conn.close()
    step = f"v{before} -> v{version}" if before != version else f"v{version}, already current"
    out.print(f"ledger {path.resolve()}: schema {step}")
    table = Table("table", "rows")
    for name, count in counts.items():
        table.add_row(name, str(count))
    out.print(table)


@app.command()
def schema(
    write: Annotated[
        Path | None, typer.Option("--write", help="Write to this file instead of printing.")
    ] = None,
) -> None:
    """Print the ledger's DDL (what schema.sql holds); `--write schema.sql` regenerates it."""
    text = db.dump_schema()
    if write is None:
        sys.stdout.write(text)
    else:
        write.parent.mkdir(parents=True, exist_ok=True)
        write.write_text(text, encoding="utf-8")
        out.print(f"wrote {write}")


@app.command()
def questions(
    ctx: typer.Context,
    status: Annotated[
        QuestionStatus | None, typer.Option("--status", help="Only questions in this status.")
    ] = None,
    task: Annotated[str | None, typer.Option("--task", help="Only this task's questions.")] = None,
) -> None:
    """List gate questions, oldest first."""
    conn = _open_ready(ctx)
    try:
        rows = db.list_questions(conn, status=status.value if status else None, thread_id=task)
    finally:
        conn.close()
    if not rows:
        out.print("no questions" + (f" with status {status.value}" if status else ""))
        return
    table = Table("question", "task", "turn", "kind", "status", "transport", "deadline", "answered")
    for q in rows:
        answered = f"{q.answered_at} via {q.answered_via}" if q.answered_at else ""
        table.add_row(
            q.question_id, q.thread_id, str(q.turn), q.kind, q.status, q.transport,
            q.deadline_at or "", answered,
        )  # fmt: skip
    out.print(table)


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
    conn = _open_ready(ctx)
    try:
        rows = db.usage_summary(conn, day=bucket)
    finally:
        conn.close()
    if not rows:
        out.print(f"no model calls recorded on {bucket}")
        return
    table = Table("billing", "model", "stage", "calls", "input tok", "output tok", "USD",
                  title=f"budget {bucket} (UTC)")  # fmt: skip
    totals: dict[str, float] = {}
    for row in rows:
        table.add_row(
            row.billing_mode, row.model, row.stage, str(row.calls), str(row.input_tokens),
            str(row.output_tokens), f"{row.usd_cost:.4f}",
        )  # fmt: skip
        totals[row.billing_mode] = totals.get(row.billing_mode, 0.0) + row.usd_cost
    out.print(table)
    for mode, total in totals.items():
        out.print(f"total {mode}: ${total:.4f}")


@ledger_app.command("replay")
def ledger_replay(
    ctx: typer.Context,
    outbox: Annotated[
        Path | None,
        typer.Option("--outbox", help="The outbox file (default: AGENT_TEAM_LEDGER_OUTBOX, "
                     "else budget_ledger_failures.jsonl beside the database)."),
    ] = None,
) -> None:  # fmt: skip
    """Write budget rows that could not be recorded back into the ledger."""
    conn = _open_ready(ctx)
    try:
        path = outbox or _ctx(ctx).settings().ledger_outbox or db.default_outbox_path(conn)
        report = db.replay_outbox(path, conn)
    finally:
        conn.close()
    out.print(
        f"outbox {path}: replayed {report['replayed']}, failed {report['failed']}, "
        f"bad lines {report['bad_lines']}, remaining {report['remaining']}"
    )
    if report["remaining"]:
        raise typer.Exit(code=1)


def main() -> None:
    """Console-script entry: run the app, turning our errors into one line each."""
    try:
        app()
    except ConfigError as exc:
        err.print(f"agent-team: {exc}", soft_wrap=True)
        sys.exit(2)
    except AgentTeamError as exc:
        err.print(f"agent-team: {exc}", soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
