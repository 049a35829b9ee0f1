"""The task page's buttons as JSON: cancel, retry, reopen, and the new-task form's preview.

Why a module of its own: `api.py` reads and submits; these are the operator's
requests the CLI has (`agent-team cancel`, `retry`, `reopen`), and each goes
through the same `TaskRequests` call with the caller's actor, so the role
check, the audit row and the wake-up are the CLI's (docs/architecture.md §8,
one path for every state-changing request). Who may write is decided once
(`api_common.writer`: a bearer key, or a session with its CSRF token), and our
errors map to HTTP in `api_common.translate` (403 naming the role needed, 404,
409 for a question that is not expired, 422 for a task that cannot do it).

A cancel or a retry needs no body: an empty one, or `{}`, is taken, so a
script can `curl -X POST` it with its key.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team.common.redact import redact
from agent_team.common.timefmt import parse_duration
from agent_team.dashboard.api_common import (
    bad_field,
    bad_parameter,
    guard_async,
    json_body,
    json_out,
    no_other_fields,
    text_field,
    writer,
)
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.safe_markdown import render_markdown
from agent_team.reports.task import QuestionView
from agent_team.requests.limits import MAX_BODY_CHARS

__all__ = ["DEFAULT_REOPEN", "MAX_REOPEN", "MIN_REOPEN", "parse_reopen_deadline", "routes"]

# A reopened question's deadline: the CLI's default, and the bounds a person may pick (a
# minute at least; a year at most, so `now + deadline` always fits the calendar).
DEFAULT_REOPEN = "24h"
MIN_REOPEN = timedelta(minutes=1)
MAX_REOPEN = timedelta(days=365)


def parse_reopen_deadline(text: str) -> timedelta:
    """`24h`, `90m`, `2d` as a reopened question's window.

    Raises:
        ValueError: not a duration, or outside `MIN_REOPEN`..`MAX_REOPEN`; the message
            says what to write.
    """
    window = parse_duration(text.strip())
    if not MIN_REOPEN <= window <= MAX_REOPEN:
        raise ValueError(f"{text.strip()[:40]!r} is out of range; give from 1m to 365d")
    return window


async def _optional_body(request: Request) -> dict[str, Any]:
    """No body at all, or a JSON object (`json_body`: typed, size-capped)."""
    length = request.headers.get("content-length")
    if "transfer-encoding" not in request.headers and length in (None, "0"):
        return {}
    return await json_body(request)


def _nothing_else(data: dict[str, Any]) -> None:
    if data:
        raise bad_field(sorted(data)[0], "is not a field here; send no body, or {}")


def _path(request: Request, name: str) -> str:
    value = str(request.path_params[name]).strip()
    if not value:
        raise bad_parameter(name, "is required in the path")
    return value


class _ActionsApi:
    def __init__(self, ctx: DashboardContext) -> None:
        self.ctx = ctx
        self.json = json_out(ctx)

    async def cancel(self, request: Request) -> Response:
        actor = writer(self.ctx, request).actor()
        task_id = _path(request, "task_id")
        _nothing_else(await _optional_body(request))

        def work() -> None:
            with self.ctx.requests() as requests:
                requests.cancel(task_id, actor=actor)

        await run_in_threadpool(work)
        # 202: the cancel is queued; the worker ends the task (and stops a running build).
        return self.json({"task_id": task_id, "queued": "cancel"}, status_code=202)

    async def retry(self, request: Request) -> Response:
        actor = writer(self.ctx, request).actor()
        task_id = _path(request, "task_id")
        _nothing_else(await _optional_body(request))

        def work() -> str:
            with self.ctx.requests() as requests:
                return requests.retry(task_id, actor=actor)

        command_id = await run_in_threadpool(work)
        return self.json({"task_id": task_id, "command_id": command_id}, status_code=202)

    async def reopen(self, request: Request) -> Response:
        actor = writer(self.ctx, request).actor()
        question_id = _path(request, "question_id")
        data = await _optional_body(request)
        no_other_fields(data, {"deadline"})
        given = text_field(data, "deadline", required=False)
        try:
            window = parse_reopen_deadline(given if given and given.strip() else DEFAULT_REOPEN)
        except ValueError as exc:
            raise bad_field("deadline", f"{exc}; e.g. 30m, 24h, 2d") from None

        def work() -> QuestionView:
            with self.ctx.requests() as requests:
                return QuestionView.of(requests.reopen(question_id, deadline=window, actor=actor))

        reopened = await run_in_threadpool(work)
        return self.json({"question": reopened.to_json()})

    async def preview(self, request: Request) -> Response:
        """A task body as the task page will show it (`safe_markdown`, redacted).

        Behind a writer's sign-in like the submit it serves: it changes nothing, but
        rendering is work, and only someone who may submit needs it.
        """
        writer(self.ctx, request)
        data = await json_body(request)
        no_other_fields(data, {"markdown"})
        text = text_field(data, "markdown", required=False, max_chars=MAX_BODY_CHARS) or ""
        html = render_markdown(redact(text, self.ctx.auth.tokens.secrets()))
        return self.json({"html": str(html)})


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    """The actions' routes; `create_app` mounts them beside the rest of the API."""
    api = _ActionsApi(ctx)
    return [
        Route("/api/task/{task_id}/cancel", guard_async(api.cancel), methods=["POST"]),
        Route("/api/task/{task_id}/retry", guard_async(api.retry), methods=["POST"]),
        Route("/api/questions/{question_id}/reopen", guard_async(api.reopen), methods=["POST"]),
        Route("/api/preview", guard_async(api.preview), methods=["POST"]),
    ]
