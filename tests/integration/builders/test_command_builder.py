"""The command builder: a real shell command in the worktree."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent_team.builders import (
    BuildTask,
    CommandBuilder,
    find_build,
    plan_hash,
    prepare_worktree,
    run_build,
)
from agent_team.exceptions import BuildError
from tests.integration.builders.helpers import changed_files, git, is_gone, wait_until_gone

PLAN = "# Plan\n\nWrite seen.txt.\n"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2


def test_the_command_sees_the_plan_the_task_and_the_parent_environment(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUILD_TEST_PARENT", "from-parent")
    monkeypatch.setenv("AGENT_TEAM_TEST_SETTING", "daemon-only")
    task = BuildTask(task_id="gh:org/repo#7", title="Greet 'everyone'")
    command = (
        'cat "$AGENT_TEAM_PLAN_FILE" > seen.txt; '
        'printf "%s|%s|%s|%s|%s\\n" "$AGENT_TEAM_TASK_ID" "$AGENT_TEAM_TASK_TITLE" '
        '"$BUILD_TEST_PARENT" "${AGENT_TEAM_TEST_SETTING:-unset}" "$AGENT_TEAM_PLAN_FILE" '
        ">> seen.txt"
    )

    result = run_build(CommandBuilder(command, 30), task, PLAN, repo_path=None, state_dir=state_dir)

    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    seen = (wt.path / "seen.txt").read_text().splitlines()
    assert "\n".join(seen[:-1]) == PLAN.strip()
    assert seen[-1] == (
        f"gh:org/repo#7|Greet 'everyone'|from-parent|unset|{wt.path / '.agent-team' / 'plan.md'}"
    )
    assert changed_files(wt.path, result.commit) == ["seen.txt"]
    assert not (wt.path / ".agent-team").exists()
    assert git(wt.path, "status", "--porcelain") == ""


def test_output_is_kept_redacted_in_the_result(task: BuildTask, state_dir: Path) -> None:
    command = f"echo to-stdout; echo to-stderr >&2; echo token={TOKEN}"

    result = run_build(CommandBuilder(command, 30), task, PLAN, repo_path=None, state_dir=state_dir)

    assert "to-stdout" in result.output and "to-stderr" in result.output
    assert TOKEN not in result.output and "token=[redacted]" in result.output
    assert result.builder == "command" and not result.reused


def test_a_failing_command_raises_with_its_redacted_output(
    task: BuildTask, state_dir: Path
) -> None:
    command = f"echo compiling; echo 'push failed for https://x:{TOKEN}@github.com' >&2; exit 7"

    with pytest.raises(BuildError) as caught:
        run_build(CommandBuilder(command, 30), task, PLAN, repo_path=None, state_dir=state_dir)

    message = str(caught.value)
    assert "exited with code 7" in message
    assert "compiling" in message and "push failed" in message
    assert TOKEN not in message and "[redacted]" in message
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    assert find_build(wt, plan_hash(PLAN)) is None


def test_a_command_past_its_deadline_is_killed_with_its_children(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "sleep.pid"
    command = f"echo started; sleep 30 & echo $! > {pid_file}; wait"
    started = time.monotonic()

    with pytest.raises(BuildError, match=r"timed out after 1 s") as caught:
        run_build(CommandBuilder(command, 1), task, PLAN, repo_path=None, state_dir=state_dir)

    assert time.monotonic() - started < 10
    assert "started" in str(caught.value)
    sleeper = int(pid_file.read_text())
    assert wait_until_gone(sleeper), f"sleep {sleeper} outlived the timeout"
    assert is_gone(sleeper)
