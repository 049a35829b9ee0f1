"""The audit log: who changed what, written in the same transaction as the change it records.

Every operator and integration action that changes state (answers from any
transport, reopen, retry, cancel, submit, automation changes) passes an
`AuditEntry` to the `db` function that makes the change; that function appends
the row inside its own write transaction, only when the change happened. If
the row cannot be written, the transaction rolls back and the change does not
happen either.

Rows are hash-chained: each stores the previous row's hash and
`sha256(prev_hash, at, actor, via, action, target, detail)`. `audit_head`
holds the last hash and the row count; every append updates it, which
serialises appends (SQLite's write lock; on PostgreSQL a concurrent append
fails to serialise and runs again) and makes a truncated tail detectable.
`verify_audit` walks the chain and names the first row that does not hold.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.ledger import Ledger, Reader, Transaction
from agent_team.db.records import AuditRow, fetch_record, fetch_records
from agent_team.exceptions import LedgerInputError

__all__ = [
    "GENESIS_HASH",
    "NOTE_ACTION",
    "AuditEntry",
    "AuditVerdict",
    "append_audit",
    "list_audit",
    "list_task_notes",
    "record_audit",
    "row_hash",
    "verify_audit",
]

GENESIS_HASH = "0" * 64
_FIELD_MAX = 200  # actor, via, action, target: names and ids, never free text


@dataclass(frozen=True)
class AuditEntry:
    """One action to record: `actor` did `action` to `target` through `via`."""

    actor: str
    via: str
    action: str
    target: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("actor", "via", "action", "target"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip() or len(value) > _FIELD_MAX:
                raise LedgerInputError(
                    f"an audit entry needs a {name} of 1..{_FIELD_MAX} characters, not {value!r}"
                )

    def with_detail(self, **more: Any) -> AuditEntry:
        return AuditEntry(self.actor, self.via, self.action, self.target, {**self.detail, **more})


def _detail_json(detail: Mapping[str, Any]) -> str:
    return json.dumps(dict(detail), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def row_hash(
    prev_hash: str, at: str, actor: str, via: str, action: str, target: str, detail: str | None
) -> str:
    """The chained hash of one row (its fields as a canonical JSON list)."""
    canonical = json.dumps(
        [prev_hash, at, actor, via, action, target, detail],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def append_audit(tx: Transaction, entry: AuditEntry, *, now: datetime | None = None) -> str:
    """Inside the write that makes the change: append `entry` to the chain; its hash."""
    head = tx.fetch_one("SELECT rows, hash FROM audit_head WHERE id = 1")
    prev, rows = (str(head["hash"]), int(head["rows"])) if head else (GENESIS_HASH, 0)
    at = to_iso(now or utc_now())
    detail = _detail_json(entry.detail) if entry.detail else None
    digest = row_hash(prev, at, entry.actor, entry.via, entry.action, entry.target, detail)
    tx.execute(
        "INSERT INTO audit_log (at, actor, via, action, target, detail, prev_hash, hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (at, entry.actor, entry.via, entry.action, entry.target, detail, prev, digest),
    )
    if head is None:
        tx.execute("INSERT INTO audit_head (id, rows, hash) VALUES (1, ?, ?)", (1, digest))
    else:
        tx.execute(
            "UPDATE audit_head SET rows = ?, hash = ? WHERE id = 1 AND hash = ?",
            (rows + 1, digest, prev),
        )
    return digest


def record_audit(ledger: Ledger, entry: AuditEntry) -> AuditRow:
    """An audit row on its own (a refusal: nothing else changed, but who tried is kept)."""

    def work(tx: Transaction) -> AuditRow:
        append_audit(tx, entry)
        # The newest row is ours: appending holds the chain's head until the commit.
        row = fetch_record(tx, AuditRow, "SELECT * FROM audit_log ORDER BY seq DESC LIMIT 1")
        assert row is not None  # just written
        return row

    return ledger.write(work)


NOTE_ACTION = "note"


def list_task_notes(reader: Reader, task_id: str) -> list[AuditRow]:
    """The notes people left on a task, oldest first: audit rows, so none is edited or lost."""
    return fetch_records(
        reader,
        AuditRow,
        "SELECT * FROM audit_log WHERE target = ? AND action = ? ORDER BY seq",
        (task_id, NOTE_ACTION),
    )


def list_audit(
    reader: Reader,
    *,
    actor: str | None = None,
    via: str | None = None,
    action: str | None = None,
    target: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
    before_seq: int | None = None,
) -> list[AuditRow]:
    """Rows newest first, filtered; `action` matches a prefix (`automation.` for all of them)."""
    if not 1 <= limit <= 1000:
        raise LedgerInputError("list_audit needs 1 <= limit <= 1000")
    clauses: list[str] = []
    params: list[object] = []
    for column, value in (("actor", actor), ("via", via), ("target", target)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if action is not None:
        clauses.append("substr(action, 1, ?) = ?")
        params += [len(action), action]
    if since is not None:
        clauses.append("at >= ?")
        params.append(to_iso(since))
    if before_seq is not None:
        clauses.append("seq < ?")
        params.append(before_seq)
    where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
    return fetch_records(
        reader,
        AuditRow,
        f"SELECT * FROM audit_log {where}ORDER BY seq DESC LIMIT ?",
        [*params, limit],
    )


@dataclass(frozen=True)
class AuditVerdict:
    """What `verify_audit` found: `ok`, how many rows it checked, the first broken one."""

    rows: int
    broken_seq: int | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


_PAGE = 1000


def verify_audit(reader: Reader) -> AuditVerdict:
    """Walk the chain from the first row; stop at the first row whose link or hash is wrong.

    Pass a snapshot (`Ledger.snapshot()`): the rows and the head must be read in one
    state, or an append between the two reads looks like a removed tail.
    """
    prev, checked, after = GENESIS_HASH, 0, 0
    while True:
        page = fetch_records(
            reader,
            AuditRow,
            "SELECT * FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?",
            (after, _PAGE),
        )
        for row in page:
            if row.prev_hash != prev:
                return AuditVerdict(
                    checked,
                    row.seq,
                    f"row {row.seq} does not follow the row before it (a row was removed, "
                    "inserted or reordered there)",
                )
            expected = row_hash(
                row.prev_hash, row.at, row.actor, row.via, row.action, row.target, row.detail
            )
            if row.hash != expected:
                return AuditVerdict(
                    checked, row.seq, f"row {row.seq} was changed after it was written"
                )
            prev, checked, after = row.hash, checked + 1, row.seq
        if len(page) < _PAGE:
            break
    head = reader.fetch_one("SELECT rows, hash FROM audit_head WHERE id = 1")
    head_rows, head_hash = (int(head["rows"]), str(head["hash"])) if head else (0, GENESIS_HASH)
    if (head_rows, head_hash) != (checked, prev):
        return AuditVerdict(
            checked,
            after + 1 if head_rows > checked else after,
            f"the log ends after {checked} row(s) but its head records {head_rows}: rows were "
            "removed from the end, or the head was changed",
        )
    return AuditVerdict(checked)
