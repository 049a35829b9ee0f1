"""The JSON API of automations, the triage inbox and the audit log.

Reads of automations and of the inbox are open like the other reads; every
write (create, update, pause, resume, cancel, run-now) and every read of the
audit log needs a dashboard token, as the other writes do. A bad field is a
422 naming it (`{"error": ..., "field": ...}`), the same check the CLI makes;
an unknown automation is a 404.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team import db
from agent_team.automations import service
from agent_team.automations.runner import AutomationRunner, runner_for, schedule_of
from agent_team.common.timefmt import moment_before
from agent_team.dashboard.api_common import (
    ApiError,
    bad_parameter,
    guard_async,
    guard_sync,
    json_body,
    json_out,
    no_other_fields,
    repo_field,
    writer,
)
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.task_filters import integer
from agent_team.reports import triage
from agent_team.requests.actors import Actor
from agent_team.requests.roles import authorize

__all__ = ["routes"]

_REQUEST_FIELDS = {
    "name",
    "title",
    "body",
    "kind",
    "repo",
    "every",
    "cron",
    "timezone",
    "first_run_at",
    "once",
    "overlap",
}


def automation_json(
    automation: db.Automation, runs: list[db.RunView] | None = None
) -> dict[str, Any]:
    found = asdict(automation)
    found["schedule"] = service.describe(schedule_of(automation))
    if runs is not None:
        found["runs"] = [{**asdict(v.run), "task_status": v.task_status} for v in runs]
    return found


def _request_of(data: dict[str, Any]) -> service.AutomationRequest:
    no_other_fields(data, _REQUEST_FIELDS)
    values: dict[str, Any] = {}
    for name in _REQUEST_FIELDS - {"once"}:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise ApiError(422, f"{name}: must be a string", extra={"field": name})
        values[name] = value
    values["repo"] = repo_field(values)  # a URL or owner/name; '' clears it on a change
    once = data.get("once", False)
    if not isinstance(once, bool):
        raise ApiError(422, "once: must be true or false", extra={"field": "once"})
    return service.AutomationRequest(**values, once=once)


class _AutomationsApi:
    def __init__(self, ctx: DashboardContext) -> None:
        self.ctx = ctx
        self.json = json_out(ctx)

    def _actor(self, request: Request) -> Actor:
        return writer(self.ctx, request).actor()

    def _now(self) -> datetime:
        return self.ctx.clock()

    # -- reads -----------------------------------------------------------------------------

    def list(self, request: Request) -> Response:
        status = request.query_params.get("status") or None
        if status is not None and status not in ("active", "paused", "cancelled"):
            raise bad_parameter("status", f"{status[:40]!r} is not active, paused or cancelled")
        with self.ctx.read() as view:
            found = db.list_automations(view, status=status)
            last = db.last_runs(view)
        return self.json(
            {
                "automations": [
                    {
                        **automation_json(a),
                        "last_run": (
                            {
                                **asdict(last[a.automation_id].run),
                                "task_status": last[a.automation_id].task_status,
                            }
                            if a.automation_id in last
                            else None
                        ),
                    }
                    for a in found
                ]
            }
        )

    def one(self, request: Request) -> Response:
        key = str(request.path_params["key"])
        limit = integer(request.query_params, "runs", default=20, low=1, high=500)
        with self.ctx.read() as view:
            automation = service.find(view, key)
            runs = db.list_runs(view, automation.automation_id, limit=limit)
        return self.json(automation_json(automation, runs))

    def triage(self, request: Request) -> Response:
        now = self._now()
        with self.ctx.read() as view:
            items = triage.for_settings(view, self.ctx.settings, now)
        return self.json({"now": db.to_iso(now), "items": [item.as_json() for item in items]})

    def audit(self, request: Request) -> Response:
        actor = self._actor(request)  # the audit log is read behind a key, by owners
        with self.ctx.write() as ledger:
            authorize(ledger, actor, "audit:read", "audit")
        params = request.query_params
        since = None
        if params.get("since"):
            try:
                since = moment_before(self._now(), params["since"])
            except ValueError as exc:
                raise bad_parameter("since", str(exc)) from None
        limit = integer(params, "limit", default=100, low=1, high=1000)
        before = integer(params, "before", default=0, low=0, high=2**62) or None
        with self.ctx.read() as view:
            rows = db.list_audit(
                view,
                actor=params.get("actor") or None,
                via=params.get("via") or None,
                action=params.get("action") or None,
                target=params.get("target") or None,
                since=since,
                limit=limit,
                before_seq=before,
            )
            verdict = db.verify_audit(view) if params.get("verify") == "1" else None
        body: dict[str, Any] = {"rows": [row.to_json() for row in rows]}
        if verdict is not None:
            body["verify"] = {
                "ok": verdict.ok,
                "rows": verdict.rows,
                "broken_seq": verdict.broken_seq,
                "problem": verdict.problem,
            }
        return self.json(body)

    # -- writes ----------------------------------------------------------------------------

    async def create(self, request: Request) -> Response:
        actor = self._actor(request)
        spec = _request_of(await json_body(request))

        def work() -> db.Automation:
            with self.ctx.write() as ledger:
                return service.create(
                    ledger,
                    spec,
                    actor=actor,
                    now=self._now(),
                    confluence_enabled=self.ctx.settings.confluence_enabled,
                )

        made = await run_in_threadpool(work)
        return self.json(
            automation_json(made),
            status_code=201,
            headers={"Location": f"/api/automations/{made.automation_id}"},
        )

    async def update(self, request: Request) -> Response:
        actor = self._actor(request)
        key = str(request.path_params["key"])
        spec = _request_of(await json_body(request))

        def work() -> db.Automation:
            with self.ctx.write() as ledger:
                return service.update(
                    ledger,
                    key,
                    spec,
                    actor=actor,
                    now=self._now(),
                    confluence_enabled=self.ctx.settings.confluence_enabled,
                )

        return self.json(automation_json(await run_in_threadpool(work)))

    def transition(self, verb: str) -> Callable[[Request], Awaitable[Response]]:
        """A handler for `pause`, `resume` or `cancel` (`service.change_status`)."""

        async def handle(request: Request) -> Response:
            actor = self._actor(request)
            key = str(request.path_params["key"])

            def work() -> db.Automation:
                with self.ctx.write() as ledger:
                    return service.change_status(ledger, key, verb, actor=actor, now=self._now())

            return self.json(automation_json(await run_in_threadpool(work)))

        return handle

    async def run_now(self, request: Request) -> Response:
        actor = self._actor(request)
        key = str(request.path_params["key"])

        def work() -> db.AutomationRun:
            with self.ctx.write() as ledger:
                return service.run_now(ledger, key, runner=self._runner(ledger), actor=actor)

        run = await run_in_threadpool(work)
        return self.json(asdict(run), status_code=201)

    def _runner(self, ledger: db.Ledger) -> AutomationRunner:
        coordinator = self.ctx.coordinator
        if coordinator is not None:
            return coordinator.automations
        return runner_for(ledger, self.ctx.settings, clock=self._now, owner="dashboard")


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    api = _AutomationsApi(ctx)
    return [
        Route("/api/automations", guard_sync(api.list), methods=["GET"]),
        Route("/api/automations", guard_async(api.create), methods=["POST"]),
        Route("/api/automations/{key}", guard_sync(api.one), methods=["GET"]),
        Route("/api/automations/{key}", guard_async(api.update), methods=["PATCH"]),
        Route("/api/automations/{key}/run-now", guard_async(api.run_now), methods=["POST"]),
        *(
            Route(
                f"/api/automations/{{key}}/{name}",
                guard_async(api.transition(name)),
                methods=["POST"],
            )
            for name in service.STATUS_VERBS
        ),
        Route("/api/triage", guard_sync(api.triage), methods=["GET"]),
        Route("/api/audit", guard_sync(api.audit), methods=["GET"]),
    ]
