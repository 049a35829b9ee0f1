"""Task worktrees, and builds recorded as git commits.

Why git is the record: a builder's work *is* a commit on the task branch, so
writing the record and the work in one `git commit` makes them succeed or fail
together. After a crash (builder finished, LangGraph never checkpointed) the
build node finds the commit by its `Agent-Team-Plan` trailer and does not run
the builder again (docs/architecture.md §4, "checked before they are repeated").

Layout under `state_dir` (the repositories themselves: `agent_team.builders.repos`;
the locks: `agent_team.builders.gitcmd`):

    worktrees/<key>/          the task's worktree, on branch `agent-team/<key>`
    locks/<key>.lock          held while a task's worktree is prepared or built
    locks/repos/<id>.lock     held while a repository's worktree registry changes

Why a repository lock besides the task lock: every worktree is registered in
its repository's `.git/worktrees/<id>/`, which all tasks share, and
`git worktree prune` deletes any entry that looks half-made, including the one
another task's `git worktree add` is writing at that moment. So `worktree add`,
`prune` and the removal of a broken worktree run one at a time per repository
(a file lock, so across processes too); prune runs only while a broken worktree
is removed or after an `add` failed; and git's automatic maintenance, which
prunes as well, is switched off for our commands and run by `run_build`
under the same lock instead (`note_build`).

Why few git processes: a build of a new task runs four (`worktree add`,
`log`, `add`, `commit`) and a reused one three. (A builder that needs no
checkout, the offline one, gets no worktree at all: `agent_team.builders.plumbing`
records it in two. A finished task's worktree is removed:
`agent_team.builders.cleanup`.) A worktree's health is read
from the files git itself reads (`<worktree>/.git` and the back-pointer
`.git/worktrees/<id>/gitdir`) instead of `git worktree list`, whose cost grows
with the number of worktrees, and a repository is checked once per process.

Every git call runs through `gitcmd.run_git`: a fixed environment, no system
or global config, no hooks, our identity.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from agent_team.builders.base import (
    BuildResult,
    BuildTask,
    BuildUsage,
    TaskBranch,
    Worktree,
    plan_hash,
)
from agent_team.builders.gitcmd import AUTHOR_EMAIL, AUTHOR_NAME, file_lock, run_git
from agent_team.builders.repos import (
    GitRepo,
    known_repo,
    ref_exists,
    repo_lock,
    resolve_repo,
)
from agent_team.common.git_host import GitHost
from agent_team.common.redact import redact, tail
from agent_team.exceptions import BuildError

__all__ = [
    "AUTHOR_EMAIL",
    "AUTHOR_NAME",
    "BRANCH_PREFIX",
    "PLAN_TRAILER",
    "SCRATCH_DIR",
    "Worktree",
    "commit_all",
    "find_build",
    "note_build",
    "open_worktree",
    "prepare_worktree",
    "record_build",
    "record_message",
    "record_parts",
    "task_key",
    "task_lock",
    "try_task_lock",
]

log = logging.getLogger(__name__)

BRANCH_PREFIX = "agent-team/"
PLAN_TRAILER = "Agent-Team-Plan"
TASK_TRAILER = "Agent-Team-Task"
BUILDER_TRAILER = "Agent-Team-Builder"
USAGE_TRAILER = "Agent-Team-Usage"
# Scratch space inside a worktree (the plan file for a builder); never committed.
SCRATCH_DIR = ".agent-team"
_KEY_MAX = 60
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# The lock reason `git worktree add` writes while it works and removes when it is done.
_ADDING = "initializing"
# `git gc --auto` runs at the first build in a repository per process, then every this many.
_GC_EVERY = 100
# The first line `git commit` prints: `[<branch> (root-commit) <sha>] <subject>`.
_COMMITTED = re.compile(r"\[[^\]\n]*? ([0-9a-f]{64}|[0-9a-f]{40})\] ")


def task_key(task_id: str) -> str:
    """The task id made safe for a folder and a branch name.

    The rule: every run of characters other than ASCII letters, digits, `_`
    and `-` becomes one `-`; leading and trailing `-` are dropped; the rest is
    cut to 60 characters. If that changed anything, `-` and the first 10 hex
    digits of the SHA-256 of the original id are appended, so two ids that
    clean to the same text (`a/b`, `a-b`) still get different keys. An id that
    is already safe is its own key.

    Args:
        task_id: any task id.

    Returns:
        A non-empty key of at most 71 characters.
    """
    cleaned = _UNSAFE.sub("-", task_id).strip("-")[:_KEY_MAX].rstrip("-")
    if cleaned == task_id and cleaned:
        return cleaned
    digest = hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:10]
    return f"{cleaned or 'task'}-{digest}"


# --- locks -------------------------------------------------------------------------------------


@contextmanager
def try_task_lock(state_dir: Path, task_id: str) -> Iterator[bool]:
    """`task_lock` without waiting: yields whether it was taken (held until the block ends).

    For work that may simply be skipped while a build of the task runs
    (removing a finished task's worktree), rather than wait for that build.
    """
    path = state_dir.resolve() / "locks" / f"{task_key(task_id)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextmanager
def task_lock(state_dir: Path, task_id: str) -> Iterator[None]:
    """Hold the task's lock: one prepare or build of a task at a time, across processes.

    Why: the recovery sweep of a restarted daemon and a still-running old one
    could both build the same task; with the lock the second waits and then
    finds the first's commit. It also makes it safe to clear git lock files a
    killed git left behind in the task's worktree. The lock is not reentrant;
    a repository's lock may be taken while holding it, never the other way round.

    Args:
        state_dir: the state folder (`locks/` is made inside it).
        task_id: the task's id.
    """
    with file_lock(state_dir.resolve() / "locks" / f"{task_key(task_id)}.lock"):
        yield


# --- worktrees ---------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _pointer(base: Path, target: str | None) -> Path | None:
    # git writes absolute paths, or with `worktree.useRelativePaths` paths relative to `base`.
    return Path(os.path.realpath(base / target)) if target else None


def _admin_dir(path: Path) -> Path | None:
    """The worktree's own git folder (`.git/worktrees/<id>`), as its `.git` file names it."""
    text = _read(path / ".git")
    if text is None or not text.startswith("gitdir: "):
        return None
    return _pointer(path, text.removeprefix("gitdir: ").strip())


def _registered_at(admin: Path) -> Path | None:
    """The `.git` file a registry entry points back to (its `gitdir` file), if it names one."""
    return _pointer(admin, _read(admin / "gitdir"))


def _healthy(repo: GitRepo, path: Path, branch: str) -> Path | None:
    """The registry entry of the worktree at `path` if it is complete and on `branch`.

    These are the files git reads to find a worktree, so no git process is
    needed: `path/.git` names an entry in `repo`'s registry, the entry points
    back to `path/.git`, has its `HEAD` on `branch` and its `commondir`, and is
    not locked `initializing` (git writes that lock reason while
    `worktree add` runs and removes it when the checkout is complete: still
    there means the add was killed).
    """
    admin = _admin_dir(path)
    if admin is None or admin.parent != repo.common_dir / "worktrees":
        return None
    if (
        _registered_at(admin) != path / ".git"
        or _read(admin / "HEAD") != f"ref: refs/heads/{branch}"
        or not (admin / "commondir").is_file()
        or _read(admin / "locked") == _ADDING
    ):
        return None
    return admin


def _clear_stale_git_locks(admin: Path, common_dir: Path, branch: str) -> None:
    # A git killed mid-commit leaves its lock files and every later git call in
    # the worktree fails. We hold the task lock, so no git of ours is running here.
    for stale in (
        admin / "index.lock",
        admin / "HEAD.lock",
        common_dir / "refs" / "heads" / f"{branch}.lock",
    ):
        stale.unlink(missing_ok=True)


def _discard(repo: GitRepo, path: Path, key: str) -> None:
    """Remove what is at the worktree's place and its registration (hold the repository lock)."""
    registry = repo.common_dir / "worktrees"
    for entry in registry.iterdir() if registry.is_dir() else ():
        back = _registered_at(entry)
        # Unlock our entries, and the one a `worktree add` killed before it wrote the
        # back-pointer left, so prune removes them; other folders' entries stay.
        if back == path / ".git" or (
            entry.name == key and back is None and _read(entry / "locked") == _ADDING
        ):
            (entry / "locked").unlink(missing_ok=True)
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    run_git(repo.path, "worktree", "prune")


def _add(repo: GitRepo, path: Path, branch: str, *, pruned: bool) -> None:
    """`git worktree add` on a new or existing branch (hold the repository lock).

    A new branch starts at `repo.start`: the repository's HEAD, or a mirror's fetched head.
    """
    added = run_git(
        repo.path, "worktree", "add", "-q", "-b", branch, str(path), repo.start, check=False
    )
    if added.returncode == 0:
        return
    # The branch exists (it holds the records of earlier builds, so it is checked
    # out as it is), or a stale registration still claims the folder or the branch.
    if not pruned:
        run_git(repo.path, "worktree", "prune")
    if ref_exists(repo.path, f"refs/heads/{branch}"):
        run_git(repo.path, "worktree", "add", "-q", str(path), branch)
    else:
        run_git(repo.path, "worktree", "add", "-q", "-b", branch, str(path), repo.start)


def _prepare(
    task: BuildTask, *, repo_path: Path | None, state_dir: Path, git_host: GitHost
) -> Worktree:
    """`prepare_worktree` without the task lock (the caller holds it)."""
    state_dir = state_dir.expanduser().resolve()
    key = task_key(task.task_id)
    branch = f"{BRANCH_PREFIX}{key}"
    repo = resolve_repo(
        task, branch=branch, repo_path=repo_path, state_dir=state_dir, git_host=git_host
    )
    path = state_dir / "worktrees" / key
    worktree = Worktree(repo=repo.path, path=path, branch=branch, key=key)
    admin = _healthy(repo, path, branch)
    if admin is not None:
        # Leftovers of a run that never recorded its commit must not leak into the next one.
        _clear_stale_git_locks(admin, repo.common_dir, branch)
        run_git(path, "reset", "-q", "--hard", "HEAD")
        run_git(path, "clean", "-q", "-f", "-d")
        return worktree
    with repo_lock(state_dir, repo):
        broken = (
            path.exists() or path.is_symlink() or (repo.common_dir / "worktrees" / key).exists()
        )
        if broken:
            _discard(repo, path, key)
        # A `git branch` killed inside a killed `worktree add` leaves the branch locked.
        (repo.common_dir / "refs" / "heads" / f"{branch}.lock").unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        _add(repo, path, branch, pruned=broken)
    return worktree


def prepare_worktree(
    task: BuildTask,
    *,
    repo_path: Path | None,
    state_dir: Path,
    git_host: GitHost | None = None,
) -> Worktree:
    """Make (or reuse) the task's worktree, ready for a builder.

    The repository is `task.repo`, else `repo_path`, else one created under
    `state_dir/repos/default` with an empty first commit; a remote one is
    fetched into its mirror first (`agent_team.builders.repos`). The worktree
    is `state_dir/worktrees/<key>` on branch `agent-team/<key>`, started from
    the repository's HEAD (a mirror's: the remote's, as just fetched) when the
    branch is new and kept as it is when it exists (its history is the build
    record). Calling this again is safe: a healthy
    worktree is reused with uncommitted leftovers discarded (`reset --hard`,
    `clean -fd`); a half-made one (a killed `git worktree add`, a deleted
    folder, stale git locks) is removed and made again. Making and removing
    worktrees holds the repository's lock, so tasks sharing a repository,
    in threads or processes, do not break each other's.

    Args:
        task: the task; its id names the folder and branch (see `task_key`).
        repo_path: the configured repository (`AGENT_TEAM_REPO_PATH`), if any.
        state_dir: where worktrees and generated repositories live.
        git_host: the GitHub host and its token (None: github.com, no token).

    Returns:
        The worktree.

    Raises:
        BuildError: the repository is missing, not a git repository, has no
            commits, or a git command failed.
        RepoUnavailableError: a remote repository could not be fetched.
        BuilderUnavailableError: git is not installed.
    """
    with task_lock(state_dir, task.task_id):
        return _prepare(
            task, repo_path=repo_path, state_dir=state_dir, git_host=git_host or GitHost()
        )


def open_worktree(path: Path, task: BuildTask) -> Worktree:
    """The `Worktree` of an existing folder, for a caller that has only its path.

    Runs three git commands; `run_build` hands builders their `Worktree` instead.

    Raises:
        BuildError: `path` is not a git worktree or is not on a branch.
    """
    top = Path(run_git(path, "rev-parse", "--show-toplevel").stdout.strip()).resolve()
    common = run_git(path, "rev-parse", "--path-format=absolute", "--git-common-dir")
    common_dir = Path(common.stdout.strip()).resolve()
    repo = common_dir.parent if common_dir.name == ".git" else common_dir
    head = run_git(path, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if head.returncode != 0:
        raise BuildError(f"worktree {top} is not on a branch; prepare it with prepare_worktree()")
    return Worktree(repo=repo, path=top, branch=head.stdout.strip(), key=task_key(task.task_id))


# Per repository git folder: builds recorded by this process since `git gc --auto` last ran.
_builds_since_gc: dict[Path, int] = {}
_builds_lock = threading.Lock()


def note_build(worktree: Worktree | TaskBranch, state_dir: Path) -> None:
    """Count a new build record; at the first and every 100th, let git gc if it is due.

    Why here: git's own automatic gc after a commit is switched off (it prunes
    worktrees, and would do it without our repository lock), so loose objects
    would pile up. `git gc --auto` decides itself whether there is work (the
    repository's `gc.auto` settings), runs in the foreground under the
    repository's lock, and its failure fails nothing: the build is recorded.

    Args:
        worktree: the worktree or branch the build was recorded in.
        state_dir: the state folder (for the repository's lock).
    """
    repo = known_repo(worktree.repo)
    if repo is None:
        return
    with _builds_lock:
        count = _builds_since_gc.get(repo.common_dir, _GC_EVERY - 1) + 1
        due = count >= _GC_EVERY
        _builds_since_gc[repo.common_dir] = 0 if due else count
    if not due:
        return
    try:
        with repo_lock(state_dir.expanduser().resolve(), repo):
            done = run_git(
                repo.path, "gc", "--auto", "--quiet", check=False, config=["gc.autoDetach=false"]
            )
        problem = redact(tail(done.stderr.strip(), 500)) if done.returncode else ""
    except BuildError as exc:
        problem = str(exc)
    if problem:
        log.warning("git gc --auto failed in %s (the build is recorded): %s", repo.path, problem)


# --- build records -----------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())


def _stripspace(text: str) -> str:
    """What `git commit --cleanup=whitespace` makes of a message, done here.

    Why: a record made without `git commit` (see `agent_team.builders.plumbing`)
    must carry the very message `commit_all` would have. Trailing blanks of
    each line go (git's blanks: space, tab, CR), runs of blank lines become
    one, blank lines at both ends go, and the text ends with one newline.
    """
    kept: list[str] = []
    blank = False
    for line in text.split("\n"):
        line = line.rstrip(" \t\r")
        if not line:
            blank = True
            continue
        if blank and kept:
            kept.append("")
        blank = False
        kept.append(line)
    return "\n".join(kept) + "\n" if kept else ""


def record_message(
    message: str, key: str, plan_hash: str, trailers: Mapping[str, str] | None = None
) -> str:
    """The full message of a build record: `message`, then a paragraph of trailers.

    The trailers are `Agent-Team-Task: <key>`, `Agent-Team-Plan: <plan_hash>`
    and the given ones (each value on one line), already cleaned as
    `git commit --cleanup=whitespace` would, so every way of recording a build
    writes the same text.

    Args:
        message: subject line, then optionally a blank line and a body.
        key: the task's key (`task_key`).
        plan_hash: `plan_hash()` of the plan that was built.
        trailers: more `Agent-Team-*` trailers (name to value).
    """
    lines = [f"{TASK_TRAILER}: {key}", f"{PLAN_TRAILER}: {plan_hash}"]
    lines += [f"{name}: {_one_line(value)}" for name, value in (trailers or {}).items()]
    text = message.replace("\r\n", "\n").strip() or "agent-team build"
    return _stripspace(f"{text}\n\n" + "\n".join(lines) + "\n")


def record_parts(
    task: BuildTask, key: str, summary: str, *, builder: str, usage: BuildUsage | None
) -> tuple[str, str, dict[str, str]]:
    """A build record's subject and body, its cleaned summary and its extra trailers.

    Shared by `record_build` and the checkout-free recorder, so both say the same.

    Returns:
        `(message, clean summary, trailers)` for `record_message`.
    """
    subject = _one_line(task.title)[:72].strip() or key
    clean_summary = redact(_CONTROL.sub(" ", summary)).strip()
    trailers = {BUILDER_TRAILER: builder}
    if usage is not None:
        trailers[USAGE_TRAILER] = json.dumps(usage.model_dump(), separators=(",", ":"))
    return f"agent-team: {subject}\n\n{clean_summary}", clean_summary, trailers


def _parse_trailers(message: str) -> dict[str, str]:
    # Our own parse of the last paragraph, not git's: git stops looking for
    # trailers at a `---` line, which a Markdown summary can contain.
    paragraphs = message.strip().split("\n\n")
    trailers: dict[str, str] = {}
    for line in paragraphs[-1].splitlines():
        name, sep, value = line.partition(": ")
        if sep and name.startswith("Agent-Team-"):
            trailers[name] = value.strip()
    return trailers


def _summary_of(message: str) -> str:
    paragraphs = message.strip().split("\n\n")
    body = paragraphs[1:-1] if len(paragraphs) > 2 else []
    return "\n\n".join(body).strip() or paragraphs[0].strip()


def _usage_of(raw: str | None) -> BuildUsage | None:
    if not raw:
        return None
    try:
        return BuildUsage.model_validate_json(raw)
    except ValidationError:
        return None


def find_build(worktree: Worktree | TaskBranch, plan_hash: str) -> BuildResult | None:
    """The recorded build of this plan for this task, if there is one.

    Looks through the history of the task branch for a commit authored by
    agent-team whose trailers name this task (`Agent-Team-Task`) and this plan
    (`Agent-Team-Plan`). The task trailer matters: a branch started from a
    HEAD that already contains another task's merged build must not reuse it.

    Args:
        worktree: the task's worktree, or its branch when it has no checkout.
        plan_hash: `plan_hash()` of the approved plan.

    Returns:
        The newest matching build with `reused=True`, or `None`.
    """
    # A branch that does not exist yet has no records: `--ignore-missing` makes
    # that an empty answer instead of an error, in the same one git call.
    done = run_git(
        worktree.repo,
        "log",
        "--ignore-missing",
        "--fixed-strings",
        f"--author=<{AUTHOR_EMAIL}>",
        f"--grep={PLAN_TRAILER}: {plan_hash}",
        "--format=%H%x1f%ae%x1f%B%x1e",
        f"refs/heads/{worktree.branch}",
        "--",
    )
    for record in done.stdout.split("\x1e"):
        fields = record.lstrip("\n").split("\x1f")
        if len(fields) != 3:
            continue
        sha, email, message = fields
        trailers = _parse_trailers(message)
        if (
            email != AUTHOR_EMAIL
            or trailers.get(PLAN_TRAILER) != plan_hash
            or trailers.get(TASK_TRAILER) != worktree.key
        ):
            continue
        return BuildResult(
            builder=trailers.get(BUILDER_TRAILER, "unknown"),
            branch=worktree.branch,
            commit=sha,
            summary=_summary_of(message),
            output="",
            plan_hash=plan_hash,
            reused=True,
            usage=_usage_of(trailers.get(USAGE_TRAILER)),
        )
    return None


def commit_all(
    worktree: Worktree,
    message: str,
    plan_hash: str,
    *,
    trailers: Mapping[str, str] | None = None,
) -> str:
    """Commit everything in the worktree as the record of a build.

    `git add -A` (except `.agent-team/`, our scratch space), then one commit
    authored by agent-team whose last paragraph holds the trailers
    `Agent-Team-Task: <key>` and `Agent-Team-Plan: <plan_hash>` (plus any
    given). The commit is made even when nothing changed (`--allow-empty`), so
    every build leaves a record. Hooks do not run: the record must not depend
    on a repository's pre-commit checks. The record is also added to
    `worktree.recorded`.

    Args:
        worktree: the task's worktree.
        message: subject line, then optionally a blank line and a body.
        plan_hash: `plan_hash()` of the plan that was built.
        trailers: more `Agent-Team-*` trailers (name to one-line value).

    Returns:
        The new commit's sha.
    """
    run_git(worktree.path, "add", "-A", "--", ".", f":(exclude){SCRATCH_DIR}")
    full = record_message(message, worktree.key, plan_hash, trailers)
    done = run_git(
        worktree.path,
        "commit",
        "--allow-empty",
        "--no-verify",
        "--cleanup=whitespace",
        "-F",
        "-",
        stdin_text=full,
        config=["core.abbrev=no"],
    )
    # The commit names itself in its first line of output; rev-parse only if that changes.
    named = _COMMITTED.match(done.stdout)
    sha = named.group(1) if named else run_git(worktree.path, "rev-parse", "HEAD").stdout.strip()
    worktree.recorded.append((sha, plan_hash))
    return sha


def record_build(
    task: BuildTask,
    worktree: Worktree | Path,
    plan_markdown: str,
    *,
    builder: str,
    summary: str,
    output: str = "",
    usage: BuildUsage | None = None,
) -> BuildResult:
    """Commit a builder's work with its trailers and describe it: the last step of `run`.

    Args:
        task: the task that was built.
        worktree: the worktree the builder was given (a bare path costs three
            more git calls to describe it).
        plan_markdown: the plan it built.
        builder: the builder's name (kept in an `Agent-Team-Builder` trailer).
        summary: a few lines for people; becomes the commit body (redacted).
        output: the builder's output tail, already redacted (not committed).
        usage: model usage, kept in an `Agent-Team-Usage` trailer so a reused
            result still reports it.

    Returns:
        The result, with the new commit.
    """
    if not isinstance(worktree, Worktree):
        worktree = open_worktree(worktree, task)
    digest = plan_hash(plan_markdown)
    message, clean_summary, trailers = record_parts(
        task, worktree.key, summary, builder=builder, usage=usage
    )
    sha = commit_all(worktree, message, digest, trailers=trailers)
    return BuildResult(
        builder=builder,
        branch=worktree.branch,
        commit=sha,
        summary=clean_summary,
        output=output,
        plan_hash=digest,
        usage=usage,
    )
