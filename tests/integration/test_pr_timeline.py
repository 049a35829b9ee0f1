"""A task's pull request timeline, built from the rows the PR gate writes (`tests/pr_story.py`).

`show`, the task page and `/api/task` all print `reports.pull_request`'s
timeline, so its order, rounds, links and who-answered-what are checked here once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_team import db
from agent_team.cli.main import app
from agent_team.common.timefmt import utc_text
from agent_team.config import ENV_PREFIX
from agent_team.reports.pull_request import PullRequestTimeline, read_pull_request_timeline
from agent_team.reports.task import read_task_report
from tests.pr_story import EVIL_BODY, HEAD0, HEAD1, HEAD2, PR_URL, write_pr_story

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=2)


def iso(offset_s: float) -> str:
    return db.to_iso(T0 + timedelta(seconds=offset_s))


def shown_at(offset_s: float) -> str:
    """The same moment as `show` prints it."""
    return utc_text(T0 + timedelta(seconds=offset_s))


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[db.Ledger]:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as made:
        db.create_task(made, task_id="t1", kind="code", title="Fix the list")
        yield made


def timeline(ledger: db.Ledger) -> PullRequestTimeline:
    questions = db.list_questions(ledger, thread_id="t1")
    pull = read_pull_request_timeline(ledger, "t1", questions, NOW)
    assert pull is not None
    return pull


def test_the_pull_request_and_its_times(ledger: db.Ledger) -> None:
    write_pr_story(ledger, "t1", T0)
    pull = timeline(ledger)
    assert (pull.repo, pull.number, pull.url, pull.state) == ("acme/app", 12, PR_URL, "merged")
    assert (pull.rounds, pull.hands_off, pull.head_sha) == (1, True, HEAD1)
    assert (pull.opened_at, pull.merged_at, pull.closed_at) == (iso(100), iso(3000), iso(3000))
    assert pull.ready_at is None
    assert pull.open_for_s == 2900  # to the merge, not to now
    assert pull.headline == "acme/app#12 merged, 1 follow-up round, a person took over"


def test_entries_are_grouped_by_round_in_time_order(ledger: db.Ledger) -> None:
    write_pr_story(ledger, "t1", T0)
    pull = timeline(ledger)
    assert [(part.number, part.title) for part in pull.timeline] == [
        (0, "opened"),
        (1, "follow-up round 1"),
    ]
    opened, round_1 = pull.timeline
    # CI on the first head finished after the review, yet belongs to round 0: its head.
    assert [e.key for e in opened.entries] == ["pr:12", f"ci_green:{HEAD0}"]
    assert [e.key for e in round_1.entries] == [
        "review:11",
        "review_comment:22",
        "t1:q1",  # the gate the reviews answered, after them (one moment)
        "follow_up:r1",
        f"ci_rerun:{HEAD1}",
        f"ci_failed:{HEAD1}",
        "t1:q2",
        "t1:q3",
        "labeled:bug",
        "pr:merged",  # on a head no round made: it ends the latest round
        "t1:q4",
    ]
    assert all(e.round == part.number for part in pull.timeline for e in part.entries)
    times = [e.at for e in round_1.entries]
    assert times == sorted(t for t in times if t is not None)


def test_each_entry_says_who_and_links_to_it(ledger: db.Ledger) -> None:
    write_pr_story(ledger, "t1", T0)
    entries = {e.key: e for part in timeline(ledger).timeline for e in part.entries}
    review = entries["review:11"]
    assert (review.summary, review.actor, review.body) == ("review by alice", "alice", EVIL_BODY)
    assert review.url == f"{PR_URL}#pullrequestreview-11"
    inline = entries["review_comment:22"]
    assert inline.summary == "review comment by bob on src/app.py:3"
    assert inline.url == f"{PR_URL}#discussion_r22"
    follow = entries["follow_up:r1"]
    assert (
        follow.summary == "follow-up commit bbbbbbb answering 2 items: 1 reply, 1 thread resolved"
    )
    assert follow.url == f"{PR_URL}/commits/{HEAD1}"
    assert follow.body == "Handled the empty list and renamed the helper."
    assert entries[f"ci_green:{HEAD0}"].summary == "CI green on aaaaaaa"
    assert entries[f"ci_rerun:{HEAD1}"].summary == (
        "CI failed jobs rerun on bbbbbbb: lint (runs 501)"
    )
    assert entries[f"ci_failed:{HEAD1}"].summary == "CI failed on bbbbbbb: lint (failure)"
    # A kind this code does not know still shows: kind, who, commit, detail.
    assert entries["labeled:bug"].summary == "labeled by dave on ccccccc: ids 1, 2; label bug"
    assert entries["pr:merged"].summary == "merged on ccccccc"
    assert entries["pr:merged"].head_sha == HEAD2


def test_every_gate_question_says_who_answered(ledger: db.Ledger) -> None:
    write_pr_story(ledger, "t1", T0)
    entries = {e.key: e for part in timeline(ledger).timeline for e in part.entries}
    said = {key: (entries[key].kind, entries[key].summary) for key in ("t1:q1", "t1:q2", "t1:q3")}
    assert said == {
        "t1:q1": ("pull_request", "PR gate t1:q1: feedback by alice via github"),
        "t1:q2": ("pull_request", "PR gate t1:q2: ci_failed by acme/app via github"),
        "t1:q3": ("pr_decision", "decision t1:q3 (ci_failed): takeover by carol via dashboard"),
    }
    assert entries["t1:q3"].body == "mine now"
    assert entries["t1:q3"].detail["answered_via"] == "dashboard:carol"
    assert entries["t1:q4"].summary == "PR gate t1:q4: merged by acme/app via github"


def test_an_open_gate_waits_and_an_open_pr_counts_to_now(ledger: db.Ledger) -> None:
    db.watch_pull_request(
        ledger,
        task_id="t1",
        repo="Acme/App",
        number=3,
        url="javascript:alert(1)",
        head_sha=HEAD0,
        at=T0,
    )
    db.ensure_question(
        ledger,
        question_id="t1:q1",
        thread_id="t1",
        turn=1,
        kind="pull_request",
        transport="local",
        deadline_at=None,
        payload_json=json.dumps({"text": "open", "round": 0}),
    )
    pull = timeline(ledger)
    assert (pull.state, pull.merged_at, pull.closed_at, pull.open_for_s) == (
        "open",
        None,
        None,
        7200,
    )
    assert pull.url is None  # never a link that is not http(s)
    ((part),) = pull.timeline
    gate = part.entries[-1]
    assert (gate.key, gate.at, gate.summary) == (
        "t1:q1",
        None,
        "PR gate t1:q1: waiting on reviews, CI, a merge or a close",
    )


def test_the_task_report_carries_it_and_its_json_round_trips(ledger: db.Ledger) -> None:
    assert read_task_report(ledger, "t1", NOW).to_json()["pull_request"] is None
    write_pr_story(ledger, "t1", T0)
    report = read_task_report(ledger, "t1", NOW)
    assert report.pull_request == timeline(ledger)
    shown = report.to_json()["pull_request"]
    assert json.loads(json.dumps(shown)) == shown
    assert shown["url"] == PR_URL and shown["merged_at"] == iso(3000)
    assert [part["round"] for part in shown["timeline"]] == [0, 1]
    first = shown["timeline"][1]["entries"][0]
    assert {key: first[key] for key in ("source", "kind", "key", "actor", "body")} == {
        "source": "event",
        "kind": "review",
        "key": "review:11",
        "actor": "alice",
        "body": EVIL_BODY,
    }


def test_show_prints_the_rounds_without_terminal_controls(
    ledger: db.Ledger, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_pr_story(ledger, "t1", T0)
    escape = db.NewPrEvent("note:1", "note", actor="eve\x1b[2J", detail={"text": "hi"})
    assert db.record_pr_event(ledger, "t1", escape, at=T0 + timedelta(seconds=500))
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # the ledger is at the default path there

    shown = CliRunner().invoke(app, ["show", "t1"])

    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert "pull request acme/app#12 merged, 1 follow-up round, a person took over: " + PR_URL in (
        text
    )
    # Times to the second, as people read them (#31, 14); the JSON keeps the ledger's.
    assert f"opened {shown_at(100)}, merged {shown_at(3000)} (48m 20s)" in text
    assert text.index("round 0: opened") < text.index("round 1: follow-up round 1")
    assert f"{shown_at(1000)}  review by alice  {PR_URL}#pullrequestreview-11" in text
    assert f"      {EVIL_BODY}" in text
    assert "decision t1:q3 (ci_failed): takeover by carol via dashboard" in text
    assert "note by eve\\x1b[2J: text hi" in text and "\x1b" not in text
