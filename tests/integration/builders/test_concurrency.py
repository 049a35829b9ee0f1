"""Builds of different tasks in one repository at the same time, in threads and in processes.

What must hold: every build succeeds and is recorded on its own branch. The
tasks share the repository's worktree administration (`.git/worktrees/`), and
`git worktree prune` deletes any entry it finds half-made, including one that
another task's `git worktree add` is writing that very moment. Builds without a
checkout (`fast-import`) share the object store and the refs instead. Both
kinds run here: `checkout` is the offline builder made to ask for a worktree.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent_team.builders import BuildResult, BuildTask, CommandBuilder, OfflineBuilder, run_build
from tests.integration.builders.conftest import GitCalls
from tests.integration.builders.helpers import git, make_repo

PLAN = "# Plan\n\n1. Build it.\n"
THREADS = 8
ROUNDS = 4
REPO_ROOT = Path(__file__).resolve().parents[3]


class CheckoutOffline(OfflineBuilder):
    """The offline builder, working in a worktree as the command and claude-code builders do."""

    needs_checkout = True


BUILDERS = {"checkout": CheckoutOffline, "plumbing": OfflineBuilder}


def _build_together(
    tasks: list[BuildTask], repo: Path | None, state_dir: Path, kind: str = "plumbing"
) -> list[str]:
    """Build every task in its own thread, all let go at once; the errors, as text."""
    start = threading.Barrier(len(tasks))
    errors: list[str] = []
    results: list[BuildResult] = []

    def build(task: BuildTask) -> None:
        start.wait()
        try:
            results.append(
                run_build(BUILDERS[kind](), task, PLAN, repo_path=repo, state_dir=state_dir)
            )
        except Exception as exc:
            errors.append(f"{task.task_id}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=build, args=(task,)) for task in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=100)
    assert not any(thread.is_alive() for thread in threads), "a build hung"
    if not errors:
        assert len({result.commit for result in results}) == len(tasks)
        assert not any(result.reused for result in results)
    return errors


def _branches(repo: Path) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split())


@pytest.mark.parametrize("kind", list(BUILDERS))
@pytest.mark.parametrize("configured", [False, True], ids=["default-repo", "configured-repo"])
def test_threads_building_different_tasks_in_one_repository_all_succeed(
    state_dir: Path, tmp_path: Path, configured: bool, kind: str
) -> None:
    repo = make_repo(tmp_path / "repo") if configured else None
    for round_no in range(ROUNDS):
        tasks = [BuildTask(f"r{round_no}-t{n}", f"Task {n}") for n in range(THREADS)]

        errors = _build_together(tasks, repo, state_dir, kind)

        assert errors == [], f"round {round_no}: {len(errors)} builds failed, first: {errors[0]}"
    built = _branches(repo or state_dir / "repos" / "default")
    assert {f"agent-team/r{r}-t{n}" for r in range(ROUNDS) for n in range(THREADS)} <= built


# A child process: import everything, say so; then per line "go" on stdin build `count`
# tasks and say "done", so every round starts in all processes at once.
_CHILD = """
import sys
from pathlib import Path
from agent_team.builders import BuildTask, OfflineBuilder, run_build

state_dir, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
builder = OfflineBuilder()
builder.needs_checkout = sys.argv[4] == "checkout"
print("ready", flush=True)
for round_no, _go in enumerate(sys.stdin):
    for n in range(count):
        task = BuildTask(f"{name}-r{round_no}-t{n}", f"Task {n}")
        run_build(builder, task, "# Plan\\n", repo_path=None, state_dir=state_dir)
    print("done", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(BUILDERS))
def test_processes_building_different_tasks_in_one_repository_all_succeed(
    state_dir: Path, kind: str
) -> None:
    processes, rounds, per_round = 6, 5, 2
    # The default repository exists before the race, as it does in a running system.
    run_build(
        OfflineBuilder(), BuildTask("first", "First"), PLAN, repo_path=None, state_dir=state_dir
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(state_dir), f"p{n}", str(per_round), kind],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for _round in range(rounds):
            for child in children:
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            # A child that failed closes its stdout: an empty line instead of "done".
            answers = [child.stdout.readline().strip() for child in children if child.stdout]
            if answers != ["done"] * processes:
                break
        outcomes = [child.communicate(timeout=100) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()

    failures = [
        err.strip().splitlines()[-1]
        for child, (_out, err) in zip(children, outcomes, strict=True)
        if child.returncode != 0
    ]
    assert failures == [], f"{len(failures)} of {processes} processes failed, first: {failures[0]}"
    built = _branches(state_dir / "repos" / "default")
    expected = {
        f"agent-team/p{p}-r{r}-t{n}"
        for p in range(processes)
        for r in range(rounds)
        for n in range(per_round)
    }
    assert expected <= built


def _repository_lock_held(state_dir: Path) -> bool:
    """Whether a repository lock under `state_dir` is taken (by anyone, this process included)."""
    for lock in (state_dir / "locks" / "repos").glob("*.lock"):
        if lock.name == "default.lock":  # held only while the default repository is made
            continue
        with lock.open("a+b") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return False


def test_the_worktree_registry_changes_only_under_the_repository_lock(
    state_dir: Path, git_calls: GitCalls
) -> None:
    changes: list[str] = []

    def check(words: list[str]) -> None:
        if words[:2] in (["worktree", "add"], ["worktree", "prune"], ["worktree", "remove"]) or (
            words[:1] == ["gc"]
        ):
            changes.append(" ".join(words[:2]))
            assert _repository_lock_held(state_dir), f"git {' '.join(words)} ran without it"

    git_calls.before = check
    # A builder that works in a checkout (the offline builder records without one).
    builder = CommandBuilder("true", timeout_s=30)
    run_build(builder, BuildTask("t1", "t1"), PLAN, repo_path=None, state_dir=state_dir)
    # A deleted worktree (add fails on the stale registration, prune, add) and a stray folder.
    shutil.rmtree(state_dir / "worktrees" / "t1")
    run_build(builder, BuildTask("t1", "t1"), PLAN + "more\n", repo_path=None, state_dir=state_dir)
    (state_dir / "worktrees" / "t2").mkdir()
    run_build(builder, BuildTask("t2", "t2"), PLAN, repo_path=None, state_dir=state_dir)

    assert {"worktree add", "worktree prune", "gc --auto"} <= set(changes), changes
