"""The dashboard's JSON API, `/healthz` and `/metrics`.

Handlers stay thin (docs/architecture.md §8): parse and validate, read one consistent
view of the ledger per request, or hand a write to `TaskRequests` (the one path
the CLI and Slack use too, which wakes the worker). Every refusal is JSON
`{"error": ...}` naming the parameter or field at fault; an unexpected
exception is logged and answered with a bare 500, never a traceback.

Writes need a dashboard token: `Authorization: Bearer <token>` from scripts,
or a signed-in session plus its CSRF token from the pages (`auth`). With no
token configured, writes are off.
"""

from __future__ import annotations

import logging
import math
import re
from datetime import date, datetime
from enum import StrEnum
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team import db
from agent_team.builders.live_log import read_build_log, state_dir_of
from agent_team.common.redact import redact
from agent_team.dashboard.api_common import (
    MAX_BODY_BYTES,
    ApiError,
    bad_field,
    bad_parameter,
    guard_async,
    guard_sync,
    json_body,
    json_out,
    no_other_fields,
    repo_field,
    text_field,
    writer,
)
from agent_team.dashboard.auth import AuthRefused, Caller
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.metrics import make_registry
from agent_team.dashboard.task_filters import (
    MAX_LIMIT,
    choice,
    integer,
    list_filtered,
    parse_task_filter,
)
from agent_team.exceptions import (
    IdempotencyKeyReusedError,
    InvalidAnswerError,
    LedgerError,
    UnknownTaskError,
)
from agent_team.health.readiness import readiness
from agent_team.health.status import LoopStatus
from agent_team.reports import task as reports
from agent_team.reports.build_watch import build_output
from agent_team.requests.actors import Actor
from agent_team.requests.answers import (
    PLAN_DECISION_HELP,
    PR_DECISION_HELP,
    PUBLISH_HELP,
    PULL_REQUEST_HELP,
)
from agent_team.requests.limits import MAX_NOTE_CHARS, MAX_TITLE_CHARS
from agent_team.task_model import BillingMode, QuestionKind, QuestionStatus, TaskKind

__all__ = ["MAX_BODY_BYTES", "MAX_LIMIT", "ApiError", "routes"]

log = logging.getLogger(__name__)

MAX_NAME_CHARS = 100
IDEMPOTENCY_HEADER = IdempotencyKeyReusedError.header
REPLAYED_HEADER = "Idempotent-Replayed"
_KEY = re.compile(rf"[\x21-\x7e]{{1,{db.MAX_KEY_CHARS}}}")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_ACCEPTED: dict[str, str] = {
    QuestionKind.CLARIFY.value: "any non-empty text with the information asked for",
    QuestionKind.PLAN_DECISION.value: PLAN_DECISION_HELP,
    QuestionKind.CONFLUENCE_APPROVAL.value: PUBLISH_HELP,
    QuestionKind.PR_DECISION.value: PR_DECISION_HELP,
    QuestionKind.PULL_REQUEST.value: PULL_REQUEST_HELP,  # no answer is accepted: who moves it
}


# --- parameters ---------------------------------------------------------------------------


def _choice(request: Request, name: str, allowed: type[StrEnum]) -> str | None:
    """An optional query parameter that must be one of an enum's values (blank: not given)."""
    return choice(request.query_params, name, allowed)


def _day(request: Request, now: datetime) -> str:
    raw = request.query_params.get("day", "").strip()
    if not raw:
        return db.day_bucket(now)
    try:
        if not _DAY.fullmatch(raw):
            raise ValueError(raw)
        return date.fromisoformat(raw).isoformat()
    except ValueError:
        raise bad_parameter("day", f"{raw[:40]!r} is not a date; use YYYY-MM-DD") from None


# --- views --------------------------------------------------------------------------------


def _age_s(stamp: str, now: datetime) -> float:
    return round(max(0.0, (now - db.from_iso(stamp)).total_seconds()), 3)


def _task_row(task: db.Task, cost: db.TaskCost, now: datetime) -> dict[str, Any]:
    """A task in a list: no body (it can be long), with its age and spend."""
    return {
        "id": task.id,
        "kind": task.kind,
        "source": task.source,
        "source_ref": task.source_ref,
        "title": task.title,
        "status": task.status,
        "phase": task.phase,
        "parked_reason": task.parked_reason,
        "resume_at": task.resume_at,  # a task parked on its models continues by itself then
        "created_at": task.created_at,
        "updated_at": task.updated_at,
        "age_s": _age_s(task.created_at, now),
        "cost_usd": cost.usd,
        "tokens": cost.tokens,
    }


def _when(moment: datetime | None) -> str | None:
    return db.to_iso(moment) if moment is not None else None


def _loop_view(status: LoopStatus) -> dict[str, Any]:
    return {
        "name": status.name,
        "alive": status.alive,
        "started_at": _when(status.started_at),
        "last_beat": _when(status.last_beat),
        "restarts": status.restarts,
        "last_error": redact(status.last_error) if status.last_error else None,
    }


def _jsonable(value: object) -> Any:
    """A health fact as JSON; facts are free-form, so anything unknown becomes its text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return redact(str(value))


# --- the API ------------------------------------------------------------------------------


class _Api:
    def __init__(self, ctx: DashboardContext) -> None:
        self.ctx = ctx
        self.json = json_out(ctx)
        self.registry = make_registry(ctx)

    # reads

    def task_by_query(self, request: Request) -> Response:
        task_id = request.query_params.get("id", "").strip()
        if not task_id:
            raise bad_parameter("id", "is required: /api/task?id=<task id>")
        return self._task(task_id)

    def task_by_path(self, request: Request) -> Response:
        task_id = str(request.path_params["task_id"]).strip()
        if not task_id:
            raise bad_parameter("id", "is required: /api/task/<task id>")
        return self._task(task_id)

    def _task(self, task_id: str) -> Response:
        now = self.ctx.clock()
        with self.ctx.read() as view:
            try:
                report = reports.task_report(view, task_id, now)
            except UnknownTaskError:
                raise ApiError(404, f"no task {task_id!r}", extra={"id": task_id}) from None
        return self.json(report)

    def task_log(self, request: Request) -> Response:
        """The task's build output after offset `after` (all of the kept tail without it)."""
        task_id = str(request.path_params["task_id"]).strip()
        given = request.query_params.get("after", "").strip()
        after = integer(request.query_params, "after", 0, 0, None) if given else None
        with self.ctx.read() as view:
            task = db.get_task(view, task_id)
        if task is None:
            raise ApiError(404, f"no task {task_id!r}", extra={"id": task_id})
        tail = read_build_log(state_dir_of(self.ctx.settings), task_id)
        output = build_output(
            task.id,
            task.status,
            tail,
            self.ctx.clock(),
            after=after,
            secrets=self.ctx.auth.tokens.secrets(),
        )
        return self.json(output.as_json(), headers={"Cache-Control": "no-store"})

    def tasks(self, request: Request) -> Response:
        wanted = parse_task_filter(request.query_params)
        now = self.ctx.clock()
        with self.ctx.read() as view:
            rows, total = list_filtered(view, wanted)
            costs = db.task_costs(view, [task.id for task in rows])
        return self.json(
            {
                "tasks": [_task_row(task, costs[task.id], now) for task in rows],
                "total": total,
                "limit": wanted.limit,
                "offset": wanted.offset,
            }
        )

    def questions(self, request: Request) -> Response:
        status = _choice(request, "status", QuestionStatus)
        task_id = request.query_params.get("task", "").strip() or None
        with self.ctx.read() as view:
            rows = db.list_questions(view, status=status, thread_id=task_id)
        return self.json({"questions": [reports.QuestionView.of(q).to_json() for q in rows]})

    def budget(self, request: Request) -> Response:
        settings = self.ctx.settings
        day = _day(request, self.ctx.clock())
        with self.ctx.read() as view:
            rows = db.usage_summary(view, day=day)
            spent = db.spent_by_mode(view, day=day)
        modes: dict[str, dict[str, Any]] = {}
        for mode in BillingMode:
            spend = spent.get(mode.value, db.Spend())
            # Mirrors the caps the model caller enforces (models/caller.py): USD caps
            # priced models in `api` mode only; tokens cap everything else, per mode.
            usd_cap = settings.daily_budget_usd if mode is BillingMode.API else None
            modes[mode.value] = {
                "spent_usd": spend.usd_cost,
                "tokens": spend.tokens,
                "usd_cap": usd_cap,
                "usd_remaining": max(0.0, usd_cap - spend.usd_cost)
                if usd_cap is not None
                else None,
                "token_cap": settings.daily_token_cap,
                "tokens_remaining": max(0, settings.daily_token_cap - spend.tokens),
            }
        return self.json(
            {
                "day": day,
                "billing_mode": settings.billing_mode,
                "caps": {
                    "daily_budget_usd": settings.daily_budget_usd,
                    "daily_token_cap": settings.daily_token_cap,
                },
                "modes": modes,
                "rows": [
                    {
                        "billing_mode": row.billing_mode,
                        "model": row.model,
                        "stage": row.stage,
                        "calls": row.calls,
                        "input_tokens": row.input_tokens,
                        "output_tokens": row.output_tokens,
                        "usd_cost": row.usd_cost,
                    }
                    for row in rows
                ],
            }
        )

    def _ledger_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "ok": False,
            "schema_version": None,
            "expected_schema_version": db.SCHEMA_VERSION,
            "error": None,
        }
        try:
            with self.ctx.read() as view:
                state["schema_version"] = db.schema_version(view)
            state["ok"] = True
        except LedgerError as exc:
            log.warning("healthz: cannot read the ledger: %s", exc)
            state["error"] = f"cannot read the ledger ({type(exc).__name__}); see the daemon's log"
        return state

    def healthz(self, request: Request) -> Response:
        """Liveness: 200 while the process serves; `status` says `degraded` when a loop or the
        ledger is not right (`/readyz` says what, with a 503)."""
        state = self._ledger_state()
        loops = self.ctx.health.loops()
        healthy = bool(state["ok"]) and all(status.alive for status in loops)
        body = {
            "status": "ok" if healthy else "degraded",
            "db": state,
            "loops": [_loop_view(status) for status in loops],
            "facts": _jsonable(self.ctx.health.facts()),
        }
        return self.json(body)

    def readyz(self, request: Request) -> Response:
        """Readiness (see `agent_team.health.readiness`): 503 with the reasons when not ready."""
        state = self._ledger_state()
        coordinator = self.ctx.coordinator
        verdict = readiness(
            schema_version=state["schema_version"],
            read_error=state["error"],
            write_health=coordinator.ledger.write_health if coordinator is not None else None,
            health=self.ctx.health,
        )
        body = {
            "status": "ready" if verdict.ready else "not ready",
            "reasons": verdict.reasons,
            "last_write_failure": verdict.last_write_failure,
        }
        return self.json(body, status_code=200 if verdict.ready else 503)

    def metrics(self, request: Request) -> Response:
        """Prometheus text; behind a bearer token when `AGENT_TEAM_METRICS_AUTH` asks (by
        default off loopback: counts of a team's work are not for anyone who reaches the port)."""
        if self.ctx.settings.metrics_need_token:
            try:
                self.ctx.auth.authorize_bearer(request, "/metrics")
            except AuthRefused as exc:
                raise ApiError(exc.status, exc.message, headers=exc.headers) from None
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    # writes

    def _authorize(self, request: Request) -> Caller:
        """A bearer token, or a signed-in session with its CSRF token (see `auth`)."""
        return writer(self.ctx, request)

    async def submit_task(self, request: Request) -> Response:
        caller = self._authorize(request)
        idempotency_key = _idempotency_key(request)
        data = await json_body(request)
        no_other_fields(data, {"title", "body", "kind", "repo"})
        title = text_field(data, "title", required=True, max_chars=MAX_TITLE_CHARS)
        body = text_field(data, "body", required=False) or ""
        kind = text_field(data, "kind", required=False) or TaskKind.CODE.value
        if kind not in {member.value for member in TaskKind}:
            raise bad_field("kind", f"{kind[:40]!r} is not one of: {', '.join(TaskKind)}")
        repo = repo_field(data)
        assert title is not None

        def work() -> tuple[str, bool]:
            with self.ctx.requests() as requests:
                if idempotency_key is None:
                    made = requests.submit(
                        title=title.strip(),
                        body=body,
                        kind=kind,
                        source="dashboard",
                        repo=repo,
                        actor=caller.actor(),
                    )
                    return made, False
                kept = requests.submit_once(
                    idempotency_key,
                    title=title.strip(),
                    body=body,
                    kind=kind,
                    source="dashboard",
                    repo=repo,
                    actor=caller.actor(),
                )
                return kept.task_id, not kept.created

        task_id, replayed = await run_in_threadpool(work)
        # A retry gets the first answer again (as Stripe's API does), marked as a replay.
        headers = {"Location": f"/api/task/{task_id}"}
        if replayed:
            headers[REPLAYED_HEADER] = "true"
        return self.json({"task_id": task_id}, status_code=201, headers=headers)

    async def answer(self, request: Request) -> Response:
        caller = self._authorize(request)
        question_id = str(request.path_params["question_id"]).strip()
        data = await json_body(request)
        no_other_fields(data, {"answer", "name"})
        text = text_field(data, "answer", required=True)
        name = _answerer(caller, text_field(data, "name", required=False))
        assert text is not None

        def work() -> db.Question:
            with self.ctx.requests() as requests:
                try:
                    return requests.answer(question_id, text, via=f"dashboard:{name}")
                except InvalidAnswerError as exc:
                    question = db.get_question(requests.ledger, question_id)
                    accepted = _ACCEPTED.get(question.kind) if question is not None else None
                    raise ApiError(422, str(exc), extra={"accepted": accepted}) from None

        answered = await run_in_threadpool(work)
        return self.json({"question": reports.QuestionView.of(answered).to_json()})

    async def add_note(self, request: Request) -> Response:
        caller = self._authorize(request)
        task_id = str(request.path_params["task_id"]).strip()
        data = await json_body(request)
        no_other_fields(data, {"text", "name"})
        text = text_field(data, "text", required=True, max_chars=MAX_NOTE_CHARS)
        name = _answerer(caller, text_field(data, "name", required=False))
        assert text is not None

        def work() -> db.AuditRow:
            with self.ctx.requests() as requests:
                return requests.note(task_id, text, actor=Actor(name, "dashboard"))

        row = await run_in_threadpool(work)
        return self.json(
            {"note": reports.NoteView.of(row).to_json()},
            status_code=201,
            headers={"Location": f"/api/task/{task_id}"},
        )


def _idempotency_key(request: Request) -> str | None:
    """The `Idempotency-Key` header: 1 to 255 visible ASCII characters (a UUID is usual)."""
    given = request.headers.getlist(IDEMPOTENCY_HEADER)
    if not given:
        return None
    key = given[0].strip()
    if len(given) > 1 or not _KEY.fullmatch(key):
        raise ApiError(
            400,
            f"{IDEMPOTENCY_HEADER}: send one key of 1 to {db.MAX_KEY_CHARS} visible ASCII "
            "characters (a UUID will do)",
            extra={"header": IDEMPOTENCY_HEADER},
        )
    return key


def _answerer(caller: Caller, given: str | None) -> str:
    """Who the answer is recorded as: a named token's owner, else the `name` field.

    A named token already says who is calling, so `name` may be left out; a different
    name is refused rather than recorded, so an answer is never attributed to someone
    whose token was not used.
    """
    if caller.name is not None:
        if given is not None and given.strip() and given.strip() != caller.name:
            raise bad_field(
                "name", f"this token is {caller.name!r}'s; leave name out or send {caller.name!r}"
            )
        return caller.name
    if given is None:
        raise bad_field("name", "is required with the unnamed token (a named token sets it)")
    name = given.strip()
    if not name:
        raise bad_field("name", "must not be blank")
    if len(name) > MAX_NAME_CHARS:
        raise bad_field("name", f"is longer than {MAX_NAME_CHARS} characters")
    if not name.isprintable():
        raise bad_field("name", "must be printable text on one line")
    return name


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    """The API's routes; `create_app` mounts them beside the pages."""
    api = _Api(ctx)
    return [
        Route("/api/task", guard_sync(api.task_by_query), methods=["GET"]),
        Route("/api/task/{task_id}", guard_sync(api.task_by_path), methods=["GET"]),
        Route("/api/task/{task_id}/log", guard_sync(api.task_log), methods=["GET"]),
        Route("/api/task/{task_id}/notes", guard_async(api.add_note), methods=["POST"]),
        Route("/api/tasks", guard_sync(api.tasks), methods=["GET"]),
        Route("/api/tasks", guard_async(api.submit_task), methods=["POST"]),
        Route("/api/questions", guard_sync(api.questions), methods=["GET"]),
        Route("/api/questions/{question_id}/answer", guard_async(api.answer), methods=["POST"]),
        Route("/api/budget", guard_sync(api.budget), methods=["GET"]),
        Route("/healthz", guard_sync(api.healthz), methods=["GET"]),
        Route("/readyz", guard_sync(api.readyz), methods=["GET"]),
        Route("/metrics", guard_sync(api.metrics), methods=["GET"]),
    ]
