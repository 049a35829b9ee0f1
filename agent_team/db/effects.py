"""Outbound side effects, recorded with their result id and checked before they are repeated.

DESIGN.md §4: a Slack post, a GitHub comment or pull request, a git push or a
Confluence write is keyed by a deterministic `effect_id` (for example
`github:pr:<task>`). The caller begins the effect (an idempotent insert that
returns the row as it stands), does the outside call only if the row is not
`done`, then finishes it with the result. A crash between the call and the
finish leaves a `pending` row: the caller decides how to check the outside
world before trying again (a Confluence page version, a PR listed by branch).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.connection import fetch_all, fetch_one, where_equal, write_transaction
from agent_team.db.records import SideEffect, row_to
from agent_team.exceptions import LedgerInputError
from agent_team.task_model import EffectState

__all__ = ["begin_effect", "finish_effect", "get_effect", "list_effects"]

_STATES = tuple(state.value for state in EffectState)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def begin_effect(
    conn: sqlite3.Connection,
    *,
    effect_id: str,
    task_id: str,
    kind: str,
    request: Any = None,
) -> SideEffect:
    """Insert the effect as `pending` unless it exists; return the row as it stands."""
    if not effect_id or not task_id or not kind:
        raise LedgerInputError("a side effect needs an effect_id, a task_id and a kind")

    def work(db: sqlite3.Connection) -> SideEffect:
        now = to_iso(utc_now())
        db.execute(
            "INSERT OR IGNORE INTO side_effects (effect_id, task_id, kind, state, request_json, "
            "created_at, updated_at) VALUES (?, ?, ?, 'pending', ?, ?, ?)",
            (effect_id, task_id, kind, _json(request), now, now),
        )
        row = fetch_one(db, "SELECT * FROM side_effects WHERE effect_id = ?", (effect_id,))
        assert row is not None  # same transaction
        return row_to(SideEffect, row)

    return write_transaction(conn, work)


def finish_effect(
    conn: sqlite3.Connection,
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

    def work(db: sqlite3.Connection) -> bool:
        cur = db.execute(
            "UPDATE side_effects SET state = ?, result_ref = COALESCE(?, result_ref), "
            "result_json = COALESCE(?, result_json), error = ?, "
            "request_json = COALESCE(?, request_json), updated_at = ? WHERE effect_id = ?",
            (
                state, result_ref, _json(result), error, _json(request), to_iso(utc_now()),
                effect_id,
            ),
        )  # fmt: skip
        return cur.rowcount == 1

    return write_transaction(conn, work)


def get_effect(conn: sqlite3.Connection, effect_id: str) -> SideEffect | None:
    row = fetch_one(conn, "SELECT * FROM side_effects WHERE effect_id = ?", (effect_id,))
    return None if row is None else row_to(SideEffect, row)


def list_effects(
    conn: sqlite3.Connection,
    *,
    task_id: str | None = None,
    kind: str | None = None,
    state: str | None = None,
) -> list[SideEffect]:
    where, params = where_equal({"task_id": task_id, "kind": kind, "state": state})
    rows = fetch_all(
        conn, f"SELECT * FROM side_effects {where} ORDER BY created_at, effect_id", params
    )
    return [row_to(SideEffect, row) for row in rows]
