"""One daemon per SQLite ledger: a lock file beside it, held with `flock` while the daemon runs.

Two daemons on one file would both run the recovery sweep and the same
tasks; nothing in the SQLite backend fences them (execution leases will, on
a backend that supports several daemons; there `claim_daemon_slot` can hand
out a lock that refuses nobody). The lock is the kernel's, so a `kill -9`
releases it with the process; the file only says who holds it (pid and
dashboard address) so the refusal can name them. `agent-team tick` takes no
lock: it claims commands in the ledger like any other writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.open_errors import explain
from agent_team.exceptions import LedgerError, LedgerInUseError

__all__ = [
    "DaemonHolder",
    "DaemonLock",
    "claim_daemon_slot",
    "daemon_holder",
    "in_use_error",
    "lock_path",
]


@dataclass(frozen=True)
class DaemonHolder:
    """Who runs on a ledger, as its lock file says (any field may be unknown)."""

    pid: int | None
    url: str | None
    started_at: str | None

    def describe(self) -> str:
        parts = [f"pid {self.pid}" if self.pid else "pid unknown"]
        if self.url:
            parts.append(self.url)
        return ", ".join(parts)


def lock_path(ledger: Path) -> Path:
    """`agent-team.db` -> `agent-team.db-daemon.lock`, beside SQLite's own `-wal` and `-shm`."""
    return ledger.with_name(ledger.name + "-daemon.lock")


def _read(file: IO[str]) -> DaemonHolder:
    file.seek(0)
    try:
        data = json.loads(file.read() or "{}")
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    pid = data.get("pid")
    url = data.get("url")
    started = data.get("started_at")
    return DaemonHolder(
        pid=pid if isinstance(pid, int) else None,
        url=url if isinstance(url, str) else None,
        started_at=started if isinstance(started, str) else None,
    )


def daemon_holder(ledger: Path) -> DaemonHolder | None:
    """The daemon running on this ledger now, or None; takes nothing and writes nothing."""
    path = lock_path(Path(ledger).absolute())
    try:
        file = path.open(encoding="utf-8")
    except OSError:
        return None
    with file:
        try:
            fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(file)
        except OSError:
            return None
        fcntl.flock(file, fcntl.LOCK_UN)
        return None


def in_use_error(ledger: Path, holder: DaemonHolder) -> LedgerInUseError:
    """The refusal a second daemon gets, naming the first."""
    return LedgerInUseError(
        f"another agent-team daemon ({holder.describe()}) already runs on the ledger "
        f"{ledger}; stop it first, or give this one its own --db / AGENT_TEAM_DB_PATH"
    )


class DaemonLock:
    """This process's claim on a ledger; `release()` (or the process ending) gives it up."""

    def __init__(self, ledger: Path, file: IO[str] | None) -> None:
        self.ledger = ledger
        self._file = file

    def release(self) -> None:
        file, self._file = self._file, None
        if file is None:
            return
        with contextlib.suppress(OSError):
            file.truncate(0)  # a stale record would name a daemon that is gone
        fcntl.flock(file, fcntl.LOCK_UN)
        file.close()

    def __enter__(self) -> DaemonLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def claim_daemon_slot(ledger: Path, *, url: str) -> DaemonLock:
    """Become the one daemon on this SQLite ledger, recording our pid and dashboard address.

    Raises:
        LedgerInUseError: another daemon holds it (the message names its pid and address).
        LedgerUnavailableError: the ledger's folder cannot be written.
    """
    ledger = Path(ledger).absolute()
    path = lock_path(ledger)
    try:
        ledger.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        explained = explain(exc, ledger)
        if explained is not None:
            raise explained from None
        raise LedgerError(f"cannot create {path} ({exc.strerror}); check --db") from None
    file = os.fdopen(fd, "r+", encoding="utf-8")
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read(file)
        file.close()
        raise in_use_error(ledger, holder) from None
    except BaseException:
        file.close()
        raise
    file.seek(0)
    file.truncate(0)
    json.dump({"pid": os.getpid(), "url": url, "started_at": to_iso(utc_now())}, file)
    file.flush()
    return DaemonLock(ledger, file)
