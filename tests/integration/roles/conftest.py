"""The team every surface is tried with, what each surface offers, and the one verdict.

Issue #30: the role table (`requests/roles.py`, `ACTIONS`) is proved action by
action through every surface. Four people, one per role, each with a key, a
Slack id and a GitHub login, on a ledger built once per test module. Each
attempt is judged by `judged`: allowed iff the role's rank reaches the rank the
table names for the action; a refusal changed nothing and appended exactly one
`refused` audit row naming who tried, the action and the role it needs.

`OFFERED` lists, per surface, each operation it offers and the action the table
knows it by. `test_the_table.py` checks every action of the table is offered
somewhere (or said here why not), so a new action shows up; the expected
outcomes come from `needed_role`, so a changed role is tested as it now reads.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_team import db
from agent_team.automations import service
from agent_team.config import ENV_PREFIX
from agent_team.graph import QUESTION_PHASES
from agent_team.requests.actors import INTERNAL
from agent_team.requests.people import PeopleRequests
from agent_team.requests.roles import needed_role
from agent_team.task_model import QuestionKind, Role, TaskKind
from tests.integration.dashboard.conftest import NOW
from tests.ledger_rows import REQUEST_TABLES, Rows, stored_rows

ROLES: tuple[Role, ...] = tuple(Role)
# One person per role: (name, Slack id, GitHub login).
PEOPLE: dict[Role, tuple[str, str, str]] = {
    Role.OWNER: ("ada", "U0ADA", "ada-gh"),
    Role.MAINTAINER: ("mo", "U0MO", "mo-gh"),
    Role.CONTRIBUTOR: ("cy", "U0CY", "cy-gh"),
    Role.VIEWER: ("vi", "U0VI", "vi-gh"),
}

# What each surface offers: operation -> the action the table names it by.
OFFERED: dict[str, dict[str, str]] = {
    "dashboard form": {
        "submit": "submit",
        "answer plan": "answer:plan_decision",
        "answer clarify": "answer:clarify",
    },
    "json api": {
        "submit": "submit",
        "answer clarify": "answer:clarify",
        "answer plan": "answer:plan_decision",
        "answer confluence": "answer:confluence_approval",
        "answer pr decision": "answer:pr_decision",
        "automation create": "automation:change",
        "automation update": "automation:change",
        "automation pause": "automation:change",
        "automation resume": "automation:change",
        "automation cancel": "automation:change",
        "automation run-now": "automation:run",
        "audit read": "audit:read",
    },
    "langgraph api": {
        "resume clarify": "answer:clarify",
        "resume plan": "answer:plan_decision",
        "resume confluence": "answer:confluence_approval",
        "resume pr decision": "answer:pr_decision",
    },
    "slack": {
        "thread reply": "answer:clarify",
        "approve button": "answer:plan_decision",
        "publish button": "answer:confluence_approval",
        "fix button": "answer:pr_decision",
    },
    "cli": {
        "submit": "submit",
        "answer clarify": "answer:clarify",
        "answer plan": "answer:plan_decision",
        "answer confluence": "answer:confluence_approval",
        "answer pr decision": "answer:pr_decision",
        "cancel": "cancel",
        "retry": "retry",
        "reopen": "reopen",
        "automation add": "automation:change",
        "automation update": "automation:change",
        "automation pause": "automation:change",
        "automation resume": "automation:change",
        "automation cancel": "automation:change",
        "automation run-now": "automation:run",
        "audit": "audit:read",
        "people add": "people",
        "key add": "keys",
    },
    "github": {"review feedback": f"answer:{QuestionKind.PULL_REQUEST.value}"},
}
# Actions of the table no surface is tried with here, and why.
NOT_TRIED: dict[str, str] = {
    "read": "every role may read; no request checks it",
    "note": "its surfaces are being added on main, with their own tests",
}

# A valid answer to each kind of question, as a person types it.
ANSWERS: dict[str, str] = {
    QuestionKind.CLARIFY.value: "The login page at /signin",
    QuestionKind.PLAN_DECISION.value: "approve",
    QuestionKind.CONFLUENCE_APPROVAL.value: "publish",
    QuestionKind.PR_DECISION.value: "fix",
}
BODY = "Look at the open dependency bumps and merge the safe ones, with a test run for each."
# What a refusal must leave as it was: every row a request could write, except the audit
# log (judged on its own), Slack's delivery claims (they say a delivery was seen, not acted
# on) and keys (using one stamps `last_used_at`).
WORK_TABLES: tuple[str, ...] = (
    *(t for t in REQUEST_TABLES if t not in ("audit_log", "audit_head", "seen_events")),
    "automations",
    "automation_runs",
    "people",
    "pr_events",
)


def cases(surface: str) -> list[Any]:
    """`(operation, action, role)` for every operation `surface` offers and every role."""
    return [
        pytest.param(op, action, role, id=f"{op}-{role.value}")
        for op, action in OFFERED[surface].items()
        for role in ROLES
    ]


# --- the team -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    name: str
    role: Role
    slack_id: str
    github_login: str
    key: str


class Team:
    """The four people, by role."""

    def __init__(self, ledger: db.Ledger) -> None:
        people = PeopleRequests(ledger)
        self.members: dict[Role, Member] = {}
        for role, (name, slack_id, login) in PEOPLE.items():
            people.add(name, role.value, slack_id=slack_id, github_login=login, actor=INTERNAL)
            key = people.add_key(name, actor=INTERNAL).key
            self.members[role] = Member(name, role, slack_id, login, key)

    def __getitem__(self, role: Role) -> Member:
        return self.members[role]


@contextmanager
def module_env(home: Path) -> Iterator[Path]:
    """For a module's shared world: no AGENT_TEAM_* of the developer's shell, no `.env`."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.upper().startswith(ENV_PREFIX):
                patch.delenv(name)
        patch.setenv(f"{ENV_PREFIX}SANDBOX", "none")
        patch.chdir(home)
        yield home


# --- fresh things to act on -----------------------------------------------------------------

_serial = itertools.count(1)


def fresh(prefix: str) -> str:
    """A name no other attempt in this session uses."""
    return f"{prefix}{next(_serial)}"


def waiting_task(ledger: db.Ledger, *, kind: str = TaskKind.CODE.value, phase: str) -> str:
    task_id = fresh("troles")
    assert db.create_task(ledger, task_id=task_id, kind=kind, title=f"Task {task_id}")
    assert db.set_task_status(ledger, task_id, "waiting", phase=phase)
    return task_id


def open_question(
    ledger: db.Ledger, kind: str, *, channel_ref: str | None = None, transport: str = "local"
) -> db.Question:
    """A task waiting on one open question of `kind` (posted at `channel_ref`, if given)."""
    task_kind = TaskKind.CONFLUENCE if kind == QuestionKind.CONFLUENCE_APPROVAL else TaskKind.CODE
    task_id = waiting_task(ledger, kind=task_kind.value, phase=QUESTION_PHASES[kind].value)
    question_id = f"{task_id}:q1"
    assert db.ensure_question(
        ledger,
        question_id=question_id,
        thread_id=task_id,
        turn=1,
        kind=kind,
        transport=transport,
        deadline_at=None,
        payload_json=json.dumps({"text": f"A {kind} question", "title": f"Task {task_id}"}),
    )
    if channel_ref is not None:
        assert db.record_delivery(ledger, question_id=question_id, channel_ref=channel_ref)
    found = db.get_question(ledger, question_id)
    assert found is not None and found.status == "open"
    return found


def failed_task(ledger: db.Ledger) -> str:
    task_id = waiting_task(ledger, phase="build")
    assert db.set_task_status(ledger, task_id, "failed")
    return task_id


def expired_question(ledger: db.Ledger) -> db.Question:
    question = open_question(ledger, QuestionKind.CLARIFY.value)
    assert db.expire_question(ledger, question_id=question.question_id)
    assert db.set_task_status(
        ledger, question.thread_id, "parked", parked_reason="question_expired"
    )
    found = db.get_question(ledger, question.question_id)
    assert found is not None and found.status == "expired"
    return found


def automation(ledger: db.Ledger, *, status: str = "active") -> db.Automation:
    """An automation made by code (ungoverned), in `status`."""
    made = service.create(
        ledger,
        service.AutomationRequest(
            name=fresh("bumps-"), title="Review bumps", body=BODY, every="1d"
        ),
        actor=INTERNAL,
        now=NOW,
    )
    if status != "active":
        verb = {"paused": "pause", "cancelled": "cancel"}[status]
        made = service.change_status(ledger, made.automation_id, verb, actor=INTERNAL, now=NOW)
    assert made.status == status
    return made


def status_of(ledger: db.Reader, question_id: str) -> str:
    found = db.get_question(ledger, question_id)
    assert found is not None
    return found.status


# --- the verdict ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Who:
    """Who tries, as the audit log names them; `role` None: nobody holds this identity."""

    actor: str
    via: str
    role: Role | None


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    needed: Role


def _newest_seq(ledger: db.Reader) -> int:
    rows = db.list_audit(ledger, limit=1)
    return rows[0].seq if rows else 0


def _audit_since(ledger: db.Reader, seq: int) -> list[db.AuditRow]:
    return sorted(
        (row for row in db.list_audit(ledger, limit=1000) if row.seq > seq),
        key=lambda row: row.seq,
    )


@contextmanager
def judged(ledger: db.Ledger, who: Who, action: str, *, done: str | None) -> Iterator[Verdict]:
    """Judge one attempt by `who` at `action` made in the `with` block.

    Allowed: no refusal was audited, and `done` (the audit action the change writes
    under `who`'s name; None for a read) was. Refused: exactly one new audit row, a
    `refused` one naming `who`, `action` and the role it needs, and nothing else stored.
    """
    need = needed_role(action)
    verdict = Verdict(who.role is not None and who.role.rank >= need.rank, need)
    before: Rows = stored_rows(ledger, WORK_TABLES)
    since = _newest_seq(ledger)
    yield verdict
    rows = [(r.action, r.actor, r.via, r.detail_dict) for r in _audit_since(ledger, since)]
    if verdict.allowed:
        assert [row for row in rows if row[0] == "refused"] == [], rows
        mine = [row[0] for row in rows if row[1:3] == (who.actor, who.via)]
        assert mine == ([done] if done else []), rows
    else:
        detail = {"action": action, "needed": need.value}
        assert rows == [("refused", who.actor, who.via, detail)], rows
        assert stored_rows(ledger, WORK_TABLES) == before, "a refusal changed the ledger"
