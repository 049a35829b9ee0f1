"""How the builders run git, and the file locks their git work takes.

Every git call runs with a fixed environment: no terminal prompts, no pager,
no system or global git config (so an operator's `commit.gpgSign` or hooks
path cannot change what we do), no hooks, and our identity given with `-c`.
git's automatic maintenance is switched off for our commands too: its gc
prunes worktrees, which must happen under a repository's lock
(`agent_team.builders.worktree`, `note_build`).

The locks are `flock` files under `state_dir/locks/`, so they hold across
processes (a restarted daemon beside an old one, `agent-team tick`):

    locks/<key>.lock          a task's lock (`agent_team.builders.worktree.task_lock`)
    locks/repos/<id>.lock     a repository's lock, by its git folder (`registry_lock`)
    locks/repos/default.lock  held while the default repository is created
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from agent_team.builders.proc import Completed, ProcessTimeout, inherited_env, run_process
from agent_team.common.redact import redact, tail
from agent_team.exceptions import BuildError, BuilderUnavailableError

__all__ = [
    "AUTHOR_EMAIL",
    "AUTHOR_NAME",
    "GIT_TIMEOUT_S",
    "file_lock",
    "registry_lock",
    "registry_lock_path",
    "run_git",
]

AUTHOR_NAME = "agent-team"
AUTHOR_EMAIL = "agent-team@localhost"
GIT_TIMEOUT_S = 300.0


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


def run_git(
    cwd: Path,
    *args: str,
    check: bool = True,
    stdin_text: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    config: Sequence[str] = (),
    timeout_s: float = GIT_TIMEOUT_S,
) -> Completed:
    """Run `git <args>` in `cwd` with our fixed environment and settings.

    Args:
        cwd: the folder to run in (a worktree, a repository, a bare mirror).
        args: git's arguments.
        check: raise `BuildError` on a non-zero exit (else the caller reads it).
        stdin_text: what to write to git's standard input.
        extra_env: more environment (never a secret in argv: see `git_host.auth_env`).
        config: more `-c name=value` settings, after ours.
        timeout_s: the deadline; git is killed with its children after it.

    Raises:
        BuildError: git failed (with `check`), timed out, or could not start in `cwd`.
        BuilderUnavailableError: git is not installed.
    """
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
        # No program named by a repository's config runs under our git (a build could
        # have written one where its worktree's git reads config).
        "-c",
        "core.fsmonitor=false",
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


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` (made if missing) until the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def registry_lock_path(state_dir: Path, common_dir: Path) -> Path:
    """The lock file of the repository whose git folder is `common_dir` (resolved)."""
    digest = hashlib.sha256(str(common_dir).encode("utf-8")).hexdigest()[:16]
    return state_dir / "locks" / "repos" / f"{digest}.lock"


@contextmanager
def registry_lock(state_dir: Path, common_dir: Path) -> Iterator[None]:
    """Hold a repository's lock, by its git folder: one add, prune, gc or fetch at a time.

    Why: every worktree is registered in the repository's `worktrees/`, which
    all tasks share, and `git worktree prune` (gc too) deletes any entry that
    looks half-made, including one another task's `worktree add` is writing.
    A mirror's fetch takes the same lock, so it never runs beside gc packing
    its refs or beside a `worktree add` reading the head it moves.
    """
    with file_lock(registry_lock_path(state_dir, common_dir)):
        yield
