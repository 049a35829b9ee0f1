"""What a failed model call means for the next move: retry, fall back, or give up.

`classify(exc)` turns whatever a provider client raised into a `ProviderFailure`:
a kind, the HTTP status, the wait the provider asked for, and a short log-safe
description.

Why duck typing and no imports of the clients: the provider packages are
optional extras, and their exception classes come from different HTTP stacks
(the anthropic and openai SDKs are built on `httpx2`, ollama on `httpx`, and
langchain re-raises both SDKs' errors as subclasses of its own). What they
share is a shape: `status_code`, `response.headers`, `body`, and class names
such as `APITimeoutError` or `ConnectError`. So that shape is read, and the
classes are never imported.

Where Anthropic's "overloaded" shows up: as HTTP 529 with error type
`overloaded_error`; as that error type under another status (a gateway in
between may rewrite the status); and, in a streamed reply, as an `error`
event after the reply already started with HTTP 200, which the SDK raises as a
plain `APIStatusError` whose `status_code` is 200. All three are transient.

Why `detail` carries only the status and the provider's error *type*: a
provider's message can quote the request (a prompt, a header value), and a
body can hold anything; the type is a short fixed identifier, safe in a log.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

__all__ = ["FailureKind", "ProviderFailure", "classify", "retry_after_seconds"]

FailureKind = Literal["transient", "not_found", "auth", "refused", "invalid"]

# How deep to follow __cause__ / __context__: wrappers seldom nest more than a few levels.
_CHAIN_DEPTH = 6

# Statuses worth another try. 408 and 409 (a lock timeout) are what both SDKs retry besides
# 429 and 5xx; 425 (too early) asks for a replay; 499 is a request a proxy gave up on.
_TRANSIENT_STATUSES = frozenset({408, 409, 425, 429, 499})

# The providers' error types, for an error with no HTTP error status (a streamed error
# event). Anthropic's and OpenAI's documented types; unknown types fall through.
_TYPE_KINDS: dict[str, FailureKind] = {
    "overloaded_error": "transient",
    "rate_limit_error": "transient",
    "api_error": "transient",
    "timeout_error": "transient",
    "server_error": "transient",
    "rate_limit_exceeded": "transient",
    "service_unavailable": "transient",
    "authentication_error": "auth",
    "permission_error": "auth",
    "not_found_error": "not_found",
    "invalid_request_error": "refused",
    "request_too_large": "refused",
    "billing_error": "refused",
    "insufficient_quota": "refused",
}

# A 429 that no wait clears: the month's spend limit or the account's quota is used up.
_EXHAUSTED = frozenset({"insufficient_quota", "enforced_spend_limit_reached"})

# Class names (anywhere in the class's MRO) that mean the call timed out or never connected.
# Timeouts first: the SDKs' APITimeoutError is a subclass of their APIConnectionError.
_TIMEOUT_NAMES = frozenset({"APITimeoutError", "TimeoutException", "ModelTimeoutError"})
_CONNECTION_NAMES = frozenset(
    {
        "APIConnectionError",  # anthropic, openai
        "NetworkError",  # httpx / httpx2: ConnectError, ReadError, WriteError, CloseError
        "RemoteProtocolError",  # the server closed the connection without an answer
        "ProxyError",
        "ModelConnectionError",  # langchain-core
    }
)
# Timeouts before the request was sent (httpx / httpx2 names): a connection failure.
_NEVER_SENT = frozenset({"ConnectTimeout", "PoolTimeout"})
# A reply that arrived but could not be read as the API's reply: a bug, not an outage.
_UNREADABLE_NAMES = frozenset({"APIResponseValidationError"})

# An error type or code is read only when it looks like the providers' identifiers
# (`rate_limit_error`, `model_not_found`): never free text, nor anything key-like.
_IDENTIFIER = re.compile(r"[a-z][a-z_]{0,47}")


@dataclass(frozen=True, slots=True)
class ProviderFailure:
    """A failed model call, classified.

    Attributes:
        kind: `transient` (worth another try: 408/409/425/429/499, 5xx, 529, an
            overloaded error, a timeout, a connection failure), `not_found` (404:
            the model is unknown here), `auth` (401/403), `refused` (any other 4xx:
            the request itself is wrong, or the quota is used up), `invalid`
            (anything else: a reply the client could not read, a bug).
        status: the HTTP status, when the failure came with an error status.
        retry_after_s: the wait the provider asked for (`retry-after-ms`, else
            `retry-after`), never negative; None when absent or unreadable.
        detail: a short, log-safe description ("HTTP 429 (rate_limit_error)",
            "timed out", "connection failed"); no bodies, headers or keys.
    """

    kind: FailureKind
    status: int | None
    retry_after_s: float | None
    detail: str

    @property
    def worth_retrying(self) -> bool:
        """The same request may succeed later on the same model."""
        return self.kind == "transient"

    @property
    def timed_out(self) -> bool:
        """No answer came in time: the provider may still bill the attempt."""
        return self.detail.startswith("timed out")

    @property
    def worth_falling_back(self) -> bool:
        """Another model may answer: this one is failing for now, or does not exist here."""
        return self.kind in ("transient", "not_found")


def classify(exc: BaseException, *, now: Callable[[], datetime] | None = None) -> ProviderFailure:
    """Classify what a provider client raised.

    The exception and the ones it wraps (`__cause__`, else `__context__`, a few
    levels) are read outermost first; the first that says something decides.

    Args:
        exc: the exception a model call raised.
        now: the current time, aware (for a `retry-after` HTTP date); defaults to UTC now.

    Returns:
        The failure's kind, status, requested wait and a log-safe detail.
    """
    chain = list(_chain(exc))
    for index, (error, behind_suppressed) in enumerate(chain):
        # A context raised `from None` is not a cause: it never decides the kind.
        verdict = None if behind_suppressed else _verdict(error)
        if verdict is None:
            continue
        kind, status, detail = verdict
        if detail == "timed out" and any(_class_names(e) & _NEVER_SENT for e, _ in chain):
            # The SDKs raise their timeout for a connect or a pool wait too: nothing
            # reached the provider, so nothing can be billed.
            detail = "connection failed (timed out connecting)"
        # The headers may sit deeper than the verdict: ollama raises its ResponseError
        # `from None` inside the handler of httpx's HTTPStatusError, which has them.
        headers = next((h for e, _ in chain[index:] if (h := _headers(e)) is not None), None)
        kind = _obey_should_retry(kind, headers)
        wait = retry_after_seconds(headers, now=now) if headers is not None else None
        return ProviderFailure(kind, status, wait, detail)
    return ProviderFailure("invalid", None, None, f"unclassified error ({type(exc).__name__})")


def retry_after_seconds(
    headers: Mapping[str, str] | Any, *, now: Callable[[], datetime] | None = None
) -> float | None:
    """The wait a reply's headers ask for, in seconds.

    `retry-after-ms` (milliseconds; the SDKs prefer it, it is more precise) wins
    over `retry-after` (seconds, a float tolerated, or an HTTP date, counted from
    `now`). A negative or unreadable value is ignored; a date in the past is 0.

    Args:
        headers: the reply's headers (any mapping; names matched case-insensitively).
        now: the current time, aware; defaults to UTC now.

    Returns:
        The wait in seconds, or None when neither header gives one.
    """
    millis = _number(_header(headers, "retry-after-ms"))
    if millis is not None:
        return millis / 1000
    raw = _header(headers, "retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, by RFC 5322
        when = when.replace(tzinfo=UTC)
    current = (now or _utc_now)()
    return max(0.0, (when - current).total_seconds())


# -- reading one exception ---------------------------------------------------------------


def _verdict(error: BaseException) -> tuple[FailureKind, int | None, str] | None:
    """(kind, status, detail) when this exception alone tells; None to look deeper."""
    status = _status(error)
    error_type, code = _error_type(error)
    names = _class_names(error)
    label = ", ".join(part for part in (error_type, code) if part)
    if status is not None and status >= 400:
        detail = f"HTTP {status}" + (f" ({label})" if label else "")
        return _status_kind(status, error_type, code), status, detail
    if names & _UNREADABLE_NAMES:
        return "invalid", None, f"unreadable reply ({type(error).__name__})"
    if error_type is not None or _is_stream_error(error, names, status):
        # An error event inside a reply that had started fine (HTTP 200): the server
        # accepted the request, then failed; by its type, else as a server failure.
        kind = _TYPE_KINDS.get(error_type or "", "transient")
        return kind, None, "error event in the reply" + (f" ({label})" if label else "")
    if names & _TIMEOUT_NAMES or isinstance(error, TimeoutError):
        return "transient", None, "timed out"
    if names & _CONNECTION_NAMES or isinstance(error, ConnectionError):
        return "transient", None, "connection failed"
    return None


def _status_kind(status: int, error_type: str | None, code: str | None) -> FailureKind:
    if error_type == "overloaded_error":  # whatever status a gateway put on it
        return "transient"
    if status == 429 and (error_type in _EXHAUSTED or code in _EXHAUSTED):
        return "refused"
    if status in _TRANSIENT_STATUSES or status >= 500:
        return "transient"
    if status == 404:
        return "not_found"
    if status in (401, 403):
        return "auth"
    return "refused"


def _obey_should_retry(kind: FailureKind, headers: Any) -> FailureKind:
    """The server's own word (`x-should-retry`), which both SDKs obey, turns the call."""
    said = _header(headers, "x-should-retry") if headers is not None else None
    if said == "false" and kind == "transient":
        return "refused"
    if said == "true" and kind == "refused":
        return "transient"
    return kind


def _status(error: BaseException) -> int | None:
    """The HTTP status: `status_code` (SDKs, ollama), else `response.status_code` (httpx)."""
    for value in (_attr(error, "status_code"), _attr(_attr(error, "response"), "status_code")):
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _error_type(error: BaseException) -> tuple[str | None, str | None]:
    """The provider's error type and code, when they read as identifiers.

    Anthropic's body is `{"type": "error", "error": {"type", "message", "details"}}`
    (the SDK also sets `.type`); OpenAI's SDK keeps the inner `{"message", "type",
    "code"}` as `body`; ollama's `.error` is usually a message (not an identifier),
    but holds the inner object when a server sent one.
    """
    candidates: list[Any] = []
    body = _attr(error, "body")
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            candidates.append(inner)
        elif "message" in body:  # an error object itself (OpenAI's), not some other reply
            candidates.append(body)
    ollama_error = _attr(error, "error")
    if isinstance(ollama_error, Mapping):
        candidates.append(ollama_error)
    error_type: str | None = None
    code: str | None = None
    if "APIError" in _class_names(error):  # the SDKs copy the body's fields onto the error
        error_type = _identifier(_attr(error, "type"))
        code = _identifier(_attr(error, "error_code")) or _identifier(_attr(error, "code"))
    for candidate in candidates:
        error_type = error_type or _identifier(candidate.get("type"))
        code = code or _identifier(candidate.get("code"))
        details = candidate.get("details")
        if isinstance(details, Mapping):
            code = code or _identifier(details.get("error_code"))
    if error_type == "error":  # Anthropic's outer envelope's type, never the cause
        error_type = None
    return error_type, code


def _is_stream_error(error: BaseException, names: set[str], status: int | None) -> bool:
    """An error the server sent inside a reply: an SDK's status error under a 2xx status,
    or ollama's `ResponseError` from an `{"error": ...}` line (it has no status then)."""
    if "APIStatusError" in names and status is not None and status < 400:
        return True
    return "ResponseError" in names and type(error).__module__.startswith("ollama")


def _headers(error: BaseException) -> Any:
    """The reply's headers, if this exception carries the reply."""
    headers = _attr(_attr(error, "response"), "headers")
    return headers if headers is not None and hasattr(headers, "get") else None


def _header(headers: Any, name: str) -> str | None:
    """One header's value, matching the name case-insensitively in any mapping."""
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, Mapping):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except Exception:  # a foreign object's `get` failed: no header then
        return None
    return value.strip() if isinstance(value, str) else None


def _number(raw: str | None) -> float | None:
    """A finite, non-negative number, or None."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _identifier(value: Any) -> str | None:
    return value if isinstance(value, str) and _IDENTIFIER.fullmatch(value) else None


def _class_names(error: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(error).__mro__}


def _attr(obj: Any, name: str) -> Any:
    """`getattr` that survives properties which raise (httpx's `request` when unset)."""
    if obj is None:
        return None
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _chain(exc: BaseException) -> list[tuple[BaseException, bool]]:
    """`exc` and what it wraps (`__cause__`, else `__context__`), each with whether a
    `raise ... from None` stands between it and `exc`."""
    chain: list[tuple[BaseException, bool]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    suppressed = False
    while current is not None and id(current) not in seen and len(chain) < _CHAIN_DEPTH:
        seen.add(id(current))
        chain.append((current, suppressed))
        if current.__cause__ is not None:
            current = current.__cause__
        else:
            suppressed = suppressed or current.__suppress_context__
            current = current.__context__
    return chain


def _utc_now() -> datetime:
    return datetime.now(UTC)
