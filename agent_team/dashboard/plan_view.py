"""The task page's plan card: the plan shown, its changes since the plan sent back, every version.

Why a module of its own: the page shows one plan version (the current one,
or `?plan=N`), a line diff against the plan the reviewer asked to revise,
and a link to every other version; keeping that apart from `pages.py` keeps
the page handler a list of sections. The versions and diffs come from
`plandiff` through the task report (`reports.task.read_task_report`), as
`agent-team show` and Slack get them.

All text here is untrusted (plans come from a model or a person): it is
returned as plain strings for the autoescaping templates, after `clean`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from agent_team.dashboard.safe_markdown import render_markdown
from agent_team.reports.journey import who_answered
from agent_team.reports.plandiff import ADDED, REMOVED, PlanVersion

__all__ = ["DiffRow", "PlanChoiceError", "PlanLink", "plan_context"]


class PlanChoiceError(Exception):
    """`?plan=` names no plan version of the task; `status_code` is the page's answer."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


@dataclass(frozen=True, slots=True)
class DiffRow:
    kind: str  # add | del | same
    mark: str  # what a person sees before the line: a plus, a minus sign, or nothing
    text: str


@dataclass(frozen=True, slots=True)
class PlanLink:
    number: int
    href: str
    outcome: str
    is_shown: bool
    is_current: bool


_KINDS = {ADDED: ("add", "+"), REMOVED: ("del", "\N{MINUS SIGN}")}


def _choose(plans: Sequence[PlanVersion], requested: str | None) -> PlanVersion:
    if requested is None:
        return next((p for p in plans if p.status == "open"), plans[-1])
    if not requested.isdigit():
        raise PlanChoiceError(
            400, f"plan must be a plan number from 1 to {len(plans)}, not {requested[:40]!r}"
        )
    number = int(requested)
    if not 1 <= number <= len(plans):
        raise PlanChoiceError(
            404, f"this task has plans 1 to {len(plans)}; there is no plan {number}"
        )
    return plans[number - 1]


def _outcome(plan: PlanVersion) -> str:
    """How a version was answered, for the list of versions: `revise by ada via cli`."""
    outcome = plan.decision or plan.status
    if plan.answered_via:
        outcome += f" by {who_answered(plan.answered_via)}"
    return outcome


def plan_context(
    plans: Sequence[PlanVersion],
    requested: str | None,
    *,
    clean: Callable[[str], str],
    link: Callable[[int], str],
) -> dict[str, Any]:
    """What `task.html` needs for its plan card.

    Args:
        plans: the task report's `plans`, oldest first.
        requested: the `?plan=` query value, or None for the current plan.
        clean: makes a text fit to show (redaction).
        link: the URL of the page showing plan version N.

    Raises:
        PlanChoiceError: `requested` names no version (400 if not a number, 404 if out of range).
    """
    if not plans:
        if requested is not None:
            raise PlanChoiceError(404, "this task has no plan yet")
        return {"plan_html": None, "plan_from": None, "plan": None}
    shown = _choose(plans, requested)
    current = plans[-1]
    base = plans[shown.base - 1] if shown.base else None
    changes = [
        DiffRow(*_KINDS.get(line.op, ("same", "")), text=clean(line.text)) for line in shown.diff
    ]
    asked = None
    if base is not None:
        asked = _outcome(base) + (f": {clean(base.feedback)}" if base.feedback else "")
    html: Markup = render_markdown(clean(shown.markdown))
    return {
        "plan_html": html,
        "plan_from": f"question {shown.question_id} ({shown.status})",
        "plan": {
            "number": shown.number,
            "count": len(plans),
            "is_current": shown is current,
            "current_href": link(current.number),
            "base": base.number if base else None,
            "asked": asked,
            "changes": changes,
            "changed": any(row.kind != "same" for row in changes),
            "versions": [
                PlanLink(
                    number=p.number,
                    href=link(p.number),
                    outcome=_outcome(p),
                    is_shown=p is shown,
                    is_current=p is current,
                )
                for p in plans
            ],
        },
    }
