"""The triage inbox over a seeded ledger: what is in it, what is not, in what order; the same in
`agent-team inbox --json`, `/api/triage` and the `/inbox` page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from agent_team.models.budget_view import BudgetToday
from agent_team.reports import triage
from tests.integration.dashboard.conftest import make_settings
from tests.integration.test_cli import run_cli

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def ago(**delta: float) -> str:
    return db.to_iso(NOW - timedelta(**delta))


@dataclass
class Seeded:
    path: Path


def _pin(ledger: db.Ledger, sql: str, params: tuple[object, ...]) -> None:
    ledger.write(lambda tx: tx.execute(sql, params))


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Seeded]:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as ledger:
        for task_id, title in (
            ("tA", "Waiting <b>task</b>"),
            ("tB", "Expired question"),
            ("tC", "Out of budget"),
            ("tD", "Broke this week"),
            ("tE", "Broke long ago"),
            ("tF", "Done and fine"),
        ):
            db.create_task(ledger, task_id=task_id, kind="code", title=title)
        question = {"kind": "plan_decision", "transport": "local", "payload_json": None}
        db.ensure_question(
            ledger,
            question_id="tA:q1",
            thread_id="tA",
            turn=1,
            deadline_at=NOW + timedelta(hours=1),
            **question,
        )
        db.record_delivery(ledger, question_id="tA:q1", channel_ref="local:tA:q1")
        _pin(
            ledger,
            "UPDATE pending_questions SET posted_at = ? WHERE question_id = 'tA:q1'",
            (ago(hours=3),),
        )
        db.ensure_question(
            ledger, question_id="tB:q1", thread_id="tB", turn=1, deadline_at=None, **question
        )
        assert db.expire_question(ledger, question_id="tB:q1")
        db.set_task_status(ledger, "tB", "parked", parked_reason="question_expired")
        db.set_task_status(ledger, "tC", "parked", parked_reason="budget_exhausted")
        db.set_task_status(ledger, "tD", "failed")
        db.set_task_status(ledger, "tE", "failed")
        db.set_task_status(ledger, "tF", "done")
        for task_id, when in (
            ("tB", ago(hours=5)),
            ("tC", ago(minutes=30)),
            ("tD", ago(hours=2)),
            ("tE", ago(days=10)),
        ):
            _pin(ledger, "UPDATE tasks SET updated_at = ? WHERE id = ?", (when, task_id))
        base = {
            "title": "T",
            "body": "B",
            "schedule_kind": "every",
            "every_s": 3600,
            "first_run_at": ago(days=1),
            "created_by": "cli:ada",
        }
        db.create_automation(
            ledger,
            values={**base, "automation_id": "aX", "name": "overdue", "next_run_at": ago(hours=1)},
        )
        db.create_automation(
            ledger,
            values={
                **base,
                "automation_id": "aY",
                "name": "failing",
                "next_run_at": db.to_iso(NOW + timedelta(minutes=30)),
            },
        )
        db.create_automation(
            ledger,
            values={
                **base,
                "automation_id": "aZ",
                "name": "fine",
                "next_run_at": db.to_iso(NOW + timedelta(minutes=30)),
            },
        )
        for automation_id, status in (("aY", "failed"), ("aZ", "created")):
            run = db.claim_slot(
                ledger,
                automation_id=automation_id,
                expected_next=None,
                slot_at=ago(hours=4),
                next_run_at=None,
                missed=0,
                run_id=f"{automation_id}@1",
                task_id="tF",
                claimed_by="x",
                manual=True,
            )
            assert run is not None
            assert db.finish_run(ledger, run_id=run.run_id, status=status, detail="the lane is off")
            _pin(
                ledger,
                "UPDATE automation_runs SET finished_at = ? WHERE run_id = ?",
                (ago(hours=4), run.run_id),
            )
    yield Seeded(path)


EXPECTED = [
    ("parked", "Expired question", "agent-team reopen tB:q1"),
    ("automation", "failing", "agent-team automation show aY"),
    ("question", "Waiting <b>task</b>", "agent-team answer tA:q1 ..."),
    (
        "failed",
        "Broke this week",
        "see why: agent-team show tD; fix it, then: agent-team retry tD",
    ),
    ("automation", "overdue", "start the daemon, or run `agent-team tick`"),
    ("parked", "Out of budget", triage._PARKED_FIX["budget_exhausted"]),
    ("budget", "daily budget 90% used", None),
]


def test_the_inbox_holds_what_needs_a_person_oldest_first(seeded: Seeded) -> None:
    budget = BudgetToday("2026-12-07", "api", "usd", 18.0, 20.0)
    with db.open_ledger(seeded.path) as ledger, ledger.snapshot() as view:
        items = triage.triage(view, now=NOW, budget=budget)
    assert [(i.kind, i.title, i.fix if i.kind != "budget" else None) for i in items] == EXPECTED
    question = items[2]
    assert question.deadline_at == db.to_iso(NOW + timedelta(hours=1))
    assert question.question_id == "tA:q1" and question.task_id == "tA"
    assert "last run failed: the lane is off" == items[1].detail
    assert items[-1].detail == "$18.00 of $20.00 spent on 2026-12-07 (UTC, api billing)"
    below = BudgetToday("2026-12-07", "api", "usd", 15.0, 20.0)
    with db.open_ledger(seeded.path) as ledger, ledger.snapshot() as view:
        assert [i.kind for i in triage.triage(view, now=NOW, budget=below)][-1] != "budget"


def test_the_cli_the_api_and_the_page_show_the_same_list(seeded: Seeded, tmp_path: Path) -> None:
    offset = str((NOW - datetime.now(UTC)).total_seconds())  # the CLI's clock, moved to NOW
    result = run_cli(
        tmp_path,
        "inbox",
        "--json",
        env={"AGENT_TEAM_DB_PATH": str(seeded.path), "AGENT_TEAM_CLOCK_OFFSET_S": offset},
    )
    assert result.returncode == 0, result.stderr
    from_cli = [(i["kind"], i["title"]) for i in json.loads(result.stdout)]
    assert from_cli[:6] == [(kind, title) for kind, title, _ in EXPECTED[:6]]

    ctx = DashboardContext(settings=make_settings(seeded.path), clock=lambda: NOW)
    with TestClient(create_app(ctx)) as client:
        api = client.get("/api/triage").json()["items"]
        page = client.get("/inbox")
        overview = client.get("/")
    assert [(i["kind"], i["title"]) for i in api] == from_cli
    assert page.status_code == 200
    html = page.text
    positions = [
        html.index(title.replace("<", "&lt;").replace(">", "&gt;")) for _, title, _ in EXPECTED[:6]
    ]
    assert positions == sorted(positions), "the page lists them oldest first"
    assert "<b>task</b>" not in html, "titles are escaped"
    assert 'href="/task/tA#q-tA:q1"' in html
    assert 'href="/inbox"' in overview.text, "the overview links to the inbox"


def test_a_task_on_its_pull_request_gate_waits_on_github_not_on_a_person(tmp_path: Path) -> None:
    """The PR gate is answered by GitHub: not in the inbox. A PR decision needs a person."""
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as ledger:
        for task_id, kind, deadline in (
            ("tG", "pull_request", None),
            ("tH", "pr_decision", NOW + timedelta(hours=72)),
        ):
            db.create_task(ledger, task_id=task_id, kind="code", title=f"On {kind}")
            db.set_task_status(ledger, task_id, "waiting", phase="pr_open")
            db.ensure_question(
                ledger,
                question_id=f"{task_id}:q3",
                thread_id=task_id,
                turn=3,
                kind=kind,
                transport="local",
                deadline_at=deadline,
                payload_json=None,
            )
        with ledger.snapshot() as view:
            items = triage.triage(view, now=NOW, budget=None)
    assert [(i.kind, i.question_id) for i in items] == [("question", "tH:q3")]
    assert items[0].detail == "the pull request needs a decision: fix, ignore or take over"
    assert items[0].fix == "agent-team answer tH:q3 fix [note] | ignore | take over"

    offset = str((NOW - datetime.now(UTC)).total_seconds())
    shown = run_cli(
        tmp_path,
        "inbox",
        env={"AGENT_TEAM_DB_PATH": str(path), "AGENT_TEAM_CLOCK_OFFSET_S": offset},
    )
    assert shown.returncode == 0, shown.stderr
    assert "On pr_decision" in shown.stdout and "On pull_request" not in shown.stdout
