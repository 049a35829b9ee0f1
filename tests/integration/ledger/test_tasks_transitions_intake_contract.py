"""Contract: tasks, task transitions and intake de-dup."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInputError


def test_create_task_is_idempotent_and_starts_queued(ledger: db.Ledger) -> None:
    assert db.create_task(
        ledger,
        task_id="gh-1",
        kind="code",
        title="Fix login",
        body="It breaks.",
        source="github:acme/web",
        source_ref="https://github.com/acme/web/issues/1",
    )
    assert not db.create_task(ledger, task_id="gh-1", kind="confluence", title="Other")
    task = db.get_task(ledger, "gh-1")
    assert task is not None
    assert (task.kind, task.title, task.status, task.phase) == (
        "code",
        "Fix login",
        "queued",
        "intake",
    )
    assert task.source == "github:acme/web" and task.parked_reason is None
    assert task.created_at == task.updated_at
    assert db.get_task(ledger, "nope") is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"task_id": "t", "kind": "essay", "title": "x"}, "task kind"),
        ({"task_id": "", "kind": "code", "title": "x"}, "non-empty"),
        ({"task_id": "t", "kind": "code", "title": "   "}, "non-empty"),
    ],
)
def test_create_task_refuses_bad_input(
    ledger: db.Ledger, kwargs: dict[str, str], message: str
) -> None:
    with pytest.raises(LedgerInputError, match=message):
        db.create_task(ledger, **kwargs)  # type: ignore[arg-type]
    assert db.list_tasks(ledger) == []


def test_list_tasks_newest_first_with_filters_and_paging(ledger: db.Ledger) -> None:
    for n in range(5):
        db.create_task(
            ledger, task_id=f"t{n}", kind="code" if n % 2 else "confluence", title=f"#{n}"
        )
    assert [t.id for t in db.list_tasks(ledger)] == ["t4", "t3", "t2", "t1", "t0"]
    assert [t.id for t in db.list_tasks(ledger, kind="code")] == ["t3", "t1"]
    assert [t.id for t in db.list_tasks(ledger, limit=2, offset=1)] == ["t3", "t2"]
    db.set_task_status(ledger, "t2", "running", phase="plan")
    assert [t.id for t in db.list_tasks(ledger, status="running")] == ["t2"]
    with pytest.raises(LedgerInputError):
        db.list_tasks(ledger, status="sleeping")
    with pytest.raises(LedgerInputError):
        db.list_tasks(ledger, limit=0)


def test_list_tasks_by_source_and_title_text_with_a_matching_count(ledger: db.Ledger) -> None:
    titles = {
        "a": ("cli", "Fix the LOGIN page"),
        "b": ("github", "login: 100% broken"),
        "c": ("github", "Make snake_case names"),
        "d": ("dashboard", "Add a back\\slash"),
        "e": ("cli", "Speed up search"),
    }
    for task_id, (source, title) in titles.items():
        db.create_task(ledger, task_id=task_id, kind="code", title=title, source=source)

    def found(**filters: str) -> list[str]:
        rows = [t.id for t in db.list_tasks(ledger, **filters)]  # type: ignore[arg-type]
        assert db.count_tasks(ledger, **filters) == len(rows)  # type: ignore[arg-type]
        return rows

    assert found(title_contains="login") == ["b", "a"]  # case-insensitive, newest first
    assert found(title_contains="LoGiN", source="cli") == ["a"]
    assert found(source="github") == ["c", "b"]
    assert found(source="slack") == []
    # LIKE's wildcards and its escape character match only themselves.
    assert found(title_contains="%") == ["b"]
    assert found(title_contains="0% b") == ["b"]
    assert found(title_contains="_") == ["c"]
    assert found(title_contains="e_c") == ["c"]
    assert found(title_contains="\\") == ["d"]
    assert found(title_contains="s%h") == []


def test_set_task_status_and_parked_reason(ledger: db.Ledger) -> None:
    db.create_task(ledger, task_id="t", kind="code", title="x")
    assert db.set_task_status(ledger, "t", "parked", parked_reason="budget_exhausted")
    task = db.get_task(ledger, "t")
    assert task is not None and (task.status, task.parked_reason) == ("parked", "budget_exhausted")
    assert task.phase == "intake", "phase is kept when not given"
    assert db.set_task_status(ledger, "t", "running", phase="build")
    task = db.get_task(ledger, "t")
    assert task is not None
    assert (task.status, task.phase, task.parked_reason) == ("running", "build", None)
    assert task.updated_at >= task.created_at
    with pytest.raises(LedgerInputError, match="parked_reason"):
        db.set_task_status(ledger, "t", "parked")
    with pytest.raises(LedgerInputError, match="phase"):
        db.set_task_status(ledger, "t", "running", phase="deploy")
    assert not db.set_task_status(ledger, "missing", "done")


def test_transitions_chain_with_one_open_row(ledger: db.Ledger) -> None:
    first = db.record_transition(ledger, thread_id="t", to_phase="intake", status="running")
    db.record_transition(ledger, thread_id="t", to_phase="clarify", status="running")
    db.record_transition(ledger, thread_id="t", to_phase="clarify", status="waiting", note="asked")
    rows = db.list_transitions(ledger, "t")
    assert rows[0].transition_id == first
    assert [(r.from_phase, r.to_phase, r.status) for r in rows] == [
        (None, "intake", "running"),
        ("intake", "clarify", "running"),
        ("clarify", "clarify", "waiting"),
    ]
    assert [r.exited_at is None for r in rows] == [False, False, True]
    assert rows[0].exited_at == rows[1].entered_at
    assert rows[2].note == "asked"
    assert db.list_transitions(ledger, "other") == []


def test_reentering_the_same_phase_and_status_is_a_no_op(ledger: db.Ledger) -> None:
    """LangGraph re-runs a node on resume; that must not add a row."""
    open_id = db.record_transition(ledger, thread_id="t", to_phase="plan", status="running")
    again = db.record_transition(ledger, thread_id="t", to_phase="plan", status="running")
    assert again == open_id
    assert len(db.list_transitions(ledger, "t")) == 1


def test_close_terminal_closes_the_open_row(ledger: db.Ledger) -> None:
    db.record_transition(ledger, thread_id="t", to_phase="build", status="running")
    assert db.close_terminal(ledger, thread_id="t", status="failed", note="builder crashed")
    (row,) = db.list_transitions(ledger, "t")
    assert (row.status, row.note) == ("failed", "builder crashed")
    assert row.exited_at is not None
    assert not db.close_terminal(ledger, thread_id="t", status="failed")
    # A task that resumes after a terminal close starts a fresh open row.
    db.record_transition(ledger, thread_id="t", to_phase="build", status="running")
    assert [r.exited_at is None for r in db.list_transitions(ledger, "t")] == [False, True]


def test_transitions_refuse_unknown_phase_or_status(ledger: db.Ledger) -> None:
    with pytest.raises(LedgerInputError, match="phase"):
        db.record_transition(ledger, thread_id="t", to_phase="deploy", status="running")
    with pytest.raises(LedgerInputError, match="task status"):
        db.record_transition(ledger, thread_id="t", to_phase="plan", status="busy")
    assert db.list_transitions(ledger, "t") == []


def test_intake_claim_is_taken_once_and_can_be_released(ledger: db.Ledger) -> None:
    source = "github:acme/web"
    assert not db.issue_already_ingested(ledger, source=source, issue_id=42)
    assert db.record_issue_ingested(ledger, source=source, issue_id=42)
    assert not db.record_issue_ingested(ledger, source=source, issue_id="42")
    assert db.issue_already_ingested(ledger, source=source, issue_id="42")
    assert not db.issue_already_ingested(ledger, source="github:acme/api", issue_id=42)
    assert db.delete_issue_ingested(ledger, source=source, issue_id=42)
    assert not db.delete_issue_ingested(ledger, source=source, issue_id=42)
    assert db.record_issue_ingested(ledger, source=source, issue_id=42)


def test_connect_sets_the_promised_pragmas(ledger_file: Path) -> None:
    conn = db.open_ledger(ledger_file)
    try:
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        raw = conn.raw()  # the SQLite driver's own settings
        assert raw.isolation_level is None and not raw.in_transaction
    finally:
        conn.close()


def test_connect_creates_the_parent_folder_and_refuses_memory(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b" / "ledger.db"
    db.open_ledger(nested).close()
    assert nested.is_file()
    with pytest.raises(LedgerInputError, match="must be a file"):
        db.open_ledger(":memory:")


def test_parked_before_filters_by_reason_and_day(ledger: db.Ledger) -> None:
    for name in ("a", "b", "c"):
        db.create_task(ledger, task_id=name, kind="code", title=name)
    db.set_task_status(ledger, "a", "parked", parked_reason="budget_exhausted")
    db.set_task_status(ledger, "b", "parked", parked_reason="question_expired")
    today = db.day_bucket(db.utc_now())
    assert db.parked_before(ledger, reason="budget_exhausted", day=today) == []
    tomorrow = (date.fromisoformat(today) + timedelta(days=1)).isoformat()
    assert [t.id for t in db.parked_before(ledger, reason="budget_exhausted", day=tomorrow)] == [
        "a"
    ]
