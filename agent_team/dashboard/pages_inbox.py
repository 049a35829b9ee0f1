"""The inbox page (`/inbox`): what needs a person now, each with the button that deals with it.

It reads the one triage list the CLI, `GET /api/triage` and the Slack digest
read (`triage.triage`), so they never disagree, and adds what a browser can
do about each row without opening its task: an open question is answered
inline (approve or reject a plan, publish a page, fix or ignore a pull
request, reply to a clarifying question), a parked or failed task is retried,
a task parked on an expired question gets that question reopened. Every
button posts to the JSON API (`/api/questions/{id}/answer`, `/api/task/{id}/retry`,
`/api/questions/{id}/reopen`), which checks the role and writes the audit row
as the CLI does; a button shows only to a signed-in viewer whose role allows
it, and the CLI command stays beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team import db
from agent_team.common.redact import redact
from agent_team.dashboard.api_actions import DEFAULT_REOPEN
from agent_team.dashboard.auth import Viewer
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.pages import Stamp, stamp, viewer_page
from agent_team.dashboard.permissions import abilities
from agent_team.dashboard.task_actions import kept_since, reopen_path, retry_why
from agent_team.reports import triage
from agent_team.task_model import QuestionKind, QuestionStatus

__all__ = ["INLINE_ANSWERS", "routes"]

# The answers a button gives, by question kind (each valid in `requests.answers`' grammar);
# a clarifying question gets a reply box instead.
INLINE_ANSWERS: dict[str, tuple[tuple[str, str], ...]] = {
    QuestionKind.PLAN_DECISION.value: (("Approve", "approve"), ("Reject", "reject")),
    QuestionKind.CONFLUENCE_APPROVAL.value: (("Publish", "publish"), ("Reject", "reject")),
    QuestionKind.PR_DECISION.value: (
        ("Fix", "fix"),
        ("Ignore", "ignore"),
        ("Take over", "take over"),
    ),
}
_QUESTION_CHARS = 400
# The role-table actions the rows' buttons stand for (`roles.ACTIONS`).
_OFFERED = ("retry", "reopen", *(f"answer:{kind.value}" for kind in QuestionKind))


@dataclass(frozen=True, slots=True)
class InlineAnswer:
    """How a question is answered from its row: buttons, or a reply box (`reply`)."""

    action: str
    buttons: tuple[tuple[str, str], ...]
    reply: bool


@dataclass(frozen=True, slots=True)
class InboxRow:
    kind: str
    since: Stamp | None
    title: str
    detail: str
    fix: str
    task_id: str | None
    question_id: str | None
    deadline: Stamp | None
    question: str = ""  # what an open question asks
    answer: InlineAnswer | None = None
    retry: str | None = None
    retry_reason: str = ""
    reopen: str | None = None


def _question_text(question: db.Question | None) -> str:
    payload = question.payload if question is not None else None
    if isinstance(payload, dict):
        text = payload.get("text") or payload.get("question")
        if isinstance(text, str):
            return text if len(text) <= _QUESTION_CHARS else text[: _QUESTION_CHARS - 1] + "…"
    return ""


class _InboxPage:
    def __init__(self, ctx: DashboardContext) -> None:
        self.ctx = ctx

    def _clean(self, text: str | None) -> str:
        return redact(text or "", self.ctx.auth.tokens.secrets())

    def _row(
        self, item: triage.TriageItem, view: db.Reader, can: dict[str, bool], now: datetime
    ) -> InboxRow:
        row = InboxRow(
            kind=item.kind,
            since=stamp(item.since, now),
            title=self._clean(item.title),
            detail=self._clean(item.detail),
            fix=self._clean(item.fix),
            task_id=item.task_id,
            question_id=item.question_id,
            deadline=stamp(item.deadline_at, now),
        )
        if item.kind == "question" and item.question_id:
            question = db.get_question(view, item.question_id)
            kind = question.kind if question is not None else ""
            answer = None
            if question is not None and can.get(f"answer:{kind}", False):
                answer = InlineAnswer(
                    action=f"/api/questions/{quote(item.question_id, safe='')}/answer",
                    buttons=INLINE_ANSWERS.get(kind, ()),
                    reply=kind == QuestionKind.CLARIFY,
                )
            return replace(row, question=self._clean(_question_text(question)), answer=answer)
        if item.kind in ("parked", "failed") and item.task_id:
            task = db.get_task(view, item.task_id)
            if task is None:
                return row
            why = retry_why(task, kept_since(self.ctx.settings, now))
            if why and can["retry"]:
                path = f"/api/task/{quote(task.id, safe='')}/retry"
                return replace(row, retry=path, retry_reason=self._clean(why))
            if task.parked_reason == "question_expired" and can["reopen"]:
                expired = db.list_questions(
                    view, status=QuestionStatus.EXPIRED.value, thread_id=task.id
                )
                if expired:
                    return replace(row, reopen=reopen_path(expired[-1].question_id))
        return row

    def _context(self, viewer: Viewer | None) -> dict[str, Any]:
        now = self.ctx.clock()
        with self.ctx.read() as view:
            items = triage.for_settings(view, self.ctx.settings, now)
            can = abilities(view, viewer, _OFFERED)
            rows = [self._row(item, view, can, now) for item in items]
        return {"rows": rows, "now_label": f"{now:%H:%M:%S} UTC", "reopen_deadline": DEFAULT_REOPEN}

    async def page(self, request: Request) -> Response:
        return await viewer_page(request, self.ctx, "inbox.html", self._context, live=True)


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    page = _InboxPage(ctx)
    return [Route("/inbox", page.page, methods=["GET"], name="inbox")]
