"""Builds recorded with git plumbing (no worktree), against real git repositories."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_team.builders import (
    BuildFiles,
    BuildResult,
    BuildTask,
    ClaudeCodeBuilder,
    CommandBuilder,
    OfflineBuilder,
    commit_all,
    find_build,
    plan_hash,
    prepare_worktree,
    run_build,
)
from agent_team.builders.base import builds_without_checkout
from agent_team.builders.plumbing import build_on_branch, open_branch, record_files
from agent_team.builders.worktree import AUTHOR_EMAIL, record_message
from agent_team.exceptions import BuildError
from tests.integration.builders.helpers import GIT_ENV, changed_files, git, head, make_repo

PLAN = "# Plan\n\n1. Say hello.\n"
DOC = "docs/agent-team/task-1.md"
REPO_ROOT = Path(__file__).resolve().parents[3]


class CountingOffline(OfflineBuilder):
    """The offline builder, counting how often it was asked for its files."""

    def __init__(self) -> None:
        self.calls = 0

    def files(self, task: BuildTask, plan_markdown: str) -> BuildFiles:
        self.calls += 1
        return super().files(task, plan_markdown)


def _default_repo(state_dir: Path) -> Path:
    return state_dir / "repos" / "default"


def _records(repo: Path, branch: str) -> list[str]:
    """Commits on `branch` carrying a plan trailer, newest first."""
    out = git(repo, "log", "--format=%H %(trailers:key=Agent-Team-Plan,valueonly)", branch)
    return [line.split()[0] for line in out.splitlines() if len(line.split()) > 1]


def _message(repo: Path, commit: str) -> str:
    """The commit's message exactly, CRs included (`git()` reads text with universal newlines)."""
    argv = ["git", "cat-file", "commit", commit]
    raw = subprocess.run(argv, cwd=repo, env=GIT_ENV, capture_output=True, check=True).stdout
    return raw.decode("utf-8").split("\n\n", 1)[1]


# --- what is recorded ---------------------------------------------------------------------------


def test_only_the_offline_builder_builds_without_a_checkout() -> None:
    assert builds_without_checkout(OfflineBuilder())
    assert not builds_without_checkout(CommandBuilder("true", timeout_s=1))
    assert not builds_without_checkout(ClaudeCodeBuilder("claude", 1, "api"))


def test_the_plan_is_on_the_branch_and_nothing_is_checked_out(
    task: BuildTask, state_dir: Path
) -> None:
    result = run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=state_dir)

    repo = _default_repo(state_dir)
    expected = OfflineBuilder().files(task, PLAN).files[DOC]
    assert git(repo, "show", f"agent-team/task-1:{DOC}") + "\n" == expected
    assert expected.startswith("# Plan: Add a greeting\n") and "1. Say hello." in expected
    assert head(repo, "agent-team/task-1") == result.commit
    assert git(repo, "rev-parse", f"{result.commit}^") == head(repo, "main")
    assert changed_files(repo, result.commit) == [DOC]
    assert git(repo, "ls-tree", "--format=%(objectmode)", result.commit, DOC) == "100644"
    assert (result.builder, result.branch, result.reused) == ("offline", "agent-team/task-1", False)
    assert result.plan_hash == plan_hash(PLAN)
    assert result.summary == (
        f"Wrote the approved plan to {DOC} (offline builder: no code was changed)."
    )
    assert result.output == f"wrote {DOC}"
    assert not (state_dir / "worktrees").exists()
    assert len(git(repo, "worktree", "list", "--porcelain").split("\n\n")) == 1
    assert git(repo, "status", "--porcelain") == "", "the repository's own checkout is untouched"


def test_the_record_has_the_trailers(task: BuildTask, state_dir: Path) -> None:
    result = run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=state_dir)

    repo = _default_repo(state_dir)
    trailers = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", result.commit)
    assert trailers.splitlines() == [
        "Agent-Team-Task: task-1",
        f"Agent-Team-Plan: {plan_hash(PLAN)}",
        "Agent-Team-Builder: offline",
    ]
    who = git(repo, "log", "-1", "--format=%an <%ae> %cn <%ce>", result.commit)
    assert who == f"agent-team <{AUTHOR_EMAIL}> agent-team <{AUTHOR_EMAIL}>"
    found = find_build(open_branch(task, repo_path=None, state_dir=state_dir), plan_hash(PLAN))
    assert found is not None and found.commit == result.commit and found.builder == "offline"
    assert found.summary == result.summary


def test_the_record_is_the_commit_a_worktree_build_makes(task: BuildTask, tmp_path: Path) -> None:
    plumbed = run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=tmp_path / "a")
    wt = prepare_worktree(task, repo_path=None, state_dir=tmp_path / "b")
    checked_out = OfflineBuilder().run(task, PLAN, wt)

    one, two = _default_repo(tmp_path / "a"), _default_repo(tmp_path / "b")
    assert _message(one, plumbed.commit) == _message(two, checked_out.commit)
    tree = "%T %P %an %ae %cn %ce"
    assert git(one, "log", "-1", f"--format={tree}", plumbed.commit) == git(
        two, "log", "-1", f"--format={tree}", checked_out.commit
    )
    assert plumbed.model_dump(exclude={"commit"}) == checked_out.model_dump(exclude={"commit"})


@pytest.mark.parametrize(
    "summary",
    [
        "plain",
        "  trailing blanks  \n\n\n\nafter three blank lines\t\n",
        "\n\nleading blank lines\r\nwith CRLF\rand a lone CR \r",
        "a non-breaking space stays\u00a0\nand a --- line\n---\nstays too",
        "",
    ],
    ids=["plain", "blanks", "line-ends", "unicode", "empty"],
)
def test_messages_are_cleaned_exactly_as_git_commit_cleans_them(
    task: BuildTask, state_dir: Path, summary: str
) -> None:
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    message = f"agent-team: subject  \n\n{summary}"
    trailers = {"Agent-Team-Builder": "offline"}

    sha = commit_all(wt, message, plan_hash(PLAN), trailers=trailers)

    assert _message(wt.repo, sha) == record_message(message, wt.key, plan_hash(PLAN), trailers)


def test_history_and_other_files_of_the_repository_are_kept(
    state_dir: Path, tmp_path: Path
) -> None:
    files = {
        "README.md": "hello\n",
        "docs/guide.md": "guide\n",
        "docs/agent-team/other-task.md": "another task's plan\n",
        "src/app.py": "print('hi')\n",
    }
    repo = make_repo(tmp_path / "repo", files=files)
    (repo / "src" / "app.py").write_text("print('hello')\n")
    git(repo, "commit", "-q", "-am", "second")
    before = head(repo)
    task = BuildTask("task-1", "Add a greeting")

    result = run_build(OfflineBuilder(), task, PLAN, repo_path=repo, state_dir=state_dir)

    tree = git(repo, "ls-tree", "-r", "--name-only", result.commit).splitlines()
    assert sorted(tree) == sorted([*files, DOC])
    assert git(repo, "show", f"{result.commit}:docs/agent-team/other-task.md") == (
        "another task's plan"
    )
    assert git(repo, "show", f"{result.commit}:src/app.py") == "print('hello')"
    assert git(repo, "rev-parse", f"{result.commit}^") == before == head(repo)
    assert git(repo, "diff", "--name-only", "main", result.commit) == DOC
    assert git(repo, "status", "--porcelain") == ""
    assert not (repo / "docs" / "agent-team" / "task-1.md").exists()


def test_a_changed_plan_is_recorded_on_top_of_the_first(task: BuildTask, state_dir: Path) -> None:
    builder = CountingOffline()
    first = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)
    changed = run_build(builder, task, PLAN + "2. Wave.\n", repo_path=None, state_dir=state_dir)

    repo = _default_repo(state_dir)
    assert builder.calls == 2 and not changed.reused
    assert git(repo, "rev-parse", f"{changed.commit}^") == first.commit
    assert "2. Wave." in git(repo, "show", f"agent-team/task-1:{DOC}")
    assert _records(repo, "agent-team/task-1") == [changed.commit, first.commit]


def test_an_existing_branch_is_built_on_not_reset(tmp_path: Path, state_dir: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "branch", "agent-team/task-1")
    git(repo, "checkout", "-q", "agent-team/task-1")
    (repo / "earlier.txt").write_text("earlier build\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "earlier")
    earlier = head(repo)
    git(repo, "checkout", "-q", "main")

    result = run_build(
        OfflineBuilder(), BuildTask("task-1", "t"), PLAN, repo_path=repo, state_dir=state_dir
    )

    assert git(repo, "rev-parse", f"{result.commit}^") == earlier
    assert git(repo, "show", f"{result.commit}:earlier.txt") == "earlier build"


# --- crashes and races --------------------------------------------------------------------------


def test_a_build_found_after_a_crash_is_reused(task: BuildTask, state_dir: Path) -> None:
    builder = CountingOffline()
    first = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)
    # The branch moved, then the process died before the graph checkpointed: the node runs again.
    again = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    assert builder.calls == 1
    assert (again.reused, again.commit, again.summary) == (True, first.commit, first.summary)
    assert _records(_default_repo(state_dir), "agent-team/task-1") == [first.commit]


def test_a_crash_between_the_commit_and_the_branch_update_still_gives_one_record(
    task: BuildTask, state_dir: Path
) -> None:
    target = open_branch(task, repo_path=None, state_dir=state_dir)
    repo = _default_repo(state_dir)
    # What a fast-import killed while moving the branch leaves: its commit written,
    # the branch not moved, and the branch's lock file in place.
    lock = repo / ".git" / "refs" / "heads" / "agent-team" / "task-1.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    work = OfflineBuilder().files(task, PLAN)
    orphan = record_files(task, target, PLAN, work, builder="offline", base=head(repo, "main"))
    assert orphan is None, "the branch did not move while its lock was held"
    assert git(repo, "branch", "--list", "agent-team/task-1") == ""

    result = run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=state_dir)

    assert not result.reused and not lock.exists()
    assert _records(repo, "agent-team/task-1") == [result.commit]
    again = run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=state_dir)
    assert again.reused and again.commit == result.commit


def test_a_branch_moved_past_the_base_is_a_race_to_retry_not_a_failure(
    task: BuildTask, state_dir: Path
) -> None:
    """git says "warning: Not updating …" (capital N) when another racer moved the branch."""
    target = open_branch(task, repo_path=None, state_dir=state_dir)
    repo = _default_repo(state_dir)
    first = build_on_branch(OfflineBuilder(), task, PLAN, target)
    work = OfflineBuilder().files(task, "# Plan\n\n1. Say goodbye.\n")

    # Built on main's HEAD, as a racer that read the branch before `first` existed would.
    late = record_files(task, target, PLAN, work, builder="offline", base=head(repo, "main"))

    assert late is None, "the branch moved under the record: look again, do not fail"
    assert _records(repo, "agent-team/task-1") == [first.commit]


def test_racers_building_one_task_without_its_lock_record_one_build(
    task: BuildTask, state_dir: Path
) -> None:
    target = open_branch(task, repo_path=None, state_dir=state_dir)
    racers = 4
    start = threading.Barrier(racers)
    results: list[BuildResult] = []
    errors: list[BaseException] = []

    def race() -> None:
        start.wait()
        try:
            results.append(build_on_branch(OfflineBuilder(), task, PLAN, target))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert len({result.commit for result in results}) == 1
    # A racer whose record was refused returns the winner's (reused). Racers that built the
    # same files within the same second made the very same commit (git objects are named by
    # their content), so the branch moving to it again is no second record.
    assert False in {result.reused for result in results}
    assert _records(_default_repo(state_dir), "agent-team/task-1") == [results[0].commit]


def test_two_concurrent_builds_of_one_task_build_once(task: BuildTask, state_dir: Path) -> None:
    builder = CountingOffline()
    results: list[BuildResult] = []
    start = threading.Barrier(2)

    def build() -> None:
        start.wait()
        results.append(run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir))

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert builder.calls == 1, "the task lock let one build run; the other found its record"
    assert len({r.commit for r in results}) == 1
    assert sorted(r.reused for r in results) == [False, True]


# A child that builds one task; the test kills it at some moment of the build.
_CHILD = """
import sys
from pathlib import Path
from agent_team.builders import BuildTask, OfflineBuilder, run_build

print("ready", flush=True)
sys.stdin.readline()
run_build(OfflineBuilder(), BuildTask("task-1", "t"), "# Plan\\n", repo_path=None,
          state_dir=Path(sys.argv[1]))
print("built", flush=True)
"""


@pytest.mark.slow
def test_builds_killed_at_any_moment_leave_at_most_one_record(tmp_path: Path) -> None:
    task = BuildTask("task-1", "t")
    # From before the first git call to after the branch moved (about 20-40 ms on 2 cores).
    for n, delay_ms in enumerate([0, 5, 10, 15, 20, 25, 30, 40, 60, 100]):
        state_dir = tmp_path / f"s{n}"
        # The repository exists before, as it does in a running system.
        first = BuildTask("first", "f")
        run_build(OfflineBuilder(), first, PLAN, repo_path=None, state_dir=state_dir)
        with subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(state_dir)],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        ) as child:
            assert child.stdin is not None and child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            child.stdin.write("go\n")
            child.stdin.flush()
            time.sleep(delay_ms / 1000)
            os.killpg(child.pid, signal.SIGKILL)  # its git children too, as a crash would

        result = run_build(OfflineBuilder(), task, "# Plan\n", repo_path=None, state_dir=state_dir)

        repo = _default_repo(state_dir)
        assert _records(repo, "agent-team/task-1") == [result.commit], f"killed after {delay_ms} ms"
        assert git(repo, "fsck", "--connectivity-only", "--no-dangling") == ""


# --- what a builder may name --------------------------------------------------------------------


class _Naming(OfflineBuilder):
    def __init__(self, path: str) -> None:
        self.path = path

    def files(self, task: BuildTask, plan_markdown: str) -> BuildFiles:
        return BuildFiles(files={self.path: "x\n"}, summary="named a file")


@pytest.mark.parametrize(
    "path", ["../escape.md", "/etc/passwd", ".git/config", "a//b.md", "docs/./x.md", "a\nb.md", ""]
)
def test_paths_outside_the_tree_are_refused(task: BuildTask, state_dir: Path, path: str) -> None:
    with pytest.raises(BuildError, match="give a relative path inside the repository"):
        run_build(_Naming(path), task, PLAN, repo_path=None, state_dir=state_dir)

    repo = _default_repo(state_dir)
    assert git(repo, "branch", "--list", "agent-team/task-1") == ""


@pytest.mark.parametrize("path", ['docs/with "quotes" and spaces.md', "docs/ünïcode\\back.md"])
def test_unusual_but_valid_paths_are_written_as_named(
    task: BuildTask, state_dir: Path, path: str
) -> None:
    result = run_build(_Naming(path), task, PLAN, repo_path=None, state_dir=state_dir)

    repo = _default_repo(state_dir)
    names = git(repo, "ls-tree", "-r", "-z", "--name-only", result.commit)
    assert path in names.split("\0")
    assert git(repo, "show", f"{result.commit}:{path}") == "x"


# A build recorded while the disk is full: the child fills a small tmpfs of its own first.
_FULL_CHILD = """
import subprocess, sys
from pathlib import Path
from agent_team.builders import BuildTask, OfflineBuilder, run_build
state = Path(sys.argv[1])
run_build(OfflineBuilder(), BuildTask("first", "f"), "# Plan\\n", repo_path=None, state_dir=state)
subprocess.run(["sh", "-c", f"dd if=/dev/zero of={state}/fill bs=64k 2>/dev/null"], check=False)
try:
    run_build(OfflineBuilder(), BuildTask("task-2", "t"), "# Plan\\n", repo_path=None,
              state_dir=state)
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_a_full_disk_parks_the_build_instead_of_blaming_a_moved_branch(tmp_path: Path) -> None:
    from tests.e2e.test_disk_full import _can_namespace

    why = _can_namespace()
    if why is not None:
        pytest.skip(why)
    disk = tmp_path / "disk"
    disk.mkdir()
    script = 'set -e; mount -t tmpfs -o size=4m tmpfs "$1"; shift; exec "$@"'
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(disk),
         sys.executable, "-c", _FULL_CHILD, str(disk)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    # BuilderUnavailableError parks the task (retry once there is room); BuildError failed it.
    assert done.stdout.startswith("BuilderUnavailableError "), done.stdout + done.stderr
    assert "the disk is full" in done.stdout and "agent-team retry task-2" in done.stdout
    assert "moved" not in done.stdout
