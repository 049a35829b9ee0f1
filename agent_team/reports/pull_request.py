"""A task's pull request and its timeline, for `agent-team show`, the task page and `/api/task`.

Why a module of its own: the PR gate (issue #29) keeps a task open while
reviewers, CI and the agent take turns on one pull request, and people ask
"what happened on it, in what order, and who decided". The ledger keeps the
answer in three places: the `pull_requests` row (state, rounds, times), the
`pr_events` rows (every review acted on, every follow-up pushed, every CI
step) and the gate questions (`pull_request`, `pr_decision`). This module
folds them into one plain-data timeline, so the three surfaces only format it.

The rules:

- Entries are grouped by round: round 0 is the draft as first opened, round N
  the follow-up round N. Feedback (`review`, `review_comment`, `comment`)
  carries the round it opened and `follow_up` its own round. Any other event
  (a CI step, `ready`, a kind added later) belongs to the round whose commit
  it names: a follow-up's commit is its round's head, and the head feedback of
  round N was written on is round N-1's. An event on a commit no round made
  keeps its own round, except a merge or a close, which ends the latest one.
- A gate question belongs to the round current when it was answered (else
  asked): the highest round of the events up to then. Within a round, entries
  are in time order, events before a question of the same moment (an answer
  stores its events with it, so they share the moment).
- An event kind this module does not know is still shown: its kind, who, the
  commit and its detail in a few words.

Everything here is plain text from the ledger, much of it written by people on
GitHub (review bodies, logins): callers escape it (the dashboard's templates
autoescape, `show` prints without markup) and redact it as they do any text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_team import db
from agent_team.common.web_url import web_url
from agent_team.reports.journey import who_answered
from agent_team.task_model import QuestionKind, QuestionStatus

__all__ = [
    "ENDINGS",
    "FEEDBACK_KINDS",
    "PR_QUESTION_KINDS",
    "PrEntry",
    "PrRound",
    "PullRequestTimeline",
    "pull_request_timeline",
    "read_pull_request_timeline",
    "short_sha",
]

FEEDBACK_KINDS = frozenset({"review", "review_comment", "comment"})
ENDINGS = frozenset({"merged", "closed"})
PR_QUESTION_KINDS = frozenset({QuestionKind.PULL_REQUEST.value, QuestionKind.PR_DECISION.value})
# What a review body or a summary may show of itself; the whole is on GitHub.
BODY_CHARS = 500
_DETAIL_CHARS = 200
_SHA_CHARS = 7
# GitHub's anchors for a PR's review, inline comment and comment, when the event has no link.
_ANCHORS = {
    "review": "#pullrequestreview-{id}",
    "review_comment": "#discussion_r{id}",
    "comment": "#issuecomment-{id}",
}
# Sources, in the order entries of one moment are listed.
_PR, _EVENT, _QUESTION = "pr", "event", "question"
_RANK = {_PR: 0, _EVENT: 1, _QUESTION: 2}


@dataclass(frozen=True, slots=True)
class PrEntry:
    """One line of the timeline: the PR opening, an event, or a gate question.

    `source` is `pr`, `event` or `question`; `kind` the event's kind (or
    `opened`), or the question's kind; `key` the event key or question id.
    `summary` says it in one line for a person, `body` is what a reviewer wrote
    (cut to `BODY_CHARS`) or the follow-up's summary; `url` is a web link or None.
    """

    source: str
    kind: str
    key: str
    at: str | None
    round: int
    actor: str | None
    head_sha: str | None
    url: str | None
    summary: str
    body: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "key": self.key,
            "at": self.at,
            "round": self.round,
            "actor": self.actor,
            "head_sha": self.head_sha,
            "url": self.url,
            "summary": self.summary,
            "body": self.body,
            "detail": json.loads(json.dumps(dict(self.detail))),
        }


@dataclass(frozen=True, slots=True)
class PrRound:
    """The entries of one round, in time order; round 0 is the draft as opened."""

    number: int
    entries: tuple[PrEntry, ...]

    @property
    def title(self) -> str:
        return "opened" if self.number == 0 else f"follow-up round {self.number}"

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.number,
            "title": self.title,
            "entries": [entry.to_json() for entry in self.entries],
        }


@dataclass(frozen=True, slots=True)
class PullRequestTimeline:
    """The task's pull request as people read it, and what happened on it by round.

    `rounds` counts the follow-up rounds run (the row's column); `merged_at`
    is set for a merged PR and `closed_at` for both endings, as GitHub has
    them; `open_for_s` runs from opening to the ending (or `now`).
    """

    repo: str
    number: int
    url: str | None
    state: str
    head_sha: str | None
    rounds: int
    hands_off: bool
    opened_at: str
    ready_at: str | None
    merged_at: str | None
    closed_at: str | None
    checked_at: str | None
    open_for_s: float
    timeline: tuple[PrRound, ...]

    @property
    def headline(self) -> str:
        """`acme/app#12 merged, 2 follow-up rounds, a person took over`."""
        parts = [f"{self.repo}#{self.number} {self.state}", _count(self.rounds, "follow-up round")]
        if self.hands_off:
            parts.append("a person took over")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "number": self.number,
            "url": self.url,
            "state": self.state,
            "head_sha": self.head_sha,
            "rounds": self.rounds,
            "hands_off": self.hands_off,
            "opened_at": self.opened_at,
            "ready_at": self.ready_at,
            "merged_at": self.merged_at,
            "closed_at": self.closed_at,
            "checked_at": self.checked_at,
            "open_for_s": self.open_for_s,
            "timeline": [part.to_json() for part in self.timeline],
        }


def short_sha(sha: object) -> str:
    """A commit as people compare it with GitHub's pages: its first seven characters."""
    return sha[:_SHA_CHARS] if isinstance(sha, str) else ""


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def _int(value: Any) -> int:
    """A count from an event's detail; anything but a whole number counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _one_line(text: Any, limit: int) -> str | None:
    words = " ".join(str(text or "").split())
    if not words:
        return None
    return words if len(words) <= limit else words[: limit - 1] + "…"


def _names(value: Any) -> str:
    """Checks as a list of names: `["lint"]` or `[{"name": "lint", "conclusion": ...}]`."""
    if not isinstance(value, list | tuple):
        return "" if value is None else str(value)
    names = []
    for item in value:
        if isinstance(item, dict):
            name = str(item.get("name") or "?")
            conclusion = item.get("conclusion")
            names.append(f"{name} ({conclusion})" if conclusion else name)
        else:
            names.append(str(item))
    return ", ".join(names)


def _detail_text(detail: Mapping[str, Any]) -> str:
    """An unknown event's detail in a few words: `checks lint, test; run_ids 1, 2`."""
    parts = []
    for key, value in detail.items():
        if value is None or value == "" or value == [] or value == {}:
            continue
        if isinstance(value, dict):
            shown = json.dumps(value, sort_keys=True)
        elif isinstance(value, list | tuple):
            shown = _names(value)
        else:
            shown = str(value)
        parts.append(f"{key} {shown}")
    return _one_line("; ".join(parts), _DETAIL_CHARS) or ""


def _feedback_items(questions: Sequence[db.Question]) -> dict[str, dict[str, Any]]:
    """The feedback items the PR gate's answers carried, by event key: body, path, line, url."""
    items: dict[str, dict[str, Any]] = {}
    for question in questions:
        answer = question.answer if question.kind == QuestionKind.PULL_REQUEST else None
        for item in answer.get("items", ()) if isinstance(answer, dict) else ():
            if isinstance(item, dict) and isinstance(item.get("key"), str):
                items[item["key"]] = item
    return items


def _event_entry(
    event: db.PrEvent, round_: int, pull_url: str | None, items: Mapping[str, dict[str, Any]]
) -> PrEntry:
    detail = event.detail
    kind, actor, head = event.kind, event.actor, event.head_sha
    who = f" by {actor}" if actor else ""
    on = f" on {short_sha(head)}" if head else ""
    url = web_url(detail.get("url"))
    body: str | None = None
    if kind in FEEDBACK_KINDS:
        item = items.get(event.event_key, {})
        url = url or web_url(item.get("url"))
        anchor_id = detail.get("id", item.get("id"))
        if url is None and pull_url and isinstance(anchor_id, int):
            url = pull_url + _ANCHORS[kind].format(id=anchor_id)
        where = ""
        if kind == "review_comment" and item.get("path"):
            where = f" on {item['path']}" + (f":{item['line']}" if item.get("line") else "")
        summary = kind.replace("_", " ") + who + where
        body = _one_line(item.get("body"), BODY_CHARS)
    elif kind == "follow_up":
        answers = detail.get("answers")
        answered = len(answers) if isinstance(answers, list) else 0
        replies, resolved = _int(detail.get("replies")), _int(detail.get("resolved"))
        summary = (
            f"follow-up commit {short_sha(detail.get('commit') or head)} answering "
            f"{_count(answered, 'item')}: {_count(replies, 'reply', 'replies')}, "
            f"{_count(resolved, 'thread')} resolved"
        )
        body = _one_line(detail.get("summary"), BODY_CHARS)
    elif kind == "merged":
        summary = "merged" + on
    elif kind == "closed":
        summary = "closed without merging" + on
    elif kind == "ci_failed":
        summary = f"CI failed{on}: {_names(detail.get('checks'))}"
    elif kind == "ci_rerun":
        runs = detail.get("run_ids")
        summary = f"CI failed jobs rerun{on}: {_names(detail.get('checks'))}"
        if isinstance(runs, list) and runs:
            summary += f" (runs {', '.join(str(run) for run in runs)})"
    elif kind == "ci_green":
        summary = f"CI green{on}"
    elif kind == "ready":
        summary = "marked ready for review" + who + on
    else:
        told = _detail_text(detail)
        summary = kind.replace("_", " ") + who + on + (f": {told}" if told else "")
    return PrEntry(
        source=_EVENT,
        kind=kind,
        key=event.event_key,
        at=event.at,
        round=round_,
        actor=actor,
        head_sha=head,
        url=url,
        summary=summary,
        body=body,
        detail=detail,
    )


def _question_entry(question: db.Question, round_: int, pull_url: str | None) -> PrEntry:
    answer = question.answer if isinstance(question.answer, dict) else {}
    payload = question.payload if isinstance(question.payload, dict) else {}
    decision = answer.get("decision")
    text = _one_line(answer.get("text"), BODY_CHARS)
    reason = payload.get("reason")
    who = who_answered(question.answered_via) if question.answered_at else None
    if question.kind == QuestionKind.PULL_REQUEST:
        asked = f"PR gate {question.question_id}"
        waiting = "waiting on reviews, CI, a merge or a close"
    else:
        asked = f"decision {question.question_id}" + (f" ({reason})" if reason else "")
        waiting = "waiting for a person"
    if question.status == QuestionStatus.ANSWERED:
        summary = f"{asked}: {decision} by {who}"
    elif question.status == QuestionStatus.OPEN:
        summary = f"{asked}: {waiting}"
    else:
        summary = f"{asked}: {question.status}"
    return PrEntry(
        source=_QUESTION,
        kind=question.kind,
        key=question.question_id,
        at=question.answered_at or question.posted_at,
        round=round_,
        actor=who,
        head_sha=answer.get("head_sha") if isinstance(answer.get("head_sha"), str) else None,
        url=web_url(payload.get("url")) or pull_url,
        summary=summary,
        body=text,
        detail={
            "question_id": question.question_id,
            "status": question.status,
            "decision": decision,
            "reason": reason,
            "answered_via": question.answered_via,
            "answered_at": question.answered_at,
            "posted_at": question.posted_at,
        },
    )


def _heads(events: Sequence[db.PrEvent]) -> dict[str, int]:
    """Each known commit's round: a follow-up's commit is its round's head, and the head
    feedback of round N was written on is round N-1's."""
    heads: dict[str, int] = {}
    for event in events:
        commit = event.detail.get("commit") or event.head_sha
        if event.kind == "follow_up" and isinstance(commit, str):
            heads[commit] = event.round
    for event in events:
        if event.kind in FEEDBACK_KINDS and event.head_sha and event.round >= 1:
            heads.setdefault(event.head_sha, event.round - 1)
    return heads


def pull_request_timeline(
    pull: db.PullRequestRow | None,
    events: Sequence[db.PrEvent],
    questions: Sequence[db.Question],
    now: datetime,
) -> PullRequestTimeline | None:
    """The PR and its timeline from its rows, or None when the task opened no PR.

    Args:
        pull: the task's `pull_requests` row (`db.get_pull_request`).
        events: its `pr_events`, oldest first (`db.list_pr_events`).
        questions: the task's questions (`db.list_questions`); only the PR's gates are used.
        now: the wall clock, for an open PR's age.
    """
    if pull is None:
        return None
    pull_url = web_url(pull.url)
    heads = _heads(events)
    items = _feedback_items(questions)
    entries = [
        PrEntry(
            source=_PR,
            kind="opened",
            key=f"pr:{pull.number}",
            at=pull.opened_at,
            round=0,
            actor=None,
            head_sha=None,
            url=pull_url,
            summary=f"draft pull request #{pull.number} opened",
        )
    ]
    latest = 0
    moments: list[tuple[str, int]] = []  # (at, round) of each event, in time order
    for event in events:
        if event.kind in FEEDBACK_KINDS or event.kind == "follow_up":
            round_ = event.round
        elif event.head_sha in heads:
            round_ = heads[event.head_sha]
        elif event.kind in ENDINGS:
            round_ = latest
        else:
            round_ = event.round
        latest = max(latest, round_)
        moments.append((event.at, latest))
        entries.append(_event_entry(event, round_, pull_url, items))
    for question in questions:
        if question.kind not in PR_QUESTION_KINDS:
            continue
        moment = question.answered_at or question.posted_at
        round_ = max((r for at, r in moments if moment is None or at <= moment), default=0)
        entries.append(_question_entry(question, round_, pull_url))
    # An entry with no moment (a question never delivered) goes last in its round.
    entries.sort(key=lambda e: (e.round, e.at is None, e.at or "", _RANK[e.source]))
    rounds: dict[int, list[PrEntry]] = {}
    for entry in entries:
        rounds.setdefault(entry.round, []).append(entry)
    ended = pull.closed_at if pull.state != "open" else None
    end = db.from_iso(ended) if ended else now
    return PullRequestTimeline(
        repo=pull.repo,
        number=pull.number,
        url=pull_url,
        state=pull.state,
        head_sha=pull.head_sha,
        rounds=pull.rounds,
        hands_off=bool(pull.hands_off),
        opened_at=pull.opened_at,
        ready_at=pull.ready_at,
        merged_at=pull.closed_at if pull.state == "merged" else None,
        closed_at=ended,
        checked_at=pull.checked_at,
        open_for_s=max(0.0, round((end - db.from_iso(pull.opened_at)).total_seconds(), 3)),
        timeline=tuple(PrRound(number, tuple(group)) for number, group in sorted(rounds.items())),
    )


def read_pull_request_timeline(
    reader: db.Reader, task_id: str, questions: Sequence[db.Question], now: datetime
) -> PullRequestTimeline | None:
    """`pull_request_timeline` from the ledger; `questions` are the task's, read already."""
    pull = db.get_pull_request(reader, task_id)
    if pull is None:
        return None
    return pull_request_timeline(pull, db.list_pr_events(reader, task_id), questions, now)
