"""The inbox page (`/inbox`: what needs a person now) and the automations page (`/automations`).

Both read through the same functions as the CLI and the API (`triage.triage`,
`db.list_automations` with `db.list_runs`), so the three never disagree.
They only read: changes go through the JSON API (`/api/automations/...`),
which owns authorization, validation and the audit log.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team import db
from agent_team.automations import service
from agent_team.automations.runner import schedule_of
from agent_team.common.redact import redact
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.pages import Stamp, failure_page, stamp
from agent_team.dashboard.rendering import render_page
from agent_team.reports import triage

__all__ = ["RUNS_SHOWN", "routes"]

RUNS_SHOWN = 5  # recent runs per automation on its card


@dataclass(frozen=True, slots=True)
class InboxRow:
    kind: str
    since: Stamp | None
    title: str
    detail: str
    fix: str
    task_id: str | None
    question_id: str | None
    deadline: Stamp | None


@dataclass(frozen=True, slots=True)
class RunRow:
    slot: Stamp | None
    status: str
    manual: bool
    missed: int
    task_id: str | None
    task_status: str | None
    detail: str


@dataclass(frozen=True, slots=True)
class AutomationCard:
    automation_id: str
    name: str
    title: str
    kind: str
    schedule: str
    status: str
    overlap: str
    next_run: Stamp | None
    runs: list[RunRow]


class _Pages:
    def __init__(self, ctx: DashboardContext) -> None:
        self.ctx = ctx

    def _clean(self, text: str | None) -> str:
        return redact(text or "", self.ctx.auth.tokens.secrets())

    def _inbox_context(self) -> dict[str, Any]:
        now = self.ctx.clock()
        with self.ctx.read() as view:
            items = triage.for_settings(view, self.ctx.settings, now)
        rows = [
            InboxRow(
                kind=item.kind,
                since=stamp(item.since, now),
                title=self._clean(item.title),
                detail=self._clean(item.detail),
                fix=self._clean(item.fix),
                task_id=item.task_id,
                question_id=item.question_id,
                deadline=stamp(item.deadline_at, now),
            )
            for item in items
        ]
        return {"rows": rows, "now_label": _label(now)}

    def _automations_context(self) -> dict[str, Any]:
        now = self.ctx.clock()
        cards = []
        with self.ctx.read() as view:
            for automation in db.list_automations(view):
                runs = db.list_runs(view, automation.automation_id, limit=RUNS_SHOWN)
                cards.append(self._card(automation, runs, now))
        return {"cards": cards, "now_label": _label(now)}

    def _card(
        self, automation: db.Automation, runs: list[db.RunView], now: datetime
    ) -> AutomationCard:
        return AutomationCard(
            automation_id=automation.automation_id,
            name=self._clean(automation.name),
            title=self._clean(automation.title),
            kind=automation.kind,
            schedule=self._clean(service.describe(schedule_of(automation))),
            status=automation.status,
            overlap=automation.overlap,
            next_run=stamp(automation.next_run_at, now) if automation.status == "active" else None,
            runs=[
                RunRow(
                    slot=stamp(view.run.slot_at, now),
                    status=view.run.status,
                    manual=bool(view.run.manual),
                    missed=view.run.missed,
                    task_id=view.run.task_id if view.task_status else None,
                    task_status=view.task_status,
                    detail=self._clean(view.run.detail),
                )
                for view in runs
            ],
        )

    async def inbox(self, request: Request) -> Response:
        try:
            context = await run_in_threadpool(self._inbox_context)
            return render_page(request, "inbox.html", {**context, "live": True})
        except Exception as exc:
            return failure_page(request, exc)

    async def automations(self, request: Request) -> Response:
        try:
            context = await run_in_threadpool(self._automations_context)
            return render_page(request, "automations.html", context)
        except Exception as exc:
            return failure_page(request, exc)


def _label(now: datetime) -> str:
    return f"{now:%H:%M:%S} UTC"


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    pages = _Pages(ctx)
    return [
        Route("/inbox", pages.inbox, methods=["GET"], name="inbox"),
        Route("/automations", pages.automations, methods=["GET"], name="automations"),
    ]
