"""A repository that cannot be resolved is refused at submit, by the CLI as by the automations.

Run as the installed console script: one line, exit 2, nothing stored. No
network is touched at submit (a remote is only fetched by its build).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_team import db
from tests.integration.test_cli import assert_one_line_error, run_cli

REFUSED = [
    ("file://x", "file: URLs are not taken"),
    ("ssh://h/x", "write it as git@host:owner/name.git"),
    ("https://user:pw@h/o/n", "user name or password"),
    ("missing/clone/here", "is not a folder here"),
]
BODY = "Look at the open dependency bumps and merge the safe ones, with a test run for each."


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    return path


def cli(tmp_path: Path, ledger_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, env={"AGENT_TEAM_DB_PATH": str(ledger_path)})


def stored(path: Path) -> tuple[int, int, int]:
    with db.open_ledger(path) as ledger:
        return (
            len(db.list_tasks(ledger, limit=100)),
            len(db.list_automations(ledger)),
            len(db.list_audit(ledger, limit=100)),
        )


@pytest.mark.parametrize(("repo", "says"), REFUSED)
def test_submit_refuses_in_one_line_with_exit_2(
    tmp_path: Path, ledger_path: Path, repo: str, says: str
) -> None:
    result = cli(tmp_path, ledger_path, "submit", "--title", "T", "--repo", repo)

    line = assert_one_line_error(result, 2)
    assert says in line, line
    assert "pw@" not in line
    assert stored(ledger_path) == (0, 0, 0)


@pytest.mark.parametrize(("repo", "says"), REFUSED)
def test_automation_add_refuses_in_one_line_with_exit_2(
    tmp_path: Path, ledger_path: Path, repo: str, says: str
) -> None:
    args = ("automation", "add", "bumps", "--title", "T", "--body", BODY, "--every", "1h")
    result = cli(tmp_path, ledger_path, *args, "--repo", repo)

    line = assert_one_line_error(result, 2)
    assert line.startswith("agent-team: repo: ") and says in line, line
    assert stored(ledger_path) == (0, 0, 0)


def test_submit_stores_owner_name_as_given_and_a_relative_path_absolute(
    tmp_path: Path, ledger_path: Path
) -> None:
    (tmp_path / "clone").mkdir()
    by_name = cli(tmp_path, ledger_path, "submit", "--title", "A", "--repo", "acme/widgets")
    by_path = cli(tmp_path, ledger_path, "submit", "--title", "B", "--repo", "clone")
    assert by_name.returncode == 0 and by_path.returncode == 0, by_name.stderr + by_path.stderr
    with db.open_ledger(ledger_path) as ledger:
        repos = {
            task_id: command.payload.get("repo")
            for task_id in (by_name.stdout.strip(), by_path.stdout.strip())
            if (command := db.get_command(ledger, f"start:{task_id}")) is not None
        }
    assert repos == {
        by_name.stdout.strip(): "acme/widgets",
        by_path.stdout.strip(): str((tmp_path / "clone").resolve()),
    }
