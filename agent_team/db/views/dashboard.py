"""Read-only queries for the dashboard, `/metrics` and reports.

Why a module of its own: these queries aggregate across tables (cost per
transition row, counts and latencies for metrics), so each request or scrape
is a fixed number of queries rather than one per row. (Per-task costs for a
page of tasks are `views.pages.task_costs`; tasks per status are
`tasks.count_tasks_by_status`.)

Nothing here writes; every function takes a `Reader` (the ledger, or one
`Ledger.snapshot()` of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from agent_team.db.clock import day_bucket
from agent_team.db.ledger import Reader
from agent_team.db.questions import resume_command_id
from agent_team.db.tasks import task_filter
from agent_team.task_model import CommandKind, CommandState

__all__ = [
    "AnswerResume",
    "FinishedPull",
    "OpenQuestions",
    "PullRequestStats",
    "Spend",
    "answer_resume_times",
    "count_tasks",
    "open_questions_summary",
    "pull_request_stats",
    "spent_by_mode",
    "transition_costs",
    "unattributed_spend",
]


@dataclass(frozen=True, slots=True)
class Spend:
    """USD and tokens (input plus output) of some budget rows, and (per transition row:
    `transition_costs`) the models that made them, in the order they were first used."""

    usd_cost: float = 0.0
    tokens: int = 0
    models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OpenQuestions:
    """How many questions are open, and when the oldest delivered one was posted."""

    count: int
    oldest_posted_at: str | None


@dataclass(frozen=True, slots=True)
class AnswerResume:
    """When a question was answered and when its resume command finished."""

    question_id: str
    answered_at: str
    done_at: str


@dataclass(frozen=True, slots=True)
class FinishedPull:
    """A merged or closed pull request: how many follow-up rounds it took, and when it
    opened and ended (`closed_at`: the merge or the close)."""

    state: str
    rounds: int
    opened_at: str
    closed_at: str | None


@dataclass(frozen=True, slots=True)
class PullRequestStats:
    """Pull requests per state, and every finished one (for `/metrics`' histograms)."""

    by_state: dict[str, int]
    finished: tuple[FinishedPull, ...]


def count_tasks(
    ledger: Reader,
    *,
    status: str | None = None,
    kind: str | None = None,
    source: str | None = None,
    title_contains: str | None = None,
) -> int:
    """How many tasks `list_tasks` would return with these filters and no limit."""
    where, params = task_filter(
        status=status, kind=kind, source=source, title_contains=title_contains
    )
    row = ledger.fetch_one(f"SELECT COUNT(*) AS n FROM tasks {where}", params)
    assert row is not None
    return int(row["n"])


# A budget row belongs to the transition row of the same task and stage whose
# half-open window [entered_at, exited_at) holds its `recorded_at` (an open row
# has no end). Windows of one task never overlap, so each budget row counts at
# most once. Times are the ledger's fixed-format UTC text, which sorts as time.
_WINDOW = (
    "b.thread_id = t.thread_id AND b.stage = t.to_phase AND b.recorded_at >= t.entered_at "
    "AND (t.exited_at IS NULL OR b.recorded_at < t.exited_at)"
)


def transition_costs(ledger: Reader, thread_id: str) -> dict[int, Spend]:
    """Spend per transition row of a task: its stage's budget rows recorded inside the row's window.

    A stage entered several times (e.g. `plan_review` running, waiting,
    running) gets each call counted on the row during which it was made,
    never on every row of that stage. Each row's `models` are the models that
    answered those calls (a call that fell back names the fallback; an estimate
    for a timed-out attempt names none), so the journey can say which model a
    step used.
    """
    # Grouped by model too, and folded here: one portable query (SQLite's GROUP_CONCAT
    # and PostgreSQL's STRING_AGG differ), each model ordered by its first call.
    rows = ledger.fetch_all(
        "SELECT t.transition_id, b.model, b.estimated, "
        "COALESCE(SUM(b.usd_cost), 0) AS usd_cost, "
        "COALESCE(SUM(b.input_tokens + b.output_tokens), 0) AS tokens, "
        "MIN(b.recorded_at) AS first_at "
        f"FROM task_transitions t LEFT JOIN budget_ledger b ON {_WINDOW} "
        "WHERE t.thread_id = ? GROUP BY t.transition_id, b.model, b.estimated "
        "ORDER BY t.transition_id, first_at, b.model",
        (thread_id,),
    )
    costs: dict[int, Spend] = {}
    for row in rows:
        transition_id = int(row["transition_id"])
        was = costs.get(transition_id, Spend())
        model = row["model"]
        # An estimate (a timed-out or abandoned attempt) is spend, not an answer.
        answered = model is not None and not row["estimated"] and str(model) not in was.models
        costs[transition_id] = Spend(
            was.usd_cost + float(row["usd_cost"]),
            was.tokens + int(row["tokens"]),
            was.models + ((str(model),) if answered else ()),
        )
    return costs


def unattributed_spend(ledger: Reader, thread_id: str) -> Spend:
    """A task's budget rows that fall in no transition window of their stage.

    Normally zero: a node records its transition before its model calls. A
    non-zero value shows spend the journey view cannot place (e.g. a row
    replayed from the outbox with a stage no transition has).
    """
    row = ledger.fetch_one(
        "SELECT COALESCE(SUM(b.usd_cost), 0) AS usd_cost, "
        "COALESCE(SUM(b.input_tokens + b.output_tokens), 0) AS tokens FROM budget_ledger b "
        f"WHERE b.thread_id = ? AND NOT EXISTS (SELECT 1 FROM task_transitions t WHERE {_WINDOW})",
        (thread_id,),
    )
    assert row is not None
    return Spend(float(row["usd_cost"]), int(row["tokens"]))


def open_questions_summary(ledger: Reader) -> OpenQuestions:
    """Open questions waiting on a person and the earliest `posted_at` among them
    (undelivered ones have none). A PR gate waits on GitHub, often for days: not counted."""
    row = ledger.fetch_one(
        "SELECT COUNT(*) AS n, MIN(posted_at) AS oldest FROM pending_questions "
        "WHERE status = 'open' AND kind <> 'pull_request'",
    )
    assert row is not None
    return OpenQuestions(count=int(row["n"]), oldest_posted_at=row["oldest"])


def answer_resume_times(ledger: Reader) -> list[AnswerResume]:
    """Answered questions whose resume command is done, for the answer -> resume latency.

    A pruned finished task's done commands are deleted; its questions keep when
    the resume finished in `resumed_at` (`db.retention`), so the figure stays.
    """
    rows = ledger.fetch_all(
        "SELECT q.question_id, q.answered_at, COALESCE(q.resumed_at, c.done_at) AS done_at "
        "FROM pending_questions q LEFT JOIN commands c ON c.command_id = ? || q.question_id "
        "AND c.kind = ? AND c.state = ? "
        "WHERE q.answered_at IS NOT NULL AND COALESCE(q.resumed_at, c.done_at) IS NOT NULL "
        "ORDER BY q.rowid",
        (resume_command_id(""), CommandKind.RESUME.value, CommandState.DONE.value),
    )
    return [AnswerResume(row["question_id"], row["answered_at"], row["done_at"]) for row in rows]


def spent_by_mode(ledger: Reader, *, day: str | date) -> dict[str, Spend]:
    """Spend on a UTC day per billing mode, in one query; modes with none are left out."""
    rows = ledger.fetch_all(
        "SELECT billing_mode, SUM(usd_cost) AS usd_cost, "
        "SUM(input_tokens + output_tokens) AS tokens FROM budget_ledger "
        "WHERE day_bucket = ? GROUP BY billing_mode",
        (day_bucket(day),),
    )
    return {row["billing_mode"]: Spend(float(row["usd_cost"]), int(row["tokens"])) for row in rows}


def pull_request_stats(ledger: Reader) -> PullRequestStats:
    """How many PRs are in each state, and the rounds and times of those that ended.

    Only finished PRs are listed: their rounds and times no longer change, so the
    histograms built from them only grow as PRs end (an open PR's rounds would
    move between buckets).
    """
    counts = ledger.fetch_all("SELECT state, COUNT(*) AS n FROM pull_requests GROUP BY state")
    rows = ledger.fetch_all(
        "SELECT state, rounds, opened_at, closed_at FROM pull_requests "
        "WHERE state <> 'open' ORDER BY opened_at, task_id"
    )
    return PullRequestStats(
        by_state={str(row["state"]): int(row["n"]) for row in counts},
        finished=tuple(
            FinishedPull(
                str(row["state"]), int(row["rounds"]), str(row["opened_at"]), row["closed_at"]
            )
            for row in rows
        ),
    )
