"""The audit log as a page (`/audit`): the filters of `agent-team audit`, newest first, in pages.

Why the page checks as the API does: the audit log says who did what, so once
people are set up it is for owners. The page takes the same sign-in as a read
(a session or a bearer key, `Auth.authorize_read`) and asks the one role
table (`roles.authorize`, action `audit:read`, which audits a refusal), as
`GET /api/audit` and the CLI do; a viewer gets a 403 page naming the role it
needs, someone signed out a 401 page with the way to sign in.

The filters are the CLI's: actor, via, action (a prefix: `automation.`),
target, since (`24h`, `7d`), limit; `before=<seq>` pages back, as the API's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent_team import db
from agent_team.common.redact import redact
from agent_team.common.timefmt import moment_before
from agent_team.dashboard.auth import AuthRefused
from agent_team.dashboard.context import DashboardContext
from agent_team.dashboard.pages import Stamp, failure_page, stamp
from agent_team.dashboard.rendering import render_page
from agent_team.dashboard.task_filters import BadParameter, integer
from agent_team.exceptions import AccessDeniedError
from agent_team.requests.actors import Actor
from agent_team.requests.roles import authorize

__all__ = ["AuditFilter", "parse_audit_filter", "routes"]

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000  # as `db.list_audit` and the API take
_TEXT_CHARS = 200
_DETAIL_CHARS = 300
VIAS = ("cli", "dashboard", "slack", "github", "automation", "langgraph-api", "internal")
# Actions whose target is a task (others: a question `<task>:q<n>`, an automation, a person).
_TASK_ACTIONS = frozenset({"submit", "cancel", "retry", db.NOTE_ACTION})


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Which audit rows to list; None: any."""

    actor: str | None = None
    via: str | None = None
    action: str | None = None
    target: str | None = None
    since: str | None = None
    limit: int = DEFAULT_LIMIT
    before: int | None = None

    def query(self, **changes: object) -> str:
        """This filter as a URL query, defaults left out, with `changes` applied."""
        values = {**asdict(self), **changes}
        defaults = asdict(AuditFilter())
        return urlencode({k: v for k, v in values.items() if v not in (None, defaults[k])})


def _text(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name, "").strip()
    if not value:
        return None
    if len(value) > _TEXT_CHARS or not value.isprintable():
        raise BadParameter(name, f"must be printable text on one line, {_TEXT_CHARS} at most")
    return value


def parse_audit_filter(params: Mapping[str, str]) -> AuditFilter:
    """Read the page's parameters (blank ones are not given).

    Raises:
        BadParameter: naming the parameter and what it takes.
    """
    since = _text(params, "since")
    if since is not None:
        try:
            moment_before(datetime.now(UTC), since)
        except ValueError as exc:
            raise BadParameter("since", str(exc)) from None
    before = integer(params, "before", 0, 1, None) if params.get("before", "").strip() else None
    return AuditFilter(
        actor=_text(params, "actor"),
        via=_text(params, "via"),
        action=_text(params, "action"),
        target=_text(params, "target"),
        since=since,
        limit=integer(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
        before=before,
    )


@dataclass(frozen=True, slots=True)
class AuditLine:
    seq: int
    at: Stamp | None
    actor: str
    via: str
    action: str
    target: str
    target_href: str | None
    detail: str


def _target_href(action: str, target: str) -> str | None:
    """The task page a row is about, when its target is a task or one of its questions."""
    task, sep, turn = target.rpartition(":q")
    if sep and task and turn.isdigit():
        return f"/task/{quote(task, safe='')}#q-{quote(target, safe=':')}"
    if action in _TASK_ACTIONS:
        return f"/task/{quote(target, safe='')}"
    return None


def _detail(row: db.AuditRow) -> str:
    parts = []
    for key, value in sorted(row.detail_dict.items()):
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={shown}")
    text = ", ".join(parts)
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


class _AuditPage:
    def __init__(self, ctx: DashboardContext) -> None:
        self.ctx = ctx

    def _clean(self, text: str) -> str:
        return redact(text, self.ctx.auth.tokens.secrets())

    def _context(self, actor: Actor, wanted: AuditFilter) -> dict[str, Any]:
        now: datetime = self.ctx.clock()
        with self.ctx.write() as ledger:
            # The one check, audited when refused (AccessDeniedError: a 403 page).
            authorize(ledger, actor, "audit:read", "audit")
        with self.ctx.read() as view:
            rows = db.list_audit(
                view,
                actor=wanted.actor,
                via=wanted.via,
                action=wanted.action,
                target=wanted.target,
                since=moment_before(now, wanted.since) if wanted.since else None,
                limit=wanted.limit,
                before_seq=wanted.before,
            )
        lines = [
            AuditLine(
                seq=row.seq,
                at=stamp(row.at, now),
                actor=self._clean(row.actor),
                via=row.via,
                action=row.action,
                target=self._clean(row.target),
                target_href=_target_href(row.action, row.target),
                detail=self._clean(_detail(row)),
            )
            for row in rows
        ]
        older = wanted.query(before=rows[-1].seq) if len(rows) == wanted.limit else None
        return {
            "rows": lines,
            "filter": wanted,
            "vias": VIAS,
            "older_query": older,
            "newest_query": wanted.query(before=None) if wanted.before else None,
            "narrowed": any(
                v is not None
                for v in (wanted.actor, wanted.via, wanted.action, wanted.target, wanted.since)
            ),
        }

    async def page(self, request: Request) -> Response:
        try:
            caller = self.ctx.auth.authorize_read(request)
        except AuthRefused as exc:
            if exc.status == 403:  # nobody can sign in here at all
                message = (
                    "The audit log needs a sign-in, and signing in is off here (no dashboard "
                    "token or key is configured); read it with `agent-team audit`."
                )
                return self._refused(request, 403, message)
            return self._refused(request, exc.status, exc.message)
        try:
            wanted = parse_audit_filter(request.query_params)
        except BadParameter as exc:
            return self._refused(request, 400, f"{exc}. Change it, or show the whole log.")
        try:
            context = await run_in_threadpool(self._context, caller.actor(), wanted)
            return render_page(request, "audit.html", context)
        except AccessDeniedError as exc:
            return self._refused(request, 403, f"{exc}. The audit log is for owners.")
        except Exception as exc:
            return failure_page(request, exc)

    def _refused(self, request: Request, status: int, message: str) -> Response:
        headings = {
            400: "That filter cannot be used",
            401: "Sign in to read the audit log",
            403: "The audit log is not yours to read",
        }
        return render_page(
            request,
            "error.html",
            {
                "status_code": status,
                "heading": headings.get(status, "The audit log cannot be shown"),
                "message": message
                if status != 401
                else "The audit log says who did what; reading it needs a sign-in.",
                "sign_in": status == 401,
            },
            status_code=status,
        )


def routes(ctx: DashboardContext) -> list[BaseRoute]:
    page = _AuditPage(ctx)
    return [Route("/audit", page.page, methods=["GET"], name="audit")]
