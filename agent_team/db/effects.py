"""Outbound side effects, recorded with their result id and checked before they are repeated.

docs/architecture.md §4: a Slack post, a GitHub comment or pull request, a git push or a
Confluence write is keyed by a deterministic `effect_id` (for example
`github:pr:<task>`). The caller begins the effect (an idempotent insert that
returns the row as it stands), does the outside call only if the row is not
`done`, then finishes it with the result. A crash between the call and the
finish leaves a `pending` row: the caller decides how to check the outside
world before trying again (a Confluence page version, a PR listed by branch).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.ledger import Ledger, Reader, Transaction, where_equal, write_statement
from agent_team.db.records import SideEffect, fetch_record, fetch_records, row_to
from agent_team.exceptions import LedgerInputError
from agent_team.task_model import EffectState

__all__ = ["begin_effect", "claim_effect", "finish_effect", "get_effect", "list_effects"]

_STATES = tuple(state.value for state in EffectState)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def begin_effect(
    ledger: Ledger,
    *,
    effect_id: str,
    task_id: str,
    kind: str,
    request: Any = None,
) -> SideEffect:
    """Insert the effect as `pending` unless it exists; return the row as it stands."""
    if not effect_id or not task_id or not kind:
        raise LedgerInputError("a side effect needs an effect_id, a task_id and a kind")

    def work(tx: Transaction) -> SideEffect:
        now = to_iso(utc_now())
        tx.execute(
            "INSERT INTO side_effects (effect_id, task_id, kind, state, request_json, "
            "created_at, updated_at) VALUES (?, ?, ?, 'pending', ?, ?, ?) "
            "ON CONFLICT (effect_id) DO NOTHING",
            (effect_id, task_id, kind, _json(request), now, now),
        )
        row = tx.fetch_one("SELECT * FROM side_effects WHERE effect_id = ?", (effect_id,))
        assert row is not None  # same transaction
        return row_to(SideEffect, row)

    return ledger.write(work)


def claim_effect(
    ledger: Ledger,
    *,
    effect_id: str,
    task_id: str,
    kind: str,
    now: datetime,
    stale_after: timedelta,
) -> bool:
    """Claim an effect for this caller alone (times from the caller's clock, `now`).

    Returns:
        True if it is new, or still `pending` since before `now - stale_after` (its
        claimer died before finishing it); False if another caller holds it or is done.
    """
    if not effect_id or not task_id or not kind:
        raise LedgerInputError("a side effect needs an effect_id, a task_id and a kind")
    stamp, stale = to_iso(now), to_iso(now - stale_after)

    def work(tx: Transaction) -> bool:
        cur = tx.execute(
            "INSERT INTO side_effects (effect_id, task_id, kind, state, created_at, updated_at) "
            "VALUES (?, ?, ?, 'pending', ?, ?) ON CONFLICT (effect_id) DO NOTHING",
            (effect_id, task_id, kind, stamp, stamp),
        )
        if cur.rowcount == 1:
            return True
        cur = tx.execute(
            "UPDATE side_effects SET updated_at = ? WHERE effect_id = ? AND state = 'pending' "
            "AND updated_at < ?",
            (stamp, effect_id, stale),
        )
        return cur.rowcount == 1

    return ledger.write(work)


def finish_effect(
    ledger: Ledger,
    *,
    effect_id: str,
    state: str = "done",
    result_ref: str | None = None,
    result: Any = None,
    error: str | None = None,
    request: Any = None,
) -> bool:
    """Record the outcome (or a newer outcome, e.g. an edited comment). False if no such row."""
    if state not in _STATES:
        raise LedgerInputError(f"side effect state must be one of {', '.join(_STATES)}")

    return (
        write_statement(
            ledger,
            "UPDATE side_effects SET state = ?, result_ref = COALESCE(?, result_ref), "
            "result_json = COALESCE(?, result_json), error = ?, "
            "request_json = COALESCE(?, request_json), updated_at = ? WHERE effect_id = ?",
            (
                state,
                result_ref,
                _json(result),
                error,
                _json(request),
                to_iso(utc_now()),
                effect_id,
            ),
        )
        == 1
    )


def get_effect(ledger: Reader, effect_id: str) -> SideEffect | None:
    return fetch_record(
        ledger, SideEffect, "SELECT * FROM side_effects WHERE effect_id = ?", (effect_id,)
    )


def list_effects(
    ledger: Reader,
    *,
    task_id: str | None = None,
    kind: str | None = None,
    state: str | None = None,
) -> list[SideEffect]:
    where, params = where_equal({"task_id": task_id, "kind": kind, "state": state})
    return fetch_records(
        ledger,
        SideEffect,
        f"SELECT * FROM side_effects {where} ORDER BY created_at, effect_id",
        params,
    )
