"""classify(): the kind, status, requested wait and log-safe detail of a failed model call."""

from __future__ import annotations

import ast
import inspect
from datetime import UTC, datetime
from typing import Any

import anthropic
import httpx
import httpx2
import ollama
import openai
import pytest

from agent_team.models import provider_errors
from agent_team.models.provider_errors import ProviderFailure, classify, retry_after_seconds

NOW = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
SECRET = "sk-ant-api03-Zx9secretsecret"


def at_now() -> datetime:
    return NOW


class StatusError(Exception):
    """An error shaped like the SDKs' (status_code, response.headers, body), of no SDK."""

    def __init__(
        self, status: int, headers: dict[str, str] | None = None, body: Any = None
    ) -> None:
        super().__init__(f"Error code: {status} - {body}")
        self.status_code = status
        self.response = httpx.Response(status, headers=headers or {})
        self.body = body


def anthropic_error(status: int, body: Any, headers: dict[str, str] | None = None) -> Exception:
    """The exception the anthropic SDK builds for this reply (its own status-to-class map)."""
    from anthropic._error_classes import make_status_error

    request = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
    response = httpx2.Response(status, headers=headers or {}, json=body, request=request)
    return make_status_error(f"Error code: {status}", body=body, response=response)


def anthropic_body(error_type: str, message: str = "m") -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def raised(make: Any) -> BaseException:
    """The exception `make()` raises, with the chaining Python gives it."""
    try:
        make()
    except BaseException as exc:
        return exc
    raise AssertionError("nothing raised")


# -- retry-after -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": " 7 "}, 7.0),
        ({"Retry-After": "4"}, 4.0),  # any case, in a plain dict too
        ({"retry-after": "Tue, 01 Jan 2030 00:00:30 GMT"}, 30.0),
        ({"retry-after": "Mon, 31 Dec 2029 23:59:00 GMT"}, 0.0),  # already past: now
        ({"retry-after": "soon"}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": "-5"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after-ms": "150"}, 0.15),
        ({"retry-after-ms": "150", "retry-after": "2"}, 0.15),  # ms wins
        ({"retry-after-ms": "later", "retry-after": "2"}, 2.0),  # garbled ms: seconds
        ({"retry-after-ms": "-1", "retry-after": "2"}, 2.0),
        ({}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers, now=at_now) == expected
    assert retry_after_seconds(httpx.Headers(headers), now=at_now) == expected


def test_retry_after_date_counts_from_the_real_clock_by_default() -> None:
    wait = retry_after_seconds({"retry-after": "Fri, 01 Jan 2100 00:00:00 GMT"})
    assert wait is not None and wait > 365 * 24 * 3600


def test_classify_reads_the_wait_with_the_clock_it_is_given() -> None:
    error = StatusError(503, {"retry-after": "Tue, 01 Jan 2030 00:01:00 GMT"})
    assert classify(error, now=at_now).retry_after_s == 60.0


# -- by status ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        *[(status, "transient") for status in (408, 409, 425, 429, 499, 500, 502, 503, 504, 529)],
        (404, "not_found"),
        (401, "auth"),
        (403, "auth"),
        *[(status, "refused") for status in (400, 402, 405, 413, 422)],
    ],
)
def test_status_decides_the_kind(status: int, kind: str) -> None:
    failure = classify(StatusError(status))
    assert (failure.kind, failure.status, failure.detail) == (kind, status, f"HTTP {status}")


@pytest.mark.parametrize(
    ("kind", "retry", "fall_back"),
    [
        ("transient", True, True),
        ("not_found", False, True),
        ("auth", False, False),
        ("refused", False, False),
        ("invalid", False, False),
    ],
)
def test_what_each_kind_is_worth(kind: Any, retry: bool, fall_back: bool) -> None:
    failure = ProviderFailure(kind, None, None, "x")
    assert (failure.worth_retrying, failure.worth_falling_back) == (retry, fall_back)


def test_the_sdks_own_errors() -> None:
    limited = classify(
        anthropic_error(429, anthropic_body("rate_limit_error"), {"retry-after": "2"})
    )
    assert (limited.kind, limited.status, limited.retry_after_s, limited.detail) == (
        "transient",
        429,
        2.0,
        "HTTP 429 (rate_limit_error)",
    )
    overloaded = classify(anthropic_error(529, anthropic_body("overloaded_error")))
    assert (overloaded.kind, overloaded.detail) == ("transient", "HTTP 529 (overloaded_error)")
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    assert classify(openai.APITimeoutError(request)).detail == "timed out"
    assert classify(anthropic.APITimeoutError(request)).detail == "timed out"
    assert classify(openai.APIConnectionError(request=request)).detail == "connection failed"
    reply = {"type": "message", "role": "assistant", "content": "not what was expected"}
    unreadable = anthropic.APIResponseValidationError(httpx2.Response(200, request=request), reply)
    assert classify(unreadable) == ProviderFailure(
        "invalid", None, None, "unreadable reply (APIResponseValidationError)"
    )


@pytest.mark.parametrize("status", [200, 400, 503])
def test_overloaded_is_transient_under_any_status(status: int) -> None:
    # 529 is Anthropic's; a gateway may rewrite it; in a stream it arrives under HTTP 200.
    failure = classify(anthropic_error(status, anthropic_body("overloaded_error")))
    assert failure.kind == "transient"
    if status == 200:  # an error event in a reply that had started fine
        assert failure.status is None
        assert failure.detail == "error event in the reply (overloaded_error)"


@pytest.mark.parametrize(
    ("error_type", "kind"),
    [
        ("api_error", "transient"),
        ("rate_limit_error", "transient"),
        ("authentication_error", "auth"),
        ("invalid_request_error", "refused"),
        ("something_new", "transient"),  # the server accepted the request, then failed
    ],
)
def test_an_error_event_in_a_stream_goes_by_its_type(error_type: str, kind: str) -> None:
    # openai raises a bare APIError (no status) for an error event in a stream
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    error = openai.APIError("m", request, body={"type": error_type, "message": "m"})
    assert classify(error).kind == kind


def test_quota_used_up_is_refused_not_transient() -> None:
    body = {"type": "insufficient_quota", "code": "insufficient_quota", "message": "m"}
    assert classify(StatusError(429, body=body)).kind == "refused"
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx2.Response(429, request=request)
    assert classify(openai.RateLimitError("m", response=response, body=body)).kind == "refused"
    spend = anthropic_body("rate_limit_error")
    spend["error"]["details"] = {"error_code": "enforced_spend_limit_reached"}
    failure = classify(anthropic_error(429, spend))
    assert (failure.kind, failure.detail) == (
        "refused",
        "HTTP 429 (rate_limit_error, enforced_spend_limit_reached)",
    )


def test_the_servers_should_retry_header_is_obeyed() -> None:
    assert classify(StatusError(503, {"x-should-retry": "false"})).kind == "refused"
    assert classify(StatusError(400, {"x-should-retry": "true"})).kind == "transient"
    assert classify(StatusError(401, {"x-should-retry": "true"})).kind == "auth"


# -- ollama and httpx --------------------------------------------------------------------


def test_ollama_response_errors() -> None:
    assert classify(ollama.ResponseError('{"error": "busy"}', 503)).detail == "HTTP 503"
    assert classify(ollama.ResponseError("model 'x' not found", 404)).kind == "not_found"
    streamed = classify(ollama.ResponseError("model runner has unexpectedly stopped"))
    assert (streamed.kind, streamed.status) == ("transient", None)  # an {"error"} line


def test_ollamas_retry_after_is_read_from_the_httpx_error_it_raised_from_none() -> None:
    response = httpx.Response(
        429, headers={"retry-after": "3"}, request=httpx.Request("POST", "http://h/api/chat")
    )

    def call() -> None:  # what ollama's client does
        try:
            response.raise_for_status()
        except httpx.HTTPStatusError as e:
            raise ollama.ResponseError(response.text, e.response.status_code) from None

    failure = classify(raised(call))
    assert (failure.kind, failure.status, failure.retry_after_s) == ("transient", 429, 3.0)


@pytest.mark.parametrize(
    ("error", "detail"),
    [
        (httpx.ReadTimeout("timed out"), "timed out"),
        (httpx.ConnectTimeout("timed out"), "connection failed (timed out connecting)"),
        (httpx2.ReadTimeout("timed out"), "timed out"),
        (httpx.ConnectError("refused"), "connection failed"),
        (httpx.ReadError("reset"), "connection failed"),
        (httpx.RemoteProtocolError("disconnected"), "connection failed"),
        (httpx2.ConnectError("refused"), "connection failed"),
        (TimeoutError(), "timed out"),
        (ConnectionRefusedError(), "connection failed"),
        (ConnectionResetError(), "connection failed"),
        (ConnectionError("Failed to connect to Ollama"), "connection failed"),
    ],
)
def test_timeouts_and_connection_failures_are_transient(error: Exception, detail: str) -> None:
    assert classify(error) == ProviderFailure("transient", None, None, detail)


@pytest.mark.parametrize(
    "error",
    [ValueError("bad json"), KeyError("tool_calls"), httpx.UnsupportedProtocol("ftp://")],
)
def test_anything_else_is_invalid(error: Exception) -> None:
    assert classify(error) == ProviderFailure(
        "invalid", None, None, f"unclassified error ({type(error).__name__})"
    )


def test_http_status_error_of_httpx() -> None:
    request = httpx.Request("POST", "http://h/api/chat")
    response = httpx.Response(502, headers={"retry-after": "1"}, request=request)
    error = httpx.HTTPStatusError("bad gateway", request=request, response=response)
    assert classify(error) == ProviderFailure("transient", 502, 1.0, "HTTP 502")


# -- chains ------------------------------------------------------------------------------


class Wrapper(Exception):
    """Something of ours around the provider's error."""


def test_an_explicit_cause_is_followed() -> None:
    def call() -> None:
        try:
            raise StatusError(429, {"retry-after": "5"})
        except StatusError as e:
            raise Wrapper("model call failed") from e

    assert classify(raised(call)) == ProviderFailure("transient", 429, 5.0, "HTTP 429")


def test_an_implicit_context_is_followed_a_few_levels() -> None:
    def call() -> None:
        try:
            try:
                raise httpx.ReadTimeout("slow")
            except httpx.ReadTimeout:
                raise Wrapper("inner")  # noqa: B904 - implicit chaining is the point
        except Wrapper:
            raise RuntimeError("outer")  # noqa: B904

    assert classify(raised(call)).detail == "timed out"


def test_a_context_raised_from_none_does_not_decide() -> None:
    def call() -> None:
        try:
            raise TimeoutError
        except TimeoutError:
            raise ValueError("the reply could not be read") from None

    assert classify(raised(call)).kind == "invalid"


def test_the_outermost_error_that_tells_decides() -> None:
    outer = StatusError(401)
    outer.__cause__ = TimeoutError()
    assert classify(outer).kind == "auth"


def test_deep_and_circular_chains_end() -> None:
    deep: BaseException = TimeoutError()
    for _ in range(10):
        wrapper = Wrapper()
        wrapper.__cause__ = deep
        deep = wrapper
    assert classify(deep).kind == "invalid"  # the timeout is too deep to be its cause
    first, second = Wrapper("a"), Wrapper("b")
    first.__cause__, second.__cause__ = second, first
    assert classify(first).kind == "invalid"


def test_a_property_that_raises_is_no_answer() -> None:
    class Awkward(Exception):
        @property
        def status_code(self) -> int:
            raise RuntimeError("not set")

    assert classify(Awkward()).kind == "invalid"


# -- log-safety --------------------------------------------------------------------------


def leaky_errors() -> list[BaseException]:
    headers = {"authorization": f"Bearer {SECRET}", "x-api-key": SECRET, "retry-after": "1"}
    body = anthropic_body("rate_limit_error", f"your key {SECRET} is over its limit")
    request = httpx2.Request("POST", "http://127.0.0.1/v1", headers={"x-api-key": SECRET})
    return [
        StatusError(429, headers, body),
        anthropic_error(429, body, headers),
        anthropic_error(400, anthropic_body(SECRET, SECRET)),  # a type that is no identifier
        anthropic_error(200, anthropic_body("overloaded_error", SECRET)),
        openai.APIError(SECRET, request, body={"type": SECRET, "code": SECRET}),
        ollama.ResponseError(f'{{"error": "bad key {SECRET}"}}', 401),
        ollama.ResponseError(SECRET),
        httpx.ConnectError(f"failed for {SECRET}"),
        TimeoutError(SECRET),
        ValueError(SECRET),
    ]


@pytest.mark.parametrize("error", leaky_errors(), ids=lambda e: type(e).__name__)
def test_detail_never_carries_a_body_a_header_or_a_key(error: BaseException) -> None:
    failure = classify(error)
    assert SECRET not in repr(failure)
    assert "Bearer" not in failure.detail and "key" not in failure.detail
    assert len(failure.detail) < 80


def test_the_module_imports_no_provider_package() -> None:
    tree = ast.parse(inspect.getsource(provider_errors))
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    roots = {name.split(".")[0] for name in imported}
    assert not roots & {"anthropic", "openai", "ollama", "httpx", "httpx2", "langchain_core"}


def test_a_timeout_while_connecting_is_a_connection_failure_not_a_billed_timeout() -> None:
    import httpx

    class APITimeoutError(Exception):
        """Shaped as the SDKs' timeout, which they raise for a connect timeout too."""

    try:
        try:
            raise httpx.ConnectTimeout("timed out connecting")
        except httpx.ConnectTimeout as cause:
            raise APITimeoutError("Request timed out.") from cause
    except APITimeoutError as exc:
        failure = classify(exc)
    assert failure.kind == "transient" and not failure.timed_out
    assert failure.detail == "connection failed (timed out connecting)"
    assert classify(APITimeoutError("Request timed out.")).timed_out  # a read timeout is
