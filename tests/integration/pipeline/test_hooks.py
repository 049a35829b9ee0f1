"""The integration hooks: observers of task events, and the publish step after a build."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent_team import db
from agent_team.coordinator import EVENT_RETENTION, Coordinator
from agent_team.graph import build_graph
from agent_team.requests.actors import Actor
from agent_team.task_model import TaskState
from tests.integration.pipeline.conftest import (
    Clock,
    MakeCoordinator,
    RecordingTransport,
    open_question,
    task_of,
)

BODY = "Add a short greeting to the README so new readers know what the project does."


def run_to_done(coordinator: Coordinator) -> str:
    task_id = coordinator.start_task(title="Greet readers", body=BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    question = open_question(coordinator, task_id)
    coordinator.answer(question.question_id, "approve", via="cli:tester")
    coordinator.tick(until_idle=True, timeout_s=60)
    return task_id


def test_observers_hear_every_event_and_a_failing_one_harms_nothing(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator = make_coordinator(clock=Clock(), transport=RecordingTransport())
    heard: list[tuple[str, str]] = []

    def broken(_task: db.Task, _event: str, _text: str) -> None:
        raise RuntimeError("observer down")

    coordinator.observers.extend(
        [broken, lambda task, event, _text: heard.append((task.id, event))]
    )

    task_id = run_to_done(coordinator)

    assert task_of(coordinator, task_id).status == "done"
    assert heard == [(task_id, "started"), (task_id, "waiting"), (task_id, "done")]


def test_publish_runs_once_after_the_build_and_its_link_reaches_the_done_notice(
    make_coordinator: MakeCoordinator,
) -> None:
    transport = RecordingTransport()
    coordinator = make_coordinator(clock=Clock(), transport=transport)
    published: list[dict[str, Any]] = []

    def publish(state: TaskState) -> dict[str, Any]:
        build = state.get("build") or {}
        published.append(build)
        return {"url": f"https://example.test/pull/{len(published)}", "number": len(published)}

    coordinator.deps.publish = publish
    coordinator.runner.graph = build_graph(coordinator.deps, coordinator.ledger.checkpointer())

    task_id = run_to_done(coordinator)

    assert len(published) == 1 and published[0]["branch"] == f"agent-team/{task_id}"
    values = coordinator.graph.get_state({"configurable": {"thread_id": task_id}}).values
    assert values["pull_request"] == {"url": "https://example.test/pull/1", "number": 1}
    (done_text,) = [text for tid, event, text in transport.notices if event == "done"]
    assert done_text.endswith("; pull request https://example.test/pull/1")
    phases = [row.to_phase for row in db.list_transitions(coordinator.ledger, task_id)]
    assert phases.count("build") == 1, "publish belongs to the build phase"


def test_without_a_publisher_the_graph_has_no_publish_node(
    make_coordinator: MakeCoordinator,
) -> None:
    coordinator = make_coordinator(clock=Clock())
    assert "publish" not in coordinator.graph.get_graph().nodes
    assert "build" in coordinator.graph.get_graph().nodes


def test_old_event_ids_are_forgotten_by_a_tick(make_coordinator: MakeCoordinator) -> None:
    clock = Clock()
    coordinator = make_coordinator(clock=clock)
    old = clock.now - EVENT_RETENTION - timedelta(minutes=1)
    db.claim_event(coordinator.ledger, source="slack", event_id="Ev-old", now=old)
    db.claim_event(coordinator.ledger, source="github", event_id="d-new", now=clock.now)

    coordinator.tick()

    assert not db.event_seen(coordinator.ledger, source="slack", event_id="Ev-old")
    assert db.event_seen(coordinator.ledger, source="github", event_id="d-new")


def test_idempotency_keys_are_forgotten_by_a_tick_after_a_day(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock()
    coordinator = make_coordinator(clock=clock)
    ada = Actor("ada", "dashboard")
    first = coordinator.requests.submit_once("k-1", title="Keyed", actor=ada)
    clock.advance(hours=23)
    coordinator.tick()
    assert coordinator.requests.submit_once("k-1", title="Keyed", actor=ada) == db.KeptRequest(
        first.task_id, first.fingerprint, created=False
    )

    clock.advance(hours=2)
    coordinator.tick()

    assert db.table_counts(coordinator.ledger)["idempotency_keys"] == 0
    again = coordinator.requests.submit_once("k-1", title="Keyed", actor=ada)
    assert again.created and again.task_id != first.task_id


def test_github_sign_in_states_are_forgotten_by_a_tick_a_day_after_they_expired(
    make_coordinator: MakeCoordinator,
) -> None:
    clock = Clock()
    coordinator = make_coordinator(clock=clock)
    db.save_oauth_state(coordinator.ledger, "a" * 64, next_path="/", now=clock.now)
    clock.advance(minutes=11)  # expired, but kept: a late callback is still told why
    coordinator.tick()
    assert db.spend_oauth_state(coordinator.ledger, "a" * 64, now=clock.now).outcome == "expired"

    clock.advance(days=1)
    coordinator.tick()

    assert db.table_counts(coordinator.ledger)["oauth_states"] == 0
