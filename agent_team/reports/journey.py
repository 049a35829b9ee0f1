"""A task's journey as steps: the transition rows folded the way a person reads them.

Why a module of its own: `task_transitions` keeps one row per status change,
so a gate shows as `plan_review running`, `plan_review waiting`,
`plan_review running`, and every row that was left normally still says the
status it was entered with (`running`). `agent-team show` and the dashboard's
task page must tell the same story, so both take `journey_steps` and only
format it differently.

The rules:

- Consecutive rows of one phase are one step (a gate's re-entries after a
  resume, a parked step that was retried); its duration, waiting time and
  cost are the sums of its rows, its models those of its rows' model calls
  (the one that answered, when a call fell back). A revise loop (plan, plan_review, plan,
  plan_review) alternates phases, so it stays separate steps, in order.
- A step's outcome is its own: `done` when it was left normally,
  `answered` when a person answered a question in it (`waited 2h 03m ·
  answered by ada via slack: approve`), `failed` / `cancelled` / `done` when
  the task ended there. Only the step the task is in now is `running`,
  `waiting`, `queued` or `parked`.
- A question belongs to the step of its gate's phase that was open when it
  was answered (else when it was posted). Several answers by the same
  person in one step (two clarify rounds) are said once, with their count.
- The notes of a step's rows stay apart (`notes`; `note` puts each on its
  own line): a park's message, the retry that ended it and the error of the
  run after it are three things, not one paragraph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_team import db
from agent_team.common.timefmt import span
from agent_team.task_model import Phase, QuestionKind, QuestionStatus, TaskStatus

__all__ = ["GATE_PHASES", "Step", "answer_text", "journey_steps", "who_answered"]

# The phase whose node asks each kind of question.
GATE_PHASES: dict[str, str] = {
    QuestionKind.CLARIFY.value: Phase.CLARIFY.value,
    QuestionKind.PLAN_DECISION.value: Phase.PLAN_REVIEW.value,
    QuestionKind.CONFLUENCE_APPROVAL.value: Phase.CONF_GATE.value,
    QuestionKind.PULL_REQUEST.value: Phase.PR_OPEN.value,
    QuestionKind.PR_DECISION.value: Phase.PR_OPEN.value,
}
_ENDINGS = frozenset({TaskStatus.DONE.value, TaskStatus.FAILED.value, TaskStatus.CANCELLED.value})
_CURRENT = frozenset({TaskStatus.WAITING.value, TaskStatus.QUEUED.value, TaskStatus.PARKED.value})


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the journey, as `show` and the task page list it.

    `outcome` is one word (`done`, `answered`, `waiting`, `running`, `queued`,
    `parked`, `failed`, `cancelled`); `label` says it for a person.
    """

    number: int
    phase: str
    outcome: str
    label: str
    entered_at: str
    exited_at: str | None
    duration_s: float
    wait_s: float
    parked_s: float
    cost_usd: float
    tokens: int
    note: str | None
    is_open: bool
    question_ids: tuple[str, ...] = field(default=())
    transition_ids: tuple[int, ...] = field(default=())
    # The models whose calls fall in the step (`db.transition_costs`), first used first.
    models: tuple[str, ...] = field(default=())
    # Each row's note once, in order; `note` is the same, one per line.
    notes: tuple[str, ...] = field(default=())


def who_answered(answered_via: str | None) -> str:
    """`dashboard:alice` -> `alice via dashboard`; the transport comes first in the ledger."""
    if not answered_via:
        return "someone"
    transport, _, name = answered_via.partition(":")
    return f"{name} via {transport}" if name else transport


def answer_text(answer: Any) -> str:
    """An answer as people read it: `approve`, `revise: add tests`, the clarify text.

    The ledger keeps answers as JSON; printed as JSON they show `{"text": ...}`
    and `\\ud83d` escapes for an emoji. An `edit` carries a whole plan, which is
    shown as the plan itself (`plandiff`), so here it is one word.
    """
    if not isinstance(answer, dict):
        return "" if answer is None else str(answer)
    decision = answer.get("decision")
    text = answer.get("text")
    words = " ".join(text.split()) if isinstance(text, str) else ""
    if isinstance(decision, str) and decision:
        if decision == "edit":
            return "edit (the person's own plan)"
        return f"{decision}: {words}" if words else decision
    return words


def _answered_texts(answered: Sequence[db.Question]) -> list[str]:
    """`answered by ada via cli: revise`; one person's answers in a row said once, counted."""
    runs: list[tuple[str, list[str]]] = []
    for question in answered:
        who = who_answered(question.answered_via)
        answer: Any = question.answer
        decision = answer.get("decision") if isinstance(answer, dict) else None
        said = decision if isinstance(decision, str) and decision else ""
        if runs and runs[-1][0] == who:
            runs[-1][1].append(said)
        else:
            runs.append((who, [said]))
    texts = []
    for who, decisions in runs:
        text = f"answered by {who}"
        named = [d for d in decisions if d]
        if named:
            text += ": " + ", ".join(named)
        elif len(decisions) > 1:
            text += f" ({len(decisions)} answers)"
        texts.append(text)
    return texts


def _seconds(start: str, end: str | None, now: datetime) -> float:
    finish = db.from_iso(end) if end else now
    return max(0.0, round((finish - db.from_iso(start)).total_seconds(), 3))


def _owner(question: db.Question, groups: Sequence[Sequence[db.Transition]]) -> int | None:
    """The index of the step a question was asked in, or None if no step has its phase."""
    phase = GATE_PHASES.get(question.kind)
    candidates = [i for i, rows in enumerate(groups) if rows[0].to_phase == phase]
    if not candidates:
        return None
    moment = question.answered_at or question.posted_at
    if moment is None:
        return candidates[-1]  # asked, never delivered: the newest ask of that gate
    started = [i for i in candidates if groups[i][0].entered_at <= moment]
    return started[-1] if started else candidates[0]


def _group(transitions: Sequence[db.Transition]) -> list[list[db.Transition]]:
    groups: list[list[db.Transition]] = []
    for row in transitions:
        if groups and groups[-1][-1].to_phase == row.to_phase:
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups


def _outcome(last: db.Transition, answered: bool, task_status: str | None) -> str:
    if last.exited_at is None:
        if task_status in _ENDINGS:
            # The task row says it ended and its last row is not closed yet (the
            # coordinator writes the two one after the other): nothing runs any more.
            return task_status
        return last.status if last.status in _CURRENT else TaskStatus.RUNNING.value
    if last.status in _ENDINGS:
        return last.status
    return QuestionStatus.ANSWERED.value if answered else TaskStatus.DONE.value


def journey_steps(
    transitions: Sequence[db.Transition],
    questions: Sequence[db.Question],
    *,
    costs: Mapping[int, db.Spend] | None = None,
    task_status: str | None = None,
    parked_reason: str | None = None,
    now: datetime,
) -> list[Step]:
    """The task's steps in order, from its transition rows and questions.

    Args:
        transitions: the task's rows in the order they happened (`db.list_transitions`).
        questions: the task's questions (`db.list_questions`).
        costs: spend per transition row (`db.transition_costs`), with its models; none
            means no cost.
        task_status: the task's status; a task that ended has no running step.
        parked_reason: the task's reason, shown on the step it is parked in now.
        now: the wall clock, for the open step's duration.
    """
    costs = costs or {}
    groups = _group(transitions)
    asked: dict[int, list[db.Question]] = {}
    for question in questions:
        index = _owner(question, groups)
        if index is not None:
            asked.setdefault(index, []).append(question)
    steps = []
    for index, rows in enumerate(groups):
        last = rows[-1]
        in_step = asked.get(index, [])
        answered = [q for q in in_step if q.status == QuestionStatus.ANSWERED]

        def time_in(status: str, rows: list[db.Transition] = rows) -> float:
            return sum(_seconds(r.entered_at, r.exited_at, now) for r in rows if r.status == status)

        wait_s, parked_s = time_in(TaskStatus.WAITING), time_in(TaskStatus.PARKED)
        outcome = _outcome(last, bool(answered), task_status)
        parts = [f"waited {span(wait_s)}"] if answered and wait_s else []
        if parked_s and outcome != TaskStatus.PARKED:
            parts.append(f"parked {span(parked_s)}")
        parts += _answered_texts(answered)
        if outcome == TaskStatus.WAITING:
            parts.append("waiting for an answer")
        elif outcome == TaskStatus.PARKED:
            parts.append(f"parked: {parked_reason}" if parked_reason else "parked")
        elif outcome != QuestionStatus.ANSWERED:
            parts.insert(0, outcome)
        notes = list(dict.fromkeys(r.note for r in rows if r.note))
        spend = [costs.get(r.transition_id, db.Spend()) for r in rows]
        steps.append(
            Step(
                number=index + 1,
                phase=rows[0].to_phase,
                outcome=outcome,
                label=" · ".join(parts),
                entered_at=rows[0].entered_at,
                exited_at=last.exited_at,
                duration_s=round(sum(_seconds(r.entered_at, r.exited_at, now) for r in rows), 3),
                wait_s=round(wait_s, 3),
                parked_s=round(parked_s, 3),
                cost_usd=sum(s.usd_cost for s in spend),
                tokens=sum(s.tokens for s in spend),
                note="\n".join(notes) if notes else None,
                is_open=last.exited_at is None and outcome not in _ENDINGS,
                question_ids=tuple(q.question_id for q in in_step),
                transition_ids=tuple(r.transition_id for r in rows),
                models=tuple(dict.fromkeys(m for s in spend for m in s.models)),
                notes=tuple(notes),
            )
        )
    return steps
