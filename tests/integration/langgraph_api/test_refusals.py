"""Bad input, missing keys and foreign origins: a 4xx in the server's shape, nothing stored.

Every case checks the ledger afterwards: the question still open with no
answer, no resume command, no audit row; nothing a refused request sent
can have changed what a person later sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.service.daemon import Daemon
from agent_team.service.doctor import run_checks
from tests.integration.langgraph_api.conftest import (
    ADA_KEY,
    INBOX_ORIGIN,
    Live,
    api_settings,
)

RESUME = {"assistant_id": "agent-team", "command": {"resume": [{"type": "accept", "args": None}]}}


def unchanged(live: Live, question: db.Question) -> None:
    """The question is as it was asked: open, unanswered, no resume queued, nothing audited."""
    now = db.get_question(live.conn, question.question_id)
    assert now is not None and now.status == "open" and now.answer_json is None
    assert db.list_audit(live.conn, target=question.question_id) == []
    commands = [c for c in db.list_commands(live.conn) if c.kind == "resume"]
    assert commands == []


@pytest.fixture
def asked(live: Live) -> tuple[Live, str, db.Question]:
    task_id = live.submit(clarify=False)
    return live, task_id, live.open_question(task_id)


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"x-api-key": "not-a-token"}, 401), ({"authorization": f"Bearer {ADA_KEY}"}, 401)],
)
def test_no_or_a_wrong_key_is_refused_for_reads_and_writes(
    asked: tuple[Live, str, db.Question], headers: dict[str, str], status: int
) -> None:
    live, task_id, question = asked
    calls = [
        ("POST", "threads/search", {}),
        ("GET", f"threads/{task_id}", None),
        ("GET", f"threads/{task_id}/state", None),
        ("POST", f"threads/{task_id}/runs", RESUME),
        ("POST", f"threads/{task_id}/runs/wait", RESUME),
        ("POST", f"threads/{task_id}/runs/stream", RESUME),
        ("POST", f"threads/{task_id}/state", {"values": None, "as_node": "__end__"}),
    ]
    for method, path, body in calls:
        response = live.http.request(method, path, json=body, headers=headers)
        assert response.status_code == status, (path, response.text)
        assert set(response.json()) == {"detail"}
        assert ADA_KEY not in response.text
    unchanged(live, question)
    assert live.task(task_id).status == "waiting"


BAD_RUNS: list[tuple[str, Any, int, str]] = [
    ("no command", {"assistant_id": "agent-team"}, 422, "command"),
    ("command not an object", {"command": "approve"}, 422, "command"),
    ("command without resume", {"command": {"goto": "build"}}, 422, "command"),
    ("update smuggled in", {"command": {"resume": "approve", "update": {"a": 1}}}, 422, "only"),
    ("new input", {"input": {"title": "x"}, "command": {"resume": "approve"}}, 422, "input"),
    ("unknown field", {"command": {"resume": "approve"}, "surprise": 1}, 422, "surprise"),
    ("unknown response type", {"command": {"resume": [{"type": "yolo"}]}}, 422, "resume"),
    ("two responses", {"command": {"resume": [{"type": "accept"}, {"type": "ignore"}]}},
     422, "one"),
    ("not in the grammar", {"command": {"resume": "maybe later"}}, 422, "plan decision"),
    ("response without text", {"command": {"resume": [{"type": "response"}]}}, 422, "response"),
    ("edit of nothing", {"command": {"resume": [{"type": "edit", "args": 3}]}}, 422, "edit"),
    ("edit without steps", {"command": {"resume": [{"type": "edit", "args": {"summary": "s"}}]}},
     422, "steps"),
    ("another interrupt id", {"command": {"resume": {"t-other:q1": "approve"}}}, 409, "not the"),
    ("another assistant", {"assistant_id": "other", "command": {"resume": "approve"}}, 422,
     "Invalid assistant ID"),
    ("stream mode not a list", {"command": {"resume": "approve"}, "stream_mode": 3}, 422, "stream"),
]  # fmt: skip


@pytest.mark.parametrize(("why", "body", "status", "says"), BAD_RUNS, ids=[b[0] for b in BAD_RUNS])
@pytest.mark.parametrize("endpoint", ["runs", "runs/wait", "runs/stream"])
def test_malformed_runs_are_refused_and_store_nothing(
    asked: tuple[Live, str, db.Question],
    endpoint: str,
    why: str,
    body: Any,
    status: int,
    says: str,
) -> None:
    live, task_id, question = asked
    response = live.http.post(f"threads/{task_id}/{endpoint}", json=body, headers=live.key())
    assert response.status_code == status, response.text
    assert says in response.json()["detail"], response.text
    unchanged(live, question)


def test_bodies_that_are_not_json_objects_are_refused(asked: tuple[Live, str, db.Question]) -> None:
    live, task_id, question = asked
    path = f"threads/{task_id}/runs"
    cases: list[tuple[dict[str, Any], int]] = [
        ({"content": b"{", "headers": {"content-type": "application/json"}}, 400),
        ({"content": b"[1, 2]", "headers": {"content-type": "application/json"}}, 400),
        (
            {"content": b"a=b", "headers": {"content-type": "application/x-www-form-urlencoded"}},
            415,
        ),
        (
            {"content": b"[" * 5000 + b"]" * 5000, "headers": {"content-type": "application/json"}},
            400,
        ),
        ({"content": b"x" * 5_000_000, "headers": {"content-type": "application/json"}}, 413),
    ]
    for request, status in cases:
        headers = {**request["headers"], **live.key()}
        response = live.http.post(path, content=request["content"], headers=headers)
        assert response.status_code == status, response.text
        assert "detail" in response.json()
    unchanged(live, question)


def test_unknown_threads_and_paths_get_404_in_the_servers_shape(live: Live) -> None:
    for method, path, body in [
        ("GET", "threads/t-missing", None),
        ("GET", "threads/t-missing/state", None),
        ("POST", "threads/t-missing/runs", RESUME),
        ("POST", "threads/t-missing/state", {"values": None, "as_node": "__end__"}),
        ("GET", "assistants/agent-team", None),
        ("POST", "threads", {}),
        ("GET", "threads/t-missing/history", None),
        ("DELETE", "threads/t-missing", None),
    ]:
        response = live.http.request(method, path, json=body, headers=live.key())
        assert response.status_code in (404, 405), (path, response.text)
        assert set(response.json()) == {"detail"}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"status": "sleeping"}, "status"),
        ({"limit": 0}, "limit"),
        ({"limit": 10**30}, "limit"),
        ({"offset": -1}, "offset"),
        ({"sort_by": "title"}, "sort_by"),
        ({"ids": "t1"}, "ids"),
        ({"values": {"secret_field": "x"}}, "values"),
        ({"metadata": []}, "metadata"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_searches_are_refused(live: Live, body: dict[str, Any], says: str) -> None:
    response = live.http.post("threads/search", json=body, headers=live.key())
    assert response.status_code == 422, response.text
    assert says in response.json()["detail"]


def test_update_state_other_than_resolving_is_refused(asked: tuple[Live, str, db.Question]) -> None:
    live, task_id, question = asked
    for body in ({"values": {"plan": "mine"}}, {"values": {"a": 1}, "as_node": "__end__"}):
        response = live.http.post(f"threads/{task_id}/state", json=body, headers=live.key())
        assert response.status_code == 422, response.text
    unchanged(live, question)
    assert live.task(task_id).status == "waiting"


def test_cors_preflight_only_for_listed_origins(live: Live) -> None:
    asked = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "x-api-key, content-type",
    }
    ok = live.http.options("threads/search", headers={"Origin": INBOX_ORIGIN, **asked})
    assert ok.status_code == 204
    assert ok.headers["access-control-allow-origin"] == INBOX_ORIGIN
    assert "POST" in ok.headers["access-control-allow-methods"]
    assert "x-api-key" in ok.headers["access-control-allow-headers"]
    assert "access-control-allow-credentials" not in ok.headers

    other = live.http.options("threads/search", headers={"Origin": "https://evil.example", **asked})
    assert other.status_code == 403
    assert "access-control-allow-origin" not in other.headers

    odd = {**asked, "Access-Control-Request-Headers": "x-api-key, x-unheard-of"}
    assert (
        live.http.options("threads/search", headers={"Origin": INBOX_ORIGIN, **odd}).status_code
        == 400
    )

    read = live.http.post("threads/search", json={}, headers={"Origin": INBOX_ORIGIN, **live.key()})
    assert read.headers["access-control-allow-origin"] == INBOX_ORIGIN
    foreign = live.http.post(
        "threads/search", json={}, headers={"Origin": "https://evil.example", **live.key()}
    )
    assert "access-control-allow-origin" not in foreign.headers


def test_the_stream_carries_cors_headers_too(asked: tuple[Live, str, db.Question]) -> None:
    live, task_id, _ = asked
    with live.http.stream(
        "POST",
        f"threads/{task_id}/runs/stream",
        json={"command": {"resume": "approve"}},
        headers={"Origin": INBOX_ORIGIN, **live.key()},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["access-control-allow-origin"] == INBOX_ORIGIN
        text = "".join(response.iter_text())
    assert text.startswith("event: metadata\n")


def test_info_needs_no_key_and_says_what_this_is(live: Live) -> None:
    info = live.http.get("info")
    assert info.status_code == 200
    assert info.json()["host"]["project_id"] is None
    assert info.json()["flags"]["assistants"] is False


def test_a_private_network_preflight_is_allowed_for_a_listed_origin(live: Live) -> None:
    asked = {
        "Origin": INBOX_ORIGIN,
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Private-Network": "true",
    }
    allowed = live.http.options("threads/t1", headers=asked)
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-private-network"] == "true"
    refused = live.http.options("threads/t1", headers={**asked, "Origin": "https://evil.example"})
    assert "access-control-allow-private-network" not in refused.headers


def test_errors_carry_cors_headers_for_a_listed_origin(live: Live) -> None:
    missing = live.http.get("threads/t-missing", headers={"Origin": INBOX_ORIGIN, **live.key()})
    assert missing.status_code == 404
    assert missing.headers["access-control-allow-origin"] == INBOX_ORIGIN  # not "failed to fetch"


def test_the_host_check_applies(live: Live) -> None:
    response = live.http.post(
        "threads/search", json={}, headers={"Host": "rebound.example", **live.key()}
    )
    assert response.status_code == 400


def test_off_by_default_nothing_is_mounted(tmp_path: Path) -> None:
    settings = load_settings(
        db_path=tmp_path / "agent-team.db",
        state_dir=tmp_path / "state",
        dashboard_port=0,
        dashboard_tokens=f"ada:{ADA_KEY}",
    )
    assert settings.langgraph_api is False
    daemon = Daemon(settings)
    try:
        assert not [i for i in daemon.integrations if i.name == "langgraph_api"]
        assert not [r for r in daemon.routes if getattr(r, "path", "") == "/langgraph"]
    finally:
        daemon.close()


def test_doctor_says_whether_it_is_usable(tmp_path: Path) -> None:
    def result(**overrides: Any) -> Any:
        settings = api_settings(tmp_path, **overrides)
        [found] = [r for r in run_checks(settings) if r.name == "langgraph api"]
        return found

    on = result()
    assert on.ok and "/langgraph" in on.detail and INBOX_ORIGIN in on.detail
    no_tokens = result(dashboard_tokens=None)
    assert not no_tokens.ok and "x-api-key" in no_tokens.detail
    off = result(langgraph_api=False)
    assert off.ok and off.detail.startswith("off")


def test_bad_origin_settings_are_refused(tmp_path: Path) -> None:
    from agent_team.exceptions import ConfigError

    for bad in ("*", "https://inbox.example/path", "inbox.example"):
        with pytest.raises(ConfigError) as refused:
            api_settings(tmp_path, langgraph_api_origins=bad)
        assert "LANGGRAPH_API_ORIGINS" in str(refused.value)
