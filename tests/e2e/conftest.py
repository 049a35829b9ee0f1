"""Drive agent-team as a person would: the real `agent-team` console script in subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

AGENT_TEAM = Path(sys.executable).with_name("agent-team")


@dataclass
class Cli:
    """Runs `agent-team` against one ledger and state folder, with a clean environment."""

    home: Path
    env: dict[str, str]

    @property
    def db_path(self) -> Path:
        return self.home / "agent-team.db"

    def run(
        self, *args: str, check: bool = True, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(extra_env or {})}
        result = subprocess.run(
            [str(AGENT_TEAM), "--db", str(self.db_path), *args],
            cwd=self.home,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"agent-team {' '.join(args)} exited {result.returncode}\n"
                f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
            )
        return result

    def submit(self, title: str, body: str, **env: str) -> str:
        return self.run("submit", "--title", title, "--body", body, extra_env=env).stdout.strip()

    def tick(self, **env: str) -> subprocess.CompletedProcess[str]:
        return self.run("tick", "--until-idle", "--timeout", "60", extra_env=env)

    def show(self, task_id: str) -> dict[str, Any]:
        report: dict[str, Any] = json.loads(self.run("show", task_id, "--json").stdout)
        return report

    def open_question(self, task_id: str) -> dict[str, Any]:
        open_ones = [q for q in self.show(task_id)["questions"] if q["status"] == "open"]
        assert len(open_ones) == 1, open_ones
        return open_ones[0]

    def answer(
        self, question_id: str, text: str, *, check: bool = True, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return self.run("answer", question_id, text, "--as", "tester", check=check, extra_env=env)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    from tests.e2e.daemon_process import clean_env  # it imports this module

    env = clean_env()  # builds unsandboxed, as everywhere but the sandbox's own tests
    env["AGENT_TEAM_STATE_DIR"] = str(tmp_path / "state")
    env["AGENT_TEAM_LOG_LEVEL"] = "warning"
    return Cli(home=tmp_path, env=env)


LONG_BODY = (
    "The login page should remember the user's email address between visits.\n"
    "- Store the email in a cookie after a successful login\n"
    "- Prefill the email field when the cookie is present\n"
    "- Add a test that covers both paths\n"
)
SHORT_BODY = "Make login nicer."
