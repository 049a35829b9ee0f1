"""Fixtures for the Confluence lane: a loopback Confluence and coordinators pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_team.config import load_settings
from agent_team.coordinator import Coordinator
from agent_team.service.wiring import build_coordinator
from tests.fakes import confluence_api as fc
from tests.integration.pipeline.conftest import Clock, RecordingTransport

FIXTURES = Path(__file__).parents[2] / "fixtures" / "adf"

MakeLaneCoordinator = Callable[..., Coordinator]


@pytest.fixture(autouse=True)
def _no_agent_team_env(isolated_env: Path) -> None:
    """Settings come from the test alone (see tests/conftest.py)."""


@pytest.fixture
def fake() -> Iterator[fc.FakeConfluence]:
    with fc.fake_confluence() as server:
        yield server


def lane_settings(fake: fc.FakeConfluence, **overrides: Any) -> dict[str, Any]:
    """Settings that turn the lane on against `fake` (Basic auth), dry-run unless overridden."""
    return {
        "confluence_enabled": True,
        "confluence_base_url": fake.base_url,
        "confluence_space_id": "1001",
        "confluence_email": fc.EMAIL,
        "confluence_api_token": fc.API_TOKEN,
        "confluence_retry_cap_s": 0.05,
        **overrides,
    }


@pytest.fixture
def make_lane(tmp_path: Path, fake: fc.FakeConfluence) -> Iterator[MakeLaneCoordinator]:
    """Factory: `make_lane(transport=..., **settings)`: a Coordinator with the lane on."""
    made: list[Coordinator] = []

    def make(*, transport: RecordingTransport | None = None, **overrides: Any) -> Coordinator:
        settings = load_settings(
            db_path=tmp_path / "agent-team.db",
            state_dir=tmp_path / "state",
            **lane_settings(fake, **overrides),
        )
        coordinator = build_coordinator(settings, transport=transport, clock=Clock())
        made.append(coordinator)
        return coordinator

    yield make
    for coordinator in made:
        coordinator.close()


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")
