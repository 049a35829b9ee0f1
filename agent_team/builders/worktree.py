"""Task worktrees, and builds recorded as git commits.

Why git is the record: a builder's work *is* a commit on the task branch, so
writing the record and the work in one `git commit` makes them succeed or fail
together. After a crash (builder finished, LangGraph never checkpointed) the
build node finds the commit by its `Agent-Team-Plan` trailer and does not run
the builder again (docs/architecture.md §4, "checked before they are repeated").

Layout under `state_dir`:

    repos/default/            a repository we create when no task or setting names one
    worktrees/<key>/          the task's worktree, on branch `agent-team/<key>`
    locks/<key>.lock          held while a task's worktree is prepared or built
    locks/repos/<id>.lock     held while a repository's worktree registry changes
    locks/repos/default.lock  held while the default repository is created

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

Every git call runs with a fixed environment: no terminal prompts, no pager,
no system or global git config (so an operator's `commit.gpgSign` or hooks
path cannot change what we do), no hooks, and our identity given with `-c`.
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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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
from agent_team.builders.proc import Completed, ProcessTimeout, inherited_env, run_process
from agent_team.common.redact import redact, tail
from agent_team.exceptions import BuildError, BuilderUnavailableError

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

AUTHOR_NAME = "agent-team"
AUTHOR_EMAIL = "agent-team@localhost"
BRANCH_PREFIX = "agent-team/"
PLAN_TRAILER = "Agent-Team-Plan"
TASK_TRAILER = "Agent-Team-Task"
BUILDER_TRAILER = "Agent-Team-Builder"
USAGE_TRAILER = "Agent-Team-Usage"
# Scratch space inside a worktree (the plan file for a builder); never committed.
SCRATCH_DIR = ".agent-team"
GIT_TIMEOUT_S = 300.0
# A fixed date makes the generated default repository's first commit the same everywhere.
_INITIAL_DATE = "2000-01-01T00:00:00+0000"
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


# --- git ---------------------------------------------------------------------------------------


def _git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        "PATH": inherited_env().get("PATH", os.defpath),
        "LC_ALL": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_EDITOR": ":",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    env.update(extra or {})
    return env


def _git(
    cwd: Path,
    *args: str,
    check: bool = True,
    stdin_text: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    config: Sequence[str] = (),
    timeout_s: float = GIT_TIMEOUT_S,
) -> Completed:
    git = shutil.which("git")
    if git is None:
        raise BuilderUnavailableError(
            "git was not found on PATH; install git (2.31 or newer) so builders can make worktrees"
        )
    argv = [
        git,
        "--no-pager",
        "-c",
        f"user.name={AUTHOR_NAME}",
        "-c",
        f"user.email={AUTHOR_EMAIL}",
        "-c",
        "commit.gpgSign=false",
        "-c",
        f"core.hooksPath={os.devnull}",
        "-c",
        "color.ui=false",
        # A commit would start `git maintenance run --auto`, whose gc prunes worktrees
        # outside our repository lock; `note_build` runs gc under the lock instead.
        "-c",
        "maintenance.auto=false",
    ]
    for setting in config:
        argv += ["-c", setting]
    argv += args
    what = " ".join(args[:2])
    try:
        done = run_process(
            argv, cwd=cwd, env=_git_env(extra_env), timeout_s=timeout_s, stdin_text=stdin_text
        )
    except ProcessTimeout:
        raise BuildError(
            f"`git {what}` in {cwd} did not finish within {timeout_s:g} s; check that no other "
            "git process holds the repository and retry"
        ) from None
    except OSError as exc:
        raise BuildError(
            f"could not run git in {cwd}: {exc}; check that the folder exists"
        ) from exc
    if check and done.returncode != 0:
        detail = redact(tail((done.stderr or done.stdout).strip(), 1000))
        raise BuildError(f"`git {what}` failed in {cwd} (exit {done.returncode}): {detail}")
    return done


def _common_dir(path: Path) -> Path | None:
    """The git folder of the repository whose top folder is `path`, or `None` if it is none."""
    # The ceiling stops git from walking up: a plain folder inside some other
    # checkout must not count as a repository.
    done = _git(
        path,
        "rev-parse",
        "--path-format=absolute",
        "--git-common-dir",
        check=False,
        extra_env={"GIT_CEILING_DIRECTORIES": str(path.parent)},
    )
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 else None


def _has_commit(repo: Path) -> bool:
    return (
        _git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).returncode == 0
    )


def _ref_exists(repo: Path, ref: str) -> bool:
    return _git(repo, "rev-parse", "--verify", "--quiet", ref, check=False).returncode == 0


# --- locks -------------------------------------------------------------------------------------


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


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
    with _file_lock(state_dir.resolve() / "locks" / f"{task_key(task_id)}.lock"):
        yield


# --- repositories ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Repo:
    """A checked repository: the folder we run git in, and where its worktrees are registered."""

    path: Path
    common_dir: Path


# Repositories this process has checked (a git folder, a first commit), by resolved path.
_KNOWN_REPOS: dict[Path, _Repo] = {}


def _known(path: Path) -> _Repo | None:
    repo = _KNOWN_REPOS.get(path)
    if repo is not None and repo.path.is_dir() and (repo.common_dir / "HEAD").is_file():
        return repo
    return None


@contextmanager
def _repo_lock(state_dir: Path, repo: _Repo) -> Iterator[None]:
    """Hold the lock of `repo`'s worktree registry: no other add, prune or gc runs meanwhile.

    Keyed by the repository's git folder, where the registry (`worktrees/`) lives.
    """
    with _registry_lock(state_dir, repo.common_dir):
        yield


@contextmanager
def _registry_lock(state_dir: Path, common_dir: Path) -> Iterator[None]:
    """`_repo_lock` by the repository's git folder (resolved), for a caller that knows only that."""
    digest = hashlib.sha256(str(common_dir).encode("utf-8")).hexdigest()[:16]
    with _file_lock(state_dir / "locks" / "repos" / f"{digest}.lock"):
        yield


def _default_repo(state_dir: Path) -> _Repo:
    path = state_dir / "repos" / "default"
    known = _known(path)
    if known is not None:
        return known
    with _file_lock(state_dir / "locks" / "repos" / "default.lock"):
        path.mkdir(parents=True, exist_ok=True)
        common_dir = _common_dir(path)
        if common_dir is None:
            _git(path, "init", "-q", "-b", "main")
            common_dir = path / ".git"
        if not _has_commit(path):
            _git(
                path,
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "agent-team: start of the default repository",
                extra_env={"GIT_AUTHOR_DATE": _INITIAL_DATE, "GIT_COMMITTER_DATE": _INITIAL_DATE},
            )
    repo = _KNOWN_REPOS[path] = _Repo(path, common_dir)
    return repo


def _resolve_repo(task: BuildTask, repo_path: Path | None, state_dir: Path) -> _Repo:
    if task.repo is not None:
        path, source = task.repo, "the task's repository"
    elif repo_path is not None:
        path, source = repo_path, "AGENT_TEAM_REPO_PATH"
    else:
        return _default_repo(state_dir)
    path = path.expanduser().resolve()
    known = _known(path)
    if known is not None:
        return known
    if not path.is_dir():
        raise BuildError(f"{source} {path} does not exist; point it at a git repository")
    common_dir = _common_dir(path)
    if common_dir is None:
        raise BuildError(
            f"{source} {path} is not a git repository (no .git there); run `git init` in it "
            "or point it at the top folder of a clone"
        )
    if not _has_commit(path):
        raise BuildError(
            f"{source} {path} has no commits yet; make a first commit so task branches "
            "can start from HEAD"
        )
    repo = _KNOWN_REPOS[path] = _Repo(path, common_dir)
    return repo


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


def _healthy(repo: _Repo, path: Path, branch: str) -> Path | None:
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


def _discard(repo: _Repo, path: Path, key: str) -> None:
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
    _git(repo.path, "worktree", "prune")


def _add(repo: _Repo, path: Path, branch: str, *, pruned: bool) -> None:
    """`git worktree add` on a new or existing branch (hold the repository lock)."""
    added = _git(repo.path, "worktree", "add", "-q", "-b", branch, str(path), "HEAD", check=False)
    if added.returncode == 0:
        return
    # The branch exists (it holds the records of earlier builds, so it is checked
    # out as it is), or a stale registration still claims the folder or the branch.
    if not pruned:
        _git(repo.path, "worktree", "prune")
    if _ref_exists(repo.path, f"refs/heads/{branch}"):
        _git(repo.path, "worktree", "add", "-q", str(path), branch)
    else:
        _git(repo.path, "worktree", "add", "-q", "-b", branch, str(path), "HEAD")


def _prepare(task: BuildTask, *, repo_path: Path | None, state_dir: Path) -> Worktree:
    """`prepare_worktree` without the task lock (the caller holds it)."""
    state_dir = state_dir.expanduser().resolve()
    key = task_key(task.task_id)
    branch = f"{BRANCH_PREFIX}{key}"
    repo = _resolve_repo(task, repo_path, state_dir)
    path = state_dir / "worktrees" / key
    worktree = Worktree(repo=repo.path, path=path, branch=branch, key=key)
    admin = _healthy(repo, path, branch)
    if admin is not None:
        # Leftovers of a run that never recorded its commit must not leak into the next one.
        _clear_stale_git_locks(admin, repo.common_dir, branch)
        _git(path, "reset", "-q", "--hard", "HEAD")
        _git(path, "clean", "-q", "-f", "-d")
        return worktree
    with _repo_lock(state_dir, repo):
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


def prepare_worktree(task: BuildTask, *, repo_path: Path | None, state_dir: Path) -> Worktree:
    """Make (or reuse) the task's worktree, ready for a builder.

    The repository is `task.repo`, else `repo_path`, else one created under
    `state_dir/repos/default` with an empty first commit. The worktree is
    `state_dir/worktrees/<key>` on branch `agent-team/<key>`, started from the
    repository's HEAD when the branch is new and kept as it is when it exists
    (its history is the build record). Calling this again is safe: a healthy
    worktree is reused with uncommitted leftovers discarded (`reset --hard`,
    `clean -fd`); a half-made one (a killed `git worktree add`, a deleted
    folder, stale git locks) is removed and made again. Making and removing
    worktrees holds the repository's lock, so tasks sharing a repository,
    in threads or processes, do not break each other's.

    Args:
        task: the task; its id names the folder and branch (see `task_key`).
        repo_path: the configured repository (`AGENT_TEAM_REPO_PATH`), if any.
        state_dir: where worktrees and generated repositories live.

    Returns:
        The worktree.

    Raises:
        BuildError: the repository is missing, not a git repository, has no
            commits, or a git command failed.
        BuilderUnavailableError: git is not installed.
    """
    with task_lock(state_dir, task.task_id):
        return _prepare(task, repo_path=repo_path, state_dir=state_dir)


def open_worktree(path: Path, task: BuildTask) -> Worktree:
    """The `Worktree` of an existing folder, for a caller that has only its path.

    Runs three git commands; `run_build` hands builders their `Worktree` instead.

    Raises:
        BuildError: `path` is not a git worktree or is not on a branch.
    """
    top = Path(_git(path, "rev-parse", "--show-toplevel").stdout.strip()).resolve()
    common = _git(path, "rev-parse", "--path-format=absolute", "--git-common-dir")
    common_dir = Path(common.stdout.strip()).resolve()
    repo = common_dir.parent if common_dir.name == ".git" else common_dir
    head = _git(path, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
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
    repo = _KNOWN_REPOS.get(worktree.repo)
    if repo is None:
        return
    with _builds_lock:
        count = _builds_since_gc.get(repo.common_dir, _GC_EVERY - 1) + 1
        due = count >= _GC_EVERY
        _builds_since_gc[repo.common_dir] = 0 if due else count
    if not due:
        return
    try:
        with _repo_lock(state_dir.expanduser().resolve(), repo):
            done = _git(
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
    done = _git(
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
    _git(worktree.path, "add", "-A", "--", ".", f":(exclude){SCRATCH_DIR}")
    full = record_message(message, worktree.key, plan_hash, trailers)
    done = _git(
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
    sha = named.group(1) if named else _git(worktree.path, "rev-parse", "HEAD").stdout.strip()
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
