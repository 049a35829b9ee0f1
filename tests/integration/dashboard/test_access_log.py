"""The HTTP access log: one bounded, redacted line per request, never a query value."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agent_team.common.log_format import JsonFormatter, SafeFormatter
from agent_team.dashboard import DashboardContext, create_app
from agent_team.dashboard.access_log import ACCESS_LOGGER, flush
from tests.integration.dashboard.conftest import NOW, FakeCoordinator, Seeded, make_settings

ADA = "ada-token-0123456789"
SECRET = "SECRET-0123456789abcdef"
CLIENT = ("192.0.2.44", 51000)


@pytest.fixture(autouse=True)
def _info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)


def _client(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path, **overrides: Any
) -> TestClient:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ada:{ADA}\n", encoding="utf-8")
    settings = make_settings(seeded.path, token=None, dashboard_tokens_file=tokens, **overrides)
    ctx = DashboardContext(settings, coordinator=coordinator, clock=lambda: NOW)  # type: ignore[arg-type]
    return TestClient(create_app(ctx), client=CLIENT)


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    assert flush(10.0), "the access log's writer did not catch up"
    return [record for record in caplog.records if record.name == ACCESS_LOGGER]


def test_a_token_in_the_query_never_reaches_the_log(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _client(seeded, coordinator, tmp_path) as client:
        response = client.get(f"/api/tasks?status=done&token={SECRET}&access_token={SECRET}")
        assert response.status_code == 200
    (record,) = _lines(caplog)
    text = SafeFormatter().format(record)
    as_json = JsonFormatter().format(record)
    for shown in (record.getMessage(), text, as_json):
        assert SECRET not in shown
    assert "GET /api/tasks?status=*&token=*&access_token=* 200 " in text
    assert text.endswith(f"ms - {CLIENT[0]}")
    fields = json.loads(as_json)["http"]
    assert fields["path"] == "/api/tasks?status=*&token=*&access_token=*"
    assert (fields["method"], fields["status"], fields["who"], fields["client"]) == (
        "GET",
        200,
        "-",
        CLIENT[0],
    )
    assert isinstance(fields["duration_ms"], float) and fields["duration_ms"] >= 0


def test_a_line_names_who_and_never_their_key(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _client(seeded, coordinator, tmp_path) as client:
        made = client.post(
            "/api/tasks", json={"title": "logged"}, headers={"Authorization": f"Bearer {ADA}"}
        )
        assert made.status_code == 201
        refused = client.post(
            "/api/tasks", json={"title": "x"}, headers={"Authorization": "Bearer no"}
        )
        assert refused.status_code == 401
        client.get(f"/task/{ADA}")  # a key pasted into a path: hidden as a known secret
    lines = [SafeFormatter().format(record) for record in _lines(caplog)]
    assert len(lines) == 3
    assert " POST /api/tasks 201 " in lines[0] and lines[0].endswith(f"ms ada {CLIENT[0]}")
    assert " POST /api/tasks 401 " in lines[1] and lines[1].endswith(f"ms - {CLIENT[0]}")
    assert " GET /task/[redacted] 404 " in lines[2]
    assert not [line for line in lines if ADA in line]


def test_a_line_is_bounded_whatever_the_request(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    query = "&".join(f"{'n' * 100}{i}=v" for i in range(100))
    with _client(seeded, coordinator, tmp_path) as client:
        client.get("/api/" + "x" * 3000 + "?" + query)
    (record,) = _lines(caplog)
    message = record.getMessage()
    assert len(message) < 1500
    assert "(80 more)" in message and "=v" not in message


def test_credential_shaped_text_is_redacted_and_controls_escaped(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    github = "ghp_" + "a" * 36
    with _client(seeded, coordinator, tmp_path) as client:
        client.get(f"/task/{github}%0a2026-01-01 ERROR forged?{github}=1")
    (record,) = _lines(caplog)
    text = SafeFormatter().format(record)
    assert github not in text and "\n" not in text
    assert "\\n2026-01-01 ERROR forged" in text


def test_the_access_log_can_be_turned_off(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _client(seeded, coordinator, tmp_path, access_log=False) as client:
        assert client.get("/api/tasks?token=x").status_code == 200
    assert _lines(caplog) == []


def test_refusals_of_the_outer_layers_are_logged_too(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _client(seeded, coordinator, tmp_path, limit_writes_per_min=1) as client:
        client.get("/api/tasks", headers={"Host": "evil.example"})
        for _ in range(2):
            client.post("/api/tasks", json={"title": "x"})
    statuses = [record.http["status"] for record in _lines(caplog)]  # type: ignore[attr-defined]
    assert statuses == [400, 401, 429]
