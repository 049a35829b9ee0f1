"""Build records made with git plumbing: no worktree, no checkout.

Why: for a builder whose whole work is a few known files (a `FileBuilder`,
such as the offline builder), a worktree per task was most of the build's
cost: `git worktree add` (three git processes and a checkout of the whole
tree), then `add` and `commit`, and about 18 files left on disk per task.
Here one `git fast-import` writes the blobs, the trees and the commit on top
of the branch's tip (for a new branch the repository's HEAD, or a mirror's
fetched head: `TaskBranch.start`) into the
repository's object store and moves the branch. Below `fastimport.unpackLimit`
objects it stores them loose, as `git commit` does, so `git gc --auto`
(`note_build`) treats them the same; it does not leave a pack per record.

Why `fast-import` and not `hash-object` + a temporary index (`read-tree`,
`update-index`, `write-tree`) + `commit-tree` + `update-ref`: one process
instead of six, measured at about 5 ms against 13 ms per record. Its ref
update is a compare-and-set too: it reads the branch, refuses to move it
unless the new commit contains that tip, and commits the move with that tip
as the expected old value. So two racers that built on the same tip cannot
both record; the loser finds the winner's record with `find_build`.

Crash safety: the objects are written before the branch moves. A crash in
between leaves unreachable objects (gc drops them) and no record, so the
next run records again: the branch still gets exactly one record. A killed
`fast-import` can leave the branch's ref lock behind; `open_branch` removes
it (the task lock says no git of this task runs, the repository lock that no
gc packs refs meanwhile).

The commit is the one `record_build` would make in a worktree: the same
author and committer, the same message and trailers (`record_message`), the
base's tree with the builder's files written over it. The branch's reflog is
not written: the branch only ever moves forward, so it would hold nothing the
branch does not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from agent_team.builders.base import (
    BuildFiles,
    BuildResult,
    BuildTask,
    FileBuilder,
    TaskBranch,
    plan_hash,
)
from agent_team.builders.gitcmd import AUTHOR_EMAIL, AUTHOR_NAME, run_git
from agent_team.builders.repos import repo_lock, resolve_repo
from agent_team.builders.worktree import (
    BRANCH_PREFIX,
    find_build,
    record_message,
    record_parts,
    task_key,
)
from agent_team.common.git_host import GitHost
from agent_team.common.redact import redact, tail
from agent_team.exceptions import BuildError, BuilderUnavailableError

__all__ = ["build_on_branch", "open_branch", "record_files"]

# How often a record is tried again when the branch moved under it (another racer recorded).
_ATTEMPTS = 3
# What fast-import says when another writer got to the branch first (moved it, or holds its
# lock): look again. Anything else is a failure to report, not a race to retry.
# Compared in lower case: git says "warning: Not updating refs/heads/…".
_BRANCH_TAKEN = ("not updating", ".lock", "cannot lock ref")
_OUT_OF_SPACE = ("Out of diskspace", "No space left on device", "Disk quota exceeded")
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
# Characters a path in the record may not hold: controls (git's quoting aside, no file wants them).
_BAD_PATH_CHAR = re.compile(r"[\x00-\x1f\x7f]")
# Fixed so a repository's own settings cannot change how records are stored:
# loose objects below this many (as a commit makes them), no reflog for our ref.
_FAST_IMPORT_CONFIG = ("fastimport.unpackLimit=100", "core.logAllRefUpdates=false")


def open_branch(
    task: BuildTask,
    *,
    repo_path: Path | None,
    state_dir: Path,
    git_host: GitHost | None = None,
) -> TaskBranch:
    """The task's branch and repository, ready to record on; nothing is checked out.

    The repository is chosen as for a worktree (`task.repo`, else `repo_path`,
    else the default one under `state_dir`, created if missing; a remote one
    is fetched into its mirror first). The caller holds the task lock (`task_lock`).

    Raises:
        BuildError: the repository is missing, not a git repository or has no commits.
        RepoUnavailableError: a remote repository could not be fetched.
        BuilderUnavailableError: git is not installed.
    """
    state_dir = state_dir.expanduser().resolve()
    key = task_key(task.task_id)
    branch = f"{BRANCH_PREFIX}{key}"
    repo = resolve_repo(
        task,
        branch=branch,
        repo_path=repo_path,
        state_dir=state_dir,
        git_host=git_host or GitHost(),
    )
    stale = repo.common_dir / "refs" / "heads" / f"{branch}.lock"
    if stale.exists():  # left by a git of this task that was killed: none runs now
        with repo_lock(state_dir, repo):
            stale.unlink(missing_ok=True)
    return TaskBranch(repo=repo.path, branch=branch, key=key, start=repo.start)


def build_on_branch(
    builder: FileBuilder, task: BuildTask, plan_markdown: str, target: TaskBranch
) -> BuildResult:
    """Build once: the recorded build of this plan if the branch has one, else a new record.

    Asks git for the branch's tip and where a new branch starts (one process),
    looks for a record only when the branch exists (a new branch has none),
    else asks the builder for its files and records them (one more process).
    If the branch moved while recording, it looks again: another racer's
    record of this plan is returned (`reused=True`), anything else is built on.

    Args:
        builder: a builder that needs no checkout.
        task: the task.
        plan_markdown: the approved plan.
        target: from `open_branch`.

    Returns:
        The build.

    Raises:
        BuildError: git failed, or the branch kept moving; nothing was recorded.
    """
    digest = plan_hash(plan_markdown)
    work: BuildFiles | None = None
    for _ in range(_ATTEMPTS):
        tip, head = _tips(target)
        if tip is not None:
            found = find_build(target, digest)
            if found is not None:
                return found
        if work is None:
            work = builder.files(task, plan_markdown)
        result = record_files(
            task, target, plan_markdown, work, builder=builder.name, base=tip or head
        )
        if result is not None:
            return result
    raise BuildError(
        f"could not record the build on {target.branch}: the branch moved under every try; "
        "check what else writes to it, then retry the task"
    )


def record_files(
    task: BuildTask,
    target: TaskBranch,
    plan_markdown: str,
    work: BuildFiles,
    *,
    builder: str,
    base: str,
) -> BuildResult | None:
    """Commit `work.files` on top of `base` as the record of a build, and move the branch to it.

    One `git fast-import`. The branch moves only if it still points at a commit
    that the new one contains (normally `base` itself, or nothing for a new branch).

    Args:
        task: the task that was built.
        target: the task's branch.
        plan_markdown: the plan that was built.
        work: what the builder made.
        builder: the builder's name (the `Agent-Team-Builder` trailer).
        base: the commit to build on: the branch's tip, or `target.start` for a new branch.

    Returns:
        The new build, or None when the branch had moved elsewhere and kept its
        tip (the new commit is left unreachable; look at the branch again).

    Raises:
        BuildError: a path is unsafe, or git failed before writing the commit.
    """
    digest = plan_hash(plan_markdown)
    message, summary, trailers = record_parts(
        task, target.key, work.summary, builder=builder, usage=None
    )
    text = record_message(message, target.key, digest, trailers)
    stream = _stream(f"refs/heads/{target.branch}", base, text, work.files)
    done = run_git(
        target.repo,
        "fast-import",
        "--quiet",
        "--done",
        "--date-format=now",
        check=False,
        stdin_text=stream,
        config=_FAST_IMPORT_CONFIG,
    )
    # `get-mark` names the commit as soon as it is written, before the branch moves.
    written = done.stdout.strip()
    if not _SHA.fullmatch(written):
        detail = redact(tail((done.stderr or done.stdout).strip(), 1000))
        raise BuildError(
            f"`git fast-import` could not record the build in {target.repo} "
            f"(exit {done.returncode}): {detail}"
        )
    if done.returncode != 0:
        said = done.stderr or ""
        if any(sign in said for sign in _OUT_OF_SPACE):
            # Nothing was recorded; the build is fine and can be recorded once there is room.
            raise BuilderUnavailableError(
                f"git could not record the build in {target.repo}: the disk is full "
                f"({redact(tail(said.strip(), 300)).splitlines()[0]}); free some space, then "
                f"`agent-team retry {task.task_id}`"
            )
        if not any(sign in said.lower() for sign in _BRANCH_TAKEN):
            raise BuildError(
                f"`git fast-import` could not record the build in {target.repo} "
                f"(exit {done.returncode}): {redact(tail(said.strip(), 1000))}"
            )
        return None  # the branch moved, or its lock was taken: nothing recorded
    return BuildResult(
        builder=builder,
        branch=target.branch,
        commit=written,
        summary=summary,
        output=work.output,
        plan_hash=digest,
    )


def _tips(target: TaskBranch) -> tuple[str | None, str]:
    """The branch's tip (None when it does not exist) and where a new one starts, in one call."""
    done = run_git(
        target.repo,
        "cat-file",
        "--batch-check=%(objectname) %(objecttype)",
        stdin_text=f"refs/heads/{target.branch}\n{target.start}\n",
    )
    # Each line is `<sha> commit`, or `<name> missing` for a branch not made yet.
    lines = [*done.stdout.splitlines(), "", ""][:2]
    tip, head = (line.split(" ")[0] if line.endswith(" commit") else None for line in lines)
    if head is None:
        if tip is not None:
            return tip, tip  # an existing branch needs no start
        raise BuildError(
            f"{target.start} of {target.repo} is not a commit; check out a branch with "
            "commits there"
        )
    return tip, head


def _data(text: str) -> str:
    return f"data {len(text.encode('utf-8'))}\n{text}\n"


def _quoted(path: str) -> str:
    """`path` checked and quoted for a fast-import file command."""
    parts = path.split("/")
    if (
        not path
        or _BAD_PATH_CHAR.search(path)
        or any(part in ("", ".", "..") or part.lower() == ".git" for part in parts)
    ):
        raise BuildError(
            f"the builder named the file {path!r}: give a relative path inside the repository, "
            "outside .git, without control characters"
        )
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _stream(ref: str, base: str, message: str, files: Mapping[str, str]) -> str:
    """The fast-import commands: one commit on `base` writing `files`, then its name, then done."""
    ident = f"{AUTHOR_NAME} <{AUTHOR_EMAIL}> now"
    parts = [
        f"commit {ref}\n",
        "mark :1\n",
        f"author {ident}\n",
        f"committer {ident}\n",
        _data(message),
        f"from {base}\n",
    ]
    for path, content in files.items():
        parts += [f"M 100644 inline {_quoted(path)}\n", _data(content)]
    parts += ["\n", "get-mark :1\n", "done\n"]
    return "".join(parts)
