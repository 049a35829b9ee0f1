"""Contract: the intake's ledger calls (claims listing, released events, ETags, counts)."""

from __future__ import annotations

from datetime import timedelta

from agent_team import db
from agent_team.requests import inbox


def test_claims_are_listed_by_source_prefix_and_age(ledger: db.Ledger) -> None:
    assert db.record_issue_ingested(ledger, source="github:acme/app", issue_id=1)
    assert db.record_issue_ingested(ledger, source="github:acme/app", issue_id=2)
    assert db.record_issue_ingested(ledger, source="jira:ACME", issue_id=3)
    assert db.record_issue_ingested(ledger, source="github_x:odd", issue_id=4)  # `_` is literal

    claims = db.list_issue_claims(ledger, source_prefix="github:")
    assert [(c.source, c.issue_id) for c in claims] == [
        ("github:acme/app", "1"),
        ("github:acme/app", "2"),
    ]
    past = db.to_iso(db.utc_now() - timedelta(minutes=5))
    assert db.list_issue_claims(ledger, source_prefix="github:", claimed_before=past) == []
    future = db.to_iso(db.utc_now() + timedelta(minutes=5))
    assert len(db.list_issue_claims(ledger, source_prefix="github:", claimed_before=future)) == 2


def test_task_ids_by_source(ledger: db.Ledger) -> None:
    inbox.submit_task(ledger, title="a", source="github", task_id="gh-acme-app-1")
    inbox.submit_task(ledger, title="b", source="cli", task_id="t1")
    assert db.task_ids_by_source(ledger, source="github") == {"gh-acme-app-1"}
    assert db.task_ids_by_source(ledger, source="slack") == set()


def test_a_released_event_is_claimable_again(ledger: db.Ledger) -> None:
    assert db.claim_event(ledger, source="github", event_id="d-1")
    assert db.claim_event(ledger, source="github", event_id="d-2")
    assert db.release_event(ledger, source="github", event_id="d-1")
    assert not db.release_event(ledger, source="github", event_id="d-1")  # already gone
    assert not db.event_seen(ledger, source="github", event_id="d-1")
    assert db.event_seen(ledger, source="github", event_id="d-2")  # only that one
    assert db.claim_event(ledger, source="github", event_id="d-1")


def test_forget_etag_clears_only_the_etag(ledger: db.Ledger) -> None:
    for source, label in (("github:a/b", "x"), ("github:a/b", "y"), ("github:c/d", "x")):
        db.record_poll(
            ledger, source=source, label=label, status=200, etag='W/"e"', tasks_created=2
        )
    assert db.forget_etag(ledger, source="github:a/b", label="x") == 1
    assert db.forget_etag(ledger, source="github:a/b") == 1  # label y; x has none left
    cursors = {(c.source, c.label): c for c in db.list_cursors(ledger)}
    assert cursors["github:a/b", "x"].etag is None and cursors["github:a/b", "y"].etag is None
    assert cursors["github:c/d", "x"].etag == 'W/"e"'
    assert cursors["github:a/b", "x"].tasks_created == 2 and cursors["github:a/b", "x"].polls == 1


def test_tasks_made_outside_a_poll_count_without_counting_a_poll(
    ledger: db.Ledger,
) -> None:
    db.count_tasks_created(ledger, source="github:a/b", label="x")
    db.count_tasks_created(ledger, source="github:a/b", label="x", count=2)
    (cursor,) = db.list_cursors(ledger)
    assert (cursor.tasks_created, cursor.polls, cursor.etag) == (3, 0, None)
