"""A finished task's worktree is removed and its branch kept (real git, real folders)."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_team.builders import (
    BuildTask,
    CommandBuilder,
    prepare_worktree,
    remove_worktree,
    run_build,
)
from agent_team.builders.cleanup import REMOVED_DIR, FinishedWorktrees, sweep_removed
from agent_team.builders.worktree import task_lock
from tests.integration.builders.helpers import git, head, make_repo

PLAN = "# Plan\n\n1. Make a file.\n"


def _builder() -> CommandBuilder:
    return CommandBuilder("echo built > built.txt", timeout_s=30)


def _registry(repo: Path) -> list[str]:
    folder = repo / ".git" / "worktrees"
    return sorted(entry.name for entry in folder.iterdir()) if folder.is_dir() else []


def _worktrees(repo: Path) -> list[str]:
    """The worktree paths git knows of, the repository's own checkout first."""
    listing = git(repo, "worktree", "list", "--porcelain")
    lines = listing.splitlines()
    return [line.removeprefix("worktree ") for line in lines if line.startswith("worktree ")]


def test_a_finished_tasks_worktree_is_removed_and_its_branch_kept(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    result = run_build(_builder(), task, PLAN, repo_path=repo, state_dir=state_dir)
    path = state_dir / "worktrees" / "task-1"
    assert path.is_dir() and _registry(repo) == ["task-1"]

    assert remove_worktree(task.task_id, state_dir=state_dir) is True

    assert not path.exists()
    assert _registry(repo) == []
    assert _worktrees(repo) == [str(repo.resolve())]
    assert head(repo, "agent-team/task-1") == result.commit
    assert git(repo, "show", f"{result.commit}:built.txt") == "built"
    assert not any((state_dir / "worktrees" / REMOVED_DIR).iterdir())
    assert git(repo, "fsck", "--no-dangling") == ""


def test_removing_a_missing_worktree_is_a_no_op(task: BuildTask, state_dir: Path) -> None:
    assert remove_worktree(task.task_id, state_dir=state_dir) is False
    run_build(_builder(), task, PLAN, repo_path=None, state_dir=state_dir)

    assert remove_worktree(task.task_id, state_dir=state_dir) is True
    assert remove_worktree(task.task_id, state_dir=state_dir) is False


def test_a_task_built_again_after_the_removal_reuses_its_record(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "runs.txt"
    builder = CommandBuilder(f"echo run >> {counter}; echo built > built.txt", timeout_s=30)
    first = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)
    remove_worktree(task.task_id, state_dir=state_dir)

    again = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    assert counter.read_text().splitlines() == ["run"]
    assert again.reused and again.commit == first.commit
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    assert (wt.path / "built.txt").read_text() == "built\n"


def test_only_the_finished_tasks_worktree_goes(state_dir: Path) -> None:
    one, two = BuildTask("one", "one"), BuildTask("two", "two")
    for task in (one, two):
        run_build(_builder(), task, PLAN, repo_path=None, state_dir=state_dir)
    repo = state_dir / "repos" / "default"

    remove_worktree("one", state_dir=state_dir)

    assert _registry(repo) == ["two"]
    assert git(state_dir / "worktrees" / "two", "status", "--porcelain") == ""
    assert {b.strip("* +") for b in git(repo, "branch").splitlines()} >= {
        "agent-team/one",
        "agent-team/two",
    }


def test_a_worktree_being_built_is_left_alone(task: BuildTask, state_dir: Path) -> None:
    run_build(_builder(), task, PLAN, repo_path=None, state_dir=state_dir)

    with task_lock(state_dir, task.task_id):
        assert remove_worktree(task.task_id, state_dir=state_dir) is False

    assert (state_dir / "worktrees" / "task-1" / "built.txt").is_file()


def test_a_stray_folder_at_the_worktree_path_is_removed(task: BuildTask, state_dir: Path) -> None:
    stray = state_dir / "worktrees" / "task-1"
    stray.mkdir(parents=True)
    (stray / "junk.txt").write_text("junk\n")

    assert remove_worktree(task.task_id, state_dir=state_dir) is True

    assert not stray.exists()


def test_a_removal_killed_after_the_rename_is_finished_by_the_next_one(state_dir: Path) -> None:
    for task in (BuildTask("one", "one"), BuildTask("two", "two")):
        run_build(_builder(), task, PLAN, repo_path=None, state_dir=state_dir)
    repo = state_dir / "repos" / "default"
    # What a removal killed right after its first step leaves: the folder moved aside,
    # its registration still in place.
    leftover = state_dir / "worktrees" / REMOVED_DIR / "one.0123456789ab"
    leftover.parent.mkdir()
    (state_dir / "worktrees" / "one").rename(leftover)
    assert _registry(repo) == ["one", "two"]

    assert remove_worktree("two", state_dir=state_dir) is True

    assert not leftover.exists()
    assert _registry(repo) == []
    assert sweep_removed(state_dir) == 0


def test_a_leftover_registration_of_a_worktree_made_again_is_kept(
    task: BuildTask, state_dir: Path
) -> None:
    run_build(_builder(), task, PLAN, repo_path=None, state_dir=state_dir)
    repo = state_dir / "repos" / "default"
    leftover = state_dir / "worktrees" / REMOVED_DIR / "task-1.0123456789ab"
    leftover.parent.mkdir()
    shutil.copytree(state_dir / "worktrees" / "task-1", leftover)  # its .git names the live entry

    assert sweep_removed(state_dir) == 1

    assert not leftover.exists()
    assert _registry(repo) == ["task-1"], "the registration belongs to the live worktree"
    assert git(state_dir / "worktrees" / "task-1", "status", "--porcelain") == ""


def test_a_half_deleted_worktree_is_removed(task: BuildTask, state_dir: Path) -> None:
    run_build(_builder(), task, PLAN, repo_path=None, state_dir=state_dir)
    path = state_dir / "worktrees" / "task-1"
    (path / "built.txt").unlink()  # a deletion that stopped midway, its .git file still there

    assert remove_worktree(task.task_id, state_dir=state_dir) is True

    assert not path.exists() and _registry(state_dir / "repos" / "default") == []


# --- the observer -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    id: str


@pytest.mark.parametrize("event", ["done", "failed", "cancelled"])
def test_the_observer_removes_the_worktree_when_the_task_ends(
    task: BuildTask, state_dir: Path, event: str
) -> None:
    run_build(_builder(), task, PLAN, repo_path=None, state_dir=state_dir)
    observer = FinishedWorktrees(state_dir)

    for other in ("started", "waiting", "parked"):
        observer(_Task(task.task_id), other, "")
        assert (state_dir / "worktrees" / "task-1").is_dir(), other
    observer(_Task(task.task_id), event, "the end")

    assert not (state_dir / "worktrees" / "task-1").exists()
    assert git(state_dir / "repos" / "default", "branch", "--list", "agent-team/task-1")


def test_the_observer_never_raises(
    task: BuildTask, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state_dir = tmp_path / "state"
    run_build(_builder(), task, PLAN, repo_path=None, state_dir=state_dir)
    # The place leftovers are moved to is taken by a file: the rename fails.
    (state_dir / "worktrees" / REMOVED_DIR).write_text("in the way\n")

    with caplog.at_level(logging.WARNING, logger="agent_team.builders.cleanup"):
        FinishedWorktrees(state_dir)(_Task(task.task_id), "done", "")

    assert "could not remove the worktree of task task-1" in caplog.text
    assert (state_dir / "worktrees" / "task-1").is_dir()
