"""Every plan a task was asked to approve, and what changed between them.

Why a module of its own: after `revise <feedback>` the reviewer wants to see
what the new plan changed, on the task page, in the Slack message and in
`agent-team show`; one place computes it so the three never disagree.

Every plan version is already in the ledger: each plan question keeps the
plan it asks about in its payload (`plan_markdown`), and a revise makes a new
question (a new turn), so version N is the Nth plan question of the task. The
plan a new version revises is the one before it; its answer holds the
reviewer's feedback.

An `edit` answer is a plan too: the reviewer's plan replaces the model's
and is the one built (`nodes/plan_review.py` reads it with `Plan.from_text`
and the build writes it back with `to_markdown`). So it is a version of its
own, after the one it edits (`source` "edit", written by whoever answered),
and every view that shows "the current plan" shows what was built, not the
model's plan that was set aside.

The diff compares the plans line by line (`difflib`), ignoring blank lines
and the numbers of numbered steps, so a step inserted at the top is one added
line rather than every later step renumbered.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_team import db
from agent_team.exceptions import InvalidAnswerError
from agent_team.models.schemas import Plan
from agent_team.task_model import QuestionKind

__all__ = [
    "ADDED",
    "EDIT",
    "MODEL",
    "REMOVED",
    "UNCHANGED",
    "DiffLine",
    "PlanVersion",
    "changed",
    "changes_text",
    "diff_plans",
    "edited_plan",
    "plan_versions",
]

ADDED, REMOVED, UNCHANGED = "+", "-", " "
# Where a version's text came from: the model's plan, or a person's `edit` answer.
MODEL, EDIT = "model", "edit"
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+")
_LINE_LIMIT = 500  # one very long step must not crowd out every other change


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of the plan: `op` is `+` (added), `-` (removed) or ` ` (unchanged)."""

    op: str
    text: str


@dataclass(frozen=True, slots=True)
class PlanVersion:
    """One plan a reviewer was asked about, and its diff against the plan it revises.

    `decision` / `feedback` / `answered_via` are how this version was answered
    (None while it is open); `base` is the number of the version it revises.
    A version a person wrote with `edit` (`source` "edit") shares the question
    it answered and that question's status; it was never asked about itself,
    so its `decision` and `feedback` are None, and `answered_via` says who
    wrote it.
    """

    number: int
    question_id: str
    status: str
    markdown: str
    decision: str | None
    feedback: str | None
    answered_via: str | None
    base: int | None = None
    diff: tuple[DiffLine, ...] = field(default=())
    source: str = MODEL


def _key(line: str) -> str:
    return " ".join(_NUMBERED.sub("", line).split())


def diff_plans(old: str, new: str) -> list[DiffLine]:
    """The new plan's lines with the old plan's removed lines where they were.

    Blank lines are left out; numbered steps compare without their numbers,
    and an unchanged step is shown as it reads in the new plan.
    """
    before = [line.rstrip() for line in old.splitlines() if line.strip()]
    after = [line.rstrip() for line in new.splitlines() if line.strip()]
    matcher = difflib.SequenceMatcher(
        a=[_key(line) for line in before], b=[_key(line) for line in after], autojunk=False
    )
    lines: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            lines += [DiffLine(UNCHANGED, line) for line in after[j1:j2]]
            continue
        lines += [DiffLine(REMOVED, line) for line in before[i1:i2]]
        lines += [DiffLine(ADDED, line) for line in after[j1:j2]]
    return lines


def changed(diff: Iterable[DiffLine]) -> list[DiffLine]:
    """Only the added and removed lines."""
    return [line for line in diff if line.op != UNCHANGED]


def _plain(line: DiffLine) -> str:
    return f"{line.op} {line.text}"


def changes_text(
    diff: Sequence[DiffLine],
    *,
    limit: int,
    render: Callable[[DiffLine], str] = _plain,
) -> str:
    """The changed lines, one per line, cut at a line so the text fits in `limit` characters.

    Args:
        diff: from `diff_plans`.
        limit: the most characters the result may have (Slack: a section's 3000).
        render: one line as text (Slack escapes it for mrkdwn).

    Returns:
        The lines, with `… and N more changed lines` when some were cut, or
        `The plan text did not change.` when nothing changed.
    """
    lines = changed(diff)
    if not lines:
        return "The plan text did not change."
    shown: list[str] = []
    used = 0
    for index, line in enumerate(lines):
        text = line.text if len(line.text) <= _LINE_LIMIT else line.text[: _LINE_LIMIT - 1] + "…"
        rendered = render(DiffLine(line.op, text))
        rest = len(lines) - index - 1
        tail = f"\n… and {rest} more changed line{'s' if rest != 1 else ''}" if rest else ""
        # Room for this line, and for the note about the lines after it if they must be cut.
        if used + len(rendered) + 1 + len(tail) > limit and shown:
            more = len(lines) - index
            shown.append(f"… and {more} more changed line{'s' if more != 1 else ''}")
            break
        shown.append(rendered)
        used += len(rendered) + 1
    return "\n".join(shown)[:limit]


def _answer(question: db.Question) -> tuple[str | None, str | None]:
    """`(decision, feedback)`; an `edit`'s text is the new plan, not feedback on this one."""
    answer: Any = question.answer
    if not isinstance(answer, dict):
        return None, None
    decision, text = answer.get("decision"), answer.get("text")
    decision = decision if isinstance(decision, str) and decision else None
    if decision == "edit":
        return decision, None
    return decision, text if isinstance(text, str) and text.strip() else None


def edited_plan(question: db.Question) -> str | None:
    """The plan a person wrote in an `edit` answer, as it was built; None for other answers.

    The answer was checked with `Plan.from_text` before it was stored; a row
    that no longer reads (changed by hand) is shown as it was typed.
    """
    answer: Any = question.answer
    if not isinstance(answer, dict) or answer.get("decision") != "edit":
        return None
    text = answer.get("text")
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return Plan.from_text(text).to_markdown()
    except (InvalidAnswerError, ValueError):
        return text


def plan_versions(questions: Iterable[db.Question]) -> list[PlanVersion]:
    """The task's plans in the order they were asked, each diffed against the one before.

    A plan answered with `edit` is followed by the edited plan, the one the
    build used, so the last version is always the current plan.
    """
    plans = []
    for question in sorted(questions, key=lambda q: q.turn):
        payload = question.payload
        markdown = payload.get("plan_markdown") if isinstance(payload, dict) else None
        if question.kind == QuestionKind.PLAN_DECISION and isinstance(markdown, str):
            plans.append((question, markdown))
    versions: list[PlanVersion] = []

    def add(question: db.Question, markdown: str, **how: Any) -> None:
        previous = versions[-1] if versions else None
        versions.append(
            PlanVersion(
                number=len(versions) + 1,
                question_id=question.question_id,
                status=question.status,
                markdown=markdown,
                base=previous.number if previous else None,
                diff=tuple(diff_plans(previous.markdown, markdown)) if previous else (),
                **how,
            )
        )

    for question, markdown in plans:
        decision, feedback = _answer(question)
        add(
            question,
            markdown,
            decision=decision,
            feedback=feedback,
            answered_via=question.answered_via,
        )
        edited = edited_plan(question)
        if edited is not None:
            add(
                question,
                edited,
                decision=None,
                feedback=None,
                answered_via=question.answered_via,
                source=EDIT,
            )
    return versions
