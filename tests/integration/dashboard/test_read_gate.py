"""AGENT_TEAM_DASHBOARD_READS: open on loopback by default, a sign-in for reading otherwise."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from agent_team.config import load_settings
from agent_team.dashboard import DashboardContext, create_app
from tests.integration.dashboard.conftest import NOW, TOKEN, Seeded, auth, make_settings, sign_in


def _client(seeded: Seeded, **overrides: object) -> TestClient:
    ctx = DashboardContext(settings=make_settings(seeded.path, **overrides), clock=lambda: NOW)
    return TestClient(create_app(ctx), follow_redirects=False)


@pytest.mark.parametrize(
    ("host", "reads", "need_token"),
    [
        ("127.0.0.1", None, False),
        ("localhost", None, False),
        ("::1", None, False),
        ("0.0.0.0", None, True),
        ("10.1.2.3", None, True),
        ("0.0.0.0", "open", False),
        ("127.0.0.1", "token", True),
    ],
)
def test_the_default_follows_the_bind_address(
    host: str, reads: str | None, need_token: bool
) -> None:
    settings = load_settings(dashboard_host=host, **({"dashboard_reads": reads} if reads else {}))
    assert settings.reads_need_token is need_token


@pytest.mark.parametrize(
    "path", ["/api/tasks", "/api/task/tA", "/api/budget", "/api/triage", "/api/daemons"]
)
def test_the_api_needs_a_token_to_read(seeded: Seeded, path: str) -> None:
    with _client(seeded, dashboard_reads="token") as client:
        refused = client.get(path)
        assert refused.status_code == 401
        assert "tA" not in refused.text and refused.headers["www-authenticate"].startswith("Bearer")
        assert client.get(path, headers=auth("wrong")).status_code == 401
        assert client.get(path, headers=auth()).status_code == 200


@pytest.mark.parametrize("path", ["/", "/task/tA", "/inbox", "/automations"])
def test_a_page_sends_to_the_sign_in_and_back(seeded: Seeded, path: str) -> None:
    with _client(seeded, dashboard_reads="token") as client:
        response = client.get(path + "?x=1")
        assert response.status_code == 303
        assert response.headers["location"].startswith("/login?next=")
        assert "Remember" not in response.text
        sign_in(client, TOKEN, next_path=path)
        assert client.get(path).status_code == 200


@pytest.mark.parametrize(
    "path", ["/healthz", "/readyz", "/metrics", "/login", "/static/dashboard.css"]
)
def test_what_monitors_and_the_sign_in_need_stays_open(seeded: Seeded, path: str) -> None:
    with _client(seeded, dashboard_reads="token") as client:
        assert client.get(path).status_code in (200, 503)


def test_reads_stay_open_on_loopback_by_default(seeded: Seeded) -> None:
    with _client(seeded) as client:
        assert client.get("/api/tasks").status_code == 200
        assert client.get("/").status_code == 200


def test_token_reads_without_any_token_configured_say_how_to_fix_it(seeded: Seeded) -> None:
    with _client(seeded, dashboard_reads="token", token=None) as client:
        response = client.get("/api/tasks")
    assert response.status_code == 403
    assert "AGENT_TEAM_DASHBOARD_TOKENS" in response.json()["error"]
