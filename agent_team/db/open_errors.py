"""Why the ledger file cannot be used, told apart so each case gets its own fix.

SQLite says "unable to open database file" both when the folder is read-only
(a WAL ledger needs `<name>-wal` and `<name>-shm` beside it, created even for
a read) and when the file is not ours to read; "database is locked" is another
process; only "malformed" and "not a database" are about the file itself. A
damaged ledger is reported (and a backup advised) only when `PRAGMA
quick_check` confirms it, never for a healthy file we merely cannot reach.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from agent_team.exceptions import LedgerCorruptError, LedgerStorageError, LedgerUnavailableError

__all__ = ["ensure_writable_folder", "explain", "folder_problem", "integrity_problem"]

_FOLDER_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def folder_problem(folder: Path) -> str | None:
    """Why this process cannot create files in `folder` (its nearest existing parent), or None."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError as exc:
        return f"not usable ({exc.strerror})"
    if read_only:
        return "on a read-only file system"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"not writable by this user (uid {os.geteuid()})"
    return None


def _folder_error(file: Path, reason: str) -> LedgerUnavailableError:
    name = file.name
    return LedgerUnavailableError(
        f"the ledger's folder {file.parent} is {reason}, and SQLite must create {name}-wal and "
        f"{name}-shm beside the ledger even to read it; make the folder writable (remount it "
        "read-write or give this user write access), or copy the ledger to a writable folder "
        "and point --db at the copy"
    )


def ensure_writable_folder(file: Path) -> None:
    """Refuse, with the fix, a ledger whose folder this process cannot write.

    Raises:
        LedgerUnavailableError: the folder (or the nearest one that exists) is
            read-only or not writable for this user.
    """
    reason = folder_problem(file.parent)
    if reason is not None:
        raise _folder_error(file, reason)


def integrity_problem(file: Path) -> str | None:
    """What `PRAGMA quick_check` finds wrong with the file (first problem), or None if it is sound.

    A check that cannot even run because the file is unreadable garbage counts
    as damage; one that cannot open the file at all says nothing about it (None).
    """
    try:
        conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error:
        return None
    try:
        rows = conn.execute("PRAGMA quick_check(3)").fetchall()
    except sqlite3.DatabaseError as exc:
        text = str(exc)
        return text if _is_damage(text) else None
    finally:
        conn.close()
    problems = [str(row[0]) for row in rows if row and row[0] != "ok"]
    return "; ".join(problems) if problems else None


def _is_damage(text: str) -> bool:
    lowered = text.lower()
    return "malformed" in lowered or "corrupt" in lowered


def explain(exc: sqlite3.Error | OSError, file: Path) -> LedgerStorageError | None:
    """The error an operator can act on for this failure, or None if it is none of ours to tell.

    Args:
        exc: what the driver (or the file system, creating the folder) raised.
        file: the ledger file.
    """
    if isinstance(exc, OSError):
        if exc.errno in _FOLDER_ERRNOS:
            return _folder_error(file, folder_problem(file.parent) or exc.strerror or "unusable")
        return None
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return LedgerUnavailableError(
            f"the ledger {file} is locked by another process ({exc}); wait for it to finish or "
            f"stop it (`fuser {file}` names it), then try again"
        )
    if "not a database" in text:
        return LedgerStorageError(
            f"{file} is not a SQLite database ({exc}); check --db / AGENT_TEAM_DB_PATH"
        )
    if _is_damage(text):
        problem = integrity_problem(file)
        if problem is None:
            return None
        return LedgerCorruptError(
            f"the ledger {file} is damaged (PRAGMA quick_check: {problem}); stop the daemon, "
            "keep this file aside for inspection, and restore the newest backup (made by "
            "`agent-team backup`) in its place"
        )
    if "unable to open" in text or "readonly" in text or "read-only" in text:
        reason = folder_problem(file.parent)
        if reason is not None:
            return _folder_error(file, reason)
        if file.exists() and not os.access(file, os.R_OK | os.W_OK):
            return LedgerUnavailableError(
                f"the ledger {file} is not readable and writable for this user (uid "
                f"{os.geteuid()}); give this user access to it, or run agent-team as its owner"
            )
        return LedgerUnavailableError(
            f"cannot open the ledger {file} ({exc}); check --db / AGENT_TEAM_DB_PATH and the "
            "permissions of the file and its folder"
        )
    return None
