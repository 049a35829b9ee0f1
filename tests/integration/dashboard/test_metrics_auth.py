"""`/metrics` behind a bearer token when asked (`AGENT_TEAM_METRICS_AUTH`); the new settings."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from agent_team.config import load_settings
from agent_team.dashboard import DashboardContext, create_app
from agent_team.exceptions import ConfigError
from tests.integration.dashboard.conftest import NOW, TOKEN, Seeded, auth, make_settings


def _client(seeded: Seeded, **overrides: Any) -> TestClient:
    ctx = DashboardContext(settings=make_settings(seeded.path, **overrides), clock=lambda: NOW)
    return TestClient(create_app(ctx))


def test_token_needs_a_bearer_token(seeded: Seeded) -> None:
    with _client(seeded, metrics_auth="token") as client:
        missing = client.get("/metrics")
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert "Authorization: Bearer" in missing.json()["error"]
        assert "agent_team_" not in missing.text
        wrong = client.get("/metrics", headers=auth("not-the-token"))
        assert wrong.status_code == 401 and "not-the-token" not in wrong.text
        served = client.get("/metrics", headers=auth(TOKEN))
        assert served.status_code == 200
        assert "agent_team_tasks" in served.text


def test_a_session_is_not_enough(seeded: Seeded) -> None:
    """Monitors send a bearer token; a browser's cookie never opens /metrics."""
    with _client(seeded, metrics_auth="token") as client:
        client.cookies.set("agent_team_session", "anything")
        assert client.get("/metrics").status_code == 401


def test_token_without_any_token_configured_says_how_to_fix_it(seeded: Seeded) -> None:
    with _client(seeded, metrics_auth="token", token=None) as client:
        response = client.get("/metrics", headers=auth("anything"))
    assert response.status_code == 403
    assert "AGENT_TEAM_DASHBOARD_TOKENS" in response.json()["error"]


@pytest.mark.parametrize(
    ("host", "setting", "need_token"),
    [
        ("127.0.0.1", None, False),
        ("::1", None, False),
        ("localhost", None, False),
        ("0.0.0.0", None, True),
        ("10.1.2.3", None, True),
        ("0.0.0.0", "open", False),
        ("127.0.0.1", "token", True),
    ],
)
def test_auto_is_open_on_loopback_only(host: str, setting: str | None, need_token: bool) -> None:
    chosen: dict[str, Any] = {"metrics_auth": setting} if setting else {}
    assert load_settings(dashboard_host=host, **chosen).metrics_need_token is need_token


def test_auto_off_loopback_serves_with_a_token_only(seeded: Seeded) -> None:
    with _client(seeded, dashboard_host="0.0.0.0", dashboard_hosts="testserver") as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers=auth(TOKEN)).status_code == 200


def test_auto_on_loopback_stays_open(seeded: Seeded) -> None:
    with _client(seeded) as client:
        assert client.get("/metrics").status_code == 200


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("AGENT_TEAM_METRICS_AUTH", "sometimes"),
        ("AGENT_TEAM_LIMIT_WRITES_PER_MIN", "-1"),
        ("AGENT_TEAM_LIMIT_LOGINS_PER_MIN", "lots"),
        ("AGENT_TEAM_ACCESS_LOG", "maybe"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert variable in str(info.value) and "\n" not in str(info.value)


def test_the_defaults_are_what_a_team_never_hits_by_hand() -> None:
    settings = load_settings()
    assert (settings.limit_writes_per_min, settings.limit_logins_per_min) == (120, 20)
    assert settings.access_log is True and settings.metrics_auth == "auto"
