"""Online backups of the ledger with SQLite's backup API (consistent while the daemon writes)."""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime
from pathlib import Path

from agent_team.db.clock import utc_now
from agent_team.db.sqlite_ledger import SqliteLedger
from agent_team.exceptions import LedgerError, LedgerInputError

__all__ = ["BACKUP_PREFIX", "backup_ledger", "list_backups"]

BACKUP_PREFIX = "agent-team-"


def list_backups(out_dir: Path) -> list[Path]:
    """Backups in `out_dir`, oldest first (the names sort by time)."""
    return sorted(out_dir.glob(f"{BACKUP_PREFIX}*.db"))


def backup_ledger(
    db_path: Path, out_dir: Path, *, keep: int, now: datetime | None = None
) -> tuple[Path, list[Path]]:
    """Copy the ledger (checkpoints included) to `out_dir` and keep the newest `keep` copies.

    The copy is written under a temporary name, checked with `PRAGMA
    integrity_check`, then renamed, so a half-written file never looks like a
    backup.

    Returns:
        The new backup and the old ones removed.
    """
    if keep < 1:
        raise LedgerInputError("--keep must be 1 or more")
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = (now or utc_now()).strftime("%Y%m%dT%H%M%S%fZ")
    final = out_dir / f"{BACKUP_PREFIX}{stamp}.db"
    staging = out_dir / f".{final.name}.partial"
    source = SqliteLedger(db_path, readonly=True)
    try:
        target = sqlite3.connect(staging)
        try:
            source.raw().backup(target)
            verdict = target.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            target.close()
    finally:
        source.close()
    if verdict != "ok":
        staging.unlink(missing_ok=True)
        raise LedgerError(f"the backup of {db_path} failed its integrity check: {verdict}")
    os.replace(staging, final)
    removed = list_backups(out_dir)[:-keep]
    for old in removed:
        old.unlink()
    return final, removed
