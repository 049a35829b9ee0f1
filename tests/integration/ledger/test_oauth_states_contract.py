"""Contract: a GitHub sign-in's state is spent once, within its 10 minutes (v17 `oauth_states`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError
from tests.integration.ledger.test_races import race

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
STATE = "a" * 64


def _rows(ledger: db.Ledger) -> list[tuple[object, ...]]:
    return [tuple(row) for row in ledger.execute("SELECT * FROM oauth_states").fetchall()]


def test_a_state_is_spent_once_and_says_where_to_go(ledger: db.Ledger) -> None:
    db.save_oauth_state(ledger, STATE, next_path="/task/t-1", now=T0)

    first = db.spend_oauth_state(ledger, STATE, now=T0 + timedelta(minutes=9))
    again = db.spend_oauth_state(ledger, STATE, now=T0 + timedelta(minutes=9))

    assert first == db.SpentState("ok", "/task/t-1")
    assert again.outcome == "used"


def test_an_unknown_or_expired_state_is_refused_and_nothing_is_written(
    ledger: db.Ledger,
) -> None:
    db.save_oauth_state(ledger, STATE, next_path="/", now=T0)
    before = _rows(ledger)

    assert db.spend_oauth_state(ledger, "b" * 64, now=T0).outcome == "unknown"
    late = T0 + db.OAUTH_STATE_LIFETIME
    assert db.spend_oauth_state(ledger, STATE, now=late).outcome == "expired"

    assert _rows(ledger) == before


def test_a_malformed_hash_or_next_path_is_refused(ledger: db.Ledger) -> None:
    with pytest.raises(LedgerInputError, match="SHA-256"):
        db.save_oauth_state(ledger, "not-a-hash", next_path="/", now=T0)
    with pytest.raises(LedgerInputError, match="next_path"):
        db.save_oauth_state(ledger, STATE, next_path="https://evil.example/", now=T0)
    with pytest.raises(LedgerInputError, match="SHA-256"):
        db.spend_oauth_state(ledger, "A" * 64, now=T0)
    assert _rows(ledger) == []


def test_pruning_forgets_only_states_expired_before_the_cut(ledger: db.Ledger) -> None:
    db.save_oauth_state(ledger, "1" * 64, next_path="/", now=T0)
    db.save_oauth_state(ledger, "2" * 64, next_path="/", now=T0 + timedelta(hours=2))

    gone = db.prune_oauth_states(ledger, older_than=T0 + timedelta(hours=1))

    assert gone == 1
    assert [row[0] for row in _rows(ledger)] == ["2" * 64]


def test_racing_spends_of_one_state_sign_in_once(ledger: db.Ledger) -> None:
    db.save_oauth_state(ledger, STATE, next_path="/", now=T0)

    outcomes = race(16, lambda _n: db.spend_oauth_state(ledger, STATE, now=T0).outcome)

    assert sorted(outcomes) == ["ok"] + ["used"] * 15
