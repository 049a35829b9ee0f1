"""What every JSON API module of the dashboard shares: refusals as JSON, guarded handlers,
bounded bodies and checked fields.

A refusal is `{"error": ...}` with the status that says why, naming the
parameter or field at fault; our own errors map to their statuses in
`translate`, and anything unexpected is logged and answered with a bare 500,
never a traceback.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agent_team import db
from agent_team.common.bounded_json import BadJson, loads_bounded
from agent_team.common.redact import redact_deep
from agent_team.common.repo_spec import checked_repo
from agent_team.dashboard.auth import AuthRefused
from agent_team.dashboard.task_filters import BadParameter
from agent_team.exceptions import (
    AccessDeniedError,
    IdempotencyKeyReusedError,
    InvalidAnswerError,
    InvalidAutomationError,
    InvalidRepoError,
    LedgerBusyError,
    LedgerError,
    LedgerInputError,
    QuestionClosedError,
    TaskRefusedError,
    TaskTooLargeError,
    UnknownAutomationError,
    UnknownTaskError,
)

if TYPE_CHECKING:
    from agent_team.dashboard.auth import Caller
    from agent_team.dashboard.context import DashboardContext

__all__ = [
    "MAX_BODY_BYTES",
    "ApiError",
    "RedactedJSON",
    "bad_field",
    "bad_parameter",
    "guard_async",
    "guard_sync",
    "json_body",
    "json_out",
    "no_other_fields",
    "repo_field",
    "text_field",
    "translate",
    "writer",
]

log = logging.getLogger("agent_team.dashboard.api")

MAX_BODY_BYTES = 1_000_000


class ApiError(Exception):
    """A refusal to answer with `status` and a JSON body naming what was wrong."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        extra: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        return JSONResponse(
            {"error": self.message, **self.extra}, status_code=self.status, headers=self.headers
        )


SHARED_TOKEN_REFUSED = (
    "the shared (unnamed) dashboard token may not change anything once people are set up, "
    "nor say who is acting: use your own key (agent-team key add NAME) or sign in with it"
)


def writer(ctx: DashboardContext, request: Request) -> Caller:
    """Who writes: a bearer key or a session with its CSRF token (`auth.authorize_write`).

    Once people decide, the unnamed token, which names nobody and lets its holder type a
    name, is refused here for every write; before, it works as it always did.

    Raises:
        ApiError: 401/403 from the auth check, or 403 for the shared token.
    """
    try:
        caller = ctx.auth.authorize_write(request)
    except AuthRefused as exc:
        raise ApiError(exc.status, exc.message, headers=exc.headers) from None
    if caller.name is None:
        with ctx.read() as view:
            people = db.list_people_exist(view)
        if people:
            raise ApiError(403, SHARED_TOKEN_REFUSED, extra={"needed_role": "a person's key"})
    return caller


class RedactedJSON(JSONResponse):
    """JSON whose every string went through the one redaction rule on its way out: a token
    pasted into a task body is hidden from API clients as it is on the pages."""

    def __init__(
        self,
        content: Any,
        secrets: Callable[[], Iterable[str]],
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._secrets = secrets
        super().__init__(content, status_code=status_code, headers=headers)

    def render(self, content: Any) -> bytes:
        return super().render(redact_deep(content, self._secrets()))


def json_out(
    ctx: DashboardContext,
) -> Callable[..., JSONResponse]:
    """`JSONResponse(...)` for `ctx`'s handlers, redacted with its known tokens too."""

    def make(
        content: Any, status_code: int = 200, headers: Mapping[str, str] | None = None
    ) -> JSONResponse:
        return RedactedJSON(content, ctx.auth.tokens.secrets, status_code, headers)

    return make


def bad_parameter(name: str, message: str) -> ApiError:
    return ApiError(400, f"{name}: {message}", extra={"parameter": name})


def bad_field(name: str, message: str) -> ApiError:
    return ApiError(400, f"{name}: {message}", extra={"field": name})


def translate(exc: Exception) -> ApiError:
    """Our errors as HTTP; anything else is logged and becomes a bare 500."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BadParameter):
        return bad_parameter(exc.name, exc.message)
    if isinstance(exc, AccessDeniedError):
        return ApiError(403, str(exc), extra={"needed_role": exc.needed})
    if isinstance(exc, UnknownTaskError):
        return ApiError(404, str(exc))
    if isinstance(exc, QuestionClosedError):
        return ApiError(409, str(exc))
    if isinstance(exc, TaskTooLargeError):
        return ApiError(413, f"{exc.field}: {exc}", extra={"field": exc.field})
    if isinstance(exc, IdempotencyKeyReusedError):
        return ApiError(422, str(exc), extra={"header": exc.header})
    if isinstance(exc, InvalidAnswerError | TaskRefusedError):
        return ApiError(422, str(exc))
    if isinstance(exc, InvalidAutomationError):
        return ApiError(422, str(exc), extra={"field": exc.field})
    if isinstance(exc, UnknownAutomationError):
        return ApiError(404, str(exc))
    if isinstance(exc, LedgerInputError):
        return ApiError(400, str(exc))
    if isinstance(exc, LedgerBusyError):
        return ApiError(503, "the ledger is busy; try again shortly")
    if isinstance(exc, LedgerError):
        log.error("dashboard: the ledger is unavailable: %s", exc)
        return ApiError(503, "the ledger is unavailable; check the daemon's log")
    log.exception("dashboard: unexpected error", exc_info=exc)
    return ApiError(500, "internal error")


_Sync = Callable[[Request], Response]
_Async = Callable[[Request], Awaitable[Response]]


def guard_sync(handler: _Sync) -> _Sync:
    """Run a sync handler (Starlette puts it on a worker thread), turning errors into JSON."""

    @functools.wraps(handler)
    def endpoint(request: Request) -> Response:
        try:
            return handler(request)
        except Exception as exc:
            return translate(exc).response()

    return endpoint


def guard_async(handler: _Async) -> _Async:
    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            return translate(exc).response()

    return endpoint


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, read with a size cap so a huge body cannot exhaust memory.

    Only `application/json`: a form a page posts without its script (or another site
    posts) is refused before it is read, never taken as an answer.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(
            415, f"send the body as application/json, not {kind[:60] or 'no content type'}"
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise ApiError(413, f"the body is over {MAX_BODY_BYTES} bytes")
    try:
        data = loads_bounded(bytes(body))
    except BadJson as exc:
        if exc.field is not None:
            raise bad_field(exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None
        raise ApiError(400, f"{exc}; send a JSON object") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    return data


def text_field(
    data: Mapping[str, Any], name: str, *, required: bool, max_chars: int | None = None
) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise bad_field(name, "is required")
        return None
    if not isinstance(value, str):
        raise bad_field(name, "must be a string")
    if required and not value.strip():
        raise bad_field(name, "must not be blank")
    if max_chars is not None and len(value.strip()) > max_chars:
        raise bad_field(name, f"is longer than {max_chars} characters")
    return value


def repo_field(data: Mapping[str, Any], name: str = "repo") -> str | None:
    """A repository the dashboard may name: a URL or `owner/name`, never a path here.

    Why no paths: a dashboard writer must not point builds at folders of the
    daemon's machine; paths are for the command line and the settings. A
    refusal is a 422 naming the field (`common.repo_spec.checked_repo` says why).
    """
    value = text_field(data, name, required=False)
    if value is None or not value.strip():
        return value
    try:
        return checked_repo(value, local_paths=False)
    except InvalidRepoError as exc:
        raise ApiError(422, f"{name}: {exc}", extra={"field": name}) from None


def no_other_fields(data: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise bad_field(unknown[0], f"is not a field here; send only {', '.join(sorted(allowed))}")
