"""Contract: the v7 records of the outside world (seen events, side effects, intake cursors)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError
from tests.integration.ledger.test_races import THREADS, race

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_an_event_is_claimed_once_per_source(ledger: db.Ledger) -> None:
    assert db.claim_event(ledger, source="slack", event_id="Ev1") is True
    assert db.claim_event(ledger, source="slack", event_id="Ev1") is False
    assert db.claim_event(ledger, source="github", event_id="Ev1") is True
    assert db.event_seen(ledger, source="slack", event_id="Ev1")
    assert not db.event_seen(ledger, source="slack", event_id="Ev2")


def test_an_event_without_an_id_is_refused(ledger: db.Ledger) -> None:
    with pytest.raises(LedgerInputError):
        db.claim_event(ledger, source="slack", event_id="")
    assert db.table_counts(ledger)["seen_events"] == 0


def test_64_threads_claiming_one_event_have_one_winner(ledger: db.Ledger) -> None:
    results = race(THREADS, lambda _i: db.claim_event(ledger, source="slack", event_id="Ev9"))
    assert results.count(True) == 1


def test_pruning_forgets_only_old_events(ledger: db.Ledger) -> None:
    db.claim_event(ledger, source="slack", event_id="old", now=T0 - timedelta(days=3))
    db.claim_event(ledger, source="slack", event_id="new", now=T0)
    assert db.prune_events(ledger, older_than=T0 - timedelta(days=1)) == 1
    assert not db.event_seen(ledger, source="slack", event_id="old")
    assert db.event_seen(ledger, source="slack", event_id="new")


def test_a_side_effect_begins_once_and_keeps_its_result(ledger: db.Ledger) -> None:
    first = db.begin_effect(
        ledger, effect_id="github:pr:t1", task_id="t1", kind="github_pr", request={"head": "b"}
    )
    assert first.state == "pending" and first.request == {"head": "b"}
    assert db.finish_effect(
        ledger, effect_id="github:pr:t1", result_ref="https://x/pull/3", result={"number": 3}
    )
    again = db.begin_effect(
        ledger, effect_id="github:pr:t1", task_id="t1", kind="github_pr", request={"head": "z"}
    )
    assert again.state == "done" and again.result_ref == "https://x/pull/3"
    assert again.request == {"head": "b"}, "a second begin must not overwrite the first"
    assert again.result == {"number": 3}
    assert [e.effect_id for e in db.list_effects(ledger, task_id="t1")] == ["github:pr:t1"]
    assert db.list_effects(ledger, kind="slack_post") == []


def test_a_later_outcome_replaces_the_result_but_keeps_the_ref(
    ledger: db.Ledger,
) -> None:
    db.begin_effect(ledger, effect_id="c", task_id="t1", kind="github_comment")
    db.finish_effect(ledger, effect_id="c", result_ref="77", result={"body": "one"})
    db.finish_effect(ledger, effect_id="c", result={"body": "two"})
    effect = db.get_effect(ledger, "c")
    assert effect is not None
    assert (effect.result_ref, effect.result) == ("77", {"body": "two"})


def test_finishing_with_a_bad_state_changes_nothing(ledger: db.Ledger) -> None:
    db.begin_effect(ledger, effect_id="e", task_id="t1", kind="k")
    with pytest.raises(LedgerInputError):
        db.finish_effect(ledger, effect_id="e", state="maybe")
    effect = db.get_effect(ledger, "e")
    assert effect is not None and effect.state == "pending"
    assert db.finish_effect(ledger, effect_id="missing") is False


def test_64_threads_beginning_one_effect_see_one_row(ledger: db.Ledger) -> None:
    rows = race(
        THREADS,
        lambda i: db.begin_effect(ledger, effect_id="e", task_id="t1", kind="k", request={"by": i}),
    )
    assert len({row.request_json for row in rows}) == 1
    assert len(db.list_effects(ledger)) == 1


def test_a_cursor_counts_polls_and_keeps_its_etag_on_304(ledger: db.Ledger) -> None:
    assert db.get_cursor(ledger, source="github:o/r", label="l") is None
    db.record_poll(
        ledger,
        source="github:o/r",
        label="l",
        status=200,
        etag='W/"a"',
        tasks_created=3,
        rate_remaining=4999,
        rate_reset_at=T0,
        now=T0,
    )
    cursor = db.record_poll(
        ledger, source="github:o/r", label="l", status=304, keep_etag=True, not_modified=True
    )
    assert cursor.etag == 'W/"a"'
    assert (cursor.polls, cursor.not_modified, cursor.tasks_created) == (2, 1, 3)
    assert cursor.rate_remaining == 4999 and cursor.failures == 0
    failed = db.record_poll(
        ledger,
        source="github:o/r",
        label="l",
        status=503,
        keep_etag=True,
        error="boom",
        next_poll_at=T0 + timedelta(minutes=1),
    )
    assert failed.failures == 1 and failed.last_error == "boom" and failed.etag == 'W/"a"'
    ok = db.record_poll(ledger, source="github:o/r", label="l", status=200, etag='W/"b"')
    assert (ok.failures, ok.last_error, ok.etag) == (0, None, 'W/"b"')
    assert [c.source for c in db.list_cursors(ledger)] == ["github:o/r"]
