"""The GitHub poller against a loopback GitHub: pages, ETags, rate limits, de-dup, recovery."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from agent_team import db
from agent_team.integrations.github.intake import (
    BODY_LIMIT,
    GitHubIntake,
    issue_source,
    task_id_for,
)
from agent_team.requests import inbox
from tests.integration.github.conftest import (
    APP,
    LIB,
    TOKEN,
    MakeIntake,
    World,
    github_tasks,
)


def expected_ids(world: World) -> set[str]:
    return {task_id_for(APP, n) for n in world.app_labelled} | {
        task_id_for(LIB, n) for n in world.lib_labelled
    }


def test_first_poll_creates_exactly_the_labelled_open_issues_across_pages(
    make_intake: MakeIntake, world: World
) -> None:
    intake, starter = make_intake()
    report = intake.poll_once()

    tasks = github_tasks(intake.ledger)
    assert set(tasks) == expected_ids(world)
    assert report.tasks_created == len(world.app_labelled) + len(world.lib_labelled) == 253
    assert report.errors == []
    some = tasks[task_id_for(APP, world.app_labelled[0])]
    assert some.kind == "code"
    assert some.source_ref == f"https://github.example/{APP}/issues/{world.app_labelled[0]}"
    # 250 labelled issues + 12 labelled PRs at 100 a page: page 1 and two followed Links.
    pages = world.fake.seen("GET", f"/repos/{APP}/issues")
    assert [r.query.get("cursor") for r in pages] == [None, ["c2"], ["c3"]]
    assert pages[0].query["per_page"] == ["100"]
    assert pages[0].query["labels"] == ["agent-team"]
    assert all(r.headers["x-github-api-version"] == "2022-11-28" for r in pages)
    assert all(r.headers["user-agent"].startswith("agent-team/") for r in pages)
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in pages)
    cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.etag and cursor.tasks_created == 250
    assert cursor.rate_remaining is not None and cursor.rate_remaining < 5000
    # The docs label is not polled while the Confluence lane is off.
    assert not [r for r in world.fake.requests if r.query.get("labels") == ["agent-team-docs"]]
    assert len(starter.calls) == 253
    # Each issue's task was submitted, and audited, once, by the repository's issue.
    submitted = db.list_audit(intake.ledger, action="submit", via="github", limit=1000)
    assert len(submitted) == 253
    first = task_id_for(APP, world.app_labelled[0])
    (row,) = [r for r in submitted if r.target == first]
    assert row.actor == f"{APP}#{world.app_labelled[0]}"


def test_second_poll_sends_if_none_match_and_gets_304(
    make_intake: MakeIntake, world: World
) -> None:
    intake, _ = make_intake()
    intake.poll_once()
    first_etag = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    before = len(world.fake.requests)

    report = intake.poll_once()

    second = world.fake.requests[before:]
    assert [r.path for r in second] == [f"/repos/{APP}/issues", f"/repos/{LIB}/issues"]
    assert first_etag is not None
    assert second[0].headers["if-none-match"] == first_etag.etag
    assert report.not_modified == 2 and report.tasks_created == 0
    cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.polls == 2 and cursor.not_modified == 1
    assert cursor.etag == first_etag.etag


def test_a_restart_creates_nothing_new_and_still_gets_304(
    make_intake: MakeIntake, world: World
) -> None:
    first, _ = make_intake()
    first.poll_once()

    second, starter = make_intake()  # a new process: new connection, client, intake
    report = second.poll_once()
    assert report.not_modified == 2 and starter.calls == []

    # Something changes on page 1: a full read, every issue already claimed.
    world.fake.touch(APP, world.app_labelled[5], title="Edited")
    third, starter = make_intake()
    report = third.poll_once()
    assert report.not_modified == 1 and report.tasks_created == 0 and starter.calls == []
    assert set(github_tasks(third.ledger)) == expected_ids(world)


def test_a_newly_labelled_old_issue_is_found_although_it_sits_on_a_later_page(
    make_intake: MakeIntake, world: World
) -> None:
    intake, _ = make_intake()
    intake.poll_once()
    old = world.app_other[1]  # an old unlabelled issue, created near the start
    assert world.fake.repos[APP].issues[old]["labels"][0]["name"] == "bug"
    world.fake.touch(APP, old, labels=("bug", "agent-team"))

    report = intake.poll_once()

    assert report.tasks_created == 1
    assert task_id_for(APP, old) in github_tasks(intake.ledger)


def test_a_failed_start_is_retried_on_the_next_poll(make_intake: MakeIntake, world: World) -> None:
    intake, starter = make_intake()
    unlucky = task_id_for(APP, world.app_labelled[7])
    starter.fail_for.add(unlucky)

    report = intake.poll_once()
    assert unlucky not in github_tasks(intake.ledger)
    assert len(report.errors) == 1 and "retried next poll" not in report.errors[0]
    assert not db.issue_already_ingested(
        intake.ledger, source=issue_source(APP), issue_id=world.app_labelled[7]
    )
    cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.etag is None  # so the next poll reads everything

    report = intake.poll_once()
    assert report.tasks_created == 1 and report.errors == []
    assert set(github_tasks(intake.ledger)) == expected_ids(world)
    assert starter.calls.count(unlucky) == 2


def test_a_claim_without_a_task_is_started_by_the_sweep(
    make_intake: MakeIntake, world: World
) -> None:
    intake, _ = make_intake(claim_grace_s=0)
    intake.poll_once()
    fresh = world.fake.add_issue(APP, labels=("agent-team",))
    # A process claimed it and died before starting the task.
    assert db.record_issue_ingested(intake.ledger, source=issue_source(APP), issue_id=fresh)
    gone = 9999
    assert db.record_issue_ingested(intake.ledger, source=issue_source(APP), issue_id=gone)
    restarted, starter = make_intake(claim_grace_s=0)

    report = restarted.poll_once()

    assert report.recovered == 1
    assert starter.calls == [task_id_for(APP, fresh)]
    assert task_id_for(APP, fresh) in github_tasks(restarted.ledger)
    assert world.fake.seen("GET", f"/repos/{APP}/issues/{fresh}")
    # The issue that no longer exists has its claim released.
    assert not db.issue_already_ingested(restarted.ledger, source=issue_source(APP), issue_id=gone)


def test_a_429_with_retry_after_defers_polling_without_stopping(
    make_intake: MakeIntake, world: World
) -> None:
    intake, _ = make_intake()
    world.fake.force(f"/repos/{APP}/issues", 429, {"retry-after": "30"})
    now = intake.clock()

    report = intake.poll_once()

    assert len(report.errors) == 1 and "429" in report.errors[0]
    assert report.deferred == 1  # the other repository waits too: the limit is the token's
    cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.next_poll_at is not None and cursor.failures == 1
    wait = db.from_iso(cursor.next_poll_at) - now
    assert timedelta(seconds=29) <= wait <= timedelta(seconds=40)
    # The secondary limit is for the token: nothing is asked before it passes.
    before = len(world.fake.requests)
    report = intake.poll_once()
    assert report.deferred == 2 and len(world.fake.requests) == before
    intake.clock = lambda: now + timedelta(seconds=31)
    report = intake.poll_once()
    assert report.tasks_created == len(world.app_labelled) + len(world.lib_labelled)


def test_403_without_retry_after_backs_off_at_least_a_minute_exponentially(
    make_intake: MakeIntake, world: World
) -> None:
    intake, _ = make_intake(github_repos=APP)
    now = intake.clock()
    waits = []
    for attempt in range(2):
        world.fake.force(f"/repos/{APP}/issues", 403)
        intake.clock = lambda attempt=attempt: now + timedelta(hours=2 * attempt)
        intake.poll_once()
        cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
        assert cursor is not None and cursor.next_poll_at is not None
        waits.append(db.from_iso(cursor.next_poll_at) - intake.clock())
    assert waits == [timedelta(seconds=60), timedelta(seconds=120)]


def test_a_spent_rate_limit_waits_for_the_reset(make_intake: MakeIntake, world: World) -> None:
    intake, _ = make_intake(github_repos=APP)
    world.fake.rate_remaining = 3  # 250 + 12 items: three pages spend the last requests
    intake.poll_once()
    cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.rate_remaining == 0
    assert cursor.next_poll_at == cursor.rate_reset_at
    before = len(world.fake.requests)
    assert intake.poll_once().deferred == 1
    assert len(world.fake.requests) == before


def test_a_failing_repository_does_not_stop_the_others(
    make_intake: MakeIntake, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.fake.repos[APP].broken = 500
    intake, _ = make_intake(github_repos=f"{APP},{LIB},acme/unknown", github_poll_s=30)
    caplog.set_level(logging.DEBUG)

    report = intake.poll_once()

    assert set(github_tasks(intake.ledger)) == {task_id_for(LIB, n) for n in world.lib_labelled}
    assert len(report.errors) == 2
    assert any("404" in e and "acme/unknown" in e for e in report.errors)
    broken = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert broken is not None and broken.failures == 1 and broken.last_status == 500
    assert broken.next_poll_at is not None
    assert db.from_iso(broken.next_poll_at) - db.from_iso(broken.last_poll_at or "") == timedelta(
        seconds=30
    )
    assert TOKEN not in caplog.text


def test_bad_credentials_never_show_the_token(
    make_intake: MakeIntake, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.fake.token = "another-token"
    intake, _ = make_intake(github_repos=APP)
    caplog.set_level(logging.DEBUG)

    report = intake.poll_once()

    assert len(report.errors) == 1 and "401" in report.errors[0]
    assert "AGENT_TEAM_GITHUB_TOKEN" in report.errors[0]
    cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.last_error is not None
    for text in (caplog.text, cursor.last_error, *report.errors):
        assert TOKEN not in text
        assert TOKEN[8:30] not in text


def test_bad_items_are_skipped_and_huge_bodies_capped(
    make_intake: MakeIntake, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    fake = world.fake
    label = [{"name": "agent-team"}]
    no_title = fake.add_issue(LIB, raw={"body": "x", "labels": label, "html_url": "https://g/x"})
    bad_number = fake.add_issue(
        LIB, raw={"title": "t", "labels": label, "html_url": "https://g/y", "state": "open"}
    )
    fake.repos[LIB.lower()].issues[bad_number]["number"] = "seven"
    huge = fake.add_issue(LIB, labels=("agent-team",), body="é" * 1_000_000)
    intake, _ = make_intake(github_repos=LIB)
    caplog.set_level(logging.WARNING)

    report = intake.poll_once()

    assert report.skipped_items == 2
    assert "skipped a malformed issue" in caplog.text
    tasks = github_tasks(intake.ledger)
    assert task_id_for(LIB, no_title) not in tasks
    big = tasks[task_id_for(LIB, huge)]
    assert len(big.body) < BODY_LIMIT + 300
    assert big.body.startswith("é" * 100) and "more characters cut" in big.body
    assert report.tasks_created == len(world.lib_labelled) + 1


def test_the_docs_label_makes_confluence_tasks_when_the_lane_is_on(
    make_intake: MakeIntake, world: World
) -> None:
    intake, _ = make_intake(github_repos=LIB, confluence_enabled=True)
    intake.poll_once()
    task = github_tasks(intake.ledger)[task_id_for(LIB, world.lib_docs[0])]
    assert task.kind == "confluence"


def test_a_next_link_to_another_server_is_not_followed(
    make_intake: MakeIntake, world: World
) -> None:
    world.fake.link_base = "http://127.0.0.2:9"  # the token must never go there
    intake, starter = make_intake(github_repos=APP)

    report = intake.poll_once()

    assert len(report.errors) == 1 and "another server" in report.errors[0]
    assert starter.calls == []  # nothing half-ingested from page 1 alone
    cursor = db.get_cursor(intake.ledger, source=issue_source(APP), label="agent-team")
    assert cursor is not None and cursor.etag is None and cursor.failures == 1


def test_claims_of_tasks_made_under_the_old_id_scheme_are_left_alone(
    make_intake: MakeIntake, world: World
) -> None:
    intake, starter = make_intake(github_repos=APP, claim_grace_s=0)
    number = world.app_labelled[0]
    # An older agent-team made this task, with the id of its time, and holds the claim.
    inbox.submit_task(intake.ledger, title="old", source="github", task_id=f"gh-acme-app-{number}")
    assert db.record_issue_ingested(intake.ledger, source=issue_source(APP), issue_id=number)

    assert intake.sweep_claims() == 0
    report = intake.poll_once()

    assert report.recovered == 0 and task_id_for(APP, number) not in starter.calls
    assert not world.fake.seen("GET", f"/repos/{APP}/issues/{number}")
    assert task_id_for(APP, number) not in github_tasks(intake.ledger)
    # It counts as settled: the poll keeps its ETag and the next one is a 304.
    assert intake.poll_once().not_modified == 1


def crashed_claim(intake: GitHubIntake, world: World) -> int:
    """A labelled issue whose claim a process took before dying (no task)."""
    number = world.fake.add_issue(APP, labels=("agent-team",))
    assert db.record_issue_ingested(intake.ledger, source=issue_source(APP), issue_id=number)
    return number


def test_the_claim_sweep_waits_out_a_rate_limit_pause(
    make_intake: MakeIntake, world: World
) -> None:
    intake, starter = make_intake(claim_grace_s=0)
    intake.poll_once()
    number = crashed_claim(intake, world)
    world.fake.force(f"/repos/{APP}/issues", 429, {"retry-after": "30"})
    now = intake.clock()

    report = intake.poll_once()

    assert report.recovered == 0 and report.deferred == 1
    assert not world.fake.seen("GET", f"/repos/{APP}/issues/{number}")  # paused: not asked
    intake.clock = lambda: now + timedelta(seconds=31)
    assert intake.poll_once().recovered == 1
    assert task_id_for(APP, number) in starter.calls


def test_a_rate_limit_met_by_the_sweep_pauses_everything(
    make_intake: MakeIntake, world: World
) -> None:
    intake, _ = make_intake(claim_grace_s=0)
    intake.poll_once()
    number = crashed_claim(intake, world)
    world.fake.force(f"/repos/{APP}/issues/{number}", 429, {"retry-after": "30"})
    now = intake.clock()
    assert intake.poll_once().recovered == 0
    before = len(world.fake.requests)

    report = intake.poll_once()

    assert report.deferred == 2 and len(world.fake.requests) == before
    intake.clock = lambda: now + timedelta(seconds=31)
    assert intake.poll_once().recovered == 1


def test_a_claim_that_keeps_failing_backs_off_exponentially(
    make_intake: MakeIntake, world: World
) -> None:
    intake, _ = make_intake(claim_grace_s=0, github_repos=APP, github_poll_s=30)
    intake.poll_once()
    number = crashed_claim(intake, world)
    path = f"/repos/{APP}/issues/{number}"
    now = intake.clock()
    asked = []
    for seconds in (0, 1, 29, 31, 61, 91, 151):  # waits of 30 s, then 60 s, then 120 s
        world.fake.force(path, 502)
        intake.clock = lambda seconds=seconds: now + timedelta(seconds=seconds)
        intake.poll_once()
        asked.append(len(world.fake.seen("GET", path)))
    assert asked == [1, 1, 1, 2, 2, 3, 3]
    world.fake.forced.clear()
    intake.clock = lambda: now + timedelta(seconds=212)
    assert intake.poll_once().recovered == 1
