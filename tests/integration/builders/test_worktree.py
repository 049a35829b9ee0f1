"""prepare_worktree, find_build and commit_all against real git repositories."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent_team.builders import (
    BuildTask,
    OfflineBuilder,
    commit_all,
    find_build,
    plan_hash,
    prepare_worktree,
    run_build,
    task_key,
)
from agent_team.builders.worktree import AUTHOR_EMAIL, SCRATCH_DIR
from agent_team.exceptions import BuildError
from tests.integration.builders.helpers import changed_files, git, head, make_repo

PLAN = "# Plan\n\n1. Add hello.txt\n"


def _branch_of(worktree: Path) -> str:
    return git(worktree, "symbolic-ref", "--short", "HEAD")


# --- which repository ---------------------------------------------------------------------------


def test_default_repo_is_created_under_state_dir(task: BuildTask, state_dir: Path) -> None:
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)

    assert wt.repo == (state_dir / "repos" / "default").resolve()
    assert (wt.repo / ".git").is_dir()
    assert git(wt.repo, "log", "-1", "--format=%an <%ae>") == f"agent-team <{AUTHOR_EMAIL}>"
    assert wt.path == (state_dir / "worktrees" / "task-1").resolve()
    assert wt.branch == "agent-team/task-1"
    assert _branch_of(wt.path) == "agent-team/task-1"
    assert head(wt.path) == head(wt.repo, "main")


def test_default_repo_first_commit_is_the_same_everywhere(task: BuildTask, tmp_path: Path) -> None:
    one = prepare_worktree(task, repo_path=None, state_dir=tmp_path / "a")
    two = prepare_worktree(task, repo_path=None, state_dir=tmp_path / "b")

    assert head(one.repo, "main") == head(two.repo, "main")


def test_task_repo_wins_over_repo_path(state_dir: Path, tmp_path: Path) -> None:
    task_repo = make_repo(tmp_path / "task-repo", files={"a.txt": "a\n"})
    configured = make_repo(tmp_path / "configured", files={"b.txt": "b\n"})

    mine = prepare_worktree(
        BuildTask("t-own", "own repo", repo=task_repo), repo_path=configured, state_dir=state_dir
    )
    other = prepare_worktree(
        BuildTask("t-default", "configured repo"), repo_path=configured, state_dir=state_dir
    )

    assert mine.repo == task_repo.resolve()
    assert (mine.path / "a.txt").is_file() and not (mine.path / "b.txt").exists()
    assert other.repo == configured.resolve()
    assert (other.path / "b.txt").is_file()
    assert not (state_dir / "repos").exists()


def test_a_folder_that_is_no_repository_is_refused(state_dir: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    inside = make_repo(tmp_path / "outer") / "sub"
    inside.mkdir()

    for path in (plain, inside):
        with pytest.raises(BuildError, match="is not a git repository"):
            prepare_worktree(BuildTask("t", "x"), repo_path=path, state_dir=state_dir)
    with pytest.raises(BuildError, match="does not exist"):
        prepare_worktree(BuildTask("t", "x"), repo_path=tmp_path / "nope", state_dir=state_dir)


def test_a_repository_without_commits_is_refused(state_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")

    with pytest.raises(BuildError, match="no commits"):
        prepare_worktree(BuildTask("t", "x", repo=empty), repo_path=None, state_dir=state_dir)


# --- idempotence and crash leftovers ------------------------------------------------------------


def test_preparing_twice_reuses_the_worktree_and_drops_leftovers(
    task: BuildTask, state_dir: Path
) -> None:
    first = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    (first.path / "kept.txt").write_text("kept\n")
    recorded = commit_all(first, "agent-team: kept", plan_hash(PLAN))
    # A killed builder run leaves changes it never recorded.
    (first.path / "kept.txt").write_text("half-written\n")
    (first.path / "stray.txt").write_text("stray\n")

    second = prepare_worktree(task, repo_path=None, state_dir=state_dir)

    assert second == first
    assert head(second.path) == recorded
    assert (second.path / "kept.txt").read_text() == "kept\n"
    assert not (second.path / "stray.txt").exists()
    assert git(second.path, "status", "--porcelain") == ""


def test_a_deleted_worktree_folder_is_made_again_on_the_same_branch(
    task: BuildTask, state_dir: Path
) -> None:
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    recorded = commit_all(wt, "agent-team: record", plan_hash(PLAN))
    shutil.rmtree(wt.path)

    again = prepare_worktree(task, repo_path=None, state_dir=state_dir)

    assert again.path == wt.path and again.path.is_dir()
    assert head(again.path) == recorded
    found = find_build(again, plan_hash(PLAN))
    assert found is not None and found.commit == recorded


def test_an_existing_branch_is_checked_out_not_reset(tmp_path: Path, state_dir: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "branch", "agent-team/task-1")
    git(repo, "checkout", "-q", "agent-team/task-1")
    (repo / "earlier.txt").write_text("earlier build\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "earlier")
    earlier = head(repo)
    git(repo, "checkout", "-q", "main")

    wt = prepare_worktree(BuildTask("task-1", "t"), repo_path=repo, state_dir=state_dir)

    assert head(wt.path) == earlier != head(repo, "main")
    assert (wt.path / "earlier.txt").is_file()


def test_a_worktree_add_killed_midway_is_made_again(task: BuildTask, state_dir: Path) -> None:
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    # What `git worktree add` leaves when killed during checkout: the worktree
    # is registered and still locked "initializing", and files are missing.
    git(wt.repo, "worktree", "lock", "--reason", "initializing", str(wt.path))
    for child in wt.path.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    (wt.path / "partial.tmp").write_text("x")

    again = prepare_worktree(task, repo_path=None, state_dir=state_dir)

    assert "locked" not in git(again.repo, "worktree", "list", "--porcelain")
    assert not (again.path / "partial.tmp").exists()
    assert git(again.path, "status", "--porcelain") == ""
    assert _branch_of(again.path) == again.branch


# What `git worktree add` has written when killed, in its order: the registry entry,
# its "initializing" lock, the back-pointer, the worktree's `.git` file, HEAD and commondir
# (then the checkout, see the test above).
ADD_STEPS = ["entry", "locked", "gitdir", "dot-git", "head"]


@pytest.mark.parametrize("steps", range(1, len(ADD_STEPS) + 1), ids=ADD_STEPS)
def test_a_worktree_add_killed_at_any_step_is_repaired_and_keeps_the_record(
    task: BuildTask, state_dir: Path, steps: int
) -> None:
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    recorded = commit_all(wt, "agent-team: record", plan_hash(PLAN))
    registry = wt.repo / ".git" / "worktrees"
    shutil.rmtree(wt.path)
    shutil.rmtree(registry / wt.key)
    done = set(ADD_STEPS[:steps])
    (registry / wt.key).mkdir()
    if "locked" in done:
        (registry / wt.key / "locked").write_text("initializing")
    if "gitdir" in done:
        (registry / wt.key / "gitdir").write_text(f"{wt.path / '.git'}\n")
    if "dot-git" in done:
        wt.path.mkdir()
        (wt.path / ".git").write_text(f"gitdir: {registry / wt.key}\n")
    if "head" in done:
        (registry / wt.key / "HEAD").write_text(f"ref: refs/heads/{wt.branch}\n")
        (registry / wt.key / "commondir").write_text("../..\n")

    again = prepare_worktree(task, repo_path=None, state_dir=state_dir)

    assert again == wt
    assert head(again.path) == recorded
    assert git(again.path, "status", "--porcelain") == ""
    assert sorted(entry.name for entry in registry.iterdir()) == [wt.key]
    assert "locked" not in git(again.repo, "worktree", "list", "--porcelain")
    found = find_build(again, plan_hash(PLAN))
    assert found is not None and found.commit == recorded


def test_a_copy_of_another_tasks_worktree_is_not_taken_for_the_tasks_own(
    state_dir: Path,
) -> None:
    one = prepare_worktree(BuildTask("one", "one"), repo_path=None, state_dir=state_dir)
    commit_all(one, "agent-team: one", plan_hash(PLAN))
    # Its `.git` file names task one's registry entry, which points back to task one.
    shutil.copytree(one.path, state_dir / "worktrees" / "two")

    two = prepare_worktree(BuildTask("two", "two"), repo_path=None, state_dir=state_dir)

    assert _branch_of(two.path) == "agent-team/two"
    assert head(two.path) == head(two.repo, "main")
    assert _branch_of(one.path) == "agent-team/one"
    assert git(one.path, "status", "--porcelain") == ""


def test_a_stray_folder_at_the_worktree_path_is_replaced(task: BuildTask, state_dir: Path) -> None:
    stray = state_dir / "worktrees" / "task-1"
    stray.mkdir(parents=True)
    (stray / "junk.txt").write_text("junk\n")

    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)

    assert wt.path == stray.resolve()
    assert not (wt.path / "junk.txt").exists()
    assert _branch_of(wt.path) == wt.branch


def test_stale_git_lock_files_of_a_killed_commit_are_cleared(
    task: BuildTask, state_dir: Path
) -> None:
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    git_dir = Path(git(wt.path, "rev-parse", "--absolute-git-dir"))
    (git_dir / "index.lock").write_text("")
    branch_lock = wt.repo / ".git" / "refs" / "heads" / f"{wt.branch}.lock"
    branch_lock.write_text("")

    again = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    (again.path / "f.txt").write_text("f\n")
    sha = commit_all(again, "agent-team: after a crash", plan_hash(PLAN))

    assert head(again.path) == sha
    assert not branch_lock.exists()


def test_a_branch_lock_of_a_killed_worktree_add_is_cleared(state_dir: Path) -> None:
    other = prepare_worktree(BuildTask("other", "o"), repo_path=None, state_dir=state_dir)
    # `git worktree add -b` runs `git branch`; killed with it, that leaves the ref locked.
    branch_lock = other.repo / ".git" / "refs" / "heads" / "agent-team" / "task-1.lock"
    branch_lock.write_text("")

    wt = prepare_worktree(BuildTask("task-1", "t"), repo_path=None, state_dir=state_dir)
    sha = commit_all(wt, "agent-team: after a crash", plan_hash(PLAN))

    assert head(wt.path) == sha
    assert not branch_lock.exists()


def test_unsafe_task_ids_stay_inside_the_state_folder(state_dir: Path) -> None:
    task = BuildTask(task_id="../../etc/passwd #1 @{x}..lock", title="evil")

    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)

    assert wt.path.parent == (state_dir / "worktrees").resolve()
    assert wt.path.name == task_key(task.task_id)
    assert git(wt.repo, "check-ref-format", f"refs/heads/{wt.branch}") == ""
    assert _branch_of(wt.path) == wt.branch


# --- records ------------------------------------------------------------------------------------


def test_commit_all_commits_changes_but_not_the_scratch_folder(
    task: BuildTask, state_dir: Path
) -> None:
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    (wt.path / "hello.txt").write_text("hello\n")
    (wt.path / SCRATCH_DIR).mkdir()
    (wt.path / SCRATCH_DIR / "plan.md").write_text(PLAN)

    sha = commit_all(wt, "agent-team: hello\n\nAdded hello.", plan_hash(PLAN))

    assert changed_files(wt.path, sha) == ["hello.txt"]
    trailers = git(wt.path, "log", "-1", "--format=%(trailers:only,unfold)", sha)
    assert f"Agent-Team-Plan: {plan_hash(PLAN)}" in trailers
    assert "Agent-Team-Task: task-1" in trailers
    assert git(wt.path, "log", "-1", "--format=%ae %ce", sha) == f"{AUTHOR_EMAIL} {AUTHOR_EMAIL}"


def test_commit_all_records_even_when_nothing_changed(task: BuildTask, state_dir: Path) -> None:
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    before = head(wt.path)

    sha = commit_all(wt, "agent-team: nothing to do", plan_hash(PLAN))

    assert sha != before
    assert git(wt.path, "rev-parse", f"{sha}^") == before
    assert changed_files(wt.path, sha) == []


def test_commit_all_ignores_the_repositorys_hooks(tmp_path: Path, state_dir: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    wt = prepare_worktree(BuildTask("t", "t"), repo_path=repo, state_dir=state_dir)

    sha = commit_all(wt, "agent-team: despite hooks", plan_hash(PLAN))

    assert head(wt.path) == sha


def test_find_build_matches_plan_task_and_author(tmp_path: Path, state_dir: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    wt = prepare_worktree(BuildTask("task-1", "t"), repo_path=repo, state_dir=state_dir)
    digest = plan_hash(PLAN)
    assert find_build(wt, digest) is None

    # Someone else's commit that copies our trailers is not a record of ours.
    git(
        wt.path,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        f"fake\n\nAgent-Team-Task: task-1\nAgent-Team-Plan: {digest}",
    )
    assert find_build(wt, digest) is None

    sha = commit_all(wt, "agent-team: t\n\nthe summary\n\n---\n\nmore", digest)
    found = find_build(wt, digest)
    assert found is not None
    assert (found.commit, found.reused, found.plan_hash) == (sha, True, digest)
    assert found.summary == "the summary\n\n---\n\nmore"
    assert find_build(wt, plan_hash("another plan")) is None


def test_another_tasks_merged_record_is_not_reused(tmp_path: Path, state_dir: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = prepare_worktree(BuildTask("task-a", "a"), repo_path=repo, state_dir=state_dir)
    digest = plan_hash(PLAN)
    commit_all(first, "agent-team: a", digest)
    git(repo, "merge", "-q", "--ff-only", first.branch)

    second = prepare_worktree(BuildTask("task-b", "b"), repo_path=repo, state_dir=state_dir)

    assert find_build(first, digest) is not None
    assert find_build(second, digest) is None


# --- git's housekeeping -------------------------------------------------------------------------


def _packs(repo: Path) -> int:
    return len(list((repo / ".git" / "objects" / "pack").glob("*.pack")))


def test_commits_do_not_start_gc_and_run_build_runs_it(tmp_path: Path, state_dir: Path) -> None:
    # gc prunes worktrees, so only run_build may start it (under the repository's lock).
    repo = make_repo(tmp_path / "repo")
    for setting in ("gc.autoPackLimit=1", "gc.autoDetach=false", "maintenance.autoDetach=false"):
        git(repo, "config", *setting.split("="))
    git(repo, "repack", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    git(repo, "repack", "-q")
    assert _packs(repo) == 2  # more than gc.autoPackLimit: `gc --auto` has work to do
    wt = prepare_worktree(BuildTask("t", "t"), repo_path=repo, state_dir=state_dir)

    commit_all(wt, "agent-team: a record", plan_hash(PLAN))

    assert _packs(repo) == 2, "the commit started git's automatic gc"

    run_build(OfflineBuilder(), BuildTask("u", "u"), PLAN, repo_path=repo, state_dir=state_dir)

    assert _packs(repo) == 1
