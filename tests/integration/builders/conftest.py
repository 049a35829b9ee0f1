"""Fixtures for the builder tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_team.builders import BuildTask


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """The agent-team state folder (made on demand by the code under test)."""
    return tmp_path / "state"


@pytest.fixture
def task() -> BuildTask:
    """A task whose id needs no cleaning."""
    return BuildTask(task_id="task-1", title="Add a greeting", body="Say hello.")
