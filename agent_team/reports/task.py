"""A task's drill-down, shared by `agent-team show`, the task page and `/api/task`.

Why one place: the CLI and the API must tell the same story about a task
(durations, cost per stage, questions), so all of them read `read_task_report`
and only format its result differently. The report is typed so the readers
use fields that mypy checks rather than keys that can drift; its `to_json()`
is the one JSON shape (`task_report`, `show --json`, `/api/task`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from agent_team import db
from agent_team.common.timefmt import utc_text
from agent_team.common.web_url import web_url
from agent_team.exceptions import UnknownTaskError
from agent_team.reports.journey import Step, journey_steps
from agent_team.reports.plandiff import PlanVersion, plan_versions
from agent_team.reports.pull_request import PullRequestTimeline, read_pull_request_timeline
from agent_team.task_model import TERMINAL_STATUSES, Phase, TaskStatus

__all__ = [
    "BuildRef",
    "EffectView",
    "QuestionView",
    "StageFailures",
    "TaskReport",
    "Totals",
    "TransitionView",
    "build_from_note",
    "build_note",
    "completion_notice",
    "expired_notice",
    "failed_notice",
    "failure_label",
    "lane_off_notice",
    "parked_notice",
    "read_task_report",
    "result_note",
    "resume_notice",
    "task_report",
    "waiting_notice",
]

# The coordinator closes a finished task's journey with `build_note(...)`. It is the
# only durable record of the build outside the LangGraph checkpoint, which is pruned;
# writer and reader live here together so the format cannot drift.
_BUILD_NOTE = re.compile(r"branch (?P<branch>\S+) at (?P<commit>[0-9a-f]{7,64})")


def build_note(branch: str, commit: str) -> str:
    """The done transition's note for a build, as `build_from_note` reads it back."""
    return f"branch {branch} at {commit}"


def completion_notice(values: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """`(transition note, notice text)` for a task that reached `done`.

    The transition note keeps the build note alone (the dashboard and `show`
    parse it back with `build_from_note`), or the docs lane's line when there
    was no build; the notice joins the build, the pull request and the docs.
    """
    build = values.get("build") or {}
    note = build_note(build["branch"], build["commit"]) if build else None
    pull = values.get("pull_request") or {}
    docs = result_note(values.get("confluence"))
    ended = {"merged": " merged", "cancelled": " closed unmerged"}.get(
        str(values.get("outcome")), ""
    )
    told = [note, f"pull request {pull['url']}{ended}" if pull.get("url") else None, docs]
    text = "; ".join(part for part in told if part) or None
    return note or docs, text


def waiting_notice(kinds: list[str], values: Mapping[str, Any]) -> str:
    """What people read when a run stops on its gates (the thread, the status comment)."""
    pull = values.get("pull_request") or {}
    if kinds == ["pull_request"] and pull.get("url"):
        return (
            f"pull request {pull['url']} is open: waiting on its review and its merge "
            f"({values.get('pr_round', 0)} follow-up round(s) so far)"
        )
    return f"waiting on a person: {', '.join(kinds)}"


def result_note(confluence: dict[str, Any] | None) -> str | None:
    """One line about the lane's outcome for the task's final note, or None."""
    conf = confluence or {}
    result = conf.get("result")
    if isinstance(result, dict):
        if result.get("dry_run"):
            note = (
                f"confluence dry run: {result.get('method')} {result.get('path')} recorded as "
                f"{result.get('effect_id')}, nothing sent"
            )
            if result.get("approval_was_dry_run"):
                note += (
                    "; the approval was for a dry run, so a real write needs a new approval: "
                    "submit the task again"
                )
            return note
        where = result.get("url") or f"page {result.get('page_id')}"
        return f"confluence {where} at version {result.get('version')}"
    if conf.get("decision") == "reject":
        return "confluence page rejected; nothing written"
    return None


def parked_notice(task_id: str, reason: str, why: str) -> str:
    """What a person reads when a run parks: why, and how to continue it.

    A task parked on today's budget continues by itself tomorrow, so it gets
    no command to type; one parked on its models continues by itself after a
    pause the runner knows only once it parked it, so the runner adds
    `resume_notice` to it.
    """
    if reason in ("budget_exhausted", "model_unavailable"):
        return why
    return f"{why}; then continue it: agent-team retry {task_id}"


def resume_notice(task_id: str, resume_at: datetime) -> str:
    """When a task parked `model_unavailable` continues by itself, and how to continue it now."""
    return (
        f"it continues by itself at {utc_text(resume_at)}, or now with: agent-team retry {task_id}"
    )


def failed_notice(task_id: str, why: str) -> str:
    """What a person reads when a run fails: the error, then on a line of its own the command
    that continues the task (the error may end in a build's output tail).

    It is also the failed row's note, so `show`, the task page and the inbox
    name the command, not only the notice. The task keeps its checkpoints and
    answers, so a retry after the fix runs the step that failed again and asks
    nothing again (`requests.inbox.retry_task`).
    """
    return f"{why.rstrip()}\nfix the cause, then continue it: agent-team retry {task_id}"


def lane_off_notice(task_id: str) -> str:
    return (
        "the Confluence lane is off; set AGENT_TEAM_CONFLUENCE_ENABLED=true, then "
        f"agent-team retry {task_id}"
    )


def _moment(stamp: str | None) -> str:
    return utc_text(db.from_iso(stamp)) if stamp else "its deadline"


def expired_notice(question: db.Question) -> str:
    return (
        f"question {question.question_id} expired at {_moment(question.deadline_at)}; "
        f"reopen it with `agent-team reopen {question.question_id}`"
    )


@dataclass(frozen=True, slots=True)
class BuildRef:
    """The branch and commit a finished task was built on, read back from its done note."""

    branch: str
    commit: str

    @classmethod
    def from_note(cls, note: str | None) -> BuildRef | None:
        """The build in a done transition's note, or None if it is not a build note.

        Only an exact match counts, so a free-text note can never be mistaken
        for a build.
        """
        if note is None:
            return None
        match = _BUILD_NOTE.fullmatch(note.strip())
        if match is None:
            return None
        return cls(branch=match["branch"], commit=match["commit"])

    def to_json(self) -> dict[str, str]:
        return {"branch": self.branch, "commit": self.commit}


def build_from_note(note: str | None) -> dict[str, str] | None:
    """`BuildRef.from_note` as the report's JSON carries it (`{branch, commit}` or None)."""
    build = BuildRef.from_note(note)
    return None if build is None else build.to_json()


@dataclass(frozen=True, slots=True)
class QuestionView:
    """A question as people and the API read it: the ledger columns, answer and payload parsed.

    `text` is the question as asked (from the payload kept for redelivery).
    """

    question_id: str
    thread_id: str
    turn: int
    kind: str
    status: str
    transport: str
    channel_ref: str | None
    posted_at: str | None
    deadline_at: str | None
    answered_at: str | None
    answered_via: str | None
    answer: Any
    text: str | None
    payload: Any

    @classmethod
    def of(cls, question: db.Question) -> QuestionView:
        payload = question.payload
        text = payload.get("text") if isinstance(payload, dict) else None
        return cls(
            question_id=question.question_id,
            thread_id=question.thread_id,
            turn=question.turn,
            kind=question.kind,
            status=question.status,
            transport=question.transport,
            channel_ref=question.channel_ref,
            posted_at=question.posted_at,
            deadline_at=question.deadline_at,
            answered_at=question.answered_at,
            answered_via=question.answered_via,
            answer=question.answer,
            text=text if isinstance(text, str) else None,
            payload=payload,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class NoteView:
    """A note a person left on the task."""

    seq: int
    at: str
    who: str
    via: str
    text: str

    @classmethod
    def of(cls, row: db.AuditRow) -> NoteView:
        return cls(row.seq, row.at, row.actor, row.via, str(row.detail_dict.get("text", "")))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TransitionView:
    """One transition row with its duration (an open row: until the report's `now`) and cost."""

    transition: db.Transition
    duration_s: float
    cost_usd: float
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self.transition),
            "duration_s": self.duration_s,
            "cost_usd": self.cost_usd,
            "tokens": self.tokens,
        }


@dataclass(frozen=True, slots=True)
class EffectView:
    """What the task did outside: a pull request, a comment, a page write, a post.

    `url` is kept only when it is a web link, so a page never links to anything else.
    """

    effect_id: str
    kind: str
    state: str
    result_ref: str | None
    url: str | None
    dry_run: bool
    updated_at: str

    @classmethod
    def of(cls, effect: db.SideEffect) -> EffectView:
        result = effect.result if isinstance(effect.result, dict) else {}
        url = result.get("url") or result.get("page_url") or effect.result_ref
        return cls(
            effect_id=effect.effect_id,
            kind=effect.kind,
            state=effect.state,
            result_ref=effect.result_ref,
            url=web_url(url),
            dry_run=bool(result.get("dry_run")),
            updated_at=effect.updated_at,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Totals:
    """The task's whole spend and age; what the time windows could not place is said, not hidden."""

    cost_usd: float
    tokens: int
    wall_s: float
    unattributed_cost_usd: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# An error's name in a provider's message: `overloaded_error`, `RateLimitError`, `ReadTimeout`.
_ERROR_NAME = re.compile(
    r"\b([a-z]+(?:_[a-z]+)*_error|[A-Z][A-Za-z]*(?:Error|Exception|Timeout))\b"
)
_LABEL_CHARS = 40
_TIMES = "\N{MULTIPLICATION SIGN}"
# What a stage's last failure says when no call of the stage answered after it.
_UNANSWERED = {"gave_up": "gave up", "refused": "refused by the provider"}


def failure_label(failure: db.ModelFailure) -> str:
    """A failed attempt in a few words: `HTTP 529 overloaded_error`, `ReadTimeout`."""
    found = _ERROR_NAME.search(failure.detail)
    name = found.group(1) if found else None
    if failure.http_status is not None:
        return f"HTTP {failure.http_status}" + (f" {name}" if name else "")
    if name:
        return name
    first = failure.detail.strip().splitlines()[0] if failure.detail.strip() else failure.outcome
    return first if len(first) <= _LABEL_CHARS else first[: _LABEL_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class StageFailures:
    """One stage's failed model attempts, summed up the way `show` and the task page say it.

    `errors` are (label, count) pairs, first seen first (`failure_label`);
    `answered_by` the models of the stage's calls that answered from its first
    failure on (empty: none answered since); `last_outcome` what followed the
    last failed attempt.
    """

    stage: str
    attempts: int
    errors: tuple[tuple[str, int], ...]
    answered_by: tuple[str, ...]
    last_outcome: str

    def line(self) -> str:
        """One line: the stage, how many attempts failed, each error with its count (a
        multiplication sign and the count, past one), and who answered or why nobody did."""
        attempts = "1 failed attempt" if self.attempts == 1 else f"{self.attempts} failed attempts"
        errors = ", ".join(label if n == 1 else f"{label} {_TIMES}{n}" for label, n in self.errors)
        if self.answered_by:
            end = f"answered by {', '.join(self.answered_by)}"
        else:
            end = _UNANSWERED.get(self.last_outcome, "no answer yet")
        return f"{self.stage}: {attempts} ({errors}), {end}"


def _stage_failures(
    failures: Sequence[db.ModelFailure],
    rows: Sequence[db.Transition],
    costs: Mapping[int, db.Spend],
) -> tuple[StageFailures, ...]:
    """Each stage's failures, with the models that answered in that stage from its first one on.

    A budget row is counted on the transition row whose window holds it
    (`db.transition_costs`); the stage's rows still open at its first failure,
    or entered after it, hold the calls that answered since.
    """
    by_stage: dict[str, list[db.ModelFailure]] = {}
    for failure in failures:
        by_stage.setdefault(failure.stage, []).append(failure)
    summaries = []
    for stage, failed in by_stage.items():
        labels: dict[str, int] = {}
        for failure in failed:
            label = failure_label(failure)
            labels[label] = labels.get(label, 0) + 1
        first = failed[0].recorded_at
        since = [
            r for r in rows if r.to_phase == stage and (r.exited_at is None or r.exited_at > first)
        ]
        models = (m for r in since for m in costs.get(r.transition_id, db.Spend()).models)
        summaries.append(
            StageFailures(
                stage=stage,
                attempts=len(failed),
                errors=tuple(labels.items()),
                answered_by=tuple(dict.fromkeys(models)),
                last_outcome=failed[-1].outcome,
            )
        )
    return tuple(summaries)


def _failure_json(failure: db.ModelFailure) -> dict[str, Any]:
    return {
        "stage": failure.stage,
        "model": failure.model,
        "attempt": failure.attempt,
        "outcome": failure.outcome,
        "http_status": failure.http_status,
        "detail": failure.detail,
        "recorded_at": failure.recorded_at,
    }


def _plain(value: Any) -> Any:
    """A record as JSON has it (tuples become lists), so the report equals its JSON round trip."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class TaskReport:
    """Everything known about one task, as `read_task_report` reads it from the ledger.

    `steps` are the transition rows folded as people read them
    (`journey.journey_steps`); `plans` every plan version with its diff
    against the one it revises (`plandiff.plan_versions`);
    `model_failures` every failed attempt of a model call, and
    `failures_by_stage` the same summed up per stage; `pull_request` the
    task's pull request and its timeline by round (`pull_request.
    pull_request_timeline`), None when it opened none; `notes` what people
    wrote on it, oldest first.
    """

    task: db.Task
    transitions: tuple[TransitionView, ...]
    steps: tuple[Step, ...]
    plans: tuple[PlanVersion, ...]
    questions: tuple[QuestionView, ...]
    usage: tuple[db.UsageSummaryRow, ...]
    totals: Totals
    build: BuildRef | None
    effects: tuple[EffectView, ...]
    model_failures: tuple[db.ModelFailure, ...] = ()
    failures_by_stage: tuple[StageFailures, ...] = ()
    pull_request: PullRequestTimeline | None = None
    notes: tuple[NoteView, ...] = ()

    @property
    def parked_note(self) -> str | None:
        """Why the task is parked, as its park wrote it (the provider's last error, for a
        task parked on its models): the note of its open parked row."""
        if self.task.status != TaskStatus.PARKED or not self.transitions:
            return None
        last = self.transitions[-1].transition
        return last.note if last.status == TaskStatus.PARKED and last.exited_at is None else None

    @property
    def stopped_in(self) -> str | None:
        """The phase a cancelled task was in when it stopped; None for any other task.

        A cancel ends the graph, so the task's `phase` reads `done`, which says
        nothing about where it was (a rejected plan, a cancelled build).
        """
        if self.task.status != TaskStatus.CANCELLED:
            return None
        phases = [
            view.transition.to_phase
            for view in self.transitions
            if view.transition.to_phase != Phase.DONE
        ]
        return phases[-1] if phases else None

    @property
    def cost_by_stage(self) -> dict[str, float]:
        """What each stage's model calls cost, summed from `usage`."""
        costs: dict[str, float] = {}
        for row in self.usage:
            costs[row.stage] = costs.get(row.stage, 0.0) + row.usd_cost
        return costs

    def to_json(self) -> dict[str, Any]:
        """The report as `/api/task` and `show --json` print it; it equals its JSON round trip."""
        return {
            "task": asdict(self.task),
            "transitions": [t.to_json() for t in self.transitions],
            "steps": [_plain(asdict(step)) for step in self.steps],
            "plans": [_plain(asdict(version)) for version in self.plans],
            "questions": [q.to_json() for q in self.questions],
            "usage": [asdict(u) for u in self.usage],
            "cost_by_stage": self.cost_by_stage,
            "totals": self.totals.to_json(),
            "build": None if self.build is None else self.build.to_json(),
            "effects": [effect.to_json() for effect in self.effects],
            "model_failures": [_failure_json(failure) for failure in self.model_failures],
            "pull_request": None if self.pull_request is None else self.pull_request.to_json(),
            "notes": [note.to_json() for note in self.notes],
            "stopped_in": self.stopped_in,
            # Kept for `agent-team show --json` readers from before `totals` existed.
            "total_usd": self.totals.cost_usd,
            "total_tokens": self.totals.tokens,
        }


def _seconds(start: str, end: datetime) -> float:
    return round((end - db.from_iso(start)).total_seconds(), 3)


def read_task_report(ledger: db.Reader, task_id: str, now: datetime) -> TaskReport:
    """Everything known about one task, from the ledger alone.

    Each transition row carries its duration (an open row: until `now`) and
    the cost of its stage's model calls made while that row was open (a
    time-window join, see `db.transition_costs`), so a stage entered several
    times is never counted twice. Spend the windows cannot place is reported
    as `totals.unattributed_cost_usd` rather than hidden.

    Args:
        ledger: the ledger or one snapshot of it (reads only).
        task_id: the task.
        now: the wall clock, for open rows and the age of a running task.

    Raises:
        UnknownTaskError: no such task.
    """
    task = db.get_task(ledger, task_id)
    if task is None:
        raise UnknownTaskError(f"no task {task_id!r}; list them with `agent-team tasks`")
    usage = db.task_usage(ledger, thread_id=task_id)
    row_costs = db.transition_costs(ledger, task_id)
    rows = db.list_transitions(ledger, task_id)
    transitions = []
    for t in rows:
        end = db.from_iso(t.exited_at) if t.exited_at else now
        spend = row_costs.get(t.transition_id, db.Spend())
        transitions.append(
            TransitionView(
                transition=t,
                duration_s=_seconds(t.entered_at, end),
                cost_usd=spend.usd_cost,
                tokens=spend.tokens,
            )
        )
    finished = task.status in TERMINAL_STATUSES and all(t.exited_at for t in rows)
    if finished:
        exits = [t.exited_at for t in rows if t.exited_at]
        wall_end = db.from_iso(max(exits)) if exits else db.from_iso(task.updated_at)
    else:
        wall_end = now
    done_rows = [t for t in rows if t.status == TaskStatus.DONE]
    questions = db.list_questions(ledger, thread_id=task_id)
    failures = db.list_model_failures(ledger, task_id)
    steps = journey_steps(
        rows,
        questions,
        costs=row_costs,
        task_status=task.status,
        parked_reason=task.parked_reason,
        now=now,
    )
    return TaskReport(
        task=task,
        transitions=tuple(transitions),
        steps=tuple(steps),
        plans=tuple(plan_versions(questions)),
        questions=tuple(QuestionView.of(q) for q in questions),
        usage=tuple(usage),
        totals=Totals(
            cost_usd=sum(row.usd_cost for row in usage),
            tokens=sum(row.input_tokens + row.output_tokens for row in usage),
            wall_s=_seconds(task.created_at, wall_end),
            unattributed_cost_usd=db.unattributed_spend(ledger, task_id).usd_cost,
        ),
        build=BuildRef.from_note(done_rows[-1].note) if done_rows else None,
        effects=tuple(EffectView.of(e) for e in db.list_effects(ledger, task_id=task_id)),
        model_failures=tuple(failures),
        failures_by_stage=_stage_failures(failures, rows, row_costs),
        pull_request=read_pull_request_timeline(ledger, task_id, questions, now),
        notes=tuple(NoteView.of(row) for row in db.list_task_notes(ledger, task_id)),
    )


def task_report(ledger: db.Reader, task_id: str, now: datetime) -> dict[str, Any]:
    """`read_task_report` as JSON: what `/api/task` and `show --json` return.

    Raises:
        UnknownTaskError: no such task.
    """
    return read_task_report(ledger, task_id, now).to_json()
