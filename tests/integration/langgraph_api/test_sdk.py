"""The real Python `langgraph_sdk` client against a live daemon: what Agent Inbox and scripts do.

Every object the daemon returns is validated against the SDK's own schema
types, and every answer is checked in the ledger: which question it closed,
what normalised answer the graph got, and who the audit log says gave it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import schema
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError
from pydantic import TypeAdapter

from agent_team import db
from agent_team.integrations.langgraph_api.human import CLARIFY_IGNORED
from agent_team.integrations.langgraph_api.shapes import run_id_for
from agent_team.models.schemas import Plan
from tests.integration.langgraph_api.conftest import BOB_KEY, Live, api_settings, wait_for


@pytest.fixture(params=["sqlite", "postgres"])
def live(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Live]:
    """The same calls on either ledger: the threads come from SQL that must mean one thing."""
    extra: dict[str, Any] = {}
    if request.param == "postgres":
        extra["database_url"] = request.getfixturevalue("pg_url")
    running = Live(api_settings(tmp_path, **extra))
    try:
        yield running
    finally:
        running.stop()


THREAD = TypeAdapter(schema.Thread)
LONG_REPLY = "The email address goes in a cookie at login and prefills the form on the next visit."
STATE = TypeAdapter(schema.ThreadState)
RUN = TypeAdapter(schema.Run)


def audit_rows(live: Live, question_id: str) -> list[db.AuditRow]:
    return db.list_audit(live.conn, target=question_id)


def answered(live: Live, question_id: str) -> db.Question:
    question = db.get_question(live.conn, question_id)
    assert question is not None and question.status == "answered"
    return question


def test_search_lists_waiting_tasks_with_their_interrupts(live: Live) -> None:
    clarify = live.submit(clarify=True, title="Vague")
    plan = live.submit(clarify=False, title="Clear")
    live.open_question(clarify)
    live.open_question(plan)
    running = live.submit(clarify=False, title="Not yet asked")
    live.daemon.coordinator.cancel(running)
    wait_for(lambda: live.task(running).status == "cancelled", "the cancel")

    found = live.client.threads.search(status="interrupted", limit=10)
    assert [thread["thread_id"] for thread in found] == [plan, clarify]  # newest first
    for thread in found:
        THREAD.validate_python(thread)
        assert thread["status"] == "interrupted"
        assert thread["metadata"]["graph_id"] == "agent-team"
        [(node, interrupts)] = thread["interrupts"].items()
        assert node in ("clarify_gate", "plan_review") and len(interrupts) == 1
        [value] = interrupts[0]["value"]  # one HumanInterrupt, in a list
        assert set(value) == {"action_request", "config", "description"}
    plan_interrupt = found[0]["interrupts"]
    [[interrupt]] = plan_interrupt.values()
    assert interrupt["id"] == f"{plan}:q1"
    assert interrupt["value"][0]["config"] == {
        "allow_ignore": True,
        "allow_respond": True,
        "allow_edit": True,
        "allow_accept": True,
    }
    assert interrupt["value"][0]["action_request"]["args"]["steps"]

    assert [t["thread_id"] for t in live.client.threads.search(status="idle")] == [running]
    by_id = live.client.threads.search(ids=[clarify, "nope"])
    assert [t["thread_id"] for t in by_id] == [clarify]
    assert live.client.threads.search(metadata={"graph_id": "another"}) == []
    # Agent Inbox filters by the graph id it was given (or the assistant id, for a UUID).
    assert len(live.client.threads.search(metadata={"assistant_id": "agent-team"})) == 3
    assert len(live.client.threads.search(metadata={"graph_id": "agent-team"}, limit=2)) == 2
    page = live.client.threads.search(limit=1, offset=1)
    assert [t["thread_id"] for t in page] == [plan]
    oldest = live.client.threads.search(sort_by="created_at", sort_order="asc", limit=1)
    assert [t["thread_id"] for t in oldest] == [clarify]


def test_get_and_get_state_show_the_open_question(live: Live) -> None:
    task_id = live.submit(clarify=True)
    question = live.open_question(task_id)

    thread = live.client.threads.get(task_id)
    THREAD.validate_python(thread)
    assert thread["status"] == "interrupted"
    assert thread["values"]["title"] == "Remember the email"
    assert thread["created_at"].endswith("+00:00")

    state = live.client.threads.get_state(task_id)
    STATE.validate_python(state)
    assert state["next"] == ["clarify_gate"]
    [task] = state["tasks"]
    assert task["name"] == "clarify_gate"
    assert [i["id"] for i in task["interrupts"]] == [question.question_id]
    assert state["checkpoint"]["thread_id"] == task_id
    assert state["checkpoint"]["checkpoint_id"]  # the thread's real latest checkpoint
    config = task["interrupts"][0]["value"][0]["config"]
    assert config["allow_respond"] and config["allow_ignore"] and not config["allow_accept"]
    assert STATE.validate_python(live.client.threads.get_state(task_id, subgraphs=True))

    with pytest.raises(NotFoundError):
        live.client.threads.get("t-not-a-task")
    with pytest.raises(NotFoundError):
        live.client.threads.get_state("t-not-a-task")


def test_runs_create_answers_clarify_with_a_response(live: Live) -> None:
    task_id = live.submit(clarify=True)
    question = live.open_question(task_id)
    reply = "The email goes in a cookie and prefills the login form on the next visit."

    run = live.client.runs.create(
        task_id, "agent-team", command={"resume": [{"type": "response", "args": reply}]}
    )

    RUN.validate_python(run)
    assert run["run_id"] == run_id_for(question.question_id) and run["thread_id"] == task_id
    assert live.client.threads.get(task_id)["status"] != "interrupted"  # changed before the reply
    done = answered(live, question.question_id)
    assert done.answer == {"text": reply}
    assert done.answered_via == "langgraph-api:ada"
    [row] = audit_rows(live, question.question_id)
    assert (row.actor, row.via, row.action) == ("ada", "langgraph-api", "answer")
    live.open_question(task_id, "plan_decision")  # the graph moved on to the plan


def test_runs_wait_ignore_on_clarify_proceeds_with_what_is_known(live: Live) -> None:
    task_id = live.submit(clarify=True)
    question = live.open_question(task_id)

    values = live.client.runs.wait(
        task_id, "agent-team", command={"resume": [{"type": "ignore", "args": None}]}
    )

    assert isinstance(values, dict)
    assert answered(live, question.question_id).answer == {"text": CLARIFY_IGNORED}
    # It waited for the task to settle: at the plan question, which it reports.
    [interrupt] = values["__interrupt__"]
    assert interrupt["id"] == f"{task_id}:q2"
    assert values["phase"] == "plan_review" and values["plan"]


def test_runs_wait_accept_on_the_plan_runs_to_done(live: Live) -> None:
    task_id = live.submit(clarify=False)
    question = live.open_question(task_id)

    values = live.client.runs.wait(
        task_id, "agent-team", command={"resume": [{"type": "accept", "args": None}]}
    )

    assert isinstance(values, dict)
    assert values["status"] == "done" and "__interrupt__" not in values
    assert values["result"].startswith("branch ") and values["links"][0]["kind"] == "build"
    assert answered(live, question.question_id).answer == {"decision": "approve", "text": ""}
    thread = live.client.threads.get(task_id)
    assert thread["status"] == "idle" and thread["interrupts"] == {}
    state = live.client.threads.get_state(task_id)
    STATE.validate_python(state)
    assert state["tasks"] == [] and state["next"] == []


def test_runs_stream_edit_on_the_plan_sends_progress_then_ends(live: Live) -> None:
    task_id = live.submit(clarify=False)
    question = live.open_question(task_id)
    [[interrupt]] = live.client.threads.get(task_id)["interrupts"].values()
    edited = dict(interrupt["value"][0]["action_request"])
    edited["args"] = {
        "summary": "Keep the email in a cookie",
        "steps": ["Write the cookie at login", "Prefill the field from it"],
        "risks": [],
    }

    parts = list(
        live.client.runs.stream(
            task_id,
            "agent-team",
            command={"resume": [{"type": "edit", "args": edited}]},
            stream_mode=["values", "updates"],
        )
    )

    events = [part.event for part in parts]
    assert events[0] == "metadata" and parts[0].data["run_id"] == run_id_for(question.question_id)
    assert "values" in events and "updates" in events and "error" not in events
    last_values = [part.data for part in parts if part.event == "values"][-1]
    assert last_values["status"] == "done"
    answer = answered(live, question.question_id).answer
    assert answer["decision"] == "edit"
    plan = Plan.from_text(answer["text"])
    assert plan.steps == ["Write the cookie at login", "Prefill the field from it"]
    assert "Write the cookie at login" in live.client.threads.get(task_id)["values"]["plan"]


def test_the_inbox_stream_mode_names_each_node_as_it_starts(live: Live) -> None:
    task_id = live.submit(clarify=True)
    live.open_question(task_id)

    parts = list(
        live.client.runs.stream(
            task_id,
            "agent-team",
            command={"resume": [{"type": "response", "args": LONG_REPLY}]},
            stream_mode="events",
        )
    )

    started = [p.data["metadata"]["langgraph_node"] for p in parts if p.event == "events"]
    assert all(p.data["event"] == "on_chain_start" for p in parts if p.event == "events")
    assert started[-1] == "plan_review" and len(started) == len(set(started))
    assert {p.event for p in parts} == {"metadata", "events"}


def test_response_on_the_plan_asks_for_a_revision(live: Live) -> None:
    task_id = live.submit(clarify=False)
    question = live.open_question(task_id)

    values = live.client.runs.wait(
        task_id,
        "agent-team",
        command={"resume": {question.question_id: {"type": "response", "args": "Add tests"}}},
    )

    assert answered(live, question.question_id).answer == {
        "decision": "revise",
        "text": "Add tests",
    }
    assert isinstance(values, dict)
    assert values["__interrupt__"][0]["id"] == f"{task_id}:q2"  # the revised plan, asked again


def test_ignore_on_the_plan_rejects_it(live: Live) -> None:
    task_id = live.submit(clarify=False)
    question = live.open_question(task_id)

    values = live.client.runs.wait(
        task_id, "agent-team", command={"resume": [{"type": "ignore", "args": None}]}
    )

    assert answered(live, question.question_id).answer == {"decision": "reject", "text": ""}
    assert isinstance(values, dict) and values["status"] == "cancelled"


def test_a_plain_answer_in_words_works_from_a_script(live: Live) -> None:
    task_id = live.submit(clarify=False)
    question = live.open_question(task_id)

    live.client.runs.create(task_id, "agent-team", command={"resume": "lgtm"})

    assert answered(live, question.question_id).answer["decision"] == "approve"


def test_mark_as_resolved_cancels_the_task_and_is_audited(live: Live) -> None:
    task_id = live.submit(clarify=True)
    question = live.open_question(task_id)
    with httpx.Client(base_url=live.url + "/", headers={"x-api-key": BOB_KEY}) as bob:
        response = bob.post(f"threads/{task_id}/state", json={"values": None, "as_node": "__end__"})

    assert response.status_code == 200, response.text
    assert response.json()["checkpoint"]["thread_id"] == task_id
    assert live.task(task_id).status == "cancelled"  # done before the update answered
    superseded = db.get_question(live.conn, question.question_id)
    assert superseded is not None and superseded.status == "superseded"
    rows = [row for row in db.list_audit(live.conn) if row.target == task_id]
    assert [(r.actor, r.via, r.action) for r in rows if r.action == "cancel"] == [
        ("bob", "langgraph-api", "cancel")
    ]
    # Resolving a finished thread again changes nothing and is not an error.
    again = live.client.threads.update_state(task_id, values=None, as_node="__end__")
    assert again["checkpoint"]["thread_id"] == task_id
    assert len([r for r in db.list_audit(live.conn) if r.action == "cancel"]) == 1


def test_a_second_answer_gets_409_and_changes_nothing(live: Live) -> None:
    task_id = live.submit(clarify=False)
    question = live.open_question(task_id)
    live.client.runs.create(task_id, "agent-team", command={"resume": "approve"})

    with pytest.raises(ConflictError) as refused:
        live.client.runs.create(
            task_id, "agent-team", command={"resume": {question.question_id: "reject"}}
        )

    assert "already answered" in str(refused.value)
    assert answered(live, question.question_id).answer["decision"] == "approve"
    assert len(audit_rows(live, question.question_id)) == 1


def test_a_resume_of_the_wrong_type_for_the_gate_is_refused(live: Live) -> None:
    task_id = live.submit(clarify=True)
    question = live.open_question(task_id)

    with pytest.raises(UnprocessableEntityError) as refused:
        live.client.runs.create(
            task_id, "agent-team", command={"resume": [{"type": "accept", "args": None}]}
        )

    assert "does not take `accept`" in str(refused.value)
    still = db.get_question(live.conn, question.question_id)
    assert still is not None and still.status == "open" and still.answer_json is None


def test_thread_values_hold_no_secret_from_the_task(live: Live) -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    body = f"the token is {secret} and bob's dashboard key is {BOB_KEY}"
    task_id = live.daemon.coordinator.start_task(title=f"Rotate {BOB_KEY}", body=body)
    live.open_question(task_id)

    shown = json.dumps(
        [
            live.client.threads.get(task_id),
            live.client.threads.get_state(task_id),
            live.client.threads.search(ids=[task_id]),
            list(live.client.runs.stream(task_id, "agent-team", command={"resume": "approve"})),
        ],
        default=str,
    )

    assert secret not in shown and BOB_KEY not in shown
    assert "[redacted]" in shown


def test_a_build_that_fails_ends_the_stream_with_an_error_event(tmp_path: Path) -> None:
    running = Live(api_settings(tmp_path, builder="command", build_command="exit 3"))
    try:
        task_id = running.submit(clarify=False)
        running.open_question(task_id)
        parts = list(
            running.client.runs.stream(task_id, "agent-team", command={"resume": "approve"})
        )
        assert parts[-1].event == "error"
        assert parts[-1].data["error"] == "TaskFailed" and "exited with code 3" in str(
            parts[-1].data["message"]
        )
        assert running.client.threads.get(task_id)["status"] == "error"
        with pytest.raises(httpx.HTTPStatusError) as again:  # nothing left to answer
            running.client.runs.wait(task_id, "agent-team", command={"resume": "approve"})
        assert again.value.response.status_code == 409
    finally:
        running.stop()
