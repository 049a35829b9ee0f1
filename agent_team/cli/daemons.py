"""`agent-team daemons`: which daemons run on this ledger, and what each holds now.

Read from the ledger itself (no daemon needs to answer): every daemon's row
and the live leases, judged at this command's clock by `reports.daemons`,
the same function `GET /api/daemons` answers with.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agent_team import db
from agent_team.cli.support import context_of, id_table, open_ready, out, print_json
from agent_team.common.timefmt import relative
from agent_team.reports.daemons import DaemonView, daemons_report

__all__ = ["daemons"]


def _when(stamp: str, ctx: typer.Context) -> str:
    return relative(db.from_iso(stamp), context_of(ctx).now())


def _status(view: DaemonView, ctx: typer.Context) -> str:
    if view.status == "gone":
        return f"gone (not seen for {_when(view.last_seen_at, ctx).removesuffix(' ago')})"
    if view.status == "stopped" and view.stopped_at is not None:
        return f"stopped {_when(view.stopped_at, ctx)}"
    return view.status


def daemons(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The daemons on this ledger: up, gone (not seen for their lease time) or stopped, with
    the loops and tasks each holds."""
    now = context_of(ctx).now()
    with open_ready(ctx) as ledger, ledger.snapshot() as view:
        report = daemons_report(view, now)
    if as_json:
        print_json(report.to_json())
        return
    if not report.daemons:
        out.print("no daemon has run on this ledger (in the last 7 days)")
        return
    table = id_table(
        "instance",
        "host",
        "pid",
        "status",
        "version",
        "started",
        "last seen",
        "dashboard",
        "loops",
        "tasks",
        ids=("instance",),
    )
    for daemon in report.daemons:
        table.add_row(
            daemon.instance_id,
            daemon.host,
            str(daemon.pid),
            _status(daemon, ctx),
            daemon.version,
            _when(daemon.started_at, ctx),
            _when(daemon.last_seen_at, ctx),
            daemon.url or "",
            ", ".join(daemon.loops),
            ", ".join(daemon.tasks),
        )
    out.print(table)
    counts = report.counts()
    out.print(f"{counts['up']} up, {counts['gone']} gone, {counts['stopped']} stopped")
