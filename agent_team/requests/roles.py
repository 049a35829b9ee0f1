"""Which role each action needs: the one rule table every surface is checked against.

Roles, lowest first (`task_model.Role`): viewer < contributor < maintainer <
owner. A person may do what their role or a lower one allows. The table names
actions as the request side knows them; an answer's action is
`answer:<question kind>`, so who may approve a plan and who may only answer a
clarifying question is one line each. An action missing from the table is
refused to everyone but owners: a new action is closed until it is listed.
"""

from __future__ import annotations

from agent_team import db
from agent_team.exceptions import AccessDeniedError
from agent_team.requests.actors import Actor
from agent_team.task_model import QuestionKind, Role

__all__ = ["ACTIONS", "allowed", "authorize", "check_role", "needed_role", "role_of"]

# Who acts for the daemon itself: code, automations, GitHub's watcher telling of a merge.
_UNGOVERNED_VIAS = frozenset({"internal", "automation"})
NOT_A_PERSON = "nobody"  # the role of an identity no person holds: refused everything
_TARGET_CHARS = 200  # an audit row's target (a long id from a URL is cut, never refused)

ACTIONS: dict[str, Role] = {
    "read": Role.VIEWER,
    "submit": Role.CONTRIBUTOR,
    "note": Role.CONTRIBUTOR,
    f"answer:{QuestionKind.CLARIFY.value}": Role.CONTRIBUTOR,
    f"answer:{QuestionKind.PLAN_DECISION.value}": Role.MAINTAINER,
    f"answer:{QuestionKind.CONFLUENCE_APPROVAL.value}": Role.MAINTAINER,
    f"answer:{QuestionKind.PR_DECISION.value}": Role.MAINTAINER,
    # The PR gate is answered by GitHub's watcher; a reviewer acts through their review.
    f"answer:{QuestionKind.PULL_REQUEST.value}": Role.MAINTAINER,
    "cancel": Role.MAINTAINER,
    "retry": Role.MAINTAINER,
    "reopen": Role.MAINTAINER,
    "automation:run": Role.MAINTAINER,
    "automation:change": Role.OWNER,
    "people": Role.OWNER,
    "keys": Role.OWNER,
    "audit:read": Role.OWNER,
}


def needed_role(action: str) -> Role:
    return ACTIONS.get(action, Role.OWNER)


def check_role(role: str | Role, action: str, *, who: str) -> None:
    """Refuse unless `role` may do `action`.

    Raises:
        AccessDeniedError: naming the role the action needs.
    """
    need = needed_role(action)
    if Role(role).rank < need.rank:
        raise AccessDeniedError(
            f"{who} has the {Role(role).value} role; {action} needs {need.value} or above",
            needed=need.value,
        )


def role_of(ledger: db.Reader, actor: Actor) -> str | None:
    """The role `actor` acts with; None where roles do not apply.

    None: no person is set up yet (every surface works as before, its own
    allow-list deciding); code acting for itself (`internal`, automations,
    GitHub's watcher telling of a merge or of CI); the local operator on the CLI
    (an owner) unless `--as` names a person. Anything else names a person or
    fails closed (`NOT_A_PERSON`): a Slack user id or GitHub login no person
    holds, and a dashboard or LangGraph API token whose name is nobody's (a
    removed person's token, the shared unnamed one): once people decide, a
    credential acts only as one of them.
    """
    if actor.via in _UNGOVERNED_VIAS or not db.list_people_exist(ledger):
        return None
    person: db.Person | None
    if actor.via == "slack":
        person = db.person_by_slack(ledger, actor.name)
    elif actor.via == "github":
        if actor.name == "ci" or "/" in actor.name:  # the watcher: CI, a merge or a close
            return None
        person = db.person_by_github(ledger, actor.name)
    elif actor.via == "cli" and not actor.as_person:
        return None  # the local operator, who can read the ledger's file
    else:  # cli --as, dashboard, langgraph-api: a person's name
        person = db.get_person(ledger, actor.name)
    return person.role if person is not None else NOT_A_PERSON


def allowed(ledger: db.Reader, actor: Actor, action: str) -> bool:
    """Whether `actor` may do `action`, without auditing (a watcher's repeated look)."""
    role = role_of(ledger, actor)
    return role is None or (role != NOT_A_PERSON and Role(role).rank >= needed_role(action).rank)


def authorize(ledger: db.Ledger, actor: Actor, action: str, target: str) -> None:
    """Refuse, and audit who tried, unless `actor` may do `action` (see `role_of`).

    Raises:
        AccessDeniedError: naming the role the action needs.
    """
    role = role_of(ledger, actor)
    if role is None:
        return
    try:
        if role == NOT_A_PERSON:
            need = needed_role(action)
            raise AccessDeniedError(
                f"{actor.via} user {actor.name} is not one of this team's people; "
                f"{action} needs {need.value} or above",
                needed=need.value,
            )
        check_role(role, action, who=actor.name)
    except AccessDeniedError as exc:
        db.record_audit(
            ledger,
            actor.entry(
                "refused", target[:_TARGET_CHARS], {"action": action, "needed": exc.needed}
            ),
        )
        raise
