"""Task worktrees, and builds recorded as git commits.

Why git is the record: a builder's work *is* a commit on the task branch, so
writing the record and the work in one `git commit` makes them succeed or fail
together. After a crash (builder finished, LangGraph never checkpointed) the
build node finds the commit by its `Agent-Team-Plan` trailer and does not run
the builder again (DESIGN.md §4, "checked before they are repeated").

Layout under `state_dir`:

    repos/default/        a repository we create when no task or setting names one
    worktrees/<key>/      the task's worktree, on branch `agent-team/<key>`
    locks/<key>.lock      held while a task's worktree is prepared or built

Every git call runs with a fixed environment: no terminal prompts, no pager,
no system or global git config (so an operator's `commit.gpgSign` or hooks
path cannot change what we do), no hooks, and our identity given with `-c`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from agent_team.builders._proc import Completed, ProcessTimeout, inherited_env, run_process
from agent_team.builders.base import BuildResult, BuildTask, BuildUsage, plan_hash
from agent_team.exceptions import BuildError, BuilderUnavailableError
from agent_team.redact import redact, tail

__all__ = [
    "AUTHOR_EMAIL",
    "AUTHOR_NAME",
    "BRANCH_PREFIX",
    "PLAN_TRAILER",
    "SCRATCH_DIR",
    "Worktree",
    "commit_all",
    "find_build",
    "open_worktree",
    "prepare_worktree",
    "record_build",
    "task_key",
    "task_lock",
]

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


@dataclass(frozen=True)
class Worktree:
    """A task's working copy.

    Attributes:
        repo: the repository the worktree belongs to.
        path: the worktree folder (`state_dir/worktrees/<key>`).
        branch: its branch, `agent-team/<key>`.
        key: the task id made safe for paths and branch names (see `task_key`).
    """

    repo: Path
    path: Path
    branch: str
    key: str


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
        *args,
    ]
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


def _is_repo_root(path: Path) -> bool:
    # The ceiling stops git from walking up: a plain folder inside some other
    # checkout must not count as a repository.
    done = _git(
        path,
        "rev-parse",
        "--absolute-git-dir",
        check=False,
        extra_env={"GIT_CEILING_DIRECTORIES": str(path.parent)},
    )
    return done.returncode == 0


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
def task_lock(state_dir: Path, task_id: str) -> Iterator[None]:
    """Hold the task's lock: one prepare or build of a task at a time, across processes.

    Why: the recovery sweep of a restarted daemon and a still-running old one
    could both build the same task; with the lock the second waits and then
    finds the first's commit. It also makes it safe to clear git lock files a
    killed git left behind in the task's worktree. The lock is not reentrant.

    Args:
        state_dir: the state folder (`locks/` is made inside it).
        task_id: the task's id.
    """
    with _file_lock(state_dir.resolve() / "locks" / f"{task_key(task_id)}.lock"):
        yield


# --- repositories and worktrees ----------------------------------------------------------------


def _default_repo(state_dir: Path) -> Path:
    repo = state_dir / "repos" / "default"
    with _file_lock(state_dir / "locks" / "default-repo.lock"):
        repo.mkdir(parents=True, exist_ok=True)
        if not _is_repo_root(repo):
            _git(repo, "init", "-q", "-b", "main")
        if not _has_commit(repo):
            _git(
                repo,
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "agent-team: start of the default repository",
                extra_env={"GIT_AUTHOR_DATE": _INITIAL_DATE, "GIT_COMMITTER_DATE": _INITIAL_DATE},
            )
    return repo


def _resolve_repo(task: BuildTask, repo_path: Path | None, state_dir: Path) -> Path:
    if task.repo is not None:
        repo, source = task.repo, "the task's repository"
    elif repo_path is not None:
        repo, source = repo_path, "AGENT_TEAM_REPO_PATH"
    else:
        return _default_repo(state_dir)
    repo = repo.expanduser().resolve()
    if not repo.is_dir():
        raise BuildError(f"{source} {repo} does not exist; point it at a git repository")
    if not _is_repo_root(repo):
        raise BuildError(
            f"{source} {repo} is not a git repository (no .git there); run `git init` in it "
            "or point it at the top folder of a clone"
        )
    if not _has_commit(repo):
        raise BuildError(
            f"{source} {repo} has no commits yet; make a first commit so task branches "
            "can start from HEAD"
        )
    return repo


@dataclass(frozen=True)
class _Entry:
    path: Path
    branch: str | None
    lock_reason: str | None


def _registered(repo: Path, path: Path) -> _Entry | None:
    done = _git(repo, "worktree", "list", "--porcelain", "-z")
    entry: dict[str, str] = {}
    entries: list[dict[str, str]] = []
    for field in done.stdout.split("\0"):
        if not field:
            if entry:
                entries.append(entry)
            entry = {}
            continue
        name, _, value = field.partition(" ")
        entry[name] = value
    if entry:
        entries.append(entry)
    for item in entries:
        if "worktree" in item and Path(item["worktree"]).resolve() == path:
            return _Entry(path, item.get("branch"), item.get("locked"))
    return None


def _healthy(entry: _Entry, path: Path, branch: str) -> bool:
    # git writes the lock reason "initializing" while `worktree add` runs and
    # removes it when the checkout is complete: still there means it was killed.
    if entry.lock_reason == "initializing" or entry.branch != f"refs/heads/{branch}":
        return False
    if not (path / ".git").is_file():
        return False
    done = _git(
        path,
        "rev-parse",
        "--show-toplevel",
        check=False,
        extra_env={"GIT_CEILING_DIRECTORIES": str(path.parent)},
    )
    return done.returncode == 0 and Path(done.stdout.strip()).resolve() == path


def _clear_stale_git_locks(path: Path, branch: str) -> None:
    # A git killed mid-commit leaves its lock files and every later git call in
    # the worktree fails. We hold the task lock, so no git of ours is running here.
    git_dir = Path(_git(path, "rev-parse", "--absolute-git-dir").stdout.strip())
    common = _git(path, "rev-parse", "--path-format=absolute", "--git-common-dir")
    common_dir = Path(common.stdout.strip())
    for stale in (
        git_dir / "index.lock",
        git_dir / "HEAD.lock",
        common_dir / "refs" / "heads" / f"{branch}.lock",
    ):
        stale.unlink(missing_ok=True)


def _discard(repo: Path, path: Path, entry: _Entry | None) -> None:
    if entry is not None:
        _git(repo, "worktree", "unlock", str(path), check=False)
    if path.exists() or path.is_symlink():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    _git(repo, "worktree", "prune")


def _prepare(task: BuildTask, *, repo_path: Path | None, state_dir: Path) -> Worktree:
    """`prepare_worktree` without the task lock (the caller holds it)."""
    state_dir = state_dir.expanduser().resolve()
    key = task_key(task.task_id)
    branch = f"{BRANCH_PREFIX}{key}"
    repo = _resolve_repo(task, repo_path, state_dir)
    path = state_dir / "worktrees" / key
    _git(repo, "worktree", "prune")
    entry = _registered(repo, path)
    if entry is not None and _healthy(entry, path, branch):
        # Leftovers of a run that never recorded its commit must not leak into the next one.
        _clear_stale_git_locks(path, branch)
        _git(path, "reset", "-q", "--hard", "HEAD")
        _git(path, "clean", "-q", "-f", "-d")
    else:
        _discard(repo, path, entry)
        path.parent.mkdir(parents=True, exist_ok=True)
        if _ref_exists(repo, f"refs/heads/{branch}"):
            # Keep the branch: its history holds the records of earlier builds.
            _git(repo, "worktree", "add", "-q", str(path), branch)
        else:
            _git(repo, "worktree", "add", "-q", "-B", branch, str(path), "HEAD")
    return Worktree(repo=repo, path=path, branch=branch, key=key)


def prepare_worktree(task: BuildTask, *, repo_path: Path | None, state_dir: Path) -> Worktree:
    """Make (or reuse) the task's worktree, ready for a builder.

    The repository is `task.repo`, else `repo_path`, else one created under
    `state_dir/repos/default` with an empty first commit. The worktree is
    `state_dir/worktrees/<key>` on branch `agent-team/<key>`, started from the
    repository's HEAD when the branch is new and kept as it is when it exists
    (its history is the build record). Calling this again is safe: a healthy
    worktree is reused with uncommitted leftovers discarded (`reset --hard`,
    `clean -fd`); a half-made one (a killed `git worktree add`, a deleted
    folder, stale git locks) is removed and made again.

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
    """The `Worktree` of an existing folder: what a builder gets is only a path.

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


# --- build records -----------------------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())


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


def find_build(worktree: Worktree, plan_hash: str) -> BuildResult | None:
    """The recorded build of this plan for this task, if there is one.

    Looks through the history of the task branch for a commit authored by
    agent-team whose trailers name this task (`Agent-Team-Task`) and this plan
    (`Agent-Team-Plan`). The task trailer matters: a branch started from a
    HEAD that already contains another task's merged build must not reuse it.

    Args:
        worktree: the task's worktree.
        plan_hash: `plan_hash()` of the approved plan.

    Returns:
        The newest matching build with `reused=True`, or `None`.
    """
    ref = f"refs/heads/{worktree.branch}"
    if not _ref_exists(worktree.repo, ref):
        return None
    done = _git(
        worktree.repo,
        "log",
        "--fixed-strings",
        f"--author=<{AUTHOR_EMAIL}>",
        f"--grep={PLAN_TRAILER}: {plan_hash}",
        "--format=%H%x1f%ae%x1f%B%x1e",
        ref,
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
    on a repository's pre-commit checks.

    Args:
        worktree: the task's worktree.
        message: subject line, then optionally a blank line and a body.
        plan_hash: `plan_hash()` of the plan that was built.
        trailers: more `Agent-Team-*` trailers (name to one-line value).

    Returns:
        The new commit's sha.
    """
    _git(worktree.path, "add", "-A", "--", ".", f":(exclude){SCRATCH_DIR}")
    lines = [f"{TASK_TRAILER}: {worktree.key}", f"{PLAN_TRAILER}: {plan_hash}"]
    lines += [f"{name}: {_one_line(value)}" for name, value in (trailers or {}).items()]
    text = message.replace("\r\n", "\n").strip() or "agent-team build"
    full = f"{text}\n\n" + "\n".join(lines) + "\n"
    _git(
        worktree.path,
        "commit",
        "-q",
        "--allow-empty",
        "--no-verify",
        "--cleanup=whitespace",
        "-F",
        "-",
        stdin_text=full,
    )
    return _git(worktree.path, "rev-parse", "HEAD").stdout.strip()


def record_build(
    task: BuildTask,
    worktree_path: Path,
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
        worktree_path: the worktree the builder worked in.
        plan_markdown: the plan it built.
        builder: the builder's name (kept in an `Agent-Team-Builder` trailer).
        summary: a few lines for people; becomes the commit body (redacted).
        output: the builder's output tail, already redacted (not committed).
        usage: model usage, kept in an `Agent-Team-Usage` trailer so a reused
            result still reports it.

    Returns:
        The result, with the new commit.
    """
    worktree = open_worktree(worktree_path, task)
    digest = plan_hash(plan_markdown)
    subject = _one_line(task.title)[:72].strip() or worktree.key
    clean_summary = redact(_CONTROL.sub(" ", summary)).strip()
    trailers = {BUILDER_TRAILER: builder}
    if usage is not None:
        trailers[USAGE_TRAILER] = json.dumps(usage.model_dump(), separators=(",", ":"))
    sha = commit_all(
        worktree,
        f"agent-team: {subject}\n\n{clean_summary}",
        digest,
        trailers=trailers,
    )
    return BuildResult(
        builder=builder,
        branch=worktree.branch,
        commit=sha,
        summary=clean_summary,
        output=output,
        plan_hash=digest,
        usage=usage,
    )
