"""run_build: a plan is built once per task, and the record survives crashes."""

from __future__ import annotations

import shlex
import shutil
import threading
from pathlib import Path

import pytest

from agent_team.builders import (
    BuildResult,
    BuildTask,
    CommandBuilder,
    OfflineBuilder,
    plan_hash,
    prepare_worktree,
    run_build,
)
from agent_team.exceptions import BuildError
from tests.integration.builders.helpers import changed_files, git, head

PLAN = "# Plan\n\n1. Say hello.\n"


def _counting_builder(counter: Path, extra: str = "") -> CommandBuilder:
    """A command builder that appends a line to `counter` (outside the worktree) per run."""
    command = f"echo run >> {shlex.quote(str(counter))}; date +%N > built.txt{extra}"
    return CommandBuilder(command, timeout_s=30)


def _runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_offline_builder_writes_the_plan_and_commits_it(task: BuildTask, state_dir: Path) -> None:
    result = run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=state_dir)

    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    document = wt.path / "docs" / "agent-team" / "task-1.md"
    assert document.read_text().startswith("# Plan: Add a greeting\n")
    assert "1. Say hello." in document.read_text()
    assert changed_files(wt.path, result.commit) == ["docs/agent-team/task-1.md"]
    assert head(wt.path) == result.commit
    assert (result.builder, result.branch, result.reused) == ("offline", wt.branch, False)
    assert result.plan_hash == plan_hash(PLAN)
    assert git(wt.path, "status", "--porcelain") == ""


def test_offline_builder_is_deterministic(task: BuildTask, tmp_path: Path) -> None:
    trees = []
    for name in ("a", "b"):
        result = run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=tmp_path / name)
        wt = prepare_worktree(task, repo_path=None, state_dir=tmp_path / name)
        trees.append(git(wt.path, "rev-parse", f"{result.commit}^{{tree}}"))

    assert trees[0] == trees[1]


def test_the_same_plan_is_built_once_and_a_changed_plan_again(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "runs.txt"
    builder = _counting_builder(counter)

    first = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)
    # A crash after the build, before the graph checkpointed: the node runs again.
    again = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    assert _runs(counter) == 1
    assert (again.reused, again.commit, again.builder) == (True, first.commit, "command")
    assert again.summary == first.summary

    changed = run_build(builder, task, PLAN + "2. Wave.\n", repo_path=None, state_dir=state_dir)

    assert _runs(counter) == 2
    assert not changed.reused and changed.commit != first.commit
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    assert git(wt.path, "rev-parse", f"{changed.commit}^") == first.commit


def test_the_record_survives_a_deleted_worktree(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "runs.txt"
    first = run_build(_counting_builder(counter), task, PLAN, repo_path=None, state_dir=state_dir)
    shutil.rmtree(state_dir / "worktrees" / "task-1")

    again = run_build(_counting_builder(counter), task, PLAN, repo_path=None, state_dir=state_dir)

    assert _runs(counter) == 1
    assert again.reused and again.commit == first.commit


def test_a_failed_build_records_nothing_and_runs_again(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "runs.txt"
    # Fails on its first run, works on the second.
    builder = _counting_builder(counter, f"; [ $(wc -l < {shlex.quote(str(counter))}) -ge 2 ]")

    with pytest.raises(BuildError, match="exited with code 1"):
        run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)
    result = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    assert _runs(counter) == 2
    assert not result.reused


def test_two_concurrent_builds_of_one_task_run_the_builder_once(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    counter = tmp_path / "runs.txt"
    builder = _counting_builder(counter)
    results: list[BuildResult] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            results.append(run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert _runs(counter) == 1
    assert len({r.commit for r in results}) == 1
    assert sorted(r.reused for r in results) == [False, True]


class _ForgetfulBuilder:
    """A builder that changes files but does not record them (not using record_build)."""

    name = "forgetful"

    def __init__(self) -> None:
        self.calls = 0

    def run(self, task: BuildTask, plan_markdown: str, worktree: Path) -> BuildResult:
        self.calls += 1
        (worktree / "made.txt").write_text("made\n")
        return BuildResult(
            builder=self.name,
            branch="",
            commit="",
            summary="made a file",
            plan_hash="",
        )


def test_run_build_records_for_a_builder_that_did_not(task: BuildTask, state_dir: Path) -> None:
    builder = _ForgetfulBuilder()

    result = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)
    again = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    assert builder.calls == 1
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    assert changed_files(wt.path, result.commit) == ["made.txt"]
    assert (result.plan_hash, result.branch) == (plan_hash(PLAN), wt.branch)
    assert again.reused and again.commit == result.commit and again.builder == "forgetful"
