"""`GET /api/daemons`: which daemons run on this ledger, and what each holds.

A read, open like the others (behind the read gate when
`AGENT_TEAM_DASHBOARD_READS=token`). Any daemon of the ledger answers it the
same way, for all of them: the rows are in the shared ledger, and so are the
leases that say which loops and tasks each holds (`reports.daemons`, the same
function `agent-team daemons` prints).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team.dashboard.api_common import guard_sync, json_out
from agent_team.dashboard.context import DashboardContext
from agent_team.reports.daemons import daemons_report

__all__ = ["routes"]


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    """The route; `create_app` mounts it beside the rest of the API."""
    out = json_out(ctx)

    def daemons(_request: Request) -> Response:
        now = ctx.clock()
        with ctx.read() as view:
            report = daemons_report(view, now)
        return out(report.to_json(), headers={"Cache-Control": "no-store"})

    return [Route("/api/daemons", guard_sync(daemons), methods=["GET"])]
