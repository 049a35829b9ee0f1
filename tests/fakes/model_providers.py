"""Loopback model providers for tests: Anthropic Messages, OpenAI Chat Completions, Ollama chat.

A real HTTP server on 127.0.0.1 (ephemeral port) in a thread, speaking one
provider's documented wire format, so the providers' own clients
(`ChatAnthropic`, `ChatOpenAI`, `ChatOllama`) are tested on the wire:

- Anthropic: `POST /v1/messages`; a `tool_use` content block; errors as
  `{"type": "error", "error": {"type", "message"}, "request_id"}` (529 for
  `overloaded_error`); with `"stream": true`, server-sent events.
- OpenAI: `POST /v1/chat/completions`; `choices[0].message.tool_calls` with the
  arguments as a JSON string; errors as `{"error": {"message", "type", "param", "code"}}`.
- Ollama: `POST /api/chat`; `message.tool_calls` with the arguments as an object;
  errors as `{"error": "..."}`. ChatOllama streams by default (`"stream": true`):
  the reply is NDJSON, one JSON object a line, the last with `"done": true`.

The answer is computed, not canned: the request's messages become langchain
messages and `OfflineChatModel` answers them, bound to the tool the request
names (our schemas by name; any other tool as sent), and its usage numbers are
reported as the provider's usage fields. `answer=` overrides that with a callable.

A script (`server.script(...)`) says what the next requests get, one step each,
then requests are answered normally: `ANSWER`, `Fail(status, ...)` (the
provider's error body, extra headers such as `retry-after`), `Slow(event)`
(the answer is held until the event is set or the server stops), `HANG` (no
answer until the server stops), `DROP` (the connection is closed without an
answer), `StreamError(type)` (a streamed reply that starts with HTTP 200, then
carries an error). `down()` / `up()` take the whole server away and back.
Every request is recorded (`server.requests`), with credentials redacted.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic import BaseModel

from agent_team.models.offline import OfflineChatModel
from agent_team.models.schemas import ClarifyDecision, ConfluenceDraft, Plan
from agent_team.models.tokens import estimate_tokens, message_text, reply_text
from tests.fakes.http_body import read_body

__all__ = [
    "ANSWER",
    "DROP",
    "HANG",
    "REDACTED",
    "Answer",
    "Answerer",
    "Asked",
    "Drop",
    "Fail",
    "FakeModelServer",
    "Flavour",
    "Hang",
    "Recorded",
    "Slow",
    "Step",
    "StreamError",
    "fake_anthropic",
    "fake_ollama",
    "fake_openai",
    "offline_answer",
]

Flavour = Literal["anthropic", "openai", "ollama"]
REDACTED = "<redacted>"  # an auth header's recorded value: it was sent, its value is not kept
_AUTH_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})
SCHEMAS: dict[str, type[BaseModel]] = {
    schema.__name__: schema for schema in (ClarifyDecision, Plan, ConfluenceDraft)
}


# -- the script --------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """Answer normally."""


@dataclass(frozen=True)
class Fail:
    """Answer `status` with the provider's error body.

    `error_type` (Anthropic's `error.type`, OpenAI's `error.type`) defaults to
    what the provider sends for that status; `code` is OpenAI's `error.code` or
    Anthropic's `error.details.error_code`; `headers` are added to the reply.
    """

    status: int
    error_type: str | None = None
    message: str | None = None
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Slow:
    """Hold the answer until `release` is set (or the server stops), then answer normally."""

    release: threading.Event


@dataclass(frozen=True)
class Hang:
    """Never answer; the connection is closed when the server stops."""


@dataclass(frozen=True)
class Drop:
    """Close the connection without an answer."""


@dataclass(frozen=True)
class StreamError:
    """A streamed reply (HTTP 200) that carries an error: Anthropic's `error` event,
    Ollama's `{"error": ...}` line. Only for a request that asked to stream."""

    error_type: str = "overloaded_error"
    message: str = "Overloaded"


Step = Answer | Fail | Slow | Hang | Drop | StreamError
ANSWER, HANG, DROP = Answer(), Hang(), Drop()


# -- what was asked, what was recorded ---------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """A request, read: what an answer override gets."""

    model: str | None
    tool: str | None  # the tool the request names (or the first it offers), if any
    tool_spec: dict[str, Any] | None  # that tool as an OpenAI-format tool
    messages: list[BaseMessage]
    body: dict[str, Any]


Answerer = Callable[[Asked], AIMessage]


@dataclass(frozen=True)
class Recorded:
    """One request as it arrived; auth header values are replaced by `REDACTED`."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # the JSON body, or None
    model: str | None
    tool: str | None
    streamed: bool
    auth: Literal["none", "sent", "accepted", "rejected"]


# -- the three wire formats --------------------------------------------------------------


class _Wire:
    """One provider's wire format: where it listens, how it reads and answers."""

    path: str
    url_suffix = ""
    streams = True  # whether this fake can answer a request that asks to stream
    stream_type = "application/json"

    def key(self, headers: Mapping[str, str]) -> str | None:
        kind, _, value = (headers.get("authorization") or "").partition(" ")
        return value if kind.lower() == "bearer" else None

    def messages(self, body: dict[str, Any]) -> list[BaseMessage]:
        return [_message(m.get("role"), m.get("content"), m) for m in body.get("messages") or []]

    def tools(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The offered tools as OpenAI-format tools (what OfflineChatModel binds)."""
        return [t for t in body.get("tools") or [] if isinstance(t, dict) and "function" in t]

    def named_tool(self, body: dict[str, Any]) -> str | Literal[False] | None:
        """The tool `tool_choice` names; None when it names none; False when it forbids tools."""
        choice = body.get("tool_choice")
        if choice == "none":
            return False
        if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
            name = choice["function"].get("name")
            return name if isinstance(name, str) else None
        return None

    def streamed(self, body: dict[str, Any]) -> bool:
        return body.get("stream") is True

    def error_body(self, fail: Fail) -> Any:
        raise NotImplementedError

    def reply(self, model: str, message: AIMessage, usage: tuple[int, int]) -> Any:
        raise NotImplementedError

    def stream(self, model: str, message: AIMessage, usage: tuple[int, int]) -> Iterator[bytes]:
        raise NotImplementedError

    def stream_error(self, error: StreamError) -> Iterator[bytes]:
        raise NotImplementedError

    def reply_headers(self) -> dict[str, str]:
        return {}

    def unknown_model(self, model: str | None) -> Fail:
        return Fail(404, message=f"model '{model}' not found")

    def bad_key(self) -> Fail:
        return Fail(401)


_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}{next(_ids):024x}"


def _text(content: Any) -> str | list[str | dict[str, Any]]:
    """Message content as langchain keeps it: a string, or its text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [
            {"type": "text", "text": block["text"]}
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        ]
    return ""


def _message(role: Any, content: Any, raw: Mapping[str, Any]) -> BaseMessage:
    text = _text(content)
    if role in ("system", "developer"):
        return SystemMessage(content=text)
    if role == "assistant":
        return AIMessage(content=text)
    if role == "tool":
        return ToolMessage(content=text, tool_call_id=str(raw.get("tool_call_id") or "tool"))
    return HumanMessage(content=text)


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class _Anthropic(_Wire):
    path = "/v1/messages"
    stream_type = "text/event-stream"
    _types: ClassVar[dict[int, str]] = {
        400: "invalid_request_error",
        401: "authentication_error",
        402: "billing_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        504: "timeout_error",
        529: "overloaded_error",
    }

    def key(self, headers: Mapping[str, str]) -> str | None:
        # The SDK sends the key as `x-api-key` (1.x) or as a bearer token (2.x).
        return headers.get("x-api-key") or super().key(headers)

    def messages(self, body: dict[str, Any]) -> list[BaseMessage]:
        system = body.get("system")
        head = [SystemMessage(content=_text(system))] if system else []
        return head + super().messages(body)

    def tools(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "parameters": tool.get("input_schema", {}),
                },
            }
            for tool in body.get("tools") or []
            if isinstance(tool, dict) and isinstance(tool.get("name"), str)
        ]

    def named_tool(self, body: dict[str, Any]) -> str | Literal[False] | None:
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice.get("type") == "none":
            return False
        if isinstance(choice, dict) and choice.get("type") == "tool":
            name = choice.get("name")
            return name if isinstance(name, str) else None
        return None

    def error_body(self, fail: Fail) -> Any:
        status = fail.status
        error: dict[str, Any] = {
            "type": fail.error_type
            or self._types.get(status, "api_error" if status >= 500 else "invalid_request_error"),
            "message": fail.message or "injected by the fake",
        }
        if fail.code:
            error["details"] = {"error_code": fail.code}
        return {"type": "error", "error": error, "request_id": _new_id("req_")}

    def reply_headers(self) -> dict[str, str]:
        return {"request-id": _new_id("req_")}

    def unknown_model(self, model: str | None) -> Fail:
        return Fail(404, message=f"model: {model}")

    def _blocks(self, message: AIMessage) -> list[dict[str, Any]]:
        text = message.text
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [
            {
                "type": "tool_use",
                "id": _new_id("toolu_"),
                "name": call["name"],
                "input": call["args"],
            }
            for call in message.tool_calls
        ]
        return blocks

    def _stop_reason(self, message: AIMessage) -> str:
        return "tool_use" if message.tool_calls else "end_turn"

    def reply(self, model: str, message: AIMessage, usage: tuple[int, int]) -> Any:
        return {
            "id": _new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": self._blocks(message),
            "stop_reason": self._stop_reason(message),
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }

    def stream(self, model: str, message: AIMessage, usage: tuple[int, int]) -> Iterator[bytes]:
        start = {**self.reply(model, message, usage), "content": [], "stop_reason": None}
        start["usage"] = {"input_tokens": usage[0], "output_tokens": 1}
        yield _sse("message_start", {"type": "message_start", "message": start})
        for index, block in enumerate(self._blocks(message)):
            if block["type"] == "text":
                opening, delta = (
                    {**block, "text": ""},
                    {"type": "text_delta", "text": block["text"]},
                )
            else:
                opening = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            yield _sse(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
            yield _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": self._stop_reason(message), "stop_sequence": None},
                # Cumulative, as the API sends it now (langchain reads usage from here).
                "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})

    def stream_error(self, error: StreamError) -> Iterator[bytes]:
        yield _sse("ping", {"type": "ping"})
        body = {"type": "error", "error": {"type": error.error_type, "message": error.message}}
        yield _sse("error", body)


class _OpenAI(_Wire):
    path = "/v1/chat/completions"
    url_suffix = "/v1"
    streams = False  # our code never streams from OpenAI; a streamed request gets a 400
    _types: ClassVar[dict[int, tuple[str, str | None]]] = {
        400: ("invalid_request_error", None),
        401: ("invalid_request_error", "invalid_api_key"),
        403: ("invalid_request_error", "unsupported_country_region_territory"),
        404: ("invalid_request_error", "model_not_found"),
        429: ("tokens", "rate_limit_exceeded"),
    }

    def error_body(self, fail: Fail) -> Any:
        error_type, code = self._types.get(
            fail.status, ("server_error" if fail.status >= 500 else "invalid_request_error", None)
        )
        return {
            "error": {
                "message": fail.message or "injected by the fake",
                "type": fail.error_type or error_type,
                "param": None,
                "code": fail.code or code,
            }
        }

    def reply_headers(self) -> dict[str, str]:
        return {"x-request-id": _new_id("req_")}

    def unknown_model(self, model: str | None) -> Fail:
        return Fail(404, message=f"The model `{model}` does not exist or you do not have access.")

    def reply(self, model: str, message: AIMessage, usage: tuple[int, int]) -> Any:
        reply: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        reply["refusal"] = None
        if message.tool_calls:
            reply["tool_calls"] = [
                {
                    "id": _new_id("call_"),
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                }
                for call in message.tool_calls
            ]
        return {
            "id": _new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": reply,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if message.tool_calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
            "system_fingerprint": None,
        }


class _Ollama(_Wire):
    path = "/api/chat"
    stream_type = "application/x-ndjson"

    def named_tool(self, body: dict[str, Any]) -> str | Literal[False] | None:
        return None  # Ollama has no tool_choice: the first tool offered is answered

    def streamed(self, body: dict[str, Any]) -> bool:
        return body.get("stream", True) is not False  # Ollama streams unless told not to

    def error_body(self, fail: Fail) -> Any:
        return {"error": fail.message or fail.error_type or f"injected by the fake ({fail.status})"}

    def bad_key(self) -> Fail:
        return Fail(401, message="unauthorized")

    def _head(self, model: str) -> dict[str, Any]:
        return {"model": model, "created_at": datetime.now(UTC).isoformat()}

    def _message(self, message: AIMessage) -> dict[str, Any]:
        reply: dict[str, Any] = {"role": "assistant", "content": message.text}
        if message.tool_calls:
            reply["tool_calls"] = [
                {"function": {"name": call["name"], "arguments": call["args"]}}
                for call in message.tool_calls
            ]
        return reply

    def _done(self, usage: tuple[int, int]) -> dict[str, Any]:
        return {
            "done": True,
            "done_reason": "stop",
            "total_duration": 1000,
            "load_duration": 0,
            "prompt_eval_count": usage[0],
            "prompt_eval_duration": 0,
            "eval_count": usage[1],
            "eval_duration": 0,
        }

    def reply(self, model: str, message: AIMessage, usage: tuple[int, int]) -> Any:
        return {**self._head(model), "message": self._message(message), **self._done(usage)}

    def stream(self, model: str, message: AIMessage, usage: tuple[int, int]) -> Iterator[bytes]:
        # As Ollama does: the message (and its tool calls) first, then an empty "done" line.
        first = {**self._head(model), "message": self._message(message), "done": False}
        last = {**self._head(model), "message": {"role": "assistant", "content": ""}}
        for line in (first, {**last, **self._done(usage)}):
            yield json.dumps(line).encode() + b"\n"

    def stream_error(self, error: StreamError) -> Iterator[bytes]:
        yield json.dumps({"error": error.message}).encode() + b"\n"


_WIRES: dict[Flavour, type[_Wire]] = {
    "anthropic": _Anthropic,
    "openai": _OpenAI,
    "ollama": _Ollama,
}


# -- answering ---------------------------------------------------------------------------


def offline_answer(asked: Asked) -> AIMessage:
    """What OfflineChatModel answers, bound to the asked tool (our schema class by name)."""
    model = OfflineChatModel()
    if asked.tool is None or asked.tool_spec is None:
        return model.invoke(asked.messages)
    schema: type[BaseModel] | dict[str, Any] = SCHEMAS.get(asked.tool, asked.tool_spec)
    return model.bind_tools([schema], tool_choice=asked.tool).invoke(asked.messages)


def _usage(asked: Asked, message: AIMessage) -> tuple[int, int]:
    """The answer's usage, else the same estimate the offline model reports."""
    if message.usage_metadata is not None:
        return message.usage_metadata["input_tokens"], message.usage_metadata["output_tokens"]
    return estimate_tokens(message_text(asked.messages)), estimate_tokens(reply_text(message))


# -- the server --------------------------------------------------------------------------


class FakeModelServer:
    """One loopback provider; see the module docstring. Start it with `with` (or `start()`).

    Args:
        flavour: "anthropic", "openai" or "ollama".
        api_key: the only key accepted (401 otherwise); None accepts any, or none.
        models: the model names served (404 for others); None serves any.
        answer: computes the answer instead of OfflineChatModel.
    """

    def __init__(
        self,
        flavour: Flavour,
        *,
        api_key: str | None = None,
        models: set[str] | None = None,
        answer: Answerer | None = None,
    ) -> None:
        self.flavour: Flavour = flavour
        self.api_key = api_key
        self.models = models
        self.answer: Answerer = answer or offline_answer
        self._wire = _WIRES[flavour]()
        self._lock = threading.Lock()
        self._steps: deque[Step] = deque()
        self._requests: list[Recorded] = []
        self._holding: set[threading.Event] = set()
        self._stopping = threading.Event()
        self._down: int | Literal["drop"] | None = None
        self._http: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- what tests use ----------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL the provider's client takes."""
        return f"http://127.0.0.1:{self.port}{self._wire.url_suffix}"

    @property
    def requests(self) -> list[Recorded]:
        """Every request so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def held(self) -> int:
        """How many replies are being held right now (`Slow`, `HANG`)."""
        with self._lock:
            return len(self._holding)

    @property
    def pending(self) -> int:
        """Script steps not used yet."""
        with self._lock:
            return len(self._steps)

    def script(self, *steps: Step) -> None:
        """Queue what the next requests get, one step each (after those already queued)."""
        with self._lock:
            self._steps.extend(steps)

    def down(self, how: int | Literal["refuse", "drop"] = "refuse") -> None:
        """Take the provider away: "refuse" closes the port (connection refused), "drop"
        closes every connection without an answer, a status answers every request with it.
        The script waits meanwhile; held replies stay held."""
        if how == "refuse":
            self._close_listener()
            return
        with self._lock:
            self._down = how

    def up(self) -> None:
        """Bring the provider back, on the same port."""
        with self._lock:
            self._down = None
        if self._http is None:
            self._listen(self.port)

    def start(self) -> FakeModelServer:
        self._listen(0)
        return self

    def stop(self) -> None:
        """Stop serving; held and hung replies are released (a hang closes unanswered)."""
        with self._lock:
            self._stopping.set()
            for event in self._holding:
                event.set()
        self._close_listener()

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving -----------------------------------------------------------------------

    def _listen(self, port: int) -> None:
        http = _Server(("127.0.0.1", port), _Handler)
        http.fake = self
        self.port = http.server_address[1]
        thread = threading.Thread(
            target=http.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-{self.flavour}",
            daemon=True,
        )
        thread.start()
        self._http, self._thread = http, thread

    def _close_listener(self) -> None:
        http, thread = self._http, self._thread
        self._http = self._thread = None
        if http is not None:
            http.shutdown()
            http.server_close()
        if thread is not None:
            thread.join(timeout=10)

    def _record(self, handler: BaseHTTPRequestHandler, raw: bytes) -> tuple[Recorded, Any]:
        headers = {k.lower(): v for k, v in handler.headers.items()}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        payload = body if isinstance(body, dict) else {}
        key = self._wire.key(headers)
        auth: Literal["none", "sent", "accepted", "rejected"] = "none"
        if self.api_key is not None:
            auth = "accepted" if key == self.api_key else "rejected"
        elif any(name in headers for name in _AUTH_HEADERS):
            auth = "sent"
        recorded = Recorded(
            method=handler.command,
            path=handler.path,
            headers={k: REDACTED if k in _AUTH_HEADERS else v for k, v in headers.items()},
            body=body,
            model=payload.get("model") if isinstance(payload.get("model"), str) else None,
            tool=self._asked_tool(payload)[0],
            streamed=self._wire.streamed(payload),
            auth=auth,
        )
        with self._lock:
            self._requests.append(recorded)
        return recorded, payload

    def _asked_tool(self, body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
        """The tool to answer with and its spec: the named one, else the first offered."""
        tools = self._wire.tools(body)
        named = self._wire.named_tool(body)
        if named is False or not tools:
            return None, None
        by_name = {tool["function"]["name"]: tool for tool in tools}
        name = named if named in by_name else tools[0]["function"]["name"]
        return name, by_name[name]

    def _next_step(self, recorded: Recorded) -> Step:
        """What this request gets: the outage, else the script, else the checks, else an answer."""
        with self._lock:
            if self._down is not None:
                return DROP if self._down == "drop" else Fail(self._down)
            if self._steps:
                return self._steps.popleft()
        if recorded.path.split("?")[0] != self._wire.path or recorded.method != "POST":
            return Fail(404, message=f"no route for {recorded.method} {recorded.path}")
        if recorded.auth == "rejected":
            return self._wire.bad_key()
        if self.models is not None and recorded.model not in self.models:
            return self._wire.unknown_model(recorded.model)
        return ANSWER

    def _hold(self, event: threading.Event) -> bool:
        """Wait until `event` is set or the server stops; True when it was `event`."""
        with self._lock:
            self._holding.add(event)
            if self._stopping.is_set():
                event.set()
        try:
            event.wait()
        finally:
            with self._lock:
                self._holding.discard(event)
        return not self._stopping.is_set()

    def serve(self, handler: _Handler) -> None:
        """Answer one request (called on the server's request threads)."""
        recorded, body = self._record(handler, read_body(handler))
        step = self._next_step(recorded)
        if isinstance(step, Slow) and not self._hold(step.release):
            step = DROP
        if isinstance(step, Hang):
            self._hold(threading.Event())
            step = DROP
        if isinstance(step, Drop):
            handler.close_connection = True
            return
        if isinstance(step, Fail):
            handler.send_json(step.status, self._wire.error_body(step), step.headers)
            return
        cannot = (recorded.streamed and not self._wire.streams) or (
            isinstance(step, StreamError) and not recorded.streamed
        )
        if cannot:  # a request or a script step this fake cannot honour: say so loudly
            oops = f"the {self.flavour} fake cannot answer {step} (streamed: {recorded.streamed})"
            handler.send_json(400, self._wire.error_body(Fail(400, message=oops)))
            return
        if isinstance(step, StreamError):
            handler.send_stream(self._wire.stream_type, self._wire.stream_error(step))
            return
        tool, spec = self._asked_tool(body)
        asked = Asked(recorded.model, tool, spec, self._wire.messages(body), body)
        message = self.answer(asked)
        usage = _usage(asked, message)
        model = recorded.model or "unknown"
        if recorded.streamed:
            handler.send_stream(self._wire.stream_type, self._wire.stream(model, message, usage))
        else:
            reply = self._wire.reply(model, message, usage)
            handler.send_json(200, reply, self._wire.reply_headers())


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _serve(self) -> None:
        try:
            self.server.fake.serve(self)
        except OSError:  # the client went away (it timed out): nobody to answer
            self.close_connection = True

    do_GET = do_POST = _serve

    def send_json(self, status: int, data: Any, headers: Mapping[str, str] | None = None) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(raw)

    def send_stream(self, content_type: str, chunks: Iterator[bytes]) -> None:
        # HTTP/1.0 with no length: the reply ends when the connection closes.
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeModelServer


# -- the three servers -------------------------------------------------------------------


def fake_anthropic(
    *, api_key: str | None = None, models: set[str] | None = None, answer: Answerer | None = None
) -> FakeModelServer:
    """A loopback Anthropic Messages API, for a `with` block (see `FakeModelServer`)."""
    return FakeModelServer("anthropic", api_key=api_key, models=models, answer=answer)


def fake_openai(
    *, api_key: str | None = None, models: set[str] | None = None, answer: Answerer | None = None
) -> FakeModelServer:
    """A loopback OpenAI Chat Completions API, for a `with` block (see `FakeModelServer`)."""
    return FakeModelServer("openai", api_key=api_key, models=models, answer=answer)


def fake_ollama(
    *, api_key: str | None = None, models: set[str] | None = None, answer: Answerer | None = None
) -> FakeModelServer:
    """A loopback Ollama chat API, for a `with` block (see `FakeModelServer`)."""
    return FakeModelServer("ollama", api_key=api_key, models=models, answer=answer)
