"""The automations page (`/automations`): each automation's schedule and runs, and its controls.

It reads what the CLI and the API read (`db.list_automations`, `db.list_runs`,
`service.describe`), so the three never disagree. Its forms (create, change,
pause, resume, run now) post to the JSON API (`/api/automations/...`), which
goes through `automations.service`: the role check (owners create and change,
maintainers run one now), the field checks that answer 422 naming the field,
and the audit row. A change sends only the fields a person changed, so changing
a title does not restart the schedule. Controls show only to a signed-in
viewer whose role allows them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team import db
from agent_team.automations import service
from agent_team.automations.runner import schedule_of
from agent_team.common.redact import redact
from agent_team.dashboard.auth import Viewer
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.pages import Stamp, stamp, viewer_page
from agent_team.dashboard.permissions import abilities
from agent_team.task_model import AutomationStatus, OverlapPolicy, ScheduleKind, TaskKind

__all__ = ["RUNS_SHOWN", "AutomationFields", "routes"]

RUNS_SHOWN = 5  # recent runs per automation on its card


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
class AutomationFields:
    """What a form starts with: blank for a new automation, the current values for a change."""

    name: str = ""
    title: str = ""
    body: str = ""
    kind: str = TaskKind.CODE.value
    repo: str = ""
    schedule: str = ScheduleKind.EVERY.value
    every: str = "1d"
    cron: str = ""
    timezone: str = ""  # blank: the browser's zone is filled in (a new automation)
    first_run_at: str = ""  # `YYYY-MM-DDTHH:MM` in `timezone`, as a datetime-local field
    overlap: str = OverlapPolicy.SKIP.value
    body_locked: bool = False  # the body holds a secret shown masked: not edited here


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
    path: str  # `/api/automations/<id>`: the card's forms post under it
    fields: AutomationFields


def _every_text(seconds: int | None) -> str:
    """An interval as `parse_every` takes it back: `7d`, `6h`, `30m`, `90s`."""
    if not seconds:
        return ""
    every = int(timedelta(seconds=seconds).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if every % size == 0:
            return f"{every // size}{unit}"
    return f"{every}s"


def _local_minute(stamp_text: str, zone: str) -> str:
    """A ledger time as a datetime-local value in the automation's zone."""
    try:
        moment = db.from_iso(stamp_text).astimezone(ZoneInfo(zone))
    except (ValueError, KeyError):
        return ""
    return f"{moment:%Y-%m-%dT%H:%M}"


class _Pages:
    def __init__(self, ctx: DashboardContext) -> None:
        self.ctx = ctx

    def _clean(self, text: str | None) -> str:
        return redact(text or "", self.ctx.auth.tokens.secrets())

    def _fields(self, automation: db.Automation) -> AutomationFields:
        return AutomationFields(
            name=self._clean(automation.name),
            title=self._clean(automation.title),
            body=self._clean(automation.body),
            body_locked=self._clean(automation.body) != automation.body,
            kind=automation.kind,
            repo=self._clean(automation.repo),
            schedule=automation.schedule_kind,
            every=_every_text(automation.every_s) or "1d",
            cron=automation.cron or "",
            timezone=automation.timezone,
            first_run_at=_local_minute(automation.first_run_at, automation.timezone),
            overlap=automation.overlap,
        )

    def _context(self, viewer: Viewer | None) -> dict[str, Any]:
        now = self.ctx.clock()
        cards = []
        with self.ctx.read() as view:
            can = abilities(view, viewer, ("automation:change", "automation:run"))
            for automation in db.list_automations(view):
                runs = db.list_runs(view, automation.automation_id, limit=RUNS_SHOWN)
                cards.append(self._card(automation, runs, now))
        kinds = [TaskKind.CODE.value]
        if self.ctx.settings.confluence_enabled:
            kinds.append(TaskKind.CONFLUENCE.value)
        return {
            "cards": cards,
            "now_label": f"{now:%H:%M:%S} UTC",
            "can_change": can["automation:change"],
            "can_run": can["automation:run"],
            "blank": AutomationFields(),
            "kinds": kinds,
            "schedules": [kind.value for kind in ScheduleKind],
            "overlaps": [policy.value for policy in OverlapPolicy],
        }

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
            next_run=stamp(automation.next_run_at, now)
            if automation.status == AutomationStatus.ACTIVE
            else None,
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
            path=f"/api/automations/{quote(automation.automation_id, safe='')}",
            fields=self._fields(automation),
        )

    async def automations(self, request: Request) -> Response:
        return await viewer_page(request, self.ctx, "automations.html", self._context)


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    pages = _Pages(ctx)
    return [Route("/automations", pages.automations, methods=["GET"], name="automations")]
