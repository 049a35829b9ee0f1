"""DNS rebinding: the daemon answers only to Host names it knows, reads included."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from agent_team.config import load_settings
from agent_team.dashboard import DashboardContext, create_app
from agent_team.exceptions import ConfigError
from tests.integration.dashboard.conftest import NOW, Seeded, make_settings


def _client(seeded: Seeded, **overrides: object) -> TestClient:
    ctx = DashboardContext(settings=make_settings(seeded.path, **overrides), clock=lambda: NOW)
    return TestClient(create_app(ctx), base_url="http://localhost")


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8765", "127.0.0.1:8765", "[::1]:8765", "127.0.0.1"]
)
def test_loopback_names_are_answered(seeded: Seeded, host: str) -> None:
    with _client(seeded) as client:
        response = client.get("/api/tasks", headers={"Host": host})
    assert response.status_code == 200
    assert response.json()["tasks"]


@pytest.mark.parametrize("path", ["/api/tasks", "/api/task/tA", "/", "/task/tA", "/metrics"])
def test_a_rebinding_name_reads_nothing(seeded: Seeded, path: str) -> None:
    with _client(seeded) as client:
        response = client.get(path, headers={"Host": "attacker.example:8765"})
    assert response.status_code == 400
    assert "tA" not in response.text and "Remember" not in response.text


def test_the_public_url_and_configured_names_are_answered(seeded: Seeded) -> None:
    with _client(
        seeded,
        dashboard_url="https://team.example/agent",
        dashboard_hosts="agent.internal,*.corp.example",
    ) as client:
        for host in ("team.example", "agent.internal:8765", "ci.corp.example"):
            assert client.get("/healthz", headers={"Host": host}).status_code == 200, host
        for host in ("example", "corp.example.evil", "team.example.evil"):
            assert client.get("/healthz", headers={"Host": host}).status_code == 400, host


@pytest.mark.parametrize("value", ["http://x.example", "x.example:80", "a b", "x/y"])
def test_a_malformed_host_setting_stops_the_start_naming_it(value: str) -> None:
    with pytest.raises(ConfigError, match="AGENT_TEAM_DASHBOARD_HOSTS"):
        load_settings(dashboard_hosts=value)
