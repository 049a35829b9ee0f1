"""run_build: a plan is built once per task, and the record survives crashes."""

from __future__ import annotations

import shlex
import shutil
import threading
from pathlib import Path

import pytest

from agent_team.builders import (
    Builder,
    BuildResult,
    BuildTask,
    CommandBuilder,
    OfflineBuilder,
    Worktree,
    plan_hash,
    prepare_worktree,
    run_build,
)
from agent_team.builders.worktree import record_build
from agent_team.exceptions import BuildError
from tests.integration.builders.conftest import GitCalls
from tests.integration.builders.helpers import changed_files, git, head, make_repo

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


def test_a_task_id_named_like_a_lock_of_the_repository_does_not_deadlock(
    state_dir: Path,
) -> None:
    # Task locks are `locks/<key>.lock`; the repository locks must never share their names.
    for task_id in ("default-repo", "repos", "default"):
        task = BuildTask(task_id, task_id)

        result = run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=state_dir)

        assert result.branch == f"agent-team/{task_id}" and not result.reused


class _ForgetfulBuilder:
    """A builder that changes files but does not record them (not using record_build)."""

    name = "forgetful"

    def __init__(self) -> None:
        self.calls = 0

    def run(self, task: BuildTask, plan_markdown: str, worktree: Worktree) -> BuildResult:
        self.calls += 1
        (worktree.path / "made.txt").write_text("made\n")
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


class _PathRecordingBuilder:
    """A builder written against the older interface: it records with the worktree's path."""

    name = "by-path"

    def __init__(self) -> None:
        self.calls = 0

    def run(self, task: BuildTask, plan_markdown: str, worktree: Worktree) -> BuildResult:
        self.calls += 1
        (worktree.path / "made.txt").write_text("made\n")
        return record_build(task, worktree.path, plan_markdown, builder=self.name, summary="made")


def test_a_builder_recording_by_path_is_recorded_once(task: BuildTask, state_dir: Path) -> None:
    builder = _PathRecordingBuilder()

    result = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)
    again = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    assert builder.calls == 1
    assert head(wt.path) == result.commit, "run_build committed a second record"
    assert changed_files(wt.path, result.commit) == ["made.txt"]
    assert again.reused and again.commit == result.commit


# --- how many git processes a build costs --------------------------------------------------------

# What a build runs once its repository is known to the process. In a checkout: a new task
# `worktree add`, `log` (no record yet), `add` and `commit`; a build found after a crash `reset`,
# `clean`, `log`; a changed plan in a healthy worktree `reset`, `clean`, `log`, `add`, `commit`.
# Without one (the offline builder): a new task `cat-file` (the branch is missing: no record to
# look for) and `fast-import`; a found build `cat-file`, `log`; a changed plan all three.
GIT_CALLS = {"checkout": (4, 3, 5), "plumbing": (2, 2, 3)}
FRESH_BUILD_GIT_CALLS = GIT_CALLS["checkout"][0]


def _builder_for(path: str) -> Builder:
    return OfflineBuilder() if path == "plumbing" else CommandBuilder("true", timeout_s=30)


@pytest.mark.parametrize("path", ["checkout", "plumbing"])
def test_git_calls_per_build_stay_few_and_flat(
    state_dir: Path, git_calls: GitCalls, path: str
) -> None:
    builder = _builder_for(path)
    fresh_calls, reused_calls, rebuild_calls = GIT_CALLS[path]

    def build(task_id: str, plan: str = PLAN) -> list[list[str]]:
        run_build(builder, BuildTask(task_id, task_id), plan, repo_path=None, state_dir=state_dir)
        return git_calls.take()

    # The first build in a repository also checks it (here: creates it) and runs `gc --auto`.
    first = build("first")
    assert len(first) <= 10, first
    assert ["gc", "--auto", "--quiet"] in first
    # Enough tasks that a cost growing with their number would show.
    fresh = [build(f"t{n}") for n in range(20)]
    reused = build("t0")
    rebuilt = build("t0", PLAN + "2. More.\n")

    assert max(len(calls) for calls in fresh) <= fresh_calls, fresh[-1]
    assert len(reused) <= reused_calls, reused
    assert len(rebuilt) <= rebuild_calls, rebuilt
    commands = {" ".join(call[:2]) for calls in [*fresh, reused, rebuilt] for call in calls}
    assert not {"worktree list", "worktree prune"} & commands, commands
    if path == "plumbing":
        assert not {c for c in commands if c.startswith("worktree")}, commands


@pytest.mark.parametrize("path", ["checkout", "plumbing"])
def test_a_configured_repository_is_checked_once_per_process(
    state_dir: Path, tmp_path: Path, git_calls: GitCalls, path: str
) -> None:
    repo = make_repo(tmp_path / "repo")
    builder = _builder_for(path)
    run_build(builder, BuildTask("first", "first"), PLAN, repo_path=repo, state_dir=state_dir)
    git_calls.take()

    run_build(builder, BuildTask("second", "second"), PLAN, repo_path=repo, state_dir=state_dir)

    assert len(git_calls.take()) <= GIT_CALLS[path][0]
