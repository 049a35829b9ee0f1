"""ModelCaller on a real SQLite ledger: cap first, usage always recorded, errors redacted."""

from __future__ import annotations

import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage

from agent_team import db
from agent_team.common.stops import forget_stop, request_stop
from agent_team.exceptions import BudgetExhaustedError, ConfigError, ModelError, TaskStoppedError
from agent_team.models.build_spend import build_spend_watch
from agent_team.models.caller import ModelCaller
from agent_team.models.offline import OfflineChatModel
from agent_team.models.prompts import clarify_messages, plan_messages
from agent_team.models.schemas import ClarifyDecision, Plan
from agent_team.models.tokens import message_text
from tests.integration.models.fakes import ToolFake, tool_reply

SONNET = "anthropic:claude-sonnet-4-5"  # $3 / $15 per million tokens
DAY = datetime(2030, 1, 1, 23, 59, 59, tzinfo=UTC)
PLAN_ARGS: dict[str, Any] = {"summary": "s", "steps": ["a"], "risks": []}
EXPECTED = Plan.model_validate(PLAN_ARGS)
MESSAGES = plan_messages("T", "- a", [], None, None)


class Clock:
    """A settable clock, so a test can cross UTC midnight without waiting."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def make_caller(
    conn: db.Ledger,
    chat: Any,
    *,
    model: str = SONNET,
    billing_mode: str = "api",
    budget: float = 20.0,
    token_cap: int = 5_000_000,
    clock: Clock | None = None,
    **kwargs: Any,
) -> ModelCaller:
    return ModelCaller(
        conn,
        chat,
        model=model,
        billing_mode=billing_mode,
        daily_budget_usd=budget,
        daily_token_cap=token_cap,
        clock=clock or Clock(DAY),
        **kwargs,
    )


def spend(
    conn: db.Ledger,
    *,
    usd: float = 0.0,
    tokens: int = 0,
    at: datetime = DAY,
    mode: str = "api",
) -> None:
    db.record_usage(
        conn,
        thread_id="earlier",
        stage="plan",
        model=SONNET,
        billing_mode=mode,
        input_tokens=tokens,
        output_tokens=0,
        usd_cost=usd,
        recorded_at=at,
    )


def summary(conn: db.Ledger) -> list[db.UsageSummaryRow]:
    return db.usage_summary(conn, day="2030-01-01")


def plan_fake(
    usage: tuple[int, int] | None = (1000, 500), args: dict[str, Any] | None = None
) -> ToolFake:
    return ToolFake(responses=[tool_reply("Plan", args or PLAN_ARGS, usage)])


def call(
    caller: ModelCaller,
    messages: list[BaseMessage] | None = None,
    thread_id: str = "task-1",
    **kwargs: Any,
) -> Plan:
    return caller.structured(
        thread_id=thread_id, stage="plan", schema=Plan, messages=messages or MESSAGES, **kwargs
    )


# --- recording ---------------------------------------------------------------------------


def test_usage_recorded_with_cost_and_day_bucket(conn: db.Ledger) -> None:
    caller = make_caller(conn, plan_fake(usage=(1000, 500)))
    assert call(caller) == EXPECTED
    [row] = summary(conn)
    assert (row.billing_mode, row.model, row.stage, row.calls) == ("api", SONNET, "plan", 1)
    assert (row.input_tokens, row.output_tokens) == (1000, 500)
    assert row.usd_cost == pytest.approx(0.0105)
    assert db.spent(conn, day="2030-01-02") == 0.0
    assert caller.calls == 1
    assert caller.last_usage is not None and caller.last_usage.usd_cost == pytest.approx(0.0105)


def test_row_lands_on_the_clock_day_not_the_wall_clock(conn: db.Ledger) -> None:
    clock = Clock(datetime(2030, 1, 2, 0, 0, 1, tzinfo=UTC))
    call(make_caller(conn, plan_fake(), clock=clock))
    assert db.spent(conn, day="2030-01-02") == pytest.approx(0.0105)
    assert db.spent(conn, day="2030-01-01") == 0.0


def test_offline_model_end_to_end_records_its_own_usage(conn: db.Ledger) -> None:
    caller = make_caller(conn, OfflineChatModel(), model="offline")
    messages = clarify_messages("Fix login", "It is broken", [])
    decision = caller.structured(
        thread_id="task-1", stage="clarify", schema=ClarifyDecision, messages=messages
    )
    assert not decision.clear
    raw = (
        OfflineChatModel()
        .with_structured_output(ClarifyDecision, include_raw=True)
        .invoke(messages)
    )
    assert isinstance(raw, dict)
    expected = raw["raw"].usage_metadata
    [row] = summary(conn)
    assert (row.model, row.stage, row.usd_cost) == ("offline", "clarify", 0.0)
    assert (row.input_tokens, row.output_tokens) == (
        expected["input_tokens"],
        expected["output_tokens"],
    )


def test_missing_usage_metadata_is_estimated(conn: db.Ledger) -> None:
    call(make_caller(conn, plan_fake(usage=None)))
    [row] = summary(conn)
    assert row.input_tokens == math.ceil(len(message_text(MESSAGES)) / 4)
    args_json = '{"risks": [], "steps": ["a"], "summary": "s"}'
    assert row.output_tokens == math.ceil(len(args_json) / 4)


def test_write_failure_goes_to_the_given_outbox(
    conn: db.Ledger, ledger_file: Path, tmp_path: Path
) -> None:
    # Fault injection: the ledger refuses budget rows (reads still work).
    with db.open_ledger(ledger_file) as other:
        other.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON budget_ledger "
            "BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    outbox = tmp_path / "outbox.jsonl"
    assert call(make_caller(conn, plan_fake(), outbox=outbox)) == EXPECTED
    assert summary(conn) == []
    assert '"thread_id": "task-1"' in outbox.read_text(encoding="utf-8")


# --- the USD cap -------------------------------------------------------------------------


def test_over_the_cap_raises_and_records_nothing(conn: db.Ledger) -> None:
    spend(conn, usd=19.999)
    fake = plan_fake()
    caller = make_caller(conn, fake, budget=20.0)
    with pytest.raises(BudgetExhaustedError) as caught:
        call(caller)
    message = str(caught.value)
    assert "$20.00 cap" in message
    assert "$19.9990 spent on 2030-01-01" in message
    assert "UTC midnight" in message and "AGENT_TEAM_DAILY_BUDGET_USD" in message
    assert caught.value.parked_reason == "budget_exhausted"
    assert fake.invocations == 0 and caller.calls == 0
    assert [row.calls for row in summary(conn)] == [1]  # only the earlier row


def test_estimate_counts_prompt_and_expected_output(conn: db.Ledger) -> None:
    input_tokens = math.ceil(len(message_text(MESSAGES)) / 4)
    estimate = (input_tokens * 3 + 1000 * 15) / 1_000_000
    spend(conn, usd=1.0)
    at_cap = make_caller(conn, plan_fake(), budget=1.0 + estimate)
    call(at_cap, expected_output_tokens=1000)  # exactly at the cap is allowed
    below = make_caller(
        conn, plan_fake(), budget=db.spent(conn, day="2030-01-01") + estimate * 0.999
    )
    with pytest.raises(BudgetExhaustedError):
        call(below, expected_output_tokens=1000)


def test_cap_resets_on_the_next_utc_day(conn: db.Ledger) -> None:
    spend(conn, usd=20.0)
    clock = Clock(DAY)
    caller = make_caller(conn, plan_fake(), budget=20.0, clock=clock)
    with pytest.raises(BudgetExhaustedError):
        call(caller)
    clock.now = DAY + timedelta(seconds=2)  # 2030-01-02T00:00:01Z
    assert call(caller) == EXPECTED
    assert db.spent(conn, day="2030-01-02") == pytest.approx(0.0105)


def test_zero_budget_blocks_priced_calls(conn: db.Ledger) -> None:
    with pytest.raises(BudgetExhaustedError):
        call(make_caller(conn, plan_fake(), budget=0.0))


def test_subscription_spend_does_not_count_against_the_api_cap(conn: db.Ledger) -> None:
    spend(conn, usd=100.0, mode="subscription")
    assert call(make_caller(conn, plan_fake(), budget=1.0)) == EXPECTED


def test_price_override_applies(conn: db.Ledger) -> None:
    caller = make_caller(conn, plan_fake(usage=(1_000_000, 0)), prices={SONNET: (1.0, 1.0)})
    call(caller)
    assert db.spent(conn, day="2030-01-01") == pytest.approx(1.0)


# --- the token cap -----------------------------------------------------------------------


def test_unpriced_model_is_capped_by_tokens(conn: db.Ledger) -> None:
    spend(conn, tokens=900)
    caller = make_caller(conn, OfflineChatModel(), model="offline", budget=0.0, token_cap=1000)
    with pytest.raises(BudgetExhaustedError) as caught:
        call(caller, expected_output_tokens=200)
    message = str(caught.value)
    assert "900 tokens used on 2030-01-01" in message and "1000 cap" in message
    assert "AGENT_TEAM_DAILY_TOKEN_CAP" in message and "no price known" in message
    assert caller.calls == 0
    roomy = make_caller(conn, OfflineChatModel(), model="offline", budget=0.0, token_cap=100_000)
    assert isinstance(call(roomy), Plan)
    assert db.tokens_spent(conn, day="2030-01-01") > 900


def test_offline_priced_by_override_uses_the_usd_cap(conn: db.Ledger) -> None:
    caller = make_caller(
        conn, OfflineChatModel(), model="offline", budget=0.01, prices={"offline": (1000.0, 1000.0)}
    )
    with pytest.raises(BudgetExhaustedError, match="AGENT_TEAM_DAILY_BUDGET_USD"):
        call(caller)


def test_subscription_mode_caps_tokens_not_usd(conn: db.Ledger) -> None:
    spend(conn, usd=500.0, tokens=10, mode="subscription")
    caller = make_caller(
        conn, plan_fake(usage=(1000, 500)), billing_mode="subscription", budget=0.0
    )
    assert call(caller) == EXPECTED
    [row] = summary(conn)
    assert (row.billing_mode, row.calls, row.input_tokens) == ("subscription", 2, 1010)
    # The USD recorded is the list-price equivalent, for information.
    assert db.spent(conn, day="2030-01-01", billing_mode="subscription") == pytest.approx(500.0105)
    # 1510 tokens used today; the next call's estimate (prompt + 1024) does not fit in 1000 more.
    capped = make_caller(
        conn, plan_fake(), billing_mode="subscription", budget=1e9, token_cap=1510 + 1000
    )
    with pytest.raises(BudgetExhaustedError, match="subscription billing"):
        call(capped)


# --- in-flight calls ---------------------------------------------------------------------


def test_calls_in_flight_count_against_the_cap(conn: db.Ledger) -> None:
    entered, release = threading.Event(), threading.Event()
    slow = ToolFake(
        responses=[tool_reply("Plan", PLAN_ARGS, (10, 10))], entered=entered, release=release
    )
    input_tokens = math.ceil(len(message_text(MESSAGES)) / 4)
    one_call = input_tokens + 1000
    caller = make_caller(conn, slow, model="offline", token_cap=one_call + one_call // 2)
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(call, caller)
        try:
            assert entered.wait(timeout=30)
            with pytest.raises(BudgetExhaustedError):
                call(caller)  # the first call's estimate is still held
        finally:
            release.set()
        assert first.result(timeout=30) == EXPECTED
    # Once the first call is done only its real usage (20 tokens) counts.
    assert call(caller) == EXPECTED


# --- what is left, before a priced build ------------------------------------------------


def test_check_remaining_gives_the_usd_left_and_refuses_at_the_cap(conn: db.Ledger) -> None:
    spend(conn, usd=12.5)
    spend(conn, usd=100.0, mode="subscription", at=DAY - timedelta(hours=2))  # not capped here
    caller = make_caller(conn, plan_fake(), budget=20.0)
    left = caller.check_remaining("build")
    assert (left.unit, left.usd, left.tokens) == ("usd", pytest.approx(7.5), None)

    # Exactly at the cap: the build's cost is unknown, so it is refused.
    spend(conn, usd=7.5, at=DAY - timedelta(hours=1))
    with pytest.raises(BudgetExhaustedError) as caught:
        caller.check_remaining("build")
    message = str(caught.value)
    assert "$20.0000 spent on 2030-01-01" in message and "$20.00 cap" in message
    assert "the build does not start" in message and "AGENT_TEAM_DAILY_BUDGET_USD" in message
    assert caught.value.parked_reason == "budget_exhausted"
    assert caller.calls == 0, "a check is not a call"
    assert [row.calls for row in summary(conn)] == [2, 1], "nothing recorded"


def test_check_remaining_counts_tokens_when_the_day_is_capped_in_tokens(conn: db.Ledger) -> None:
    spend(conn, tokens=900)
    caller = make_caller(conn, OfflineChatModel(), model="offline", token_cap=1000)
    left = caller.check_remaining("build")
    assert (left.unit, left.tokens, left.usd) == ("tokens", 100, None)
    spend(conn, tokens=150, at=DAY - timedelta(hours=1))
    with pytest.raises(BudgetExhaustedError, match="AGENT_TEAM_DAILY_TOKEN_CAP") as caught:
        caller.check_remaining("build")
    assert "1050 tokens used" in str(caught.value) and "no price known" in str(caught.value)
    subscription = make_caller(conn, plan_fake(), billing_mode="subscription", token_cap=5000)
    assert subscription.check_remaining("build").unit == "tokens"


def test_check_remaining_counts_calls_in_flight_and_the_next_day_is_fresh(
    conn: db.Ledger,
) -> None:
    entered, release = threading.Event(), threading.Event()
    slow = ToolFake(
        responses=[tool_reply("Plan", PLAN_ARGS, (10, 10))], entered=entered, release=release
    )
    cap = math.ceil(len(message_text(MESSAGES)) / 4) + 1024  # one call's estimate
    clock = Clock(DAY)
    caller = make_caller(conn, slow, model="offline", token_cap=cap, clock=clock)
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(call, caller)
        try:
            assert entered.wait(timeout=30)
            with pytest.raises(BudgetExhaustedError):
                caller.check_remaining("build")  # the call's estimate fills the cap
        finally:
            release.set()
        assert first.result(timeout=30) == EXPECTED
    assert caller.check_remaining("build").tokens == cap - 20  # the call's real usage
    spend(conn, tokens=10_000_000)
    with pytest.raises(BudgetExhaustedError):
        caller.check_remaining("build")
    clock.now = DAY + timedelta(seconds=2)  # past UTC midnight
    assert caller.check_remaining("build").tokens == cap


# --- errors ------------------------------------------------------------------------------


def test_provider_exception_is_a_redacted_model_error(conn: db.Ledger) -> None:
    secret = "sk-ant-api03-THISISASECRETKEY12345"
    fake = ToolFake(responses=[], error=RuntimeError(f"401 from https://api: key {secret} invalid"))
    caller = make_caller(conn, fake, secrets=["hunter2-known-value"])
    with pytest.raises(ModelError) as caught:
        call(caller)
    message = str(caught.value)
    # Not a provider's error: its text (a key, here) is never repeated, only its type.
    assert "THISISASECRET" not in message and "https://api" not in message
    assert "unclassified error (RuntimeError)" in message and "plan stage" in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    assert summary(conn) == []


def test_known_secret_values_are_redacted(conn: db.Ledger) -> None:
    fake = ToolFake(responses=[], error=ValueError("token hunter2-known-value leaked"))
    with pytest.raises(ModelError) as caught:
        call(make_caller(conn, fake, secrets=["hunter2-known-value", None]))
    assert "hunter2" not in str(caught.value)


def test_parse_failure_still_records_usage(conn: db.Ledger) -> None:
    fake = plan_fake(usage=(700, 300), args={"summary": "s", "steps": [], "risks": []})
    with pytest.raises(ModelError, match="does not fit Plan"):
        call(make_caller(conn, fake))
    [row] = summary(conn)
    assert (row.input_tokens, row.output_tokens) == (700, 300)
    assert row.usd_cost == pytest.approx((700 * 3 + 300 * 15) / 1_000_000)


def test_parse_failure_message_is_redacted(conn: db.Ledger) -> None:
    args = {"summary": "ghp_abcdefghijklmnopqrstuvwxyz0123", "steps": "not a list"}
    with pytest.raises(ModelError) as caught:
        call(make_caller(conn, plan_fake(args=args)))
    assert "abcdefghijklmnop" not in str(caught.value)


def test_reply_without_a_tool_call_is_a_model_error_and_recorded(conn: db.Ledger) -> None:
    reply = AIMessage(content="I think you should add a retry.")
    fake = ToolFake(responses=[reply])
    with pytest.raises(ModelError, match="no Plan answer"):
        call(make_caller(conn, fake))
    assert [row.calls for row in summary(conn)] == [1]


def test_model_without_tool_calling_is_a_model_error(conn: db.Ledger) -> None:
    plain = FakeMessagesListChatModel(responses=[AIMessage(content="x")])
    with pytest.raises(ModelError, match="NotImplementedError"):
        call(make_caller(conn, plain))
    assert summary(conn) == []


# --- construction ------------------------------------------------------------------------


def test_unknown_billing_mode_is_a_config_error(conn: db.Ledger) -> None:
    with pytest.raises(ConfigError, match="AGENT_TEAM_BILLING_MODE"):
        make_caller(conn, plan_fake(), billing_mode="flat")


def test_bad_price_override_fails_at_construction(conn: db.Ledger) -> None:
    with pytest.raises(ConfigError, match="AGENT_TEAM_PRICES"):
        make_caller(conn, plan_fake(), prices={SONNET: (-1.0, 1.0)})


def test_properties(conn: db.Ledger) -> None:
    caller = make_caller(conn, plan_fake(), model=f" {SONNET} ", billing_mode="subscription")
    assert caller.model == SONNET
    assert caller.billing_mode == "subscription"
    assert caller.price is not None and caller.price.input_per_mtok == 3.0


# --- a stop while the provider works -------------------------------------------------------


def test_a_stop_abandons_a_model_call_in_flight_and_counts_its_prompt(conn: db.Ledger) -> None:
    entered, release = threading.Event(), threading.Event()
    slow = ToolFake(
        responses=[tool_reply("Plan", PLAN_ARGS, (10, 10))], entered=entered, release=release
    )
    caller = make_caller(conn, slow)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            asked = pool.submit(call, caller, thread_id="t-stop")
            try:
                assert entered.wait(timeout=30)
                request_stop("t-stop", "cancelled")
                with pytest.raises(TaskStoppedError, match="cancelled") as stopped:
                    asked.result(timeout=30)  # while the provider still works
                assert not release.is_set()
            finally:
                release.set()
        assert stopped.value.reason == "cancelled"
        # It was sent and may be billed whole: counted as estimated, never lost.
        (row,) = db.task_usage(conn, thread_id="t-stop")
        assert row.stage == "plan" and row.input_tokens == math.ceil(
            len(message_text(MESSAGES)) / 4
        )
        assert row.output_tokens == 1024 and row.usd_cost > 0  # the reply it was held for
        # A call asked after the stop is not made at all.
        with pytest.raises(TaskStoppedError):
            call(caller, thread_id="t-stop")
        assert slow.invocations == 1
    finally:
        forget_stop("t-stop")


# --- spend the database refused ----------------------------------------------------------


def test_spend_waiting_in_the_outbox_counts_against_todays_cap(
    conn: db.Ledger, tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox.jsonl"
    caller = make_caller(conn, plan_fake(), budget=1.0, outbox=outbox)
    assert call(caller) == EXPECTED  # well under the cap
    stranded = {
        "thread_id": "t-refused",
        "stage": "plan",
        "model": SONNET,
        "billing_mode": "api",
        "input_tokens": 0,
        "output_tokens": 0,
        "usd_cost": 0.999,
        "recorded_at": db.to_iso(DAY),
        "day_bucket": db.day_bucket(DAY),
    }
    outbox.write_text(json.dumps(stranded) + "\n")

    with pytest.raises(BudgetExhaustedError, match="daily budget reached"):
        call(make_caller(conn, plan_fake(), budget=1.0, outbox=outbox))
    with pytest.raises(BudgetExhaustedError):
        make_caller(conn, plan_fake(), budget=1.0, outbox=outbox).check_remaining("build")
    watch = build_spend_watch(
        conn, billing_mode="api", daily_budget_usd=1.0, prices=None, clock=Clock(DAY), outbox=outbox
    )
    assert watch.remaining_usd() == 0.0  # what a streaming build may still spend today
    # Another day's row in the outbox does not count today.
    outbox.write_text(json.dumps({**stranded, "day_bucket": "2029-12-31"}) + "\n")
    assert call(make_caller(conn, plan_fake(), budget=1.0, outbox=outbox)) == EXPECTED


def test_a_replay_in_progress_is_not_counted_twice(conn: db.Ledger, tmp_path: Path) -> None:
    """A cap check waits for a replay: never the row in the ledger and in the file at once."""
    outbox = tmp_path / "outbox.jsonl"
    row = {
        "thread_id": "t-replayed",
        "stage": "plan",
        "model": SONNET,
        "billing_mode": "api",
        "input_tokens": 0,
        "output_tokens": 0,
        "usd_cost": 0.6,
        "recorded_at": db.to_iso(DAY),
        "day_bucket": db.day_bucket(DAY),
    }
    outbox.write_text(json.dumps(row) + "\n")
    real_insert = db.budget._insert
    pool = ThreadPoolExecutor(max_workers=1)
    looks: list[Any] = []

    def insert_then_look(tx: Any, row: dict[str, Any]) -> None:
        real_insert(tx, row=row)
        # Mid-replay (the row is in the ledger, not yet out of the file), another thread
        # checks the cap: it must not count the row from the file as well.
        looks.append(pool.submit(db.outbox_spend, outbox, day=DAY, billing_mode="api"))

    db.budget._insert = insert_then_look  # type: ignore[assignment]
    try:
        report = db.replay_outbox(outbox, conn)
    finally:
        db.budget._insert = real_insert  # type: ignore[assignment]
    (look,) = looks
    assert report["replayed"] == 1
    assert look.result(timeout=30).usd == 0.0  # it waited for the replay to end
    pool.shutdown()
    assert not outbox.exists()  # all replayed: no file, a cap check is one stat again
    assert db.outbox_spend(outbox, day=DAY, billing_mode="api").usd == 0.0
