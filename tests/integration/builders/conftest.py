"""Fixtures for the builder tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_team.builders import BuildTask, gitcmd
from agent_team.builders.proc import Completed
from tests.integration.builders.helpers import git_words


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """The agent-team state folder (made on demand by the code under test)."""
    return tmp_path / "state"


@pytest.fixture
def task() -> BuildTask:
    """A task whose id needs no cleaning."""
    return BuildTask(task_id="task-1", title="Add a greeting", body="Say hello.")


class GitCalls:
    """Every git command the builders run, as `git_words` lists, and a hook run before each."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.before: Callable[[list[str]], None] | None = None

    def take(self) -> list[list[str]]:
        """The calls so far; the record starts again empty."""
        taken, self.calls = self.calls, []
        return taken


@pytest.fixture
def git_calls(monkeypatch: pytest.MonkeyPatch) -> GitCalls:
    """Records the git commands of `agent_team.builders.gitcmd` (builders' own commands not)."""
    seen = GitCalls()
    real = gitcmd.run_process

    def recording(argv: Any, **kwargs: Any) -> Completed:
        words = git_words(list(argv))
        seen.calls.append(words)
        if seen.before is not None:
            seen.before(words)
        return real(argv, **kwargs)

    monkeypatch.setattr(gitcmd, "run_process", recording)
    return seen
