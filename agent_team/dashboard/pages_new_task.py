"""The new-task page (`/tasks/new`): title, body with a preview, kind and repository.

Why a page of its own: submitting from the browser is the first thing people
look for. The page only renders the form; the form posts JSON to
`POST /api/tasks` (the API's submit: the same `TaskRequests.submit` as the CLI,
its role check and audit row) with an `Idempotency-Key`, so a double click or a
retry after a lost answer makes one task, then goes to the new task's page.
The body's preview is drawn by the server (`POST /api/preview`, `safe_markdown`),
the same rendering the task page uses.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team.dashboard.auth import Viewer
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.pages import viewer_page
from agent_team.dashboard.permissions import abilities
from agent_team.requests.limits import MAX_BODY_CHARS, MAX_TITLE_CHARS
from agent_team.task_model import TaskKind

__all__ = ["routes"]

_KIND_HELP = {
    TaskKind.CODE.value: "code: clarify, plan, your review, build",
    TaskKind.CONFLUENCE.value: "confluence: a page change, published after your review",
}


class _NewTaskPage:
    def __init__(self, ctx: DashboardContext) -> None:
        self.ctx = ctx

    def _context(self, viewer: Viewer | None) -> dict[str, Any]:
        kinds = [TaskKind.CODE.value]
        if self.ctx.settings.confluence_enabled:
            kinds.append(TaskKind.CONFLUENCE.value)
        with self.ctx.read() as view:
            can = abilities(view, viewer, ("submit",))
        return {
            "kinds": [(kind, _KIND_HELP[kind]) for kind in kinds],
            "title_max": MAX_TITLE_CHARS,
            "body_max": MAX_BODY_CHARS,
            "can_submit": can["submit"],
        }

    async def page(self, request: Request) -> Response:
        return await viewer_page(request, self.ctx, "new_task.html", self._context)


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    page = _NewTaskPage(ctx)
    return [Route("/tasks/new", page.page, methods=["GET"], name="new_task")]
