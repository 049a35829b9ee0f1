"""`agent-team inbox` (what needs a person now) and `agent-team audit` (who changed what)."""

from __future__ import annotations

from typing import Annotated

import typer

from agent_team import db
from agent_team.cli.support import (
    AsOption,
    acting_actor,
    age,
    context_of,
    hint,
    id_table,
    open_ready,
    out,
    print_json,
    when,
)
from agent_team.common.timefmt import deadline_text, moment_before
from agent_team.reports import triage
from agent_team.requests.roles import authorize

__all__ = ["audit_app", "inbox"]

audit_app = typer.Typer(
    help="The audit log: every change an operator or an integration made, hash-chained.",
    invoke_without_command=True,
)


def inbox(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """What needs a person now, oldest first: questions, parked and failed tasks, and more.

    Also automations that are late or failing, and the day's budget near its cap.
    """
    settings = context_of(ctx).settings()
    now = context_of(ctx).now()
    with open_ready(ctx) as ledger, ledger.snapshot() as view:
        items = triage.for_settings(view, settings, now)
    if as_json:
        print_json([item.as_json() for item in items])
        return
    if not items:
        out.print("nothing needs a person now")
        return
    table = id_table("age", "what", "title", "detail", "deadline", "fix", ids=("fix",))
    for item in items:
        deadline = db.from_iso(item.deadline_at) if item.deadline_at else None
        table.add_row(
            age(item.since, now),
            item.kind,
            item.title,
            item.detail,
            deadline_text(deadline, now) if deadline else "",
            hint(item.fix or ""),  # the command as this shell runs it, not bare `agent-team`
        )
    out.print(table)


@audit_app.callback()
def audit(
    ctx: typer.Context,
    actor: Annotated[
        str | None, typer.Option("--actor", help="Who (a user, a token name).")
    ] = None,
    via: Annotated[
        str | None, typer.Option("--via", help="cli, dashboard, slack, github, automation.")
    ] = None,
    action: Annotated[
        str | None, typer.Option("--action", help="answer, cancel, ... (a prefix: automation.)")
    ] = None,
    target: Annotated[
        str | None, typer.Option("--target", help="A task, question or automation id.")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="How far back, e.g. 24h, 7d.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    acting_as: AsOption = None,
) -> None:
    """List the audit log, newest first (`agent-team audit verify` checks its chain)."""
    if ctx.invoked_subcommand is not None:
        return
    start = None
    if since is not None:
        try:
            start = moment_before(context_of(ctx).now(), since)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--since") from None
    with open_ready(ctx) as ledger:
        authorize(ledger, acting_actor(ledger, acting_as), "audit:read", "audit")
        rows = db.list_audit(
            ledger, actor=actor, via=via, action=action, target=target, since=start, limit=limit
        )
    if as_json:
        print_json([row.to_json() for row in rows])
        return
    if not rows:
        out.print("no audit rows match")
        return
    table = id_table("#", "at (UTC)", "who", "via", "action", "target", "detail", ids=("target",))
    for row in rows:
        detail = ", ".join(f"{k}={v}" for k, v in sorted(row.detail_dict.items()))
        table.add_row(
            str(row.seq),
            when(row.at).removesuffix(" UTC"),
            row.actor,
            row.via,
            row.action,
            row.target,
            detail,
        )
    out.print(table)


@audit_app.command("verify")
def verify(ctx: typer.Context) -> None:
    """Walk the hash chain; exit 1 naming the first row that does not hold."""
    with open_ready(ctx) as ledger, ledger.snapshot() as view:  # one state: rows and head agree
        verdict = db.verify_audit(view)
    if verdict.ok:
        out.print(f"audit log intact: {verdict.rows} row(s), every link and hash holds")
        return
    out.print(
        f"audit log BROKEN at row {verdict.broken_seq}: {verdict.problem} "
        f"({verdict.rows} row(s) before it hold)"
    )
    raise typer.Exit(1)
