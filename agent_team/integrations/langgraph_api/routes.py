"""The threads/runs endpoints Agent Inbox and the LangGraph SDKs call, under `/langgraph`.

Only what those clients use is served; anything else is a 404 in the
server's own error shape (`{"detail": ...}`), and no input ever gets a 5xx:
the JS SDK retries a 5xx up to four times, POSTs included, so a 5xx on an
answer would send it again. An answer goes through `TaskRequests.answer`,
the same compare-and-set, resume command and audit row as Slack, the CLI or
the dashboard (`via=langgraph-api:<token name>`), so whoever answers first
wins and the others get a 409.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from agent_team import db
from agent_team.common.redact import redact_deep
from agent_team.coordinator.runner import thread_config
from agent_team.dashboard.api_common import ApiError, RedactedJSON, json_body, translate
from agent_team.dashboard.auth import note_who
from agent_team.exceptions import AccessDeniedError, InvalidAnswerError, TaskRefusedError
from agent_team.integrations.langgraph_api.follow import TaskChanges, settled
from agent_team.integrations.langgraph_api.human import resume_answer
from agent_team.integrations.langgraph_api.shapes import (
    GRAPH_ID,
    ThreadView,
    interrupt_of,
    run_object,
    thread_object,
    thread_state,
    thread_view,
)
from agent_team.requests.actors import Actor
from agent_team.requests.answers import closed_message
from agent_team.task_model import TERMINAL_STATUSES

if TYPE_CHECKING:
    from agent_team.coordinator import Coordinator
    from agent_team.requests.access import DashboardTokens

__all__ = ["VIA", "LangGraphApi"]

log = logging.getLogger(__name__)

VIA = "langgraph-api"
MAX_SEARCH_LIMIT = 1000
FOLLOW_TIMEOUT_S = 600.0
RESOLVE_WAIT_S = 10.0
_THREAD_STATUSES = ("idle", "busy", "interrupted", "error")
_SEARCH_FIELDS = {
    "metadata", "values", "status", "limit", "offset", "sort_by", "sort_order", "ids",
    "select", "extract",
}  # fmt: skip
# Run fields the SDKs send that a resume may carry and that change nothing here.
_RUN_FIELDS = {
    "assistant_id", "command", "input", "config", "context", "metadata", "stream_mode",
    "stream_subgraphs", "stream_resumable", "interrupt_before", "interrupt_after",
    "feedback_keys", "webhook", "checkpoint", "checkpoint_id", "checkpoint_during",
    "multitask_strategy", "if_not_exists", "on_disconnect", "on_completion", "after_seconds",
    "durability", "strict_resume", "langsmith_tracer",
}  # fmt: skip
# `values` keys a search may match on, and the task column each is.
_VALUE_COLUMNS = {
    "task_id": "id", "title": "title", "kind": "kind", "source": "source", "status": "status",
    "phase": "phase",
}  # fmt: skip
_METADATA_COLUMNS = {"kind": "kind", "source": "source"}


def _detail(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(redact_deep({"detail": message}), status_code=status, headers=headers)


_Secrets = Callable[[], Iterable[str]]


def _guard(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Errors as `{"detail": ...}` with the status that says why; never a traceback."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            refused = translate(exc)
            return _detail(refused.status, refused.message, refused.headers)

    return endpoint


def _json(content: Any, secrets: _Secrets, *, headers: dict[str, str] | None = None) -> Response:
    """JSON through the one redaction rule, the dashboard tokens' values included."""
    return RedactedJSON(content, secrets, headers=headers)


def _int(data: dict[str, Any], name: str, default: int, *, low: int, high: int) -> int:
    value = data.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ApiError(422, f"{name}: must be an integer from {low} to {high}")
    return value


def _mapping(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(422, f"{name}: must be an object")
    return value


def _equal_filters(metadata: dict[str, Any], values: dict[str, Any]) -> dict[str, str] | None:
    """Containment filters as column equalities; None when nothing can match."""
    equal: dict[str, str] = {}
    for key, wanted in metadata.items():
        if key in ("graph_id", "assistant_id"):
            if wanted != GRAPH_ID:
                return None
            continue
        if key not in _METADATA_COLUMNS or not isinstance(wanted, str):
            return None  # no thread carries that metadata
        equal[_METADATA_COLUMNS[key]] = wanted
    for key, wanted in values.items():
        if key not in _VALUE_COLUMNS:
            raise ApiError(
                422, f"values: cannot search by {key!r}; use {', '.join(sorted(_VALUE_COLUMNS))}"
            )
        if not isinstance(wanted, str):
            return None
        column = _VALUE_COLUMNS[key]
        if equal.get(column, wanted) != wanted:
            return None
        equal[column] = wanted
    return equal


class LangGraphApi:
    """The handlers, bound to one daemon's coordinator and dashboard tokens."""

    def __init__(
        self, coordinator: Coordinator, tokens: DashboardTokens, changes: TaskChanges
    ) -> None:
        self.coordinator = coordinator
        self.tokens = tokens
        self.changes = changes

    # -- auth ------------------------------------------------------------------------------

    def _caller(self, request: Request) -> Actor:
        """The named token behind `x-api-key`; reads need one too (plans are private work)."""
        if not self.tokens.enabled:
            raise ApiError(
                403,
                "the LangGraph API needs a dashboard token: set AGENT_TEAM_DASHBOARD_TOKENS "
                "(name:token,...) and send one as x-api-key",
            )
        given = request.headers.get("x-api-key", "").strip()
        if not given:
            raise ApiError(401, "send a dashboard token in the x-api-key header")
        token = self.tokens.match(given)
        if token is None:
            raise ApiError(401, "the x-api-key is not a dashboard token of this daemon")
        note_who(request.scope, token.name)
        return Actor(token.name or "token", VIA)

    # -- reads -----------------------------------------------------------------------------

    def _read_view(self, task_id: str) -> ThreadView:
        with self.coordinator.ledger.snapshot() as reader:
            task = db.get_task(reader, task_id)
            if task is None:
                raise ApiError(404, f"Thread with ID {task_id} not found")
            return thread_view(reader, task)

    def _checkpoint_id(self, task_id: str) -> str | None:
        try:
            saved = self.coordinator.runner.checkpointer.get_tuple(thread_config(task_id))
        except Exception:  # a checkpoint is a detail of the state, never worth a refusal
            log.warning("langgraph api: could not read the checkpoint of %s", task_id)
            return None
        if saved is None:
            return None
        found = saved.config.get("configurable", {}).get("checkpoint_id")
        return found if isinstance(found, str) else None

    async def info(self, request: Request) -> Response:
        from agent_team import __version__

        # Fixed facts, no key needed (Agent Inbox asks before it has one); a null
        # `project_id` keeps the Inbox from rewriting its inbox ids.
        return _json(
            {
                "version": __version__,
                "langgraph_py_version": None,
                "flags": {"assistants": False, "crons": False, "langsmith": False},
                "host": {
                    "kind": "self-hosted",
                    "project_id": None,
                    "revision_id": __version__,
                    "tenant_id": None,
                },
                "metadata": {"server": "agent-team", "graph_id": GRAPH_ID},
            },
            self.tokens.secrets,
        )

    async def search(self, request: Request) -> Response:
        self._caller(request)
        data = await json_body(request)
        unknown = sorted(set(data) - _SEARCH_FIELDS)
        if unknown:
            raise ApiError(422, f"{unknown[0]}: is not a search field")
        status = data.get("status")
        if status is not None and status not in _THREAD_STATUSES:
            raise ApiError(422, f"status: must be one of {', '.join(_THREAD_STATUSES)}")
        ids = data.get("ids")
        if ids is not None and (
            not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or len(ids) > 1000
        ):
            raise ApiError(422, "ids: must be a list of at most 1000 thread ids")
        limit = _int(data, "limit", 10, low=1, high=MAX_SEARCH_LIMIT)
        offset = _int(data, "offset", 0, low=0, high=1_000_000_000)
        sort_by = data.get("sort_by") or "created_at"
        if sort_by not in ("created_at", "updated_at", "thread_id"):
            raise ApiError(422, "sort_by: must be created_at, updated_at or thread_id")
        order = data.get("sort_order") or "desc"
        if order not in ("asc", "desc"):
            raise ApiError(422, "sort_order: must be asc or desc")
        equal = _equal_filters(_mapping(data, "metadata"), _mapping(data, "values"))
        if equal is None:
            return _json([], self.tokens.secrets)

        def work() -> list[dict[str, Any]]:
            with self.coordinator.ledger.snapshot() as reader:
                tasks = db.search_threads(
                    reader,
                    thread_status=status,
                    ids=ids,
                    equal=equal,
                    sort_by=sort_by,
                    descending=order == "desc",
                    limit=limit,
                    offset=offset,
                )
                return [thread_object(thread_view(reader, task)) for task in tasks]

        return _json(await run_in_threadpool(work), self.tokens.secrets)

    async def get_thread(self, request: Request) -> Response:
        self._caller(request)
        view = await run_in_threadpool(self._read_view, _thread_id(request))
        return _json(thread_object(view), self.tokens.secrets)

    async def get_state(self, request: Request) -> Response:
        self._caller(request)
        task_id = _thread_id(request)

        def work() -> dict[str, Any]:
            view = self._read_view(task_id)
            return thread_state(view, self._checkpoint_id(task_id))

        return _json(await run_in_threadpool(work), self.tokens.secrets)

    # -- writes ----------------------------------------------------------------------------

    async def update_state(self, request: Request) -> Response:
        """Only Agent Inbox's "Mark as resolved": `as_node: "__end__"` cancels the task."""
        actor = self._caller(request)
        task_id = _thread_id(request)
        data = await json_body(request)
        if data.get("as_node") != "__end__":
            raise ApiError(
                422,
                "only marking a thread resolved is supported here: "
                '{"values": null, "as_node": "__end__"}; answer a question with a run',
            )
        if data.get("values") not in (None, {}):
            raise ApiError(422, "values: cannot be changed here; send null")

        def cancel() -> None:
            view = self._read_view(task_id)
            if view.task.status not in TERMINAL_STATUSES:
                try:
                    self.coordinator.requests.cancel(task_id, actor=actor)
                except TaskRefusedError:
                    pass  # it finished meanwhile: resolved either way

        await run_in_threadpool(cancel)
        # The server's update is done when it answers, and the Inbox lists the threads again
        # at once: wait for the cancel to land (a waiting task's is immediate), within reason.
        async for _ in self.changes.changes(task_id, timeout_s=RESOLVE_WAIT_S):
            view = await run_in_threadpool(self._read_view, task_id)
            if view.task.status in TERMINAL_STATUSES:
                break
        checkpoint = await run_in_threadpool(self._checkpoint_id, task_id)
        return _json({"checkpoint": _checkpoint_ref(task_id, checkpoint)}, self.tokens.secrets)

    async def _answer(self, request: Request) -> tuple[db.Task, db.Question, str, set[str]]:
        """Validate the run request, then record its answer.

        Returns `(task, question, assistant id, stream modes)`; every field is checked
        before anything is stored, whichever of the three run endpoints was called.
        """
        actor = self._caller(request)
        task_id = _thread_id(request)
        data = await json_body(request)
        unknown = sorted(set(data) - _RUN_FIELDS)
        if unknown:
            raise ApiError(422, f"{unknown[0]}: is not a run field")
        if data.get("input") is not None:
            raise ApiError(
                422, "input: a new run cannot be started here; resume the open question with "
                '{"command": {"resume": ...}}',
            )  # fmt: skip
        command = data.get("command")
        if not isinstance(command, dict) or "resume" not in command:
            raise ApiError(422, 'command: send {"resume": <a response to the open question>}')
        if (
            set(command) - {"resume", "update", "goto"}
            or command.get("update")
            or command.get("goto")
        ):
            raise ApiError(422, "command: only `resume` is supported")
        assistant_id = data.get("assistant_id") or GRAPH_ID
        if assistant_id != GRAPH_ID:
            # Agent Inbox recognises this wording and tells the person to fix its setting.
            raise ApiError(422, f"Invalid assistant ID: this server has one graph, {GRAPH_ID!r}")
        resume = command["resume"]
        modes = _stream_modes(data)

        def work() -> tuple[db.Task, db.Question]:
            view = self._read_view(task_id)
            question = view.open_question
            wanted = resume
            if isinstance(resume, dict) and "type" not in resume:
                # The SDK's `{interrupt id: value}` form: it must name the open question.
                if len(resume) != 1:
                    raise ApiError(422, "command.resume: name one interrupt id")
                ((named, wanted),) = resume.items()
                if question is None or named != question.question_id:
                    raise _not_open(view, named)
            if question is None:
                raise _not_open(view, None)
            answer = resume_answer(question.kind, question.payload, wanted)
            answered = self.coordinator.requests.answer(
                question.question_id, answer, via=f"{actor.via}:{actor.name}"
            )
            task = db.get_task(self.coordinator.ledger, task_id)
            assert task is not None
            return task, answered

        try:
            task, question = await run_in_threadpool(work)
        except InvalidAnswerError as exc:
            raise ApiError(422, f"command.resume: {exc}") from None
        except AccessDeniedError as exc:
            raise ApiError(403, str(exc)) from None
        return task, question, assistant_id, modes

    async def create_run(self, request: Request) -> Response:
        task, question, assistant, _ = await self._answer(request)
        run = run_object(task, question, status="pending", assistant_id=assistant)
        return _json(run, self.tokens.secrets, headers=_location(run))

    async def wait_run(self, request: Request) -> Response:
        task, question, assistant, _ = await self._answer(request)
        view = await run_in_threadpool(self._read_view, task.id)
        async for latest in self._follow(task.id, question.question_id):
            view = latest
        run = run_object(task, question, status="success", assistant_id=assistant)
        values = _final_values(view)
        failure = _failure(view, values)
        if failure is not None:
            values["__error__"] = failure  # where the server puts a run's error
        return _json(values, self.tokens.secrets, headers=_location(run))

    async def stream_run(self, request: Request) -> Response:
        task, question, assistant, modes = await self._answer(request)
        run = run_object(task, question, status="pending", assistant_id=assistant)
        return StreamingResponse(
            self._events(task.id, question.question_id, run, modes),
            media_type="text/event-stream",
            headers={**_location(run), "Cache-Control": "no-store"},
        )

    async def _follow(self, task_id: str, answered: str) -> AsyncIterator[ThreadView]:
        """The task's view each time it changed, ending with the one where it settled."""
        last: tuple[Any, ...] | None = None
        async for _ in self.changes.changes(task_id, timeout_s=FOLLOW_TIMEOUT_S):
            view = await run_in_threadpool(self._read_view, task_id)
            seen = (view.task.status, view.task.phase, view.task.updated_at, view.status)
            if seen != last:
                last = seen
                yield view
            if settled(view.task, view.questions, answered):
                return

    async def _events(
        self, task_id: str, answered: str, run: dict[str, Any], modes: set[str]
    ) -> AsyncIterator[bytes]:
        known = self.tokens.secrets()
        yield _sse("metadata", {"run_id": run["run_id"], "attempt": 1})
        entered: str | None = None
        try:
            async for view in self._follow(task_id, answered):
                if "events" in modes and view.task.phase != entered:
                    entered = view.task.phase  # Agent Inbox shows it as the node running now
                    yield _sse("events", _node_started(view, run["run_id"]), known)
                values = _final_values(view)
                if "values" in modes:
                    yield _sse("values", values, known)
                if "updates" in modes:
                    yield _sse("updates", _update_of(view), known)
                failure = _failure(view, values)
                if failure is not None:
                    yield _sse("error", failure, known)
        except Exception as exc:
            log.exception("langgraph api: following task %s failed", task_id)
            yield _sse(
                "error", {"error": type(exc).__name__, "message": "following the task failed"}
            )


def _location(run: dict[str, Any]) -> dict[str, str]:
    return {"Content-Location": f"/threads/{run['thread_id']}/runs/{run['run_id']}"}


def _final_values(view: ThreadView) -> dict[str, Any]:
    """The thread's values, with `__interrupt__` when it stopped at a question (as the server)."""
    values = dict(thread_object(view)["values"])
    question = view.open_question
    if question is not None:
        values["__interrupt__"] = [interrupt_of(question)]
    return values


def _failure(view: ThreadView, values: dict[str, Any]) -> dict[str, str] | None:
    """A task that failed or parked (its `values` say why), as the server reports a run's error."""
    if view.status != "error":
        return None
    kind = "TaskParked" if view.task.status == "parked" else "TaskFailed"
    reason = values.get("error") or view.task.status
    return {"error": kind, "message": str(reason)}


def _node_started(view: ThreadView, run_id: str) -> dict[str, Any]:
    """A phase entered, as the `events` stream mode's `on_chain_start` of that node."""
    node = view.task.phase
    return {
        "event": "on_chain_start",
        "name": node,
        "run_id": run_id,
        "tags": [],
        "metadata": {"langgraph_node": node, "thread_id": view.task.id},
        "data": {},
        "parent_ids": [],
    }


def _update_of(view: ThreadView) -> dict[str, Any]:
    question = view.open_question
    if question is not None:
        return {"__interrupt__": [interrupt_of(question)]}
    return {view.task.phase: {"status": view.task.status, "phase": view.task.phase}}


def _sse(event: str, data: Any, secrets: Iterable[str] = ()) -> bytes:
    body = json.dumps(redact_deep(data, secrets), separators=(",", ":"), ensure_ascii=False)
    return f"event: {event}\ndata: {body}\n\n".encode()


def _stream_modes(data: dict[str, Any]) -> set[str]:
    modes = data.get("stream_mode") or ["values"]
    if isinstance(modes, str):
        modes = [modes]
    if not isinstance(modes, list) or not all(isinstance(mode, str) for mode in modes):
        raise ApiError(422, "stream_mode: must be a mode or a list of modes")
    return set(modes)


def _checkpoint_ref(task_id: str, checkpoint_id: str | None) -> dict[str, Any]:
    return {"thread_id": task_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}


def _not_open(view: ThreadView, named: str | None) -> ApiError:
    """A resume with nothing to resume: 409, saying what happened to the question."""
    if named is not None:
        for question in view.questions:
            if question.question_id == named:
                return ApiError(409, closed_message(question))
    closed = [q for q in view.questions if q.status != "open"]
    if named is None and closed:
        return ApiError(409, f"no question is open on this thread; {closed_message(closed[-1])}")
    what = f"interrupt {named!r} is not the open question" if named else "no question is open"
    return ApiError(409, f"{what} on thread {view.task.id} (status {view.status})")


def _thread_id(request: Request) -> str:
    value = str(request.path_params["thread_id"]).strip()
    if not value or len(value) > 200 or not value.isprintable():
        raise ApiError(404, "Thread not found")
    return value


def routes(api: LangGraphApi) -> list[BaseRoute]:
    return [
        Route("/info", _guard(api.info), methods=["GET"]),
        Route("/threads/search", _guard(api.search), methods=["POST"]),
        Route("/threads/{thread_id}", _guard(api.get_thread), methods=["GET"]),
        Route("/threads/{thread_id}/state", _guard(api.get_state), methods=["GET"]),
        Route("/threads/{thread_id}/state", _guard(api.update_state), methods=["POST"]),
        Route("/threads/{thread_id}/runs", _guard(api.create_run), methods=["POST"]),
        Route("/threads/{thread_id}/runs/stream", _guard(api.stream_run), methods=["POST"]),
        Route("/threads/{thread_id}/runs/wait", _guard(api.wait_run), methods=["POST"]),
    ]
