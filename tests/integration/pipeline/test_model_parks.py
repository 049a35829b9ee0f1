"""Tasks whose models are down: parked with a growing pause, continued by the timers, retried.

The model caller stands in for the real one's retries and fallbacks: each call
records its failed attempts (`db.record_model_failure`) and then either raises
`ModelsDownError` (every model spent) or answers through the offline model and
starts the task's pauses over (`db.reset_model_parks`), as the real caller does.
What must hold: the task parks `model_unavailable` with its pause (1m, 5m, 15m,
1h, then 1h again), the notice says when it continues (UTC) and how to continue
it now, the timers queue it once the pause is over and not before, a retry
clears the pause, and every report (triage, `show`, `/api/task`, the task page)
names the failures, the models and the provider's last error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from langchain_core.messages import BaseMessage
from pydantic import BaseModel
from starlette.testclient import TestClient
from typer.testing import CliRunner

from agent_team import db
from agent_team.cli.main import app
from agent_team.common.timefmt import utc_text
from agent_team.coordinator import Coordinator
from agent_team.dashboard import DashboardContext, create_app
from agent_team.exceptions import ModelRefusedError, ModelsDownError
from agent_team.models.caller import ModelCaller
from agent_team.models.offline import OfflineChatModel
from agent_team.reports import triage
from agent_team.reports.task import read_task_report
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    Clock,
    MakeCoordinator,
    RecordingTransport,
    serving,
    status_is,
    task_of,
)
from tests.waiting import wait_for

T = TypeVar("T", bound=BaseModel)

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
PRIMARY = "anthropic:claude-sonnet-4-5"
DOWN = f"every model of the call failed: {PRIMARY} HTTP 529 overloaded_error (2 attempts)"
OVERLOADED = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
PAUSES = [timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=15), timedelta(hours=1)]


class FlakyCaller(ModelCaller):
    """The offline model behind a provider that is down while `down` is set.

    A call made while down records two failed attempts (retried, then gave up)
    and raises `ModelsDownError`; `refused` raises `ModelRefusedError`; with
    `flaky` > 0 a call records one failed attempt and then answers.
    """

    def __init__(self, coordinator: Coordinator) -> None:
        # Its rows are stamped by the wall clock, as the history rows are, so each
        # call falls in its step's time window (`db.transition_costs`); the pauses
        # follow the coordinator's settable clock.
        super().__init__(
            coordinator.ledger,
            OfflineChatModel(),
            model="offline",
            billing_mode="api",
            daily_budget_usd=20.0,
            daily_token_cap=5_000_000,
        )
        self.ledger = coordinator.ledger
        self.down = False
        self.refused = False
        self.flaky = 0
        self.calls = 0

    def _failed(self, thread_id: str, stage: str, attempt: int, outcome: str) -> None:
        db.record_model_failure(
            self.ledger,
            thread_id=thread_id,
            stage=stage,
            model=PRIMARY,
            attempt=attempt,
            outcome=outcome,
            http_status=529,
            detail=OVERLOADED,
            at=db.utc_now(),
        )

    def structured(
        self,
        *,
        thread_id: str,
        stage: str,
        schema: type[T],
        messages: Sequence[BaseMessage],
        expected_output_tokens: int = 1024,
    ) -> T:
        self.calls += 1
        if self.refused:
            raise ModelRefusedError(f"{PRIMARY} refused the call: HTTP 401 invalid x-api-key")
        if self.down:
            self._failed(thread_id, stage, 1, "retried")
            self._failed(thread_id, stage, 2, "gave_up")
            raise ModelsDownError(DOWN)
        if self.flaky > 0:
            self.flaky -= 1
            self._failed(thread_id, stage, 1, "retried")
        answer = super().structured(
            thread_id=thread_id,
            stage=stage,
            schema=schema,
            messages=messages,
            expected_output_tokens=expected_output_tokens,
        )
        db.reset_model_parks(self.ledger, thread_id)
        return answer


def flaky_coordinator(
    make_coordinator: MakeCoordinator, **settings: Any
) -> tuple[Coordinator, FlakyCaller, RecordingTransport, Clock]:
    clock = Clock(NOW)
    transport = RecordingTransport()
    coordinator = make_coordinator(clock=clock, transport=transport, **settings)
    caller = FlakyCaller(coordinator)
    coordinator.deps.caller = caller
    return coordinator, caller, transport, clock


def parked_notices(transport: RecordingTransport, task_id: str) -> list[str]:
    return [text for tid, event, text in transport.notices if tid == task_id and event == "parked"]


def test_a_task_whose_models_stay_down_waits_longer_each_time_and_starts_over_once_answered(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator, caller, transport, clock = flaky_coordinator(make_coordinator)
    caller.down = True
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)

    waits = []
    for park in range(5):
        task = task_of(coordinator, task_id)
        assert (task.status, task.parked_reason, task.phase) == (
            "parked",
            "model_unavailable",
            "clarify",
        )
        assert task.model_parks == park + 1
        assert task.resume_at is not None
        resume_at = db.from_iso(task.resume_at)
        waits.append(resume_at - clock.now)
        # Each park is in the history; only the first of a streak is told to people.
        notice = db.list_transitions(coordinator.ledger, task_id)[-1].note or ""
        assert DOWN in notice
        assert f"continues by itself at {utc_text(resume_at)}" in notice
        assert f"agent-team retry {task_id}" in notice

        # Not a moment before the pause is over...
        clock.now = resume_at - timedelta(seconds=1)
        assert coordinator.unpark_models() == 0
        assert task_of(coordinator, task_id).status == "parked"
        # ... and then at once: the tick queues it, runs it, and it parks again.
        clock.now = resume_at
        coordinator.tick(until_idle=True, timeout_s=60)
    assert waits == [*PAUSES, PAUSES[-1]]
    assert len(parked_notices(transport, task_id)) == 1, "one notice for the whole outage"
    calls = caller.calls

    caller.down = False
    clock.now = db.from_iso(task_of(coordinator, task_id).resume_at or "")
    coordinator.tick(until_idle=True, timeout_s=60)

    task = task_of(coordinator, task_id)
    assert (task.status, task.model_parks, task.resume_at) == ("waiting", 0, None)
    assert caller.calls > calls
    unparks = [
        c.command_id
        for c in db.list_commands(coordinator.ledger, task_id=task_id)
        if c.command_id.startswith("unpark:")
    ]
    assert len(unparks) == 6, "one start command per pause that ran out"
    # Once answered, a new outage starts from the first pause again.
    assert db.park_for_models(
        coordinator.ledger, task_id, pauses=PAUSES, now=clock.now
    ) == clock.now + timedelta(minutes=1)


def test_the_daemons_timers_continue_a_task_whose_pause_is_over(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator, caller, _transport, clock = flaky_coordinator(make_coordinator)
    caller.down = True
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    parked = task_of(coordinator, task_id)
    assert parked.status == "parked" and parked.resume_at is not None
    caller.down = False
    clock.now = db.from_iso(parked.resume_at)

    with serving(coordinator):
        waiting = wait_for(lambda: status_is(coordinator, task_id, "waiting"), "the unpark")

    assert (waiting.resume_at, waiting.model_parks) == (None, 0)


def test_a_retry_continues_a_task_parked_on_its_models_at_once(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator, caller, _transport, _clock = flaky_coordinator(make_coordinator)
    caller.down = True
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).resume_at is not None

    caller.down = False
    coordinator.retry(task_id)

    retried = task_of(coordinator, task_id)
    assert (retried.status, retried.parked_reason, retried.resume_at) == ("queued", None, None)
    assert coordinator.unpark_models() == 0, "the retry's command is the only one"
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "waiting"
    (audit,) = [row for row in db.list_audit(coordinator.ledger) if row.action == "retry"]
    assert audit.detail_dict == {"parked_reason": "model_unavailable"}


def test_a_refused_call_parks_until_someone_fixes_it(make_coordinator: MakeCoordinator) -> None:
    coordinator, caller, transport, clock = flaky_coordinator(make_coordinator)
    caller.refused = True
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)

    task = task_of(coordinator, task_id)
    assert (task.status, task.parked_reason, task.resume_at) == ("parked", "model_refused", None)
    notice = parked_notices(transport, task_id)[-1]
    assert "HTTP 401 invalid x-api-key" in notice and f"agent-team retry {task_id}" in notice
    clock.advance(days=2)
    assert coordinator.unpark_models() == 0
    (item,) = triage.triage(coordinator.ledger, now=clock.now, budget=None)
    assert item.fix == (
        f"fix the key or the model setting named in the message, then: agent-team retry {task_id}"
    )

    caller.refused = False
    coordinator.retry(task_id)
    coordinator.tick(until_idle=True, timeout_s=60)
    assert task_of(coordinator, task_id).status == "waiting"


@pytest.fixture
def reported(make_coordinator: MakeCoordinator) -> tuple[Coordinator, str]:
    """A task whose clarify call answered after a failed attempt, then whose plan call
    found every model down: parked `model_unavailable`, its failures recorded."""
    coordinator, caller, _transport, _clock = flaky_coordinator(make_coordinator)
    caller.flaky = 1
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    original = caller.structured

    def down_for_the_plan(**call: Any) -> Any:
        caller.down = call["stage"] == "plan"
        return original(**call)

    caller.structured = down_for_the_plan  # type: ignore[method-assign]
    coordinator.tick(until_idle=True, timeout_s=60)
    task = task_of(coordinator, task_id)
    assert (task.status, task.parked_reason, task.phase) == ("parked", "model_unavailable", "plan")
    return coordinator, task_id


def test_the_report_names_each_stages_failures_and_the_model_that_answered(
    reported: tuple[Coordinator, str],
) -> None:
    coordinator, task_id = reported
    report = read_task_report(coordinator.ledger, task_id, coordinator.clock())

    assert [(f.stage, f.attempt, f.outcome) for f in report.model_failures] == [
        ("clarify", 1, "retried"),
        ("plan", 1, "retried"),
        ("plan", 2, "gave_up"),
    ]
    assert [stage.line() for stage in report.failures_by_stage] == [
        "clarify: 1 failed attempt (HTTP 529 overloaded_error), answered by offline",
        "plan: 2 failed attempts (HTTP 529 overloaded_error \N{MULTIPLICATION SIGN}2), gave up",
    ]
    steps = {step.phase: step for step in report.steps}
    assert steps["clarify"].models == ("offline",)
    assert steps["plan"].models == () and steps["plan"].outcome == "parked"
    assert report.parked_note is not None and DOWN in report.parked_note

    as_json = report.to_json()
    first = report.model_failures[0]
    assert as_json["model_failures"][0] == {
        "stage": "clarify",
        "model": PRIMARY,
        "attempt": 1,
        "outcome": "retried",
        "http_status": 529,
        "detail": OVERLOADED,
        "recorded_at": first.recorded_at,
    }
    assert json.loads(json.dumps(as_json)) == as_json
    clarify = next(s for s in as_json["steps"] if s["phase"] == "clarify")
    assert clarify["models"] == ["offline"]
    assert as_json["task"]["resume_at"] == db.to_iso(NOW + PAUSES[0])


def test_the_inbox_shows_the_providers_last_error_and_when_the_task_continues(
    reported: tuple[Coordinator, str],
) -> None:
    coordinator, task_id = reported

    (item,) = triage.triage(coordinator.ledger, now=coordinator.clock(), budget=None)

    assert item.kind == "parked" and item.task_id == task_id
    assert item.detail.startswith(f"parked: model_unavailable: {DOWN}")
    assert item.fix == (
        f"continues by itself at {utc_text(NOW + PAUSES[0])}; or: agent-team retry {task_id}"
    )


def test_show_prints_the_failures_per_stage_and_each_steps_model(
    reported: tuple[Coordinator, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _coordinator, task_id = reported
    monkeypatch.setenv("AGENT_TEAM_DB_PATH", str(tmp_path / "agent-team.db"))
    monkeypatch.setenv("AGENT_TEAM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("COLUMNS", "250")

    shown = CliRunner().invoke(app, ["show", task_id])

    assert shown.exit_code == 0, shown.output
    out = shown.stdout
    assert "status parked, phase plan, parked: model_unavailable" in out
    assert f"continues by itself at {utc_text(NOW + PAUSES[0])}" in out
    assert f"or now: agent-team retry {task_id}" in out
    assert "model calls that failed:" in out
    assert "clarify: 1 failed attempt (HTTP 529 overloaded_error), answered by offline" in out
    assert (
        "plan: 2 failed attempts (HTTP 529 overloaded_error \N{MULTIPLICATION SIGN}2), gave up"
        in out
    )
    (clarify_row,) = [line for line in out.splitlines() if "│ clarify " in line]
    assert "│ offline " in clarify_row


def test_the_task_page_and_the_api_show_the_park_the_failures_and_the_models(
    reported: tuple[Coordinator, str],
) -> None:
    coordinator, task_id = reported
    ctx = DashboardContext(
        settings=coordinator.settings, coordinator=coordinator, clock=coordinator.clock
    )
    with TestClient(create_app(ctx)) as client:
        page = client.get(f"/task/{task_id}")
        api = client.get(f"/api/task/{task_id}").json()
        inbox = client.get("/inbox")
        (item,) = client.get("/api/triage").json()["items"]
        listed = client.get("/api/tasks").json()

    assert page.status_code == 200
    html = page.text
    callout = html[html.index('class="callout parked"') :]
    callout = callout[: callout.index("</div>\n")]
    assert "model_unavailable" in callout and DOWN in callout
    assert "continues by itself" in callout and f"agent-team retry {task_id}" in callout
    assert "Model calls that failed" in html
    assert "clarify: 1 failed attempt (HTTP 529 overloaded_error), answered by offline" in html
    assert 'class="muted models"' in html and ">offline</div>" in html
    assert html.count("<td>gave up</td>") == 1
    assert [f["outcome"] for f in api["model_failures"]] == ["retried", "retried", "gave_up"]
    assert f"parked: model_unavailable: {DOWN}" in inbox.text
    assert item["detail"].startswith(f"parked: model_unavailable: {DOWN}")
    rows = listed["tasks"] if isinstance(listed, dict) else listed
    (row,) = [r for r in rows if r["id"] == task_id]
    assert row["resume_at"] is not None  # the list says when it continues
    assert row["resume_at"] == api["task"]["resume_at"]
