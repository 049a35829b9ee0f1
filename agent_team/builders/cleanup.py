"""A finished task's worktree is removed; its branch, the build record, stays.

Why: a worktree is a checkout of the whole repository plus git's files for it
(index, HEAD, logs) per task, and nothing reads it once the task has ended:
the build is a commit on the task branch, and publishing pushes that commit
from the repository's object store (`agent_team.integrations.github.pr`),
never from the worktree. So when a task ends (done, failed, cancelled) the
coordinator removes it, through `FinishedWorktrees`, a task observer wired in
`agent_team.service.wiring`. A task built again later (a retry) gets a fresh worktree
from its branch (`prepare_worktree`).

How, with no git process and safe at every step of a crash:

1. Under the task's lock (skipped if a build of the task holds it: that
   build's process still works there) and the repository's registry lock
   (no `worktree add`, prune or gc of ours meanwhile), the folder is renamed
   into `worktrees/.removed/`: one atomic step that frees the task's path
   and makes git see the worktree as gone. Then its registration
   (`.git/worktrees/<id>`) is deleted, as `git worktree prune` would.
2. The renamed folder is deleted.

A crash after the rename leaves a folder under `.removed/` whose `.git` file
still names the registration; every later removal first finishes such
leftovers (`sweep_removed`). Task keys never start with `.`, so `.removed`
is never a task's folder.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Protocol

from agent_team.builders.gitcmd import registry_lock
from agent_team.builders.worktree import (
    _admin_dir,
    _read,
    _registered_at,
    task_key,
    try_task_lock,
)

__all__ = [
    "FINISHED_EVENTS",
    "REMOVED_DIR",
    "FinishedWorktrees",
    "remove_worktree",
    "sweep_removed",
]

log = logging.getLogger(__name__)

# The task events (the coordinator's `notify`) after which a task never builds again by itself.
FINISHED_EVENTS = frozenset({"done", "failed", "cancelled"})
REMOVED_DIR = ".removed"


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


class FinishedWorktrees:
    """A task observer: removes a task's worktree when the task ends.

    Observers are called with `(task, event, text)` after every task event;
    this one acts on `done`, `failed` and `cancelled`. It never raises: a
    worktree that cannot be removed now is logged and left for later.
    """

    def __init__(self, state_dir: Path) -> None:
        """Remember where the worktrees are (`<state_dir>/worktrees`)."""
        self.state_dir = state_dir

    def __call__(self, task: _HasId, event: str, text: str) -> None:
        if event not in FINISHED_EVENTS:
            return
        try:
            remove_worktree(task.id, state_dir=self.state_dir)
        except Exception:  # the task has ended; its worktree must not change that
            log.warning("could not remove the worktree of task %s", task.id, exc_info=True)


def remove_worktree(task_id: str, *, state_dir: Path) -> bool:
    """Remove the task's worktree, if it has one; keep its branch and commits.

    Idempotent: a missing worktree is a no-op. Leftovers of an earlier removal
    that crashed are finished first.

    Args:
        task_id: the task's id.
        state_dir: the state folder (worktrees are in `worktrees/<key>`).

    Returns:
        True if a worktree (or a stray folder at its place) was removed.

    Raises:
        OSError: the folder could not be renamed (its parent is not writable).
    """
    state_dir = state_dir.expanduser().resolve()
    sweep_removed(state_dir)
    path = state_dir / "worktrees" / task_key(task_id)
    if not (path.exists() or path.is_symlink()):
        return False
    with try_task_lock(state_dir, task_id) as held:
        if not held:
            log.info("task %s is being built; its worktree is left in place", task_id)
            return False
        if not (path.exists() or path.is_symlink()):
            return False
        trash = state_dir / "worktrees" / REMOVED_DIR / f"{path.name}.{uuid.uuid4().hex[:12]}"
        trash.parent.mkdir(exist_ok=True)
        admin = _admin_dir(path) if not path.is_symlink() else None
        common = _common_dir_of(admin)
        if admin is None or common is None:
            os.rename(path, trash)  # a stray folder: no registration to change
        else:
            with registry_lock(state_dir, common):
                ours = _registered_at(admin) == path / ".git"
                os.rename(path, trash)
                if ours:  # not the registration of another folder this one was copied from
                    _delete_registration(admin)
    _delete(trash)
    return True


def sweep_removed(state_dir: Path) -> int:
    """Finish removals a crash interrupted: registrations left behind, then the folders.

    Returns:
        How many leftover folders were found.
    """
    removed = state_dir.expanduser().resolve() / "worktrees" / REMOVED_DIR
    try:
        leftovers = list(removed.iterdir())
    except FileNotFoundError:
        return 0
    for leftover in leftovers:
        admin = _admin_dir(leftover) if not leftover.is_symlink() else None
        common = _common_dir_of(admin)
        if admin is not None and common is not None:
            with registry_lock(state_dir.expanduser().resolve(), common):
                target = _registered_at(admin)
                # Only a registration whose worktree is gone: the task may have a new one by now.
                if admin.is_dir() and (target is None or not target.exists()):
                    _delete_registration(admin)
        _delete(leftover)
    return len(leftovers)


def _common_dir_of(admin: Path | None) -> Path | None:
    """The repository's git folder a registration entry (`<git>/worktrees/<id>`) belongs to."""
    if admin is None or admin.parent.name != "worktrees":
        return None
    common = admin.parent.parent
    return common if _read(common / "HEAD") is not None else None


def _delete_registration(admin: Path) -> None:
    try:
        shutil.rmtree(admin)
    except FileNotFoundError:
        pass
    except OSError as exc:  # `git worktree prune` removes what is left of it
        log.warning("could not delete the worktree registration %s: %s", admin, exc)


def _delete(folder: Path) -> None:
    if folder.is_symlink() or folder.is_file():
        folder.unlink(missing_ok=True)
        return
    shutil.rmtree(folder, ignore_errors=True)
    if folder.exists():
        log.warning("could not delete %s; the next worktree removal tries again", folder)
