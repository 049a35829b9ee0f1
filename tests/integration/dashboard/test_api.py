"""The JSON API, `/healthz` and `/metrics` over the seeded ledger of `conftest.py`.

Timestamps there are pinned and the app's clock is `NOW`, so durations,
ages and per-row costs are asserted exactly.
"""

from __future__ import annotations

import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from agent_team.db.sqlite_ledger import storage_error
from agent_team.reports import task as reports
from agent_team.requests.answers import PLAN_DECISION_HELP
from tests.integration.dashboard.conftest import (
    BUDGET_USD,
    BUILD_BRANCH,
    BUILD_COMMIT,
    NOW,
    TA_JOURNEY,
    TOKEN,
    TOKEN_CAP,
    FakeCoordinator,
    Seeded,
    at,
    auth,
    iso,
    make_settings,
)

# --- the drill-down -----------------------------------------------------------------------

# Expected per-row (USD, tokens) of tA's journey: each call on the row open when it was made.
TA_ROW_COSTS = [
    (0.0, 0),  # intake
    (0.25, 150),  # clarify
    (0.5, 300),  # plan (the call at its exit instant is not its own)
    (0.0, 0),
    (0.0, 0),
    (0.0, 0),
    (0.125, 50),  # plan again (revise): only the call made during this row
    (0.0, 0),
    (0.0, 0),
    (0.0, 0),
    (1.0, 1500),  # build
    (0.0, 0),  # done
]


def test_task_drill_down_has_exact_durations_and_per_row_costs(client: TestClient) -> None:
    response = client.get("/api/task/tA")
    assert response.status_code == 200
    report = response.json()
    task = report["task"]
    assert (task["id"], task["kind"], task["status"], task["phase"]) == (
        "tA",
        "code",
        "done",
        "done",
    )
    assert task["source"] == "github:acme/app"
    assert task["source_ref"] == "https://github.com/acme/app/issues/7"
    assert (task["created_at"], task["updated_at"]) == (iso(0), iso(4394))
    assert task["parked_reason"] is None

    rows = report["transitions"]
    assert [(r["to_phase"], r["status"]) for r in rows] == [(p, s) for p, s, _, _ in TA_JOURNEY]
    assert [r["from_phase"] for r in rows] == [None] + [p for p, _, _, _ in TA_JOURNEY[:-1]]
    assert [r["duration_s"] for r in rows] == [
        (exited or 0) - entered for _, _, entered, exited in TA_JOURNEY
    ]
    assert [(r["cost_usd"], r["tokens"]) for r in rows] == TA_ROW_COSTS
    assert rows[-1]["note"] == f"branch {BUILD_BRANCH} at {BUILD_COMMIT}"

    assert report["totals"] == {
        "cost_usd": 1.9375,
        "tokens": 2016,
        "wall_s": 4394.0,
        "unattributed_cost_usd": 0.0625,
    }
    assert report["cost_by_stage"] == {"clarify": 0.25, "plan": 0.6875, "build": 1.0}
    assert report["build"] == {"branch": BUILD_BRANCH, "commit": BUILD_COMMIT}


def test_task_drill_down_lists_questions_with_parsed_answers(client: TestClient) -> None:
    questions = client.get("/api/task?id=tA").json()["questions"]
    assert [q["question_id"] for q in questions] == ["tA:q1", "tA:q2"]
    first = questions[0]
    assert first["kind"] == "plan_decision"
    assert first["status"] == "answered"
    assert first["posted_at"] == iso(131)
    assert first["deadline_at"] == iso(131 + 72 * 3600)
    assert first["answered_at"] == iso(1900)
    assert first["answered_via"] == "cli:alice"
    assert first["answer"] == {"decision": "revise", "text": "add tests"}
    assert first["text"] == "Review the plan for: Task tA"
    assert "answer_json" not in first and "payload_json" not in first


def test_an_unfinished_task_runs_until_now(client: TestClient) -> None:
    report = client.get("/api/task/tB").json()
    open_row = report["transitions"][-1]
    assert open_row["exited_at"] is None
    assert open_row["duration_s"] == 7200 - 5020
    assert open_row["cost_usd"] == 0.0
    assert report["transitions"][0]["cost_usd"] == 0.0  # intake: the clarify call is not its
    assert report["transitions"][1]["cost_usd"] == 0.03125
    assert report["totals"]["wall_s"] == 7200 - 5000
    assert report["build"] is None
    assert report["questions"][0]["status"] == "open"
    assert report["questions"][0]["answer"] is None


def test_unknown_task_is_404_and_a_missing_id_is_400(client: TestClient) -> None:
    missing = client.get("/api/task/nope")
    assert missing.status_code == 404
    assert missing.json()["error"] == "no task 'nope'"
    assert client.get("/api/task?id=nope").status_code == 404
    for url in ("/api/task", "/api/task?id=", "/api/task?id=%20%20"):
        response = client.get(url)
        assert response.status_code == 400, url
        assert response.json()["parameter"] == "id"
        assert response.json()["error"].startswith("id:")


def test_the_cli_and_the_api_tell_the_same_story(client: TestClient, seeded: Seeded) -> None:
    conn = db.open_ledger(seeded.path)
    try:
        direct = reports.task_report(conn, "tA", NOW)
    finally:
        conn.close()
    assert client.get("/api/task/tA").json() == direct


@pytest.mark.parametrize(
    ("note", "expected"),
    [
        (
            f"branch {BUILD_BRANCH} at {BUILD_COMMIT}",
            {"branch": BUILD_BRANCH, "commit": BUILD_COMMIT},
        ),
        ("branch agent-team/x at abc1234", {"branch": "agent-team/x", "commit": "abc1234"}),
        ("cancelled by an operator", None),
        ("branch agent-team/x at not-a-sha", None),
        ("the branch agent-team/x at abc1234 failed", None),
        (None, None),
    ],
)
def test_build_is_read_only_from_an_exact_build_note(
    note: str | None, expected: dict[str, str] | None
) -> None:
    assert reports.build_from_note(note) == expected


# --- the task list ------------------------------------------------------------------------


def ids(response: Any) -> list[str]:  # the TestClient's response type (httpx2 or httpx)
    return [task["id"] for task in response.json()["tasks"]]


def test_tasks_are_newest_first_with_age_and_cost(client: TestClient) -> None:
    response = client.get("/api/tasks")
    assert response.status_code == 200
    body = response.json()
    assert ids(response) == ["tC", "tB", "tA", "tD"]
    assert (body["total"], body["limit"], body["offset"]) == (4, 50, 0)
    by_id = {task["id"]: task for task in body["tasks"]}
    assert by_id["tA"]["age_s"] == 7200.0
    assert by_id["tB"]["age_s"] == 2200.0
    assert by_id["tD"]["age_s"] == 7200.0 + 86400
    assert by_id["tA"]["cost_usd"] == 1.9375
    assert by_id["tA"]["tokens"] == 2016
    assert by_id["tC"]["cost_usd"] == 0.0
    assert by_id["tD"]["cost_usd"] == 2.0
    assert by_id["tB"]["phase"] == "clarify"
    assert "body" not in by_id["tA"]


def test_tasks_paginate_and_filter(client: TestClient) -> None:
    page = client.get("/api/tasks?limit=2&offset=1")
    assert ids(page) == ["tB", "tA"]
    assert page.json()["total"] == 4
    assert ids(client.get("/api/tasks?limit=2&offset=4")) == []
    waiting = client.get("/api/tasks?status=waiting")
    assert ids(waiting) == ["tB"] and waiting.json()["total"] == 1
    assert ids(client.get("/api/tasks?kind=confluence")) == ["tC"]
    assert ids(client.get("/api/tasks?kind=code&status=failed")) == ["tD"]
    assert ids(client.get("/api/tasks?status=")) == ["tC", "tB", "tA", "tD"]


def test_tasks_filter_by_source_and_title_text(client: TestClient, seeded: Seeded) -> None:
    conn = db.open_ledger(seeded.path)
    try:
        db.create_task(conn, task_id="tW", kind="code", title="Cut 50% of the_cost", source="cli")
    finally:
        conn.close()
    assert ids(client.get("/api/tasks?source=github:acme/app")) == ["tA"]
    assert ids(client.get("/api/tasks?source=cli&status=failed")) == ["tD"]
    assert ids(client.get("/api/tasks?q=TASK%20t")) == ["tC", "tB", "tA", "tD"]
    matched = client.get("/api/tasks?q=K%20TB")
    assert ids(matched) == ["tB"] and matched.json()["total"] == 1
    # `%` and `_` are literal characters in a search, not wildcards.
    assert ids(client.get("/api/tasks?q=%25")) == ["tW"]
    assert ids(client.get("/api/tasks?q=e_c")) == ["tW"]
    assert ids(client.get("/api/tasks?q=k_t")) == []
    assert ids(client.get("/api/tasks?q=&source=")) == ["tW", "tC", "tB", "tA", "tD"]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("q=" + "x" * 301, "q"),
        ("q=a%0Ab", "q"),
        ("source=" + "s" * 301, "source"),
        ("status=sleeping", "status"),
        ("kind=poem", "kind"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=ten", "limit"),
        ("offset=-1", "offset"),
        ("offset=1.5", "offset"),
    ],
)
def test_bad_task_list_parameters_are_400_naming_them(
    client: TestClient, query: str, parameter: str
) -> None:
    response = client.get(f"/api/tasks?{query}")
    assert response.status_code == 400
    assert response.json()["parameter"] == parameter
    assert response.json()["error"].startswith(f"{parameter}:")


def test_limit_500_is_allowed(client: TestClient) -> None:
    assert client.get("/api/tasks?limit=500").status_code == 200


# --- questions and budget -----------------------------------------------------------------


def test_questions_filter_by_status(client: TestClient) -> None:
    open_ones = client.get("/api/questions?status=open").json()["questions"]
    assert [q["question_id"] for q in open_ones] == ["tB:q1"]
    assert open_ones[0]["text"] == "Which login page?"
    assert open_ones[0]["posted_at"] == iso(5020)
    every = client.get("/api/questions").json()["questions"]
    assert [q["question_id"] for q in every] == ["tA:q1", "tA:q2", "tB:q1"]
    bad = client.get("/api/questions?status=pending")
    assert bad.status_code == 400 and bad.json()["parameter"] == "status"


def test_budget_of_today_per_mode_with_caps_and_remaining(client: TestClient) -> None:
    body = client.get("/api/budget").json()
    assert body["day"] == "2026-03-02"
    assert body["caps"] == {"daily_budget_usd": BUDGET_USD, "daily_token_cap": TOKEN_CAP}
    assert body["modes"]["api"] == {
        "spent_usd": 0.96875,
        "tokens": 541,
        "usd_cap": BUDGET_USD,
        "usd_remaining": BUDGET_USD - 0.96875,
        "token_cap": TOKEN_CAP,
        "tokens_remaining": TOKEN_CAP - 541,
    }
    assert body["modes"]["subscription"] == {
        "spent_usd": 1.0,
        "tokens": 1500,
        "usd_cap": None,
        "usd_remaining": None,
        "token_cap": TOKEN_CAP,
        "tokens_remaining": TOKEN_CAP - 1500,
    }
    rows = {(r["billing_mode"], r["stage"]): r for r in body["rows"]}
    assert set(rows) == {("api", "clarify"), ("api", "plan"), ("subscription", "build")}
    assert rows[("api", "plan")]["calls"] == 3
    assert rows[("api", "plan")]["usd_cost"] == 0.6875
    assert rows[("api", "clarify")]["input_tokens"] == 120


def test_budget_of_another_day_and_bad_days(client: TestClient) -> None:
    body = client.get("/api/budget?day=2026-03-01").json()
    assert [(r["stage"], r["usd_cost"]) for r in body["rows"]] == [("plan", 2.0)]
    assert body["modes"]["api"]["usd_remaining"] == BUDGET_USD - 2.0
    assert body["modes"]["subscription"]["tokens"] == 0
    for bad in ("2026-13-01", "20260301", "yesterday", "2026-03-01T00:00"):
        response = client.get("/api/budget", params={"day": bad})
        assert response.status_code == 400, bad
        assert response.json()["parameter"] == "day"


# --- writes -------------------------------------------------------------------------------


def test_submit_creates_a_task_and_its_start_command_and_wakes(
    client: TestClient, seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    response = client.post(
        "/api/tasks",
        json={"title": "  Add a greeting  ", "body": "To the README", "kind": "code"},
        headers=auth(),
    )
    assert response.status_code == 201
    task_id = response.json()["task_id"]
    assert response.headers["location"] == f"/api/task/{task_id}"
    assert coordinator.wake.is_set()
    conn = db.open_ledger(seeded.path)
    try:
        task = db.get_task(conn, task_id)
        commands = db.list_commands(conn, task_id=task_id)
    finally:
        conn.close()
    assert task is not None
    assert (task.title, task.body, task.kind, task.source) == (
        "Add a greeting",
        "To the README",
        "code",
        "dashboard",
    )
    assert [(c.kind, c.state) for c in commands] == [("start", "pending")]
    assert client.get(f"/api/task/{task_id}").json()["task"]["status"] == "queued"


def test_submit_defaults_to_a_code_task_with_an_empty_body(client: TestClient) -> None:
    response = client.post("/api/tasks", json={"title": "Only a title"}, headers=auth())
    assert response.status_code == 201
    report = client.get(f"/api/task/{response.json()['task_id']}").json()
    assert (report["task"]["kind"], report["task"]["body"]) == ("code", "")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"body": "no title"}, "title"),
        ({"title": "   "}, "title"),
        ({"title": 7}, "title"),
        ({"title": "x" * 301}, "title"),
        ({"title": "ok", "body": ["not", "text"]}, "body"),
        ({"title": "ok", "kind": "poem"}, "kind"),
        ({"title": "ok", "repo": 7}, "repo"),
        ({"title": "ok", "branch": "main"}, "branch"),
    ],
)
def test_submit_refuses_bad_fields_naming_them(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    response = client.post("/api/tasks", json=body, headers=auth())
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert response.json()["error"].startswith(f"{field}:")


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
def test_submit_refuses_a_body_that_is_not_a_json_object(client: TestClient, raw: bytes) -> None:
    response = client.post(
        "/api/tasks", content=raw, headers={**auth(), "Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]


def test_submit_refuses_an_oversized_body(client: TestClient) -> None:
    huge = {"title": "big", "body": "x" * 1_100_000}
    assert client.post("/api/tasks", json=huge, headers=auth()).status_code == 413


def test_a_confluence_task_is_refused_with_422(client: TestClient) -> None:
    response = client.post(
        "/api/tasks", json={"title": "Docs", "kind": "confluence"}, headers=auth()
    )
    assert response.status_code == 422
    assert "documentation lane" in response.json()["error"]


def test_writes_are_off_without_a_token(seeded: Seeded) -> None:
    ctx = DashboardContext(settings=make_settings(seeded.path, token=None), clock=lambda: NOW)
    with TestClient(create_app(ctx)) as client:
        for path, body in (
            ("/api/tasks", {"title": "x"}),
            ("/api/questions/tB:q1/answer", {"answer": "a", "name": "n"}),
        ):
            response = client.post(path, json=body, headers=auth())
            assert response.status_code == 403
            assert response.json() == {
                "error": "writes are disabled: set AGENT_TEAM_DASHBOARD_TOKENS "
                "(name:token,...) or start the daemon once with --demo"
            }


def test_a_blank_configured_token_also_disables_writes(seeded: Seeded) -> None:
    ctx = DashboardContext(settings=make_settings(seeded.path, token=""), clock=lambda: NOW)
    with TestClient(create_app(ctx)) as client:
        response = client.post(
            "/api/tasks", json={"title": "x"}, headers={"Authorization": "Bearer "}
        )
        assert response.status_code == 403


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": "Bearer ünïcode".encode()},  # a non-ASCII header must not crash
    ],
)
def test_a_missing_or_wrong_token_is_401_before_anything_else(
    client: TestClient, seeded: Seeded, headers: dict[str, Any]
) -> None:
    for path in ("/api/tasks", "/api/questions/tB:q1/answer"):
        response = client.post(path, content=b"{not json", headers=headers)
        assert response.status_code == 401, path
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in response.text
    conn = db.open_ledger(seeded.path)
    try:
        assert db.count_tasks(conn) == 4
        assert db.get_question(conn, "tB:q1").status == "open"  # type: ignore[union-attr]
    finally:
        conn.close()


def test_the_scheme_is_case_insensitive(client: TestClient) -> None:
    response = client.post(
        "/api/tasks", json={"title": "x"}, headers={"Authorization": f"bearer {TOKEN}"}
    )
    assert response.status_code == 201


def test_answer_records_it_with_the_dashboard_as_via_and_wakes(
    client: TestClient, seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    response = client.post(
        "/api/questions/tB:q1/answer",
        json={"answer": "  The one at /login  ", "name": "alice"},
        headers=auth(),
    )
    assert response.status_code == 200
    question = response.json()["question"]
    assert question["status"] == "answered"
    assert question["answered_via"] == "dashboard:alice"
    (audit,) = db.list_audit(coordinator.ledger, action="answer")
    assert (audit.actor, audit.via) == ("alice", "dashboard")
    assert question["answered_at"] == db.to_iso(NOW)
    assert question["answer"] == {"text": "The one at /login"}
    assert coordinator.wake.is_set()
    conn = db.open_ledger(seeded.path)
    try:
        resume = db.get_command(conn, db.resume_command_id("tB:q1"))
    finally:
        conn.close()
    assert resume is not None and resume.state == "pending"


def test_an_answer_outside_the_grammar_is_422_with_the_grammar(
    client: TestClient, seeded: Seeded
) -> None:
    conn = db.open_ledger(seeded.path)
    try:
        db.ensure_question(
            conn,
            question_id="tB:q2",
            thread_id="tB",
            turn=2,
            kind="plan_decision",
            transport="local",
            deadline_at=at(90_000),
            payload_json='{"text": "Review"}',
        )
    finally:
        conn.close()
    response = client.post(
        "/api/questions/tB:q2/answer", json={"answer": "maybe", "name": "bob"}, headers=auth()
    )
    assert response.status_code == 422
    assert "approve [comment]" in response.json()["error"]
    assert response.json()["accepted"] == PLAN_DECISION_HELP
    assert client.get("/api/questions?status=open").json()["questions"][-1]["question_id"] == (
        "tB:q2"
    )


def test_answering_a_closed_question_is_409(client: TestClient) -> None:
    response = client.post(
        "/api/questions/tA:q1/answer", json={"answer": "approve", "name": "bob"}, headers=auth()
    )
    assert response.status_code == 409
    assert "already answered by cli:alice" in response.json()["error"]


def test_answering_an_unknown_question_is_404(client: TestClient) -> None:
    response = client.post(
        "/api/questions/zz:q9/answer", json={"answer": "approve", "name": "bob"}, headers=auth()
    )
    assert response.status_code == 404
    assert "zz:q9" in response.json()["error"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "alice"}, "answer"),
        ({"answer": "   ", "name": "alice"}, "answer"),
        ({"answer": 42, "name": "alice"}, "answer"),
        ({"answer": "yes"}, "name"),
        ({"answer": "yes", "name": " "}, "name"),
        ({"answer": "yes", "name": "al\nice"}, "name"),
        ({"answer": "yes", "name": "a" * 101}, "name"),
        ({"answer": "yes", "name": "alice", "via": "slack:U1"}, "via"),
    ],
)
def test_bad_answer_fields_are_400_naming_them(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    response = client.post("/api/questions/tB:q1/answer", json=body, headers=auth())
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_an_unexpected_error_is_a_bare_500_and_is_logged(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"token {TOKEN} in a message")

    monkeypatch.setattr(reports, "task_report", explode)
    with caplog.at_level(logging.ERROR, logger="agent_team.dashboard.api"):
        response = client.get("/api/task/tA")
    assert response.status_code == 500
    assert response.json() == {"error": "internal error"}
    assert TOKEN not in response.text and "Traceback" not in response.text
    assert any(record.exc_info for record in caplog.records)


def test_a_missing_ledger_is_503_not_a_traceback(tmp_path: Path) -> None:
    ctx = DashboardContext(settings=make_settings(tmp_path / "absent.db"), clock=lambda: NOW)
    with TestClient(create_app(ctx)) as client:
        response = client.get("/api/tasks")
    assert response.status_code == 503
    assert "absent.db" not in response.text
    assert not (tmp_path / "absent.db").exists(), "a read must never create the ledger"


# --- health and metrics -------------------------------------------------------------------


def test_healthz_is_200_when_the_ledger_reads_and_loops_live(
    client: TestClient, ctx: DashboardContext
) -> None:
    ctx.health.started("worker")
    ctx.health.set_fact("intake_polls", 3)
    ctx.health.set_fact("last_poll", at(60))
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["db"]["ok"] is True
    assert body["db"]["schema_version"] == db.SCHEMA_VERSION
    assert [loop["name"] for loop in body["loops"]] == ["worker"]
    assert body["loops"][0]["alive"] is True
    assert body["facts"] == {"intake_polls": 3, "last_poll": at(60).isoformat()}


def test_a_dead_loop_leaves_healthz_live_and_readyz_not_ready(
    client: TestClient, ctx: DashboardContext
) -> None:
    ctx.health.started("worker")
    ctx.health.started("x")
    ctx.health.died("x", "boom")
    response = client.get("/healthz")
    assert response.status_code == 200  # liveness: the process serves
    body = response.json()
    assert body["status"] == "degraded"
    assert body["db"]["ok"] is True
    loops = {loop["name"]: loop for loop in body["loops"]}
    assert loops["x"]["alive"] is False
    assert loops["x"]["last_error"] == "boom"
    assert loops["x"]["restarts"] == 0
    assert loops["worker"]["alive"] is True
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["reasons"] == ["the x loop is not running: boom"]
    ctx.health.started("x")
    assert client.get("/readyz").status_code == 200


def test_without_a_ledger_healthz_is_live_and_readyz_says_why(tmp_path: Path) -> None:
    ctx = DashboardContext(settings=make_settings(tmp_path / "absent.db"), clock=lambda: NOW)
    with TestClient(create_app(ctx)) as client:
        response = client.get("/healthz")
        ready = client.get("/readyz")
    assert response.status_code == 200 and response.json()["status"] == "degraded"
    assert response.json()["db"]["ok"] is False
    assert response.json()["db"]["schema_version"] is None
    assert ready.status_code == 503
    (reason,) = ready.json()["reasons"]
    assert reason.startswith("the ledger cannot be read") and "absent.db" not in reason


def test_a_refused_write_makes_readyz_503_until_a_write_succeeds(
    client: TestClient, coordinator: FakeCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client.get("/readyz").json() == {
        "status": "ready",
        "reasons": [],
        "last_write_failure": None,
    }
    real_write = coordinator.ledger._write  # type: ignore[attr-defined]

    def disk_full(work: Any, *, flush: bool) -> Any:
        raise storage_error(sqlite3.OperationalError("database or disk is full"), Path("/x/l.db"))

    monkeypatch.setattr(coordinator.ledger, "_write", disk_full)
    submit = client.post("/api/tasks", json={"title": "lost?"}, headers=auth())
    assert submit.status_code == 503
    ready = client.get("/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert body["status"] == "not ready"
    assert "disk is full" in body["last_write_failure"]["error"]
    assert "refused the last write" in body["reasons"][0]
    metrics = client.get("/metrics").text
    assert "agent_team_ledger_writable 0.0" in metrics
    assert "agent_team_ledger_write_failures_total 1.0" in metrics

    monkeypatch.setattr(coordinator.ledger, "_write", real_write)  # the disk has room again
    assert client.post("/api/tasks", json={"title": "kept"}, headers=auth()).status_code == 201
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert "disk is full" in ready.json()["last_write_failure"]["error"]  # still on record
    assert "agent_team_ledger_writable 1.0" in client.get("/metrics").text


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_read_the_ledger_at_scrape_time(client: TestClient, ctx: DashboardContext) -> None:
    ctx.health.set_fact("intake_polls", 12)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    found = samples(response.text)
    assert found[("agent_team_ledger_up", ())] == 1
    for status, count in {
        "done": 1,
        "waiting": 1,
        "queued": 1,
        "failed": 1,
        "running": 0,
        "parked": 0,
        "cancelled": 0,
    }.items():
        assert found[("agent_team_tasks", (("status", status),))] == count, status
    assert found[("agent_team_open_questions", ())] == 1
    assert found[("agent_team_oldest_open_question_age_seconds", ())] == 7200 - 5020
    assert found[("agent_team_budget_spent_usd", (("billing_mode", "api"),))] == 0.96875
    assert found[("agent_team_budget_spent_usd", (("billing_mode", "subscription"),))] == 1.0
    assert found[("agent_team_budget_spent_tokens", (("billing_mode", "api"),))] == 541
    assert found[("agent_team_budget_spent_tokens", (("billing_mode", "subscription"),))] == 1500
    assert found[("agent_team_intake_polls_total", ())] == 12
    assert found[("agent_team_intake_not_modified_total", ())] == 0


def test_metrics_show_instances_leases_takeovers_and_wakeups(
    client: TestClient, coordinator: FakeCoordinator
) -> None:
    ledger = coordinator.ledger
    me, other = coordinator.instance, "host-b:77:20260302T100000.000000Z"
    for task, owner in (("t1", me), ("t2", me), ("t3", other)):
        live = db.acquire_lease(ledger, name=f"task:{task}", owner=owner, lease_s=60, now=NOW)
        assert live is not None
    lapsed = db.acquire_lease(ledger, name="task:t4", owner=other, lease_s=60, now=at(0))
    assert lapsed is not None
    assert db.acquire_lease(ledger, name="task:t4", owner=me, lease_s=60, now=NOW)  # took over
    coordinator.wakeups = 7
    coordinator.held = ["timers"]
    refused = db.fence_counters.refused

    found = samples(client.get("/metrics").text)

    assert found[("agent_team_instance", (("instance", me),))] == 1
    assert found[("agent_team_running_tasks", (("instance", me),))] == 3
    assert found[("agent_team_running_tasks", (("instance", other),))] == 1
    assert found[("agent_team_lease_takeovers_total", (("kind", "task"),))] == 1
    assert found[("agent_team_lease_takeovers_total", (("kind", "loop"),))] == 0
    assert found[("agent_team_command_wakeups_total", ())] == 7
    assert found[("agent_team_singleton_loop_held", (("loop", "timers"),))] == 1
    assert found[("agent_team_fenced_writes_refused_total", ())] == refused


def test_answer_to_resume_latency_is_a_cumulative_histogram(client: TestClient) -> None:
    found = samples(client.get("/metrics").text)
    name = "agent_team_answer_resume_seconds"
    # Seeded latencies: 31 s and 94 s.
    assert found[(f"{name}_bucket", (("le", "30.0"),))] == 0
    assert found[(f"{name}_bucket", (("le", "60.0"),))] == 1
    assert found[(f"{name}_bucket", (("le", "120.0"),))] == 2
    assert found[(f"{name}_bucket", (("le", "+Inf"),))] == 2
    assert found[(f"{name}_count", ())] == 2
    assert found[(f"{name}_sum", ())] == 125


def test_metrics_follow_new_writes_without_a_restart(client: TestClient, seeded: Seeded) -> None:
    conn = db.open_ledger(seeded.path)
    try:
        db.create_task(conn, task_id="tE", kind="code", title="New")
    finally:
        conn.close()
    found = samples(client.get("/metrics").text)
    assert found[("agent_team_tasks", (("status", "queued"),))] == 2


def test_each_app_has_its_own_registry(seeded: Seeded, tmp_path: Path) -> None:
    """Two apps in one process: no duplicate-registration error, each reads its own ledger."""
    other = DashboardContext(settings=make_settings(tmp_path / "absent.db"), clock=lambda: NOW)
    mine = DashboardContext(settings=make_settings(seeded.path), clock=lambda: NOW)
    with TestClient(create_app(other)) as a, TestClient(create_app(mine)) as b:
        assert samples(a.get("/metrics").text)[("agent_team_ledger_up", ())] == 0
        assert samples(b.get("/metrics").text)[("agent_team_ledger_up", ())] == 1


# --- a real server ------------------------------------------------------------------------


@pytest.fixture
def live_server(ctx: DashboardContext) -> Iterator[str]:
    """The app under uvicorn on 127.0.0.1, on a port the OS picks."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(ctx), log_level="warning", lifespan="off", ws="none", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        # join() returns early if the server thread dies; a deadline bounds the wait.
        thread.join(timeout=0.01)
        assert thread.is_alive(), "uvicorn exited before it started"
        assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"


def test_a_real_server_serves_reads_and_writes(live_server: str) -> None:
    with httpx.Client(base_url=live_server, timeout=10) as http:
        health = http.get("/healthz")
        assert health.status_code == 200 and health.json()["db"]["ok"] is True
        assert [t["id"] for t in http.get("/api/tasks?limit=1").json()["tasks"]] == ["tC"]
        created = http.post("/api/tasks", json={"title": "Over TCP"}, headers=auth())
        assert created.status_code == 201
        task_id = created.json()["task_id"]
        assert http.get(f"/api/task/{task_id}").json()["task"]["title"] == "Over TCP"
        assert http.post("/api/tasks", json={"title": "x"}).status_code == 401
        metrics = http.get("/metrics")
        assert samples(metrics.text)[("agent_team_tasks", (("status", "queued"),))] == 2


# --- bad input is a 4xx naming the field, never a 500 ----------------------------------------


def _nested(depth: int) -> bytes:
    return b'{"title": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize("depth", [40, 1_000, 100_000])
def test_deeply_nested_json_is_a_400_on_every_body(
    client: TestClient, seeded: Seeded, depth: int
) -> None:
    before = client.get("/api/tasks").json()["total"]
    for path in ("/api/tasks", "/api/questions/tB:q1/answer"):
        response = client.post(
            path, content=_nested(depth), headers={**auth(), "Content-Type": "application/json"}
        )
        assert response.status_code == 400, (path, response.text)
        assert "nested too deeply" in response.json()["error"]
    assert client.get("/api/tasks").json()["total"] == before


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"title": "bad \\ud800 title"}', "title"),
        (b'{"title": "ok", "body": "x \\udfff"}', "body"),
        (b'{"title": "ok", "\\ud83d": 1}', None),
    ],
)
def test_text_that_cannot_be_utf_8_is_refused_naming_its_field(
    client: TestClient, raw: bytes, field: str | None
) -> None:
    before = client.get("/api/tasks").json()["total"]
    response = client.post(
        "/api/tasks", content=raw, headers={**auth(), "Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert "unpaired surrogate" in response.json()["error"]
    if field is not None:
        assert response.json()["field"] == field
    assert client.get("/api/tasks").json()["total"] == before


@pytest.mark.parametrize(
    "query", ["offset=9223372036854775808", "offset=1" + "0" * 30, "limit=99999999999999999999"]
)
def test_huge_integers_are_a_400_naming_the_parameter(client: TestClient, query: str) -> None:
    response = client.get(f"/api/tasks?{query}")
    assert response.status_code == 400
    assert response.json()["parameter"] == query.split("=")[0]


@pytest.mark.parametrize(
    ("repo", "says"),
    [
        ("file://x", "file: URLs are not taken"),
        ("ssh://h/x", "write it as git@host:owner/name.git"),
        ("https://user:pw@h/o/n", "user name or password"),
        ("/no/such/clone", "cannot be named here"),
        ("/etc", "cannot be named here"),  # a folder of the daemon's machine: not from here
    ],
)
def test_submit_refuses_a_repository_it_cannot_take_with_422(
    client: TestClient, repo: str, says: str
) -> None:
    before = client.get("/api/tasks", headers=auth()).json()
    response = client.post("/api/tasks", json={"title": "ok", "repo": repo}, headers=auth())
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "repo"
    assert response.json()["error"].startswith("repo: ") and says in response.json()["error"]
    assert "pw@" not in response.text
    assert client.get("/api/tasks", headers=auth()).json() == before


def test_submit_takes_a_url_or_owner_name(client: TestClient) -> None:
    for repo in ("https://git.example/acme/widgets.git", "acme/widgets"):
        response = client.post("/api/tasks", json={"title": "ok", "repo": repo}, headers=auth())
        assert response.status_code == 201, response.text
