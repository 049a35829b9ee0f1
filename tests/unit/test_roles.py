"""The role table: each action's least role, checked the same way for everyone."""

from __future__ import annotations

import pytest

from agent_team.exceptions import AccessDeniedError
from agent_team.requests.roles import ACTIONS, check_role, needed_role
from agent_team.task_model import QuestionKind, Role

EXPECTED = {
    "read": "viewer",
    "submit": "contributor",
    "note": "contributor",
    "answer:clarify": "contributor",
    "answer:plan_decision": "maintainer",
    "answer:confluence_approval": "maintainer",
    "answer:pr_decision": "maintainer",
    "answer:pull_request": "maintainer",
    "cancel": "maintainer",
    "retry": "maintainer",
    "reopen": "maintainer",
    "automation:run": "maintainer",
    "automation:change": "owner",
    "people": "owner",
    "keys": "owner",
    "audit:read": "owner",
}


def test_the_table_is_the_issue_s_table() -> None:
    assert {action: role.value for action, role in ACTIONS.items()} == EXPECTED
    # Every question kind has its answer's role.
    assert {f"answer:{kind.value}" for kind in QuestionKind} <= set(ACTIONS)


@pytest.mark.parametrize("action", sorted(EXPECTED))
@pytest.mark.parametrize("role", list(Role))
def test_a_role_may_do_what_its_rank_allows(role: Role, action: str) -> None:
    need = Role(EXPECTED[action])
    if role.rank >= need.rank:
        check_role(role, action, who="p")
    else:
        with pytest.raises(AccessDeniedError) as refused:
            check_role(role, action, who="p")
        assert refused.value.needed == need.value
        assert f"{action} needs {need.value} or above" in str(refused.value)


def test_an_unlisted_action_is_for_owners_only() -> None:
    assert needed_role("drop:everything") is Role.OWNER
    with pytest.raises(AccessDeniedError):
        check_role("maintainer", "drop:everything", who="p")
