"""Contract: an `Idempotency-Key` names one task for 24 h (v15 `idempotency_keys`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError
from tests.integration.ledger.test_races import THREADS, race

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
KEY = db.IdempotencyKey("dashboard:ada", "retry-me", "a" * 64)


def _once(
    ledger: db.Ledger, key: db.IdempotencyKey, task_id: str, *, now: datetime = T0
) -> db.KeptRequest:
    return db.create_task_once(
        ledger,
        key,
        now=now,
        task_id=task_id,
        kind="code",
        title="Keyed",
        audit=db.AuditEntry("ada", "dashboard", "submit", task_id),
        start=db.StartCommand(f"start:{task_id}"),
    )


def test_a_key_makes_one_task_and_names_it_afterwards(ledger: db.Ledger) -> None:
    assert _once(ledger, KEY, "t-1") == db.KeptRequest("t-1", KEY.fingerprint, created=True)
    assert _once(ledger, KEY, "t-2", now=T0 + timedelta(hours=23)) == db.KeptRequest(
        "t-1", KEY.fingerprint, created=False
    )
    assert db.get_task(ledger, "t-2") is None
    assert [c.command_id for c in db.list_commands(ledger)] == ["start:t-1"]
    assert [row.target for row in db.list_audit(ledger)] == ["t-1"]


def test_a_different_request_under_the_key_gets_the_first_ones_fingerprint(
    ledger: db.Ledger,
) -> None:
    _once(ledger, KEY, "t-1")
    other = db.IdempotencyKey(KEY.scope, KEY.key, "b" * 64)
    assert _once(ledger, other, "t-2") == db.KeptRequest("t-1", KEY.fingerprint, created=False)
    assert db.get_task(ledger, "t-2") is None


def test_keys_are_per_caller(ledger: db.Ledger) -> None:
    _once(ledger, KEY, "t-1")
    bob = db.IdempotencyKey("dashboard:bob", KEY.key, KEY.fingerprint)
    assert _once(ledger, bob, "t-2").created


def test_after_24_hours_the_key_names_a_new_request(ledger: db.Ledger) -> None:
    _once(ledger, KEY, "t-1")
    later = _once(ledger, KEY, "t-2", now=T0 + db.KEY_WINDOW + timedelta(seconds=1))
    assert later == db.KeptRequest("t-2", KEY.fingerprint, created=True)
    assert _once(ledger, KEY, "t-3", now=T0 + db.KEY_WINDOW * 1.5).task_id == "t-2"


def test_pruning_forgets_only_keys_older_than_asked(ledger: db.Ledger) -> None:
    _once(ledger, KEY, "t-1")
    fresh = db.IdempotencyKey(KEY.scope, "fresh", KEY.fingerprint)
    _once(ledger, fresh, "t-2", now=T0 + timedelta(hours=2))
    assert db.prune_idempotency_keys(ledger, older_than=T0 + timedelta(hours=1)) == 1
    assert db.table_counts(ledger)["idempotency_keys"] == 1
    assert db.get_task(ledger, "t-1") is not None, "the task outlives its key"
    assert _once(ledger, fresh, "t-3", now=T0 + timedelta(hours=3)).task_id == "t-2"


@pytest.mark.parametrize(
    "key",
    [
        db.IdempotencyKey("", "k", "f"),
        db.IdempotencyKey("s", "", "f"),
        db.IdempotencyKey("s", "k" * (db.MAX_KEY_CHARS + 1), "f"),
        db.IdempotencyKey("s", "k", ""),
    ],
)
def test_a_key_without_its_parts_is_refused(ledger: db.Ledger, key: db.IdempotencyKey) -> None:
    with pytest.raises(LedgerInputError):
        _once(ledger, key, "t-1")
    assert db.table_counts(ledger)["tasks"] == 0


def test_64_threads_retrying_one_key_make_one_task(ledger: db.Ledger) -> None:
    kept = race(THREADS, lambda i: _once(ledger, KEY, f"t-{i}"))
    assert sum(k.created for k in kept) == 1
    assert len({k.task_id for k in kept}) == 1
    assert db.table_counts(ledger)["tasks"] == 1
    assert db.table_counts(ledger)["commands"] == 1
