"""The triage inbox: one list of what needs a person now, oldest first.

Open questions (with their age and deadline; not the pull request gate, which
waits on GitHub), parked tasks (the reason, what their park said, and the
command that fixes it), tasks that failed in the last week, automations that
are overdue (no daemon ran their slot) or whose last run failed or was skipped
for the budget, and the day's budget once it is near its cap. The CLI
(`agent-team inbox`), `GET /api/triage`, the dashboard's inbox page and the
daily Slack digest all read this one function.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from agent_team import db
from agent_team.common.timefmt import utc_text
from agent_team.models.budget_view import BudgetToday, settings_budget
from agent_team.task_model import QuestionKind

if TYPE_CHECKING:
    from agent_team.config import Settings

__all__ = [
    "FAILED_WINDOW",
    "NEAR_CAP",
    "OVERDUE_GRACE",
    "TriageItem",
    "for_settings",
    "triage",
]

FAILED_WINDOW = timedelta(days=7)
NEAR_CAP = 0.8  # the budget shows from 80 % of the day's cap
# An automation whose slot is this late was not run: no daemon (or `tick`) is working.
OVERDUE_GRACE = timedelta(minutes=5)

# What fixes a parked task, by reason (`{task}`: its id; `{resume_at}`: when it continues
# by itself, UTC); others: fix the cause, then retry.
_PARKED_FIX = {
    "budget_exhausted": "resumes by itself after UTC midnight; or raise "
    "AGENT_TEAM_DAILY_BUDGET_USD / AGENT_TEAM_DAILY_TOKEN_CAP",
    # Its checkpoints are missing (`coordinator.runner`): a retry has nothing to continue.
    "needs_operator": "its checkpoints are missing; submit the task again: agent-team submit ...",
    "repo_unavailable": "make its repository reachable (it exists, the address is right, "
    "AGENT_TEAM_GITHUB_TOKEN may read it), then: agent-team retry {task}",
    # Every model of the call kept failing: the timers continue it after a pause.
    "model_unavailable": "continues by itself at {resume_at}; or: agent-team retry {task}",
    # A 401/403/400: the message names the provider, the model and the setting.
    "model_refused": "fix the key or the model setting named in the message, then: "
    "agent-team retry {task}",
}
# A park's note in the inbox's detail: its start says what happened (a provider's error).
_NOTE_CHARS = 300


@dataclass(frozen=True)
class TriageItem:
    kind: str  # question, parked, failed, automation, budget
    since: str  # ISO 8601 UTC: what the list is ordered by (oldest first)
    title: str
    detail: str
    fix: str | None = None  # the command or action that deals with it
    task_id: str | None = None
    question_id: str | None = None
    automation_id: str | None = None
    deadline_at: str | None = None

    def as_json(self) -> dict[str, Any]:
        # Flat fields: a plain copy (dataclasses.asdict deep-copies, 20x slower on a big inbox).
        return dict(vars(self))


# What an open question's row says and how to answer it, by kind (others: the generic pair).
_QUESTION_DETAIL = {
    QuestionKind.PR_DECISION.value: "the pull request needs a decision: fix, ignore or take over",
}
_QUESTION_FIX = {
    QuestionKind.PR_DECISION.value: "agent-team answer {question} fix [note] | ignore | take over",
}


def _questions(rows: db.TriageRows, now: datetime) -> list[TriageItem]:
    items = []
    for q in rows.open_questions:
        since = q.posted_at or q.task_created_at or db.to_iso(now)
        detail = _QUESTION_DETAIL.get(q.kind, f"{q.kind.replace('_', ' ')} question waiting")
        fix = _QUESTION_FIX.get(q.kind, "agent-team answer {question} ...")
        items.append(
            TriageItem(
                kind="question",
                since=since,
                title=q.task_title or q.task_id,
                detail=detail,
                fix=fix.replace("{question}", q.question_id),
                task_id=q.task_id,
                question_id=q.question_id,
                deadline_at=q.deadline_at,
            )
        )
    return items


def _parked(rows: db.TriageRows) -> list[TriageItem]:
    items = []
    for task in rows.parked:
        reason = task.parked_reason or "unknown"
        if reason == "question_expired":
            question = rows.expired_question_of.get(task.id, "<question id>")
            fix = f"agent-team reopen {question}"
        else:
            fix = _PARKED_FIX.get(reason, "fix the cause, then: agent-team retry {task}")
            fix = fix.replace("{task}", task.id).replace("{resume_at}", _utc(task.resume_at))
        detail = f"parked: {reason}"
        note = rows.park_note_of.get(task.id)
        if note:
            cut = note if len(note) <= _NOTE_CHARS else note[: _NOTE_CHARS - 1] + "…"
            detail += f": {cut}"
        items.append(
            TriageItem(
                kind="parked",
                since=task.updated_at,
                title=task.title,
                detail=detail,
                fix=fix,
                task_id=task.id,
            )
        )
    return items


def _utc(stamp: str | None) -> str:
    """A ledger time as people read it: `2026-12-07 12:05:00 UTC`."""
    if stamp is None:  # `db.park_for_models` always sets one; a row changed by hand may not
        return "the end of its pause"
    return utc_text(db.from_iso(stamp))


def _failed(rows: db.TriageRows) -> list[TriageItem]:
    return [
        TriageItem(
            kind="failed",
            since=task.updated_at,
            title=task.title,
            detail=f"failed in {task.phase}",
            fix=f"see why: agent-team show {task.id}; fix it, then: agent-team retry {task.id}",
            task_id=task.id,
        )
        for task in rows.failed
    ]


def _automations(rows: db.TriageRows) -> list[TriageItem]:
    items = []
    for automation in rows.overdue_automations:
        assert automation.next_run_at is not None  # the query asks for one in the past
        items.append(
            TriageItem(
                kind="automation",
                since=automation.next_run_at,
                title=automation.name,
                detail="overdue: its slot has passed and no daemon ran it",
                fix="start the daemon, or run `agent-team tick`",
                automation_id=automation.automation_id,
            )
        )
    overdue = {automation.automation_id for automation in rows.overdue_automations}
    for failing in rows.failing_automations:
        if failing.automation_id in overdue:
            continue
        detail = f"last run {failing.status.replace('_', ' ')}: {failing.detail or ''}"
        items.append(
            TriageItem(
                kind="automation",
                since=failing.at,
                title=failing.name,
                detail=detail.rstrip(": "),
                fix=f"agent-team automation show {failing.automation_id}",
                automation_id=failing.automation_id,
            )
        )
    return items


def _budget(budget: BudgetToday | None, now: datetime) -> list[TriageItem]:
    """A state of now (when it crossed 80 % is not recorded), so it is listed last."""
    if budget is None or budget.fraction < NEAR_CAP:
        return []
    state = "reached" if budget.reached else f"{budget.fraction:.0%} used"
    return [
        TriageItem(
            kind="budget",
            since=db.to_iso(now),
            title=f"daily budget {state}",
            detail=budget.describe(),
            fix="raise AGENT_TEAM_DAILY_BUDGET_USD / AGENT_TEAM_DAILY_TOKEN_CAP, or wait for "
            "UTC midnight",
        )
    ]


def triage(reader: db.Reader, *, now: datetime, budget: BudgetToday | None) -> list[TriageItem]:
    """Everything waiting on a person, oldest first (`reader`: a snapshot, for one view)."""
    rows = db.triage_rows(
        reader, failed_since=now - FAILED_WINDOW, overdue_before=now - OVERDUE_GRACE
    )
    items = [
        *_questions(rows, now),
        *_parked(rows),
        *_failed(rows),
        *_automations(rows),
        *_budget(budget, now),
    ]
    return sorted(items, key=lambda item: (item.since, item.kind, item.title))


def for_settings(reader: db.Reader, settings: Settings, now: datetime) -> list[TriageItem]:
    """`triage` with the configured caps' budget: what the CLI, the API and the page show."""
    return triage(reader, now=now, budget=settings_budget(reader, settings, now))
