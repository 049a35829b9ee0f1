"""The dashboard's HTML pages: the overview (`/`) and a task's drill-down (`/task/{id}`).

Handlers stay thin (docs/architecture.md §8): they read the ledger through `db` and
the typed task report (the same story the CLI and `/api/task` tell), turn
rows into small view objects, and render Jinja templates with autoescaping
on. Issue text, plans and answers are untrusted, so nothing is ever marked
safe except the output of `safe_markdown`, which escapes every character it
is given. Every shown text also goes through `redact`, and errors render a
short page: the dashboard never shows a token, a secret or a traceback.

Writing is not done here: the task page's forms (an answer, the plan editor's
`edit`, a note, cancel, retry, reopen) post with `fetch` to the JSON API (with
the signed-in session and its CSRF token), which owns authorization and
validation; which of them the page offers, and the links to the pushed work,
come from `task_actions`. Every page knows who is signed in (`viewer`, from
`auth`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from agent_team import db
from agent_team.builders.live_log import read_build_log, state_dir_of
from agent_team.common.redact import redact
from agent_team.common.timefmt import age_text, relative, span
from agent_team.common.web_url import web_url
from agent_team.dashboard.auth import Viewer
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.plan_view import PlanChoiceError, plan_context
from agent_team.dashboard.pr_view import pull_request_context
from agent_team.dashboard.rendering import error_page, render_page
from agent_team.dashboard.safe_markdown import render_markdown
from agent_team.dashboard.task_actions import plan_to_edit, reopen_path, task_actions
from agent_team.dashboard.task_filters import (
    DEFAULT_LIMIT,
    BadParameter,
    TaskFilter,
    list_filtered,
    parse_task_filter,
)
from agent_team.exceptions import LedgerError, UnknownTaskError
from agent_team.models.budget_view import settings_budget
from agent_team.reports.build_watch import BuildOutput, build_output
from agent_team.reports.journey import who_answered
from agent_team.reports.task import QuestionView, read_task_report
from agent_team.requests.limits import MAX_NOTE_CHARS, PAGE_BODY_CHARS
from agent_team.task_model import (
    TERMINAL_STATUSES,
    QuestionKind,
    QuestionStatus,
    TaskKind,
    TaskStatus,
)

__all__ = ["Stamp", "failure_page", "routes", "stamp"]

log = logging.getLogger(__name__)

TASK_LIMIT = DEFAULT_LIMIT
# A budget bar turns amber from this share of the cap; red at the cap.
_WARN_SHARE = 0.8
# A timeline segment shows its phase name inside only when it has this share of the width.
_LABEL_SHARE = 0.09

_KIND_LABELS = {
    QuestionKind.CLARIFY.value: "clarifying question",
    QuestionKind.PLAN_DECISION.value: "plan approval",
    QuestionKind.CONFLUENCE_APPROVAL.value: "publish approval",
    QuestionKind.PULL_REQUEST.value: "pull request gate",
    QuestionKind.PR_DECISION.value: "pull request decision",
}
# One-click fills for the answer field; each is valid in `answers.parse_answer`'s grammar
# (or, ending in a space, the start of an answer the person completes).
_QUICK_FILLS = {
    QuestionKind.PLAN_DECISION.value: ("approve", "revise ", "reject "),
    QuestionKind.CONFLUENCE_APPROVAL.value: ("publish", "reject "),
    QuestionKind.PR_DECISION.value: ("fix", "ignore", "take over"),
}
# The answer field's hint, by kind.
_PLACEHOLDERS = {
    QuestionKind.PLAN_DECISION.value: "approve, revise …, reject …",
    QuestionKind.CONFLUENCE_APPROVAL.value: "publish, revise …, reject …",
    QuestionKind.PR_DECISION.value: "fix [note], ignore, take over",
}
# Kinds nobody answers here: the PR gate is answered by GitHub (reviews, a merge, a close).
_NOT_ANSWERED_HERE = frozenset({QuestionKind.PULL_REQUEST.value})
# Answers that said no, and the chip they get instead of "answered".
_NO_DECISIONS = {"reject": "rejected", "closed": "closed"}
# A PR decision's card lists at most this many failing checks and review items.
_CARD_CHECKS, _CARD_ITEMS, _CARD_EXCERPT = 5, 10, 4000


# ---- formatting ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stamp:
    """A ledger timestamp as the page shows it: ISO for machines and JS, a label for people."""

    iso: str
    label: str
    relative: str


_age = age_text  # the CLI's `tasks` says ages the same way


def stamp(text: str | None, now: datetime) -> Stamp | None:
    if not text:
        return None
    moment = db.from_iso(text)
    label = f"{moment:%Y-%m-%d %H:%M} UTC"
    return Stamp(iso=db.to_iso(moment), label=label, relative=relative(moment, now))


def _usd(amount: float) -> str:
    if amount == 0:
        return "$0"
    if amount < 0.01:
        return f"${amount:.4f}"
    return f"${amount:,.2f}"


def _tokens(count: int) -> str:
    """Exact below a million (`12,345`), then `5M` / `2.5M`."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}".removesuffix(".0") + "M"
    return f"{count:,}"


_who = who_answered


# ---- view objects --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskRow:
    id: str
    title: str
    kind: str
    status: str
    phase: str
    parked_reason: str | None
    age: str
    created: Stamp | None
    cost: str


@dataclass(frozen=True, slots=True)
class OpenQuestionRow:
    question_id: str
    task_id: str
    task_title: str
    kind_label: str
    text: str
    deadline: Stamp | None


@dataclass(frozen=True, slots=True)
class BudgetView:
    unit: str  # "USD" or "tokens"
    used: str
    cap: str
    percent: float  # of the cap, clamped to 0..100 for the bar's width
    share: str  # the unclamped share as text, e.g. "112%"
    level: str  # ok | warn | over
    note: str


@dataclass(frozen=True, slots=True)
class Segment:
    phase: str
    status: str
    grow: float
    label: str
    title: str
    is_open: bool
    waited: bool = False  # time on a person: drawn striped


@dataclass(frozen=True, slots=True)
class Step:
    phase: str
    status: str
    entered: Stamp | None
    duration: str
    cost: str
    tokens: str
    note: str
    is_open: bool
    detail: str = ""  # the outcome in words when the status word alone does not say it
    models: str = ""  # the models whose calls fall in the step


@dataclass(frozen=True, slots=True)
class FailureRow:
    """One failed attempt of a model call, as the task page lists it."""

    stage: str
    model: str
    attempt: int
    outcome: str
    http_status: str
    detail: str
    at: Stamp | None


@dataclass(frozen=True, slots=True)
class CheckView:
    """A failing check of a PR decision: its name, how it ended, its log and an excerpt."""

    name: str
    conclusion: str
    url: str | None
    excerpt: str


@dataclass(frozen=True, slots=True)
class PullRequestView:
    """What a PR question shows beside its text: the pull request, red checks, reviews."""

    url: str | None  # only an http(s) URL, so it is safe in an href
    reason: str | None = None
    checks: tuple[CheckView, ...] = ()
    items: tuple[tuple[str, str], ...] = ()  # (who, what they asked)
    more: int = 0  # checks and items left out


@dataclass(frozen=True, slots=True)
class QuestionCard:
    question_id: str
    kind: str
    kind_label: str
    status: str
    turn: int
    text: str
    help: Markup | str  # rendered by `safe_markdown` (our text, but kept in the ledger)
    deadline: Stamp | None
    is_open: bool
    action: str
    decision: str | None
    answer_text: str | None
    answered_by: str | None
    answered_at: Stamp | None
    quick_fills: tuple[str, ...] = field(default=())
    answerable: bool = True  # False: GitHub answers it (the PR gate); no form
    placeholder: str = "your answer"
    pull: PullRequestView | None = None
    reopen: str | None = None  # where an expired question's Reopen form posts
    plan_text: str | None = None  # an open plan question's plan: the plan editor's start

    @property
    def chip(self) -> str:
        """The status chip: an answer that said no is not shown as a green "answered"."""
        if self.status == QuestionStatus.ANSWERED and self.decision in _NO_DECISIONS:
            return _NO_DECISIONS[self.decision]
        return self.status


# ---- the pages -----------------------------------------------------------------------------


class _Pages:
    """The page handlers, bound to one dashboard context."""

    def __init__(self, ctx: DashboardContext) -> None:
        self.ctx = ctx

    def _clean(self, text: str | None) -> str:
        """Text fit to show: secrets and credential-shaped strings removed."""
        return redact(text or "", self.ctx.auth.tokens.secrets())

    # -- overview --------------------------------------------------------------------------

    def _budget(self, view: db.Reader, now: datetime) -> BudgetView:
        """Today's spend against the cap that applies, as `ModelCaller` enforces it.

        USD when the configured model has a price and billing is `api`;
        otherwise tokens against the token cap (unpriced models, and
        subscription billing where USD is informational only).
        """
        settings = self.ctx.settings
        budget = settings_budget(view, settings, now)
        if budget.cap > 0:
            share = budget.used / budget.cap
        else:
            share = 1.0 if budget.used > 0 else 0.0
        if budget.unit == "usd":
            used, cap, unit = _usd(budget.used), _usd(budget.cap), "USD"
            note = f"{budget.billing_mode} billing, {settings.model}; resets at UTC midnight"
        else:
            used, cap, unit = _tokens(int(budget.used)), _tokens(int(budget.cap)), "tokens"
            why = "subscription billing" if budget.priced else "no price known"
            note = f"{settings.model} ({why}): capped by tokens; resets at UTC midnight"
        level = "over" if share >= 1 else "warn" if share >= _WARN_SHARE else "ok"
        return BudgetView(
            unit=unit,
            used=used,
            cap=cap,
            percent=round(min(1.0, max(0.0, share)) * 100, 1),
            share=f"{share * 100:.0f}%",
            level=level,
            note=note,
        )

    def _overview_context(self, wanted: TaskFilter) -> dict[str, Any]:
        now = self.ctx.clock()
        with self.ctx.read() as view:
            tasks, matching = list_filtered(view, wanted)
            sources = db.task_sources(view)
            costs = db.task_costs(view, [t.id for t in tasks])
            cancelled = [t.id for t in tasks if t.status == TaskStatus.CANCELLED]
            stopped = db.stopped_phases(view, cancelled) if cancelled else {}
            counts = db.count_tasks_by_status(view)
            questions = db.list_questions(view, status=QuestionStatus.OPEN.value)
            titles = {t.id: t.title for t in tasks}
            for question in questions:
                if question.thread_id not in titles:
                    owner = db.get_task(view, question.thread_id)
                    titles[question.thread_id] = owner.title if owner else question.thread_id
            budget = self._budget(view, now)
        rows = []
        for t in tasks:
            created = stamp(t.created_at, now)
            cost = costs.get(t.id, db.TaskCost(0.0, 0))
            rows.append(
                TaskRow(
                    id=t.id,
                    title=self._clean(t.title),
                    kind=t.kind,
                    status=t.status,
                    phase=f"stopped in {stopped[t.id]}" if t.id in stopped else t.phase,
                    parked_reason=self._clean(t.parked_reason) if t.parked_reason else None,
                    age=_age((now - db.from_iso(t.created_at)).total_seconds()),
                    created=created,
                    cost=f"{_usd(cost.usd)}"
                    + (f" · {_tokens(cost.tokens)} tok" if cost.tokens else ""),
                )
            )
        # The PR gate waits on GitHub, not on people: not in "waiting on people".
        questions = [q for q in questions if q.kind not in _NOT_ANSWERED_HERE]
        open_rows = [
            OpenQuestionRow(
                question_id=q.question_id,
                task_id=q.thread_id,
                task_title=self._clean(titles.get(q.thread_id, q.thread_id)),
                kind_label=_KIND_LABELS.get(q.kind, q.kind),
                text=self._clean(_question_text(q.payload)),
                deadline=stamp(q.deadline_at, now),
            )
            for q in questions
        ]
        # Soonest deadline first: that is the one to answer next.
        open_rows.sort(key=lambda r: (r.deadline is None, r.deadline.iso if r.deadline else ""))
        return {
            "live": True,
            "now_label": f"{now:%H:%M:%S} UTC",
            "tasks": rows,
            "total_tasks": sum(counts.values()),
            "shown_tasks": len(rows),
            "filter": wanted,
            "default_limit": TASK_LIMIT,
            "filter_options": {
                "status": [status.value for status in TaskStatus],
                "kind": [kind.value for kind in TaskKind],
                "source": sorted({*sources, *([wanted.source] if wanted.source else [])}),
            },
            "paging": _paging(wanted, matching, len(rows)),
            "counts": [(status, n) for status, n in counts.items() if n],
            "open_questions": open_rows,
            "budget": budget,
        }

    async def overview(self, request: Request) -> Response:
        try:
            wanted = parse_task_filter(request.query_params, default_limit=TASK_LIMIT)
        except BadParameter as exc:
            return error_page(
                request,
                400,
                "That filter cannot be used",
                f"{exc} Change it, or go back to all tasks.",
            )
        try:
            context = await run_in_threadpool(self._overview_context, wanted)
            return render_page(request, "overview.html", context)
        except Exception as exc:
            return failure_page(request, exc)

    # -- task ------------------------------------------------------------------------------

    def _task_context(
        self, task_id: str, plan: str | None = None, viewer: Viewer | None = None
    ) -> dict[str, Any]:
        now = self.ctx.clock()
        with self.ctx.read() as view:
            report = read_task_report(view, task_id, now)
            actions = task_actions(view, report, viewer, self.ctx.settings, self._clean, now)
        task = report.task
        # One row per step, as `agent-team show` lists them (`journey.journey_steps`).
        journey = report.steps
        total_s = sum(t.duration_s for t in journey)
        segments: list[Segment] = []
        steps: list[Step] = []
        for t in journey:
            share = t.duration_s / total_s if total_s > 0 else 1 / max(1, len(journey))
            duration = span(t.duration_s)
            label = self._clean(t.label)
            segments.append(
                Segment(
                    phase=t.phase,
                    status=t.outcome,
                    # Flex grow as a percentage of the whole: grows summing below 1 would
                    # leave the bar part empty (CSS flexbox). A zero-length step still gets
                    # the CSS min width.
                    grow=round(share * 100, 4),
                    label=t.phase if share >= _LABEL_SHARE else "",
                    title=f"{t.phase} ({label}): {duration}"
                    + (" so far" if t.is_open else "")
                    + f", {_usd(t.cost_usd)}",
                    is_open=t.is_open,
                    waited=t.wait_s + t.parked_s > 0,
                )
            )
            steps.append(
                Step(
                    phase=t.phase,
                    status=t.outcome,
                    entered=stamp(t.entered_at, now),
                    duration=duration,
                    cost=_usd(t.cost_usd),
                    tokens=_tokens(t.tokens) if t.tokens else "",
                    note=self._clean(t.note),
                    is_open=t.is_open,
                    detail=label if label != t.outcome else "",
                    models=self._clean(", ".join(t.models)),
                )
            )
        questions = [
            self._question_card(q, now, plan_to_edit(report, q.question_id))
            for q in report.questions
        ]
        plans = plan_context(
            report.plans,
            plan,
            clean=self._clean,
            link=lambda number: f"/task/{quote(task_id, safe='')}?plan={number}#h-plan",
        )
        totals, build = report.totals, report.build
        return {
            "live": True,
            "now_label": f"{now:%H:%M:%S} UTC",
            "task": {
                "id": task.id,
                "title": self._clean(task.title),
                "body": self._clean(task.body[:PAGE_BODY_CHARS]),
                "body_left": max(0, len(task.body) - PAGE_BODY_CHARS),
                # As the new-task form's preview showed it (`safe_markdown`).
                "body_html": render_markdown(self._clean(task.body[:PAGE_BODY_CHARS])),
                "kind": task.kind,
                "source": task.source,
                "source_ref": self._clean(task.source_ref) if task.source_ref else None,
                "status": task.status,
                "phase": task.phase,
                "parked_reason": self._clean(task.parked_reason) if task.parked_reason else None,
                # What the park said (for a model park: the provider's last error), and
                # when a pause ends by itself.
                "parked_note": self._clean(report.parked_note) if report.parked_note else None,
                "resume_at": stamp(task.resume_at, now),
                "created": stamp(task.created_at, now),
                "checkpoints_pruned": stamp(task.checkpoints_pruned_at, now),
            },
            "totals": {
                "cost": _usd(totals.cost_usd),
                "tokens": _tokens(totals.tokens),
                "wall": span(totals.wall_s),
                "unattributed": _usd(totals.unattributed_cost_usd),
                "has_unattributed": totals.unattributed_cost_usd > 0,
            },
            "segments": segments,
            "steps": steps,
            "timeline_start": steps[0].entered if steps else None,
            "timeline_total": span(total_s),
            "questions": questions,
            "open_count": sum(1 for q in questions if q.is_open and q.answerable),
            **plans,
            "build": {"branch": self._clean(build.branch), "commit": self._clean(build.commit)}
            if build
            else None,
            "effects": [
                {
                    "kind": e.kind.replace("_", " "),
                    "state": "recorded (dry run)" if e.dry_run else e.state,
                    "ref": self._clean(e.result_ref) if e.result_ref else "",
                    "url": self._clean(e.url) if e.url else None,
                }
                for e in report.effects
            ],
            "build_output": self._build_output(task.id, task.status, now),
            "pull_request": pull_request_context(
                report.pull_request, clean=self._clean, when=lambda text: stamp(text, now)
            ),
            "notes": [
                {
                    "text": self._clean(n.text),
                    "who": self._clean(n.who),
                    "via": n.via,
                    "at": stamp(n.at, now),
                }
                for n in report.notes
            ],
            "note_max": MAX_NOTE_CHARS,
            "notes_open": task.status not in TERMINAL_STATUSES,
            "actions": actions,
            "failure_lines": [self._clean(stage.line()) for stage in report.failures_by_stage],
            "failures": [
                FailureRow(
                    stage=f.stage,
                    model=self._clean(f.model),
                    attempt=f.attempt,
                    outcome=f.outcome.replace("_", " "),
                    http_status=str(f.http_status) if f.http_status is not None else "",
                    detail=self._clean(f.detail),
                    at=stamp(f.recorded_at, now),
                )
                for f in report.model_failures
            ],
        }

    def _build_output(self, task_id: str, status: str, now: datetime) -> BuildOutput:
        """The build output card: the kept tail, and whether the page should keep asking."""
        tail = read_build_log(state_dir_of(self.ctx.settings), task_id)
        return build_output(task_id, status, tail, now, secrets=self.ctx.auth.tokens.secrets())

    def _question_card(
        self, q: QuestionView, now: datetime, plan_text: str | None = None
    ) -> QuestionCard:
        payload = q.payload if isinstance(q.payload, dict) else {}
        answer = q.answer if isinstance(q.answer, dict) else None
        is_open = q.status == QuestionStatus.OPEN
        return QuestionCard(
            question_id=q.question_id,
            kind=q.kind,
            kind_label=_KIND_LABELS.get(q.kind, q.kind),
            status=q.status,
            turn=q.turn,
            text=self._clean(_question_text(payload)),
            help=render_markdown(self._clean(str(payload.get("help") or ""))) if payload else "",
            deadline=stamp(q.deadline_at, now),
            is_open=is_open,
            action=f"/api/questions/{quote(q.question_id, safe='')}/answer",
            decision=str(answer["decision"]) if answer and answer.get("decision") else None,
            answer_text=self._clean(str(answer.get("text") or "")) if answer else None,
            answered_by=_who(q.answered_via) if q.answered_at else None,
            answered_at=stamp(q.answered_at, now),
            quick_fills=_QUICK_FILLS.get(q.kind, ()) if is_open else (),
            answerable=q.kind not in _NOT_ANSWERED_HERE,
            placeholder=_PLACEHOLDERS.get(q.kind, "your answer"),
            pull=self._pull_view(q.kind, payload),
            reopen=reopen_path(q.question_id) if q.status == QuestionStatus.EXPIRED else None,
            # No editor over a plan that had to be redacted: saving it would build the mask.
            plan_text=plan_text
            if plan_text is not None and self._clean(plan_text) == plan_text
            else None,
        )

    def _pull_view(self, kind: str, payload: dict[str, Any]) -> PullRequestView | None:
        if kind not in (QuestionKind.PULL_REQUEST, QuestionKind.PR_DECISION):
            return None
        url = web_url(self._clean(str(payload.get("url") or "")))
        if kind == QuestionKind.PULL_REQUEST:
            return PullRequestView(url=url)
        checks = [c for c in payload.get("checks") or () if isinstance(c, dict)]
        items = [i for i in payload.get("items") or () if isinstance(i, dict)]
        return PullRequestView(
            url=url,
            reason=str(payload.get("reason") or "").replace("_", " ") or None,
            checks=tuple(
                CheckView(
                    name=self._clean(str(c.get("name") or "")),
                    conclusion=self._clean(str(c.get("conclusion") or "failure")),
                    url=web_url(self._clean(str(c.get("url") or ""))),
                    excerpt=self._clean(str(c.get("excerpt") or ""))[:_CARD_EXCERPT],
                )
                for c in checks[:_CARD_CHECKS]
            ),
            items=tuple(
                (
                    self._clean(str(i.get("user") or "someone")),
                    self._clean(str(i.get("body") or "")),
                )
                for i in items[:_CARD_ITEMS]
            ),
            more=max(0, len(checks) - _CARD_CHECKS) + max(0, len(items) - _CARD_ITEMS),
        )

    async def task(self, request: Request) -> Response:
        task_id = str(request.path_params["task_id"])
        try:
            plan = request.query_params.get("plan")
            viewer = self.ctx.auth.viewer(request)
            context = await run_in_threadpool(self._task_context, task_id, plan, viewer)
            return render_page(request, "task.html", context)
        except PlanChoiceError as exc:
            return error_page(request, exc.status_code, "No such plan", exc.message)
        except UnknownTaskError:
            return error_page(
                request,
                404,
                "No such task",
                "There is no task with that id. It may have been mistyped, or it lives in "
                "another ledger.",
            )
        except Exception as exc:
            return failure_page(request, exc)


async def viewer_page(
    request: Request,
    ctx: DashboardContext,
    template: str,
    build: Callable[[Viewer | None], dict[str, Any]],
    **extra: Any,
) -> Response:
    """A page drawn for who is signed in: `build` reads the ledger off the event loop; a
    failure becomes a short page (`failure_page`)."""
    try:
        viewer = ctx.auth.viewer(request)
        context = await run_in_threadpool(build, viewer)
        return render_page(request, template, {**context, **extra})
    except Exception as exc:
        return failure_page(request, exc)


def failure_page(request: Request, exc: Exception) -> HTMLResponse:
    """A failed page becomes a short explanation; the details go to the log only."""
    if isinstance(exc, LedgerError):
        log.error("dashboard page %s: the ledger is not readable: %s", request.url.path, exc)
        return error_page(
            request,
            503,
            "The ledger is not available",
            "The dashboard cannot read the task ledger right now. Check that the daemon is "
            "running and its database is migrated (agent-team migrate); the daemon log has "
            "the details.",
        )
    log.error("dashboard page %s failed", request.url.path, exc_info=exc)
    return error_page(
        request,
        500,
        "Something went wrong",
        "This page could not be built. The daemon log has the details.",
    )


@dataclass(frozen=True, slots=True)
class Paging:
    """Where one page of the task list sits in everything the filter selects."""

    first: int  # 1-based position of the first row shown; 0 when none is
    last: int
    matching: int
    prev_query: str | None  # the URL query of the page before, None on the first page
    next_query: str | None


def _paging(wanted: TaskFilter, matching: int, shown: int) -> Paging:
    before = max(0, min(wanted.offset - wanted.limit, matching - wanted.limit))
    after = wanted.offset + wanted.limit
    return Paging(
        first=wanted.offset + 1 if shown else 0,
        last=wanted.offset + shown,
        matching=matching,
        prev_query=wanted.query(offset=before) if wanted.offset > 0 else None,
        next_query=wanted.query(offset=after) if after < matching else None,
    )


def _question_text(payload: Any) -> str:
    if isinstance(payload, dict):
        text = payload.get("text") or payload.get("question")
        if isinstance(text, str):
            return text
    return ""


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    """The HTML pages; `create_app` mounts them beside the API and the static files."""
    pages = _Pages(ctx)
    return [
        Route("/", pages.overview, methods=["GET"], name="overview"),
        Route("/task/{task_id}", pages.task, methods=["GET"], name="task_page"),
    ]
