"""The providers' own clients against loopback servers speaking their wire formats.

Each client (`ChatAnthropic`, `ChatOpenAI`, `ChatOllama`) answers our structured
output through a tool call that the server computed with `OfflineChatModel`, and
reports the usage the server sent. Each scripted failure raises whatever the
client raises for it, and `classify` must read that right. `max_retries=0`: one
request per call, so the records show exactly what one attempt sent.

Two read timeouts: a generous one for every call that gets a reply (an answer or an
error), so that a loaded CI machine never turns a reply into a timeout, and a short one
only for the servers that hold or never send their reply, so those tests end fast.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_ollama import ChatOllama
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, SecretStr

from agent_team.models.offline import OfflineChatModel
from agent_team.models.prompts import clarify_messages, plan_messages
from agent_team.models.provider_errors import ProviderFailure, classify
from agent_team.models.schemas import ClarifyDecision, Plan
from tests.fakes import model_providers as mp
from tests.waiting import wait_for

# Every call that is answered: far longer than any loopback reply, however loaded the machine.
ANSWER_TIMEOUT_S = 30.0
# Only where the server holds its reply (`Slow`, `HANG`): the timeout is what is tested.
HANG_TIMEOUT_S = 0.3
KEY = "test-key-0123456789"
USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")

CLEAR = clarify_messages(
    "Add login", "Add a login form with email and password, and a test that signs in.", []
)
UNCLEAR = clarify_messages("Fix it", "It is broken.", [])
PLAN = plan_messages(
    "Add login", "- add the form\n- add a test that signs in\n- migrate the schema", [], None, None
)
PROMPTS = [
    pytest.param(ClarifyDecision, CLEAR, id="clarify-clear"),
    pytest.param(ClarifyDecision, UNCLEAR, id="clarify-unclear"),
    pytest.param(Plan, PLAN, id="plan"),
]


def anthropic(
    server: mp.FakeModelServer,
    *,
    model: str = "claude-test",
    key: str = KEY,
    timeout: float = ANSWER_TIMEOUT_S,
    **options: Any,
) -> ChatAnthropic:
    return ChatAnthropic(  # type: ignore[call-arg]
        model=model,
        base_url=server.url,
        api_key=SecretStr(key),
        max_retries=0,
        default_request_timeout=timeout,
        **options,
    )


def openai(
    server: mp.FakeModelServer,
    *,
    model: str = "gpt-test",
    key: str = KEY,
    timeout: float = ANSWER_TIMEOUT_S,
) -> ChatOpenAI:
    return ChatOpenAI(
        model=model, base_url=server.url, api_key=SecretStr(key), max_retries=0, timeout=timeout
    )


def ollama(
    server: mp.FakeModelServer, *, model: str = "llama-test", timeout: float = ANSWER_TIMEOUT_S
) -> ChatOllama:
    return ChatOllama(model=model, base_url=server.url, client_kwargs={"timeout": timeout})


def ask(chat: BaseChatModel, schema: type[BaseModel], messages: list[BaseMessage]) -> Any:
    # OpenAI and Ollama: tool calls ("function_calling"), as our code asks for them, because
    # gateways and local servers that lack `json_schema` response formats still do tool calls.
    # Anthropic has one way: a forced tool.
    method = {} if isinstance(chat, ChatAnthropic) else {"method": "function_calling"}
    return chat.with_structured_output(schema, include_raw=True, **method).invoke(messages)


def failure(
    chat: BaseChatModel, schema: type[BaseModel] = Plan, messages: list[BaseMessage] = PLAN
) -> ProviderFailure:
    """Classify what the client raised for this call."""
    try:
        ask(chat, schema, messages)
    except Exception as exc:
        return classify(exc)
    raise AssertionError("the call succeeded")


def timed_out(chat: BaseChatModel) -> ProviderFailure:
    """Classify the failure of a call to a server that holds its reply, and check that the
    short timeout ended it: with the answering one the test would wait 30 s and still pass."""
    started = time.monotonic()
    found = failure(chat)
    assert time.monotonic() - started < ANSWER_TIMEOUT_S / 3
    return found


def offline(schema: type[BaseModel], messages: list[BaseMessage]) -> tuple[Any, dict[str, int]]:
    """What OfflineChatModel answers for this prompt, and its usage."""
    result = ask(OfflineChatModel(), schema, messages)
    return result["parsed"], usage(result["raw"])


def usage(raw: AIMessage) -> dict[str, int]:
    assert raw.usage_metadata is not None
    return {key: raw.usage_metadata[key] for key in USAGE_KEYS}  # type: ignore[literal-required]


def assert_answered(chat: BaseChatModel, schema: type[BaseModel], messages: list[Any]) -> None:
    result = ask(chat, schema, messages)
    parsed, expected_usage = offline(schema, messages)
    assert result["parsing_error"] is None
    assert result["parsed"] == parsed
    assert usage(result["raw"]) == expected_usage


def assert_failure(
    found: ProviderFailure, kind: str, status: int | None, wait: float | None, detail: str
) -> None:
    assert (found.kind, found.status, found.retry_after_s, found.detail) == (
        kind,
        status,
        wait,
        detail,
    )


# -- Anthropic ---------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("schema", "messages"), PROMPTS)
def test_anthropic_answers_the_offline_models_tool_call_with_its_usage(
    fake_anthropic: mp.FakeModelServer,
    schema: type[BaseModel],
    messages: list[BaseMessage],
    streaming: bool,
) -> None:
    assert_answered(anthropic(fake_anthropic, streaming=streaming), schema, messages)

    [sent] = fake_anthropic.requests  # max_retries=0: one request
    assert (sent.method, sent.path, sent.model, sent.tool) == (
        "POST",
        "/v1/messages",
        "claude-test",
        schema.__name__,
    )
    assert sent.body["tool_choice"] == {"type": "tool", "name": schema.__name__}
    assert sent.streamed is streaming
    assert sent.headers["x-stainless-retry-count"] == "0"
    assert sent.headers["x-stainless-read-timeout"] == str(ANSWER_TIMEOUT_S)
    assert sent.auth == "sent"
    assert sent.headers["authorization"] == mp.REDACTED
    assert not any(KEY in value for value in sent.headers.values())


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        pytest.param(
            mp.Fail(429, headers={"retry-after": "2"}),
            ("transient", 429, 2.0, "HTTP 429 (rate_limit_error)"),
            id="429-retry-after",
        ),
        pytest.param(
            mp.Fail(429, headers={"retry-after-ms": "150", "retry-after": "2"}),
            ("transient", 429, 0.15, "HTTP 429 (rate_limit_error)"),
            id="429-retry-after-ms",
        ),
        pytest.param(
            mp.Fail(429, code="enforced_spend_limit_reached"),
            ("refused", 429, None, "HTTP 429 (rate_limit_error, enforced_spend_limit_reached)"),
            id="429-spend-limit",
        ),
        pytest.param(
            mp.Fail(529), ("transient", 529, None, "HTTP 529 (overloaded_error)"), id="529"
        ),
        pytest.param(mp.Fail(500), ("transient", 500, None, "HTTP 500 (api_error)"), id="500"),
        pytest.param(
            mp.Fail(400, message=f"bad request, key {KEY}"),
            ("refused", 400, None, "HTTP 400 (invalid_request_error)"),
            id="400",
        ),
    ],
)
def test_anthropic_error_replies_are_classified(
    fake_anthropic: mp.FakeModelServer, step: mp.Fail, expected: tuple[Any, ...]
) -> None:
    fake_anthropic.script(step)
    assert_failure(failure(anthropic(fake_anthropic)), *expected)
    assert len(fake_anthropic.requests) == 1


def test_anthropic_overloaded_inside_a_started_stream_is_transient(
    fake_anthropic: mp.FakeModelServer,
) -> None:
    fake_anthropic.script(mp.StreamError("overloaded_error"))
    found = failure(anthropic(fake_anthropic, streaming=True))
    assert_failure(found, "transient", None, None, "error event in the reply (overloaded_error)")


def test_anthropic_reply_slower_than_the_timeout_is_a_transient_timeout(
    fake_anthropic: mp.FakeModelServer,
) -> None:
    release = threading.Event()
    fake_anthropic.script(mp.Slow(release))
    chat = anthropic(fake_anthropic, timeout=HANG_TIMEOUT_S)
    assert_failure(timed_out(chat), "transient", None, None, "timed out")
    release.set()
    wait_for(lambda: fake_anthropic.held == 0, "the held reply to be let go", 10)
    assert len(fake_anthropic.requests) == 1


def test_anthropic_wrong_key_is_auth_and_the_right_one_is_answered() -> None:
    with mp.fake_anthropic(api_key=KEY) as server:
        found = failure(anthropic(server, key="wrong-key"))
        assert_failure(found, "auth", 401, None, "HTTP 401 (authentication_error)")
        assert not found.worth_retrying and not found.worth_falling_back
        assert_answered(anthropic(server), Plan, PLAN)
    assert [sent.auth for sent in server.requests] == ["rejected", "accepted"]


def test_anthropic_unknown_model_is_not_found_and_a_fallback_model_answers() -> None:
    with mp.fake_anthropic(models={"claude-known"}) as server:
        found = failure(anthropic(server, model="claude-gone"))
        assert_failure(found, "not_found", 404, None, "HTTP 404 (not_found_error)")
        assert found.worth_falling_back and not found.worth_retrying
        assert_answered(anthropic(server, model="claude-known"), Plan, PLAN)
    assert [sent.model for sent in server.requests] == ["claude-gone", "claude-known"]


# -- OpenAI ------------------------------------------------------------------------------


@pytest.mark.parametrize(("schema", "messages"), PROMPTS)
def test_openai_answers_the_offline_models_tool_call_with_its_usage(
    fake_openai: mp.FakeModelServer, schema: type[BaseModel], messages: list[BaseMessage]
) -> None:
    assert_answered(openai(fake_openai), schema, messages)

    [sent] = fake_openai.requests
    assert (sent.path, sent.model, sent.tool, sent.streamed) == (
        "/v1/chat/completions",
        "gpt-test",
        schema.__name__,
        False,
    )
    # function_calling forces the tool by name, one call at a time, and no response_format.
    assert sent.body["tool_choice"] == {"type": "function", "function": {"name": schema.__name__}}
    assert sent.body["parallel_tool_calls"] is False
    assert "response_format" not in sent.body
    assert sent.headers["x-stainless-retry-count"] == "0"
    assert sent.headers["x-stainless-read-timeout"] == str(ANSWER_TIMEOUT_S)
    assert sent.headers["authorization"] == mp.REDACTED


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        pytest.param(
            mp.Fail(429, headers={"retry-after": "1"}),
            ("transient", 429, 1.0, "HTTP 429 (tokens, rate_limit_exceeded)"),
            id="429",
        ),
        pytest.param(
            mp.Fail(429, error_type="insufficient_quota", code="insufficient_quota"),
            ("refused", 429, None, "HTTP 429 (insufficient_quota, insufficient_quota)"),
            id="429-quota",
        ),
        pytest.param(mp.Fail(503), ("transient", 503, None, "HTTP 503 (server_error)"), id="503"),
        pytest.param(mp.DROP, ("transient", None, None, "connection failed"), id="dropped"),
    ],
)
def test_openai_failures_are_classified(
    fake_openai: mp.FakeModelServer, step: mp.Step, expected: tuple[Any, ...]
) -> None:
    fake_openai.script(step)
    assert_failure(failure(openai(fake_openai)), *expected)
    assert len(fake_openai.requests) == 1


def test_openai_server_that_never_answers_times_out(fake_openai: mp.FakeModelServer) -> None:
    fake_openai.script(mp.HANG)
    found = timed_out(openai(fake_openai, timeout=HANG_TIMEOUT_S))
    assert_failure(found, "transient", None, None, "timed out")
    assert len(fake_openai.requests) == 1


def test_openai_wrong_key_is_auth() -> None:
    with mp.fake_openai(api_key=KEY) as server:
        found = failure(openai(server, key="wrong-key"))
    assert_failure(found, "auth", 401, None, "HTTP 401 (invalid_request_error, invalid_api_key)")
    assert [sent.auth for sent in server.requests] == ["rejected"]


def test_openai_down_then_up(fake_openai: mp.FakeModelServer) -> None:
    fake_openai.script(mp.ANSWER)
    fake_openai.down(503)
    for _ in range(2):
        assert failure(openai(fake_openai)).detail == "HTTP 503 (server_error)"
    fake_openai.down("drop")
    assert failure(openai(fake_openai)).detail == "connection failed"
    assert fake_openai.pending == 1  # the script waits while the server is down
    fake_openai.up()
    assert_answered(openai(fake_openai), Plan, PLAN)
    assert fake_openai.pending == 0
    assert len(fake_openai.requests) == 4


def test_a_test_can_give_the_answer() -> None:
    given = Plan(summary="Given", steps=["one"], risks=[])

    def answer(asked: mp.Asked) -> AIMessage:
        assert asked.tool == "Plan" and asked.model == "gpt-test"
        return AIMessage(
            content="", tool_calls=[{"name": "Plan", "args": given.model_dump(), "id": "c1"}]
        )

    with mp.fake_openai(answer=answer) as server:
        result = ask(openai(server), Plan, PLAN)
    assert result["parsed"] == given
    assert usage(result["raw"])["input_tokens"] == offline(Plan, PLAN)[1]["input_tokens"]


# -- Ollama ------------------------------------------------------------------------------


@pytest.mark.parametrize(("schema", "messages"), PROMPTS)
def test_ollama_answers_the_offline_models_tool_call_with_its_usage(
    fake_ollama: mp.FakeModelServer, schema: type[BaseModel], messages: list[BaseMessage]
) -> None:
    assert_answered(ollama(fake_ollama), schema, messages)

    [sent] = fake_ollama.requests
    assert (sent.path, sent.model, sent.tool) == ("/api/chat", "llama-test", schema.__name__)
    assert sent.streamed and sent.body["stream"] is True  # ChatOllama always streams
    assert "tool_choice" not in sent.body  # Ollama has none: the only tool offered is it
    assert [tool["function"]["name"] for tool in sent.body["tools"]] == [schema.__name__]


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        pytest.param(mp.Fail(500), ("transient", 500, None, "HTTP 500"), id="500"),
        pytest.param(
            # ollama drops the reply's headers, but raises inside httpx's error, which has them
            mp.Fail(429, headers={"retry-after": "3"}),
            ("transient", 429, 3.0, "HTTP 429"),
            id="429-retry-after",
        ),
        pytest.param(
            mp.StreamError(message="model runner has unexpectedly stopped"),
            ("transient", None, None, "error event in the reply"),
            id="stream-error",
        ),
        pytest.param(mp.Fail(400), ("refused", 400, None, "HTTP 400"), id="400"),
    ],
)
def test_ollama_error_replies_are_classified(
    fake_ollama: mp.FakeModelServer, step: mp.Step, expected: tuple[Any, ...]
) -> None:
    fake_ollama.script(step)
    assert_failure(failure(ollama(fake_ollama)), *expected)
    assert len(fake_ollama.requests) == 1


def test_ollama_unknown_model_is_not_found() -> None:
    with mp.fake_ollama(models={"llama-known"}) as server:
        assert_failure(failure(ollama(server)), "not_found", 404, None, "HTTP 404")


def test_ollama_server_that_never_answers_times_out_and_stop_lets_it_go() -> None:
    with mp.fake_ollama() as server:
        server.script(mp.HANG)
        found = timed_out(ollama(server, timeout=HANG_TIMEOUT_S))
        assert_failure(found, "transient", None, None, "timed out")
        assert server.held == 1
    wait_for(lambda: server.held == 0, "the hung reply to be let go", 10)


def test_ollama_connection_refused_then_back_up(fake_ollama: mp.FakeModelServer) -> None:
    fake_ollama.down()  # the port is closed
    found = failure(ollama(fake_ollama))
    assert_failure(found, "transient", None, None, "connection failed")
    assert fake_ollama.requests == []
    fake_ollama.up()
    assert_answered(ollama(fake_ollama), Plan, PLAN)
    assert len(fake_ollama.requests) == 1
