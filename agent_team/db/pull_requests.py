"""`pull_requests` and `pr_events`: a task's draft pull request while people review it.

The PR gate (issue #29) keeps a task open while its pull request is open. The
watcher reads GitHub (webhook or poll) and answers the gate; these rows are
what it needs to do that once per event, whatever delivers it and however
many daemons share the ledger:

- `pull_requests` says which task owns which PR, the head commit and ETag the
  watcher last saw, how many follow-up rounds ran, and whether a person took over;
- `pr_events` holds every event acted on (a review, a comment, a merge) and
  every step taken (a follow-up pushed, a CI rerun) under a deterministic key.
  An answer that names an event key already there is refused in the same
  transaction (`insert_pr_events` inside `db.answer_question`), so the poller
  racing a webhook acts once. The rows are kept for the task's life: they are
  the PR's timeline on the task page, `show` and `/api/task`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_team.db.clock import to_iso
from agent_team.db.ledger import Ledger, Reader, Transaction, write_statement
from agent_team.db.records import fetch_record, fetch_records, row_to
from agent_team.exceptions import LedgerInputError
from agent_team.task_model import PullRequestState

__all__ = [
    "PR_STATES",
    "NewPrEvent",
    "PrEvent",
    "PullRequestRow",
    "WatchedPull",
    "find_pull_request",
    "get_pull_request",
    "insert_pr_events",
    "list_pr_events",
    "note_pull_request",
    "pr_event_keys",
    "pr_events_taken",
    "pull_requests_at",
    "record_pr_event",
    "watch_pull_request",
    "watched_pull_requests",
]

PR_STATES = tuple(state.value for state in PullRequestState)
# What one event's detail may hold: enough for the timeline, never a whole diff.
DETAIL_CHARS = 8000


@dataclass(frozen=True, slots=True)
class PullRequestRow:
    task_id: str
    repo: str
    number: int
    url: str
    state: str
    head_sha: str | None
    etag: str | None
    rounds: int
    hands_off: int
    opened_at: str
    checked_at: str | None
    ready_at: str | None
    closed_at: str | None


@dataclass(frozen=True, slots=True)
class PrEvent:
    task_id: str
    event_key: str
    kind: str
    round: int
    head_sha: str | None
    actor: str | None
    detail_json: str
    at: str

    @property
    def detail(self) -> dict[str, Any]:
        value = json.loads(self.detail_json)
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class NewPrEvent:
    """An event about to be acted on: stored in the transaction that acts on it."""

    event_key: str
    kind: str
    round: int = 0
    head_sha: str | None = None
    actor: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WatchedPull:
    """An open PR whose task waits on its gate: the watcher's work list."""

    pull: PullRequestRow
    question_id: str
    kind: str = "pull_request"  # or `pr_decision`: only a merge or a close answers it here


def _check_event(event: NewPrEvent) -> str:
    if not event.event_key or len(event.event_key) > 300:
        raise LedgerInputError("a pull request event needs a key of 1 to 300 characters")
    if not event.kind:
        raise LedgerInputError("a pull request event needs a kind")
    if event.round < 0:
        raise LedgerInputError(f"a round counts from 0, not {event.round}")
    detail = json.dumps(event.detail, sort_keys=True)
    if len(detail) > DETAIL_CHARS:
        raise LedgerInputError(
            f"a pull request event's detail is {len(detail)} characters; at most {DETAIL_CHARS}"
        )
    return detail


def watch_pull_request(
    ledger: Ledger,
    *,
    task_id: str,
    repo: str,
    number: int,
    url: str,
    head_sha: str | None,
    at: datetime,
) -> PullRequestRow:
    """The task's PR row, made on first call (a resumed gate calls again: no change).

    Raises:
        LedgerInputError: no repository, a number below 1, or another task owns the PR.
    """
    if not repo or "/" not in repo:
        raise LedgerInputError(f"{repo!r} is not an owner/name repository")
    if number < 1:
        raise LedgerInputError(f"{number} is not a pull request number")
    key = repo.lower()

    def work(tx: Transaction) -> None:
        tx.execute(
            "INSERT INTO pull_requests (task_id, repo, number, url, head_sha, opened_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (task_id, key, number, url, head_sha, to_iso(at)),
        )

    ledger.write(work, flush=False)
    row = get_pull_request(ledger, task_id)
    if row is None or (row.repo, row.number) != (key, number):
        raise LedgerInputError(f"pull request {repo}#{number} belongs to another task")
    return row


def get_pull_request(reader: Reader, task_id: str) -> PullRequestRow | None:
    return fetch_record(
        reader, PullRequestRow, "SELECT * FROM pull_requests WHERE task_id = ?", (task_id,)
    )


def find_pull_request(reader: Reader, repo: str, number: int) -> PullRequestRow | None:
    """The task that owns `repo#number`, if any (the webhook's first question)."""
    return fetch_record(
        reader,
        PullRequestRow,
        "SELECT * FROM pull_requests WHERE repo = ? AND number = ?",
        (repo.lower(), number),
    )


def pull_requests_at(reader: Reader, repo: str, head_sha: str) -> list[PullRequestRow]:
    """The open PRs of `repo` whose head the watcher last saw at `head_sha` (CI events)."""
    return fetch_records(
        reader,
        PullRequestRow,
        "SELECT * FROM pull_requests WHERE repo = ? AND head_sha = ? AND state = 'open'",
        (repo.lower(), head_sha),
    )


def watched_pull_requests(reader: Reader) -> list[WatchedPull]:
    """Open PRs whose task waits on its PR gate or on a person's PR decision (a merge or a
    close ends that too), the least recently checked first."""
    rows = reader.fetch_all(
        "SELECT p.*, q.question_id AS question_id, q.kind AS question_kind "
        "FROM pull_requests p JOIN pending_questions q ON q.thread_id = p.task_id "
        "AND q.status = 'open' AND q.kind IN ('pull_request', 'pr_decision') "
        "WHERE p.state = 'open' ORDER BY p.checked_at IS NOT NULL, p.checked_at, p.task_id",
    )
    return [
        WatchedPull(row_to(PullRequestRow, row), str(row["question_id"]), str(row["question_kind"]))
        for row in rows
    ]


_NOTE_COLUMNS = frozenset(
    {"state", "head_sha", "etag", "rounds", "hands_off", "checked_at", "ready_at", "closed_at"}
)


def note_pull_request(ledger: Ledger, task_id: str, **changes: Any) -> bool:
    """Set some of the PR row's columns; False when the task has no PR row.

    Datetimes are stored as ISO text. History, not a decision: no flush of its own.

    Raises:
        LedgerInputError: an unknown column or state.
    """
    unknown = set(changes) - _NOTE_COLUMNS
    if unknown or not changes:
        raise LedgerInputError(f"cannot note {sorted(unknown) or 'nothing'} on a pull request")
    if "state" in changes and changes["state"] not in PR_STATES:
        raise LedgerInputError(f"{changes['state']!r} is not a pull request state")
    values = [to_iso(v) if isinstance(v, datetime) else v for v in changes.values()]
    sets = ", ".join(f"{name} = ?" for name in changes)
    return (
        write_statement(
            ledger,
            f"UPDATE pull_requests SET {sets} WHERE task_id = ?",
            (*values, task_id),
            flush=False,
        )
        == 1
    )


def pr_events_taken(tx: Transaction, task_id: str, events: Sequence[NewPrEvent]) -> bool:
    """Whether any of `events` is stored already (checked before a write acts on them)."""
    if not events:
        return False
    marks = ", ".join("?" for _ in events)
    taken = tx.execute(
        f"SELECT 1 FROM pr_events WHERE task_id = ? AND event_key IN ({marks}) LIMIT 1",
        (task_id, *(event.event_key for event in events)),
    ).fetchone()
    return taken is not None


def insert_pr_events(
    tx: Transaction, task_id: str, events: Sequence[NewPrEvent], *, at: datetime
) -> bool:
    """Store `events` in `tx` unless one of them is stored already (then nothing is).

    Returns:
        True when every event was new and is now stored.
    """
    details = [_check_event(event) for event in events]
    if pr_events_taken(tx, task_id, events):
        return False
    for event, detail in zip(events, details, strict=True):
        tx.execute(
            "INSERT INTO pr_events (task_id, event_key, kind, round, head_sha, actor, "
            "detail_json, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                task_id,
                event.event_key,
                event.kind,
                event.round,
                event.head_sha,
                event.actor,
                detail,
                to_iso(at),
            ),
        )
    return True


def record_pr_event(ledger: Ledger, task_id: str, event: NewPrEvent, *, at: datetime) -> bool:
    """Store one event in a transaction of its own; False when its key is taken."""
    return ledger.write(lambda tx: insert_pr_events(tx, task_id, [event], at=at))


def pr_event_keys(reader: Reader, task_id: str) -> set[str]:
    rows = reader.fetch_all("SELECT event_key FROM pr_events WHERE task_id = ?", (task_id,))
    return {str(row["event_key"]) for row in rows}


def list_pr_events(reader: Reader, task_id: str) -> list[PrEvent]:
    """The task's PR timeline, oldest first."""
    return fetch_records(
        reader,
        PrEvent,
        "SELECT * FROM pr_events WHERE task_id = ? ORDER BY at, event_key",
        (task_id,),
    )
