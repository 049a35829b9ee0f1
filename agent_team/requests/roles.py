"""Which role each action needs: the one rule table every surface is checked against.

Roles, lowest first (`task_model.Role`): viewer < contributor < maintainer <
owner. A person may do what their role or a lower one allows. The table names
actions as the request side knows them; an answer's action is
`answer:<question kind>`, so who may approve a plan and who may only answer a
clarifying question is one line each. An action missing from the table is
refused to everyone but owners: a new action is closed until it is listed.
"""

from __future__ import annotations

from agent_team.exceptions import AccessDeniedError
from agent_team.task_model import QuestionKind, Role

__all__ = ["ACTIONS", "check_role", "needed_role"]

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
