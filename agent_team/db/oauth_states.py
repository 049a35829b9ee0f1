"""`oauth_states`: the one-time `state` of each Sign in with GitHub, kept until it is spent.

Why the ledger and not memory or the cookie alone: the state must be one-time
across a restart and across every daemon behind one ledger (the callback may
land on another daemon than the one that began the sign-in). Only a SHA-256 of
the state is stored, so a copy of the database gives no state away. Spending
one is a single compare-and-set on `used_at`, so two callbacks racing with the
same state sign in at most once; the spent row stays until the retention pass,
so a replay can be told apart from a forgery.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from agent_team.db.clock import to_iso
from agent_team.db.ledger import Ledger, Transaction, write_statement
from agent_team.exceptions import LedgerInputError

__all__ = [
    "OAUTH_STATE_KEPT",
    "OAUTH_STATE_LIFETIME",
    "SpentState",
    "prune_oauth_states",
    "save_oauth_state",
    "spend_oauth_state",
]

# How long a sign-in begun may take (GitHub's own codes last as long).
OAUTH_STATE_LIFETIME = timedelta(minutes=10)
# How long an expired or spent state is kept, so its refusal can say why.
OAUTH_STATE_KEPT = timedelta(days=1)
_HASH = re.compile(r"^[0-9a-f]{64}$")
MAX_NEXT_CHARS = 2000


@dataclass(frozen=True, slots=True)
class SpentState:
    """What spending a state found: `ok` (it was live and is spent now, `next_path` is where
    the sign-in goes), `unknown` (never issued here: forged), `used` or `expired`."""

    outcome: Literal["ok", "unknown", "used", "expired"]
    next_path: str = "/"


def _checked(state_hash: str) -> str:
    if not _HASH.match(state_hash):
        raise LedgerInputError("an OAuth state is stored as its SHA-256 in hex (64 characters)")
    return state_hash


def save_oauth_state(
    ledger: Ledger,
    state_hash: str,
    *,
    next_path: str,
    now: datetime,
    lifetime: timedelta = OAUTH_STATE_LIFETIME,
) -> None:
    """Record a state just issued (by its hash), live for `lifetime` from `now`.

    Raises:
        LedgerInputError: a malformed hash or an over-long `next_path`.
    """
    if not next_path.startswith("/") or len(next_path) > MAX_NEXT_CHARS:
        raise LedgerInputError(f"next_path must be a path of at most {MAX_NEXT_CHARS} characters")
    write_statement(
        ledger,
        "INSERT INTO oauth_states (state_hash, next_path, created_at, expires_at) "
        "VALUES (?, ?, ?, ?)",
        (_checked(state_hash), next_path, to_iso(now), to_iso(now + lifetime)),
    )


def spend_oauth_state(ledger: Ledger, state_hash: str, *, now: datetime) -> SpentState:
    """Spend a live state, once: one transaction, whoever else presents it at the same time.

    Writes nothing unless the state was live (`ok`).
    """
    _checked(state_hash)
    stamp = to_iso(now)

    def work(tx: Transaction) -> SpentState:
        spent = tx.execute(
            "UPDATE oauth_states SET used_at = ? "
            "WHERE state_hash = ? AND used_at IS NULL AND expires_at > ?",
            (stamp, state_hash, stamp),
        ).rowcount
        row = tx.fetch_one(
            "SELECT next_path, used_at FROM oauth_states WHERE state_hash = ?", (state_hash,)
        )
        if row is None:
            return SpentState("unknown")
        if spent:
            return SpentState("ok", str(row["next_path"]))
        return SpentState("used" if row["used_at"] is not None else "expired")

    return ledger.write(work)


def prune_oauth_states(ledger: Ledger, *, older_than: datetime) -> int:
    """Forget states that expired before `older_than` (the retention pass); how many went."""
    return write_statement(
        ledger, "DELETE FROM oauth_states WHERE expires_at < ?", (to_iso(older_than),)
    )
