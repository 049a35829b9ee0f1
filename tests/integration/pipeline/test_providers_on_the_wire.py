"""The pipeline on each provider's real client, against a loopback server of its API.

`ChatAnthropic`, `ChatOpenAI` and `ChatOllama` are built by the daemon's own
wiring from the settings (model spec, base URL, time limit) and talk HTTP to
`tests/fakes/model_providers.py`, which answers as the offline model would and
reports the usage the budget prices. Then what a provider's failures do to a
task: retried and gone on, parked and continued by itself, a fallback named as
the model that answered, a refused key, a failed call continued by `retry`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from agent_team import db
from agent_team.coordinator import Coordinator
from agent_team.models.pricing import cost_usd, price_for
from agent_team.reports.task import read_task_report
from agent_team.reports.triage import triage
from agent_team.requests.actors import Actor
from tests.fakes import model_providers as mp
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    SHORT_BODY,
    Clock,
    MakeCoordinator,
    RecordingTransport,
    open_question,
    task_of,
    usage_calls,
)

KEY = "test-key-for-the-loopback-server-0123456789"
SPECS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-5-mini",
    "ollama": "ollama:llama3.1",
}
CLARIFICATION = (
    "Remember the email address on the login form so returning users type less; "
    "a test covers the prefilled and the empty field."
)


class Reported:
    """The offline answer, with the usage the server reports for it kept per tool."""

    def __init__(self) -> None:
        self.usage: dict[str, tuple[int, int]] = {}
        self.lock = threading.Lock()

    def __call__(self, asked: mp.Asked) -> AIMessage:
        message = mp.offline_answer(asked)
        usage = message.usage_metadata
        assert usage is not None and asked.tool is not None
        with self.lock:
            self.usage[asked.tool] = (usage["input_tokens"], usage["output_tokens"])
        return message


class WallClock(Clock):
    """The wall clock, moved on by `advance`: budget rows and history rows (which the ledger
    stamps with the wall clock) then fall in the same step of the journey."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return db.utc_now() + self.offset

    def advance(self, **delta: float) -> datetime:
        self.offset += timedelta(**delta)
        return self()


@pytest.fixture(autouse=True)
def _provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OLLAMA_HOST", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def servers() -> Iterator[dict[str, mp.FakeModelServer]]:
    started = {flavour: mp.FakeModelServer(flavour, answer=Reported()) for flavour in SPECS}  # type: ignore[arg-type]
    for server in started.values():
        server.start()
    try:
        yield started
    finally:
        for server in started.values():
            server.stop()


def on(
    make: MakeCoordinator,
    servers: dict[str, mp.FakeModelServer],
    flavour: str,
    *,
    clock: Clock | None = None,
    transport: RecordingTransport | None = None,
    **settings: Any,
) -> Coordinator:
    """A coordinator whose model is `flavour`'s, every provider pointed at its loopback server."""
    settings.setdefault("model", SPECS[flavour])
    return make(
        clock=clock or WallClock(),
        transport=transport,
        anthropic_base_url=servers["anthropic"].url,
        openai_base_url=servers["openai"].url,
        ollama_base_url=servers["ollama"].url,
        model_timeout_s=10.0,
        model_backoff_s=0.0,
        **settings,
    )


def settle(coordinator: Coordinator) -> None:
    coordinator.tick(until_idle=True, timeout_s=60)


def failures(coordinator: Coordinator, task_id: str) -> list[tuple[str, str, str, int | None]]:
    return [
        (f.stage, f.model, f.outcome, f.http_status)
        for f in db.list_model_failures(coordinator.ledger, task_id)
    ]


@pytest.mark.parametrize("flavour", list(SPECS))
def test_the_whole_pipeline_runs_on_each_providers_client(
    make_coordinator: MakeCoordinator, servers: dict[str, mp.FakeModelServer], flavour: str
) -> None:
    server = servers[flavour]
    coordinator = on(make_coordinator, servers, flavour)

    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    settle(coordinator)
    coordinator.answer(open_question(coordinator, task_id).question_id, "approve")
    settle(coordinator)

    assert task_of(coordinator, task_id).status == "done"
    asked = [(r.path, r.model, r.tool) for r in server.requests]
    name = SPECS[flavour].split(":", 1)[1]
    path = {
        "anthropic": "/v1/messages",
        "openai": "/v1/chat/completions",
        "ollama": "/api/chat",
    }[flavour]
    assert asked == [(path, name, "ClarifyDecision"), (path, name, "Plan")]
    assert all(r.auth != "none" for r in server.requests) or flavour == "ollama"
    # Each call is priced from the usage the provider reported, under the model's spec.
    reported: Reported = server.answer  # type: ignore[assignment]
    price = price_for(SPECS[flavour])
    rows = {row.stage: row for row in db.task_usage(coordinator.ledger, thread_id=task_id)}
    for stage, tool in (("clarify", "ClarifyDecision"), ("plan", "Plan")):
        row = rows[stage]
        assert (row.model, row.input_tokens, row.output_tokens) == (
            SPECS[flavour],
            *reported.usage[tool],
        )
        expected = cost_usd(price, *reported.usage[tool]) if price is not None else 0.0
        assert row.usd_cost == pytest.approx(expected)
    assert (price is None) == (flavour == "ollama")  # Ollama is capped by tokens
    assert failures(coordinator, task_id) == []


def test_a_provider_that_fails_twice_then_answers_goes_on(
    make_coordinator: MakeCoordinator, servers: dict[str, mp.FakeModelServer]
) -> None:
    server = servers["anthropic"]
    server.script(mp.Fail(529, "overloaded_error"), mp.Fail(429, headers={"retry-after-ms": "20"}))
    coordinator = on(make_coordinator, servers, "anthropic")

    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    settle(coordinator)

    assert task_of(coordinator, task_id).status == "waiting"  # at the plan gate
    assert failures(coordinator, task_id) == [
        ("clarify", SPECS["anthropic"], "retried", 529),
        ("clarify", SPECS["anthropic"], "retried", 429),
    ]
    assert len(server.requests) == 4  # three clarify attempts and the plan
    assert usage_calls(coordinator.ledger, task_id) == {"clarify": 1, "plan": 1}
    report = read_task_report(coordinator.ledger, task_id, db.utc_now())
    assert [f.outcome for f in report.model_failures] == ["retried", "retried"]


def test_a_provider_that_is_down_parks_the_task_which_comes_back_by_itself(
    make_coordinator: MakeCoordinator, servers: dict[str, mp.FakeModelServer]
) -> None:
    server = servers["openai"]
    clock = WallClock()
    transport = RecordingTransport()
    coordinator = on(make_coordinator, servers, "openai", clock=clock, transport=transport)
    task_id = coordinator.start_task(title="Make login nicer", body=SHORT_BODY)
    settle(coordinator)
    clarify = open_question(coordinator, task_id)
    server.down("drop")  # the provider goes away (answers nothing) between question and answer

    coordinator.answer(clarify.question_id, CLARIFICATION, via="cli:ada")
    settle(coordinator)

    parked = task_of(coordinator, task_id)
    assert (parked.status, parked.parked_reason) == ("parked", "model_unavailable")
    assert [f[2] for f in failures(coordinator, task_id)] == ["retried", "retried", "gave_up"]
    note = db.list_transitions(coordinator.ledger, task_id)[-1].note or ""
    assert f"{SPECS['openai']}: connection failed after 3 attempts" in note
    assert KEY not in note
    (item,) = [
        i for i in triage(coordinator.ledger, now=clock(), budget=None) if i.task_id == task_id
    ]
    assert "connection failed" in item.detail
    settle(coordinator)
    assert task_of(coordinator, task_id).status == "parked"  # not before its pause

    server.up()
    clock.advance(minutes=1, seconds=1)
    settle(coordinator)

    plan = open_question(coordinator, task_id)
    assert plan.kind == "plan_decision"
    questions = db.list_questions(coordinator.ledger, thread_id=task_id)
    assert [(q.kind, q.status) for q in questions] == [
        ("clarify", "answered"),
        ("plan_decision", "open"),
    ]  # the clarify answer was kept: nobody is asked again
    assert transport.delivered == [clarify.question_id, plan.question_id]
    assert task_of(coordinator, task_id).model_parks == 0  # the next outage waits 1 min again


def test_a_fallback_answers_and_is_named_as_the_model_that_did(
    make_coordinator: MakeCoordinator, servers: dict[str, mp.FakeModelServer]
) -> None:
    servers["anthropic"].models = {"claude-sonnet-4-5"}  # the configured model is unknown there
    coordinator = on(
        make_coordinator,
        servers,
        "anthropic",
        model="anthropic:claude-opus-4-1",
        model_fallbacks=[SPECS["openai"]],
    )

    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    settle(coordinator)

    rows = db.task_usage(coordinator.ledger, thread_id=task_id)
    assert {(row.stage, row.model) for row in rows} == {
        ("clarify", SPECS["openai"]),
        ("plan", SPECS["openai"]),
    }
    assert failures(coordinator, task_id) == [
        ("clarify", "anthropic:claude-opus-4-1", "fell_back", 404),
        ("plan", "anthropic:claude-opus-4-1", "fell_back", 404),
    ]
    report = read_task_report(coordinator.ledger, task_id, db.utc_now())
    models = {model for step in report.steps for model in step.models}
    assert models == {SPECS["openai"]}


def test_a_refused_key_parks_at_once_naming_its_variable_not_its_value(
    make_coordinator: MakeCoordinator, servers: dict[str, mp.FakeModelServer]
) -> None:
    servers["anthropic"].api_key = "the-key-the-server-wants"
    coordinator = on(make_coordinator, servers, "anthropic", model_fallbacks=[SPECS["openai"]])

    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    settle(coordinator)

    parked = task_of(coordinator, task_id)
    assert (parked.status, parked.parked_reason) == ("parked", "model_refused")
    note = db.list_transitions(coordinator.ledger, task_id)[-1].note or ""
    assert "HTTP 401" in note and "ANTHROPIC_API_KEY" in note
    assert KEY not in note
    assert len(servers["anthropic"].requests) == 1  # no retry
    assert servers["openai"].requests == []  # no fallback
    assert failures(coordinator, task_id) == [("clarify", SPECS["anthropic"], "refused", 401)]


def test_a_task_failed_in_a_model_call_continues_with_retry(
    make_coordinator: MakeCoordinator, servers: dict[str, mp.FakeModelServer]
) -> None:
    broken = threading.Event()
    broken.set()

    def answer(asked: mp.Asked) -> AIMessage:
        if asked.tool == "Plan" and broken.is_set():  # a plan with no steps does not fit
            return AIMessage(
                content="",
                tool_calls=[{"name": "Plan", "args": {"summary": "x"}, "id": "call-1"}],
            )
        return mp.offline_answer(asked)

    servers["ollama"].answer = answer
    coordinator = on(make_coordinator, servers, "ollama")
    task_id = coordinator.start_task(title="Make login nicer", body=SHORT_BODY)
    settle(coordinator)
    coordinator.answer(open_question(coordinator, task_id).question_id, CLARIFICATION)
    settle(coordinator)
    failed = task_of(coordinator, task_id)
    assert (failed.status, failed.phase) == ("failed", "plan")

    broken.clear()
    coordinator.retry(task_id, actor=Actor("ada", "cli"))
    settle(coordinator)

    assert open_question(coordinator, task_id).kind == "plan_decision"
    kinds = [q.kind for q in db.list_questions(coordinator.ledger, thread_id=task_id)]
    assert kinds == ["clarify", "plan_decision"]  # the clarify question was not asked again
