"""ModelCaller when providers fail: retries, fallbacks, refusals, time limits, a model per stage.

The chat models here raise errors shaped as the providers' clients raise them
(a status code, the reply's headers, the provider's error type); the real
clients on the wire are in test_provider_wire.py and the pipeline tests.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from agent_team import db
from agent_team.common.stops import forget_stop, request_stop
from agent_team.exceptions import (
    ModelError,
    ModelRefusedError,
    ModelsDownError,
    TaskStoppedError,
)
from agent_team.models.caller import ModelCaller
from agent_team.models.retry_policy import RetryPolicy
from agent_team.models.schemas import Plan
from tests.fakes.chat import ToolBindingFake
from tests.integration.models.fakes import tool_reply
from tests.integration.models.test_caller import DAY, MESSAGES, PLAN_ARGS, SONNET, Clock
from tests.waiting import wait_for

MINI = "openai:gpt-5-mini"
LOCAL = "ollama:llama3.1"
FAST = RetryPolicy(retries=2, backoff_s=0.0, window_s=30.0, timeout_s=30.0, jitter=lambda: 0.0)


class _Headers(dict[str, str]):
    """Headers as the SDKs hand them: a mapping with `get`."""


class _Reply:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = _Headers(headers)


class APIStatusError(Exception):
    """Shaped as the anthropic and openai SDKs' status errors: status, reply, body."""

    def __init__(self, status: int, error_type: str, headers: dict[str, str] | None = None):
        super().__init__(f"Error code: {status} - secret-in-body sk-ant-api03-abcdefghijklmnop")
        self.status_code = status
        self.response = _Reply(status, headers or {})
        self.body = {"type": "error", "error": {"type": error_type, "message": "no"}}


class APITimeoutError(Exception):
    """Shaped as the SDKs' timeout (the classifier reads the class name)."""


class Scripted(ToolBindingFake):
    """Raises its `failures` in turn, then replies; `hold` makes every call wait on an event."""

    failures: list[Any] = []  # noqa: RUF012 (a pydantic field: copied per instance)
    hold: threading.Event | None = None
    calls: int = 0

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls += 1
        if self.hold is not None:
            self.hold.wait(30)
        if self.failures:
            raise self.failures.pop(0)
        return super()._generate(messages, stop, run_manager, **kwargs)


def answering(*failures: Exception, hold: threading.Event | None = None) -> Scripted:
    reply = tool_reply("Plan", PLAN_ARGS, (100, 50))
    return Scripted(responses=[reply] * 5, failures=list(failures), hold=hold)


def caller(
    conn: db.Ledger,
    chat: Any,
    *,
    fallbacks: list[tuple[str, Any]] | None = None,
    stage_models: dict[str, tuple[str, Any]] | None = None,
    retry: RetryPolicy = FAST,
    **kwargs: Any,
) -> ModelCaller:
    return ModelCaller(
        conn,
        chat,
        model=SONNET,
        billing_mode="api",
        daily_budget_usd=20.0,
        daily_token_cap=5_000_000,
        clock=Clock(DAY),
        fallbacks=fallbacks or [],
        stage_models=stage_models,
        retry=retry,
        **kwargs,
    )


def plan(model_caller: ModelCaller, task: str = "t1") -> Plan:
    return model_caller.structured(thread_id=task, stage="plan", schema=Plan, messages=MESSAGES)


def failures(conn: db.Ledger, task: str = "t1") -> list[tuple[str, int, str, int | None]]:
    return [
        (f.model, f.attempt, f.outcome, f.http_status) for f in db.list_model_failures(conn, task)
    ]


def spend_rows(conn: db.Ledger, task: str = "t1") -> list[tuple[str, int, int]]:
    return [
        (row.model, row.input_tokens, row.output_tokens)
        for row in db.task_usage(conn, thread_id=task)
    ]


def test_two_transient_failures_then_an_answer(conn: db.Ledger) -> None:
    chat = answering(APIStatusError(529, "overloaded_error"), APIStatusError(500, "api_error"))
    model_caller = caller(conn, chat)

    assert plan(model_caller) == Plan.model_validate(PLAN_ARGS)

    assert chat.calls == 3
    assert failures(conn) == [(SONNET, 1, "retried", 529), (SONNET, 2, "retried", 500)]
    assert spend_rows(conn) == [(SONNET, 100, 50)]  # failed attempts were not billed
    assert model_caller.last_model == SONNET


def test_retry_after_is_a_floor_for_the_pause(conn: db.Ledger) -> None:
    chat = answering(APIStatusError(429, "rate_limit_error", {"retry-after-ms": "150"}))
    started = time.monotonic()

    plan(caller(conn, chat))

    assert time.monotonic() - started >= 0.15  # never sooner than the provider asked
    assert failures(conn) == [(SONNET, 1, "retried", 429)]


def test_spent_retries_fall_back_to_the_next_model(conn: db.Ledger) -> None:
    down = answering(*[APIStatusError(529, "overloaded_error") for _ in range(3)])
    spare = answering()
    model_caller = caller(conn, down, fallbacks=[(MINI, spare)])

    plan(model_caller)

    assert down.calls == 3 and spare.calls == 1
    assert [f[2] for f in failures(conn)] == ["retried", "retried", "fell_back"]
    assert spend_rows(conn) == [(MINI, 100, 50)]  # the model that answered is on the row
    assert model_caller.last_model == MINI


def test_an_unknown_model_falls_back_at_once(conn: db.Ledger) -> None:
    gone = answering(APIStatusError(404, "not_found_error"))
    spare = answering()

    plan(caller(conn, gone, fallbacks=[(MINI, spare)]))

    assert gone.calls == 1
    assert failures(conn) == [(SONNET, 1, "fell_back", 404)]


def test_every_model_down_parks_with_each_last_error(conn: db.Ledger) -> None:
    down = answering(*[APIStatusError(529, "overloaded_error") for _ in range(3)])
    also_down = answering(*[APITimeoutError("slow") for _ in range(3)])

    with pytest.raises(ModelsDownError) as raised:
        plan(caller(conn, down, fallbacks=[(MINI, also_down)]))

    message = str(raised.value)
    assert raised.value.parked_reason == "model_unavailable"
    assert f"{SONNET}: HTTP 529 (overloaded_error) after 3 attempts" in message
    assert f"{MINI}: timed out after 3 attempts" in message
    assert failures(conn)[-1] == (MINI, 3, "gave_up", None)
    assert "sk-ant" not in message
    # A timed-out attempt may be billed: each counts its estimate, on its own model.
    assert [row[0] for row in spend_rows(conn)] == [MINI]
    assert spend_rows(conn)[0][1] > 0


def test_a_refusal_is_not_retried_nor_sent_elsewhere(conn: db.Ledger) -> None:
    refused = answering(APIStatusError(401, "authentication_error"))
    spare = answering()

    with pytest.raises(ModelRefusedError) as raised:
        plan(caller(conn, refused, fallbacks=[(MINI, spare)]))

    assert refused.calls == 1 and spare.calls == 0
    assert raised.value.parked_reason == "model_refused"
    assert "ANTHROPIC_API_KEY" in str(raised.value)
    assert "sk-ant" not in str(raised.value)
    assert failures(conn) == [(SONNET, 1, "refused", 401)]


def test_a_bad_request_is_refused_too(conn: db.Ledger) -> None:
    with pytest.raises(ModelRefusedError, match="HTTP 400"):
        plan(caller(conn, answering(APIStatusError(400, "invalid_request_error"))))


def test_an_error_no_provider_raised_fails_the_call(conn: db.Ledger) -> None:
    with pytest.raises(ModelError, match="unclassified error \\(KeyError\\)") as raised:
        plan(caller(conn, answering(KeyError("content"))))
    assert not isinstance(raised.value, ModelsDownError | ModelRefusedError)


def test_a_retry_after_past_the_window_moves_on(conn: db.Ledger) -> None:
    slow_down = answering(APIStatusError(429, "rate_limit_error", {"retry-after": "3600"}))
    spare = answering()
    started = time.monotonic()

    plan(caller(conn, slow_down, fallbacks=[(MINI, spare)]))

    assert time.monotonic() - started < 30  # it did not wait the hour
    assert failures(conn) == [(SONNET, 1, "fell_back", 429)]


def test_each_stage_uses_its_own_model(conn: db.Ledger) -> None:
    default, planner = answering(), answering()
    model_caller = caller(conn, default, stage_models={"plan": ("openai:gpt-5", planner)})

    plan(model_caller)
    model_caller.structured(thread_id="t1", stage="clarify", schema=Plan, messages=MESSAGES)

    assert planner.calls == 1 and default.calls == 1
    assert sorted(row[0] for row in spend_rows(conn)) == [SONNET, "openai:gpt-5"]
    assert model_caller.models_for("plan") == ("openai:gpt-5",)


def test_an_attempt_past_the_time_limit_is_abandoned(conn: db.Ledger) -> None:
    never = threading.Event()
    hung = answering(hold=never)
    policy = RetryPolicy(retries=0, backoff_s=0.0, timeout_s=0.2, jitter=lambda: 0.0)
    try:
        with pytest.raises(ModelsDownError, match="timed out"):
            plan(caller(conn, hung, retry=policy))
    finally:
        never.set()
    assert failures(conn) == [(SONNET, 1, "gave_up", None)]
    assert len(spend_rows(conn)) == 1  # the estimate: the provider may bill it


def test_a_cancel_ends_the_pause_before_a_retry(conn: db.Ledger) -> None:
    chat = answering(APIStatusError(429, "rate_limit_error", {"retry-after": "60"}))
    policy = RetryPolicy(retries=2, backoff_s=0.0, window_s=600.0, jitter=lambda: 0.0)
    model_caller = caller(conn, chat, retry=policy)
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(plan, model_caller, "t-cancel")
            wait_for(lambda: failures(conn, "t-cancel"), "the first failure")
            started = time.monotonic()
            request_stop("t-cancel", "cancelled")
            with pytest.raises(TaskStoppedError):
                running.result(timeout=30)
            assert time.monotonic() - started < 30
    finally:
        forget_stop("t-cancel")
    assert chat.calls == 1


def test_a_fallback_is_priced_and_capped_as_itself(conn: db.Ledger) -> None:
    down = answering(APIStatusError(404, "not_found_error"))
    local = answering()
    model_caller = caller(conn, down, fallbacks=[(LOCAL, local)])

    plan(model_caller)

    usage = db.task_usage(conn, thread_id="t1")
    assert [(row.model, row.usd_cost) for row in usage] == [(LOCAL, 0.0)]  # no price known
    assert db.tokens_spent(conn, day=DAY.date()) == 150


def test_a_fallback_that_refuses_is_skipped_for_the_next(conn: db.Ledger) -> None:
    down = answering(*[APIStatusError(503, "api_error") for _ in range(3)])
    expired = answering(APIStatusError(401, "authentication_error"))
    spare = answering()

    plan(caller(conn, down, fallbacks=[(MINI, expired), (LOCAL, spare)]))

    assert (expired.calls, spare.calls) == (1, 1)
    assert [(f[0], f[2]) for f in failures(conn)][-2:] == [(SONNET, "fell_back"), (MINI, "refused")]
    assert spend_rows(conn) == [(LOCAL, 100, 50)]


def test_a_refusing_fallback_does_not_turn_an_outage_into_a_refusal(conn: db.Ledger) -> None:
    down = answering(*[APIStatusError(529, "overloaded_error") for _ in range(3)])
    expired = answering(APIStatusError(401, "authentication_error"))

    with pytest.raises(ModelsDownError) as raised:
        plan(caller(conn, down, fallbacks=[(MINI, expired)]))

    # The outage passes by itself: the task continues by itself, the bad key is named.
    assert "OPENAI_API_KEY" in str(raised.value)


def test_unknown_models_alone_need_a_person_not_a_wait(conn: db.Ledger) -> None:
    gone = answering(APIStatusError(404, "not_found_error"))
    also_gone = answering(APIStatusError(404, "not_found_error"))

    with pytest.raises(ModelRefusedError, match="check the model names"):
        plan(caller(conn, gone, fallbacks=[(MINI, also_gone)]))


def test_the_longest_retry_after_goes_with_the_park(conn: db.Ledger) -> None:
    limited = answering(
        APIStatusError(429, "rate_limit_error", {"retry-after": "900"}),
    )

    with pytest.raises(ModelsDownError) as raised:
        plan(caller(conn, limited))

    assert raised.value.retry_after_s == 900.0  # past the window: parked at least that long


def test_a_timed_out_attempt_is_an_estimate_that_names_no_answer(conn: db.Ledger) -> None:
    never = threading.Event()
    policy = RetryPolicy(retries=0, backoff_s=0.0, timeout_s=0.2, jitter=lambda: 0.0)
    spare = answering()
    try:
        plan(caller(conn, answering(hold=never), fallbacks=[(MINI, spare)], retry=policy))
    finally:
        never.set()

    rows = conn.fetch_all(
        "SELECT model, estimated FROM budget_ledger WHERE thread_id = 't1' ORDER BY entry_id"
    )
    assert [(row["model"], row["estimated"]) for row in rows] == [(SONNET, 1), (MINI, 0)]


def test_a_stop_during_an_attempt_sends_nothing_more(conn: db.Ledger) -> None:
    released = threading.Event()

    class StopsTheTask(Scripted):
        def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
            request_stop("t-stop", "cancelled")  # told while this attempt is in flight
            released.wait(30)  # still working when the caller looks: it sees the stop
            return super()._generate(*args, **kwargs)

    reply = tool_reply("Plan", PLAN_ARGS, (100, 50))
    down = StopsTheTask(responses=[reply], failures=[APIStatusError(404, "not_found_error")])
    spare = answering()
    try:
        with pytest.raises(TaskStoppedError):
            plan(caller(conn, down, fallbacks=[(MINI, spare)]), "t-stop")
    finally:
        released.set()
        forget_stop("t-stop")
    assert spare.calls == 0  # the fallback was never asked
    # The attempt in flight when the stop came is counted, as sent (its estimate).
    assert [row[0] for row in spend_rows(conn, "t-stop")] == [SONNET]


def test_the_window_counts_the_attempts_time_not_only_the_pauses(conn: db.Ledger) -> None:
    never = threading.Event()
    # One attempt (its time limit) already outlasts the window: no retry on this model.
    policy = RetryPolicy(retries=2, backoff_s=0.0, window_s=0.1, timeout_s=0.2, jitter=lambda: 0.0)
    hung = answering(hold=never)
    try:
        with pytest.raises(ModelsDownError, match="after 1 attempt"):
            plan(caller(conn, hung, retry=policy))
    finally:
        never.set()
    assert failures(conn) == [(SONNET, 1, "gave_up", None)]
