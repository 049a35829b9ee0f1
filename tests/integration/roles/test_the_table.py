"""The table itself: every action is tried on some surface; GitHub reviews by login.

A new action in `ACTIONS` fails the first test until a surface here tries it
(or `NOT_TRIED` says why none does); an operation naming an action the table
does not list fails it too (it would be owners-only by default, untested).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_team import db
from agent_team.exceptions import AccessDeniedError
from agent_team.requests.roles import ACTIONS, needed_role
from agent_team.requests.task_requests import TaskRequests
from agent_team.task_model import QuestionKind, Role
from tests.integration.roles.conftest import (
    NOT_TRIED,
    OFFERED,
    ROLES,
    Team,
    Who,
    judged,
    module_env,
    open_question,
    status_of,
)


def test_every_action_of_the_table_is_tried_on_some_surface() -> None:
    tried = {action for offered in OFFERED.values() for action in offered.values()}
    assert tried <= set(ACTIONS), f"not in the table: {sorted(tried - set(ACTIONS))}"
    assert not tried & set(NOT_TRIED), "tried after all: take it out of NOT_TRIED"
    assert set(ACTIONS) - set(NOT_TRIED) == tried, "an action no surface tries"


def test_every_step_between_two_roles_is_crossed() -> None:
    """Each role above the lowest is exactly what some tried action needs, so a test finds
    the role below it refused and that role allowed: no step of the ladder goes untried."""
    tried = {action for offered in OFFERED.values() for action in offered.values()}
    assert {needed_role(action) for action in tried} >= set(ROLES[1:])


# --- GitHub: a review's author is checked by their login --------------------------------------


@pytest.fixture(scope="module")
def github(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Team, db.Ledger]]:
    home = tmp_path_factory.mktemp("roles-github")
    with module_env(home):
        path = home / "agent-team.db"
        db.init_db(path)
        with db.open_ledger(path) as ledger:
            yield Team(ledger), ledger


def _feedback(login: str) -> dict[str, object]:
    """What the PR watcher answers the PR gate with for one review (`pr_watch._check`)."""
    item = {"key": f"review:{login}", "kind": "review", "id": 7, "user": login, "body": "Fix it"}
    return {"decision": "feedback", "head_sha": "0" * 40, "items": [item]}


def _review(ledger: db.Ledger, question: db.Question, login: str) -> AccessDeniedError | None:
    """A review by `login` answering the PR gate `question`, as the watcher sends it."""
    event = db.NewPrEvent(f"review:{login}", "review", round=1, head_sha="0" * 40, actor=login)
    try:
        TaskRequests(ledger).answer(
            question.question_id, _feedback(login), via=f"github:{login}", events=[event]
        )
    except AccessDeniedError as exc:
        return exc
    return None


ACTION = OFFERED["github"]["review feedback"]


@pytest.mark.parametrize("role", ROLES, ids=[role.value for role in ROLES])
def test_a_reviews_author_acts_with_their_role(github: tuple[Team, db.Ledger], role: Role) -> None:
    team, ledger = github
    login = team[role].github_login
    question = open_question(ledger, QuestionKind.PULL_REQUEST.value)
    with judged(ledger, Who(login, "github", role), ACTION, done="answer") as verdict:
        refused = _review(ledger, question, login)
    if verdict.allowed:
        assert refused is None
        assert status_of(ledger, question.question_id) == "answered"
    else:
        assert isinstance(refused, AccessDeniedError) and refused.needed == verdict.needed.value
        assert f"{ACTION} needs {verdict.needed.value} or above" in str(refused)
        assert status_of(ledger, question.question_id) == "open"


def test_a_login_no_person_holds_is_refused(github: tuple[Team, db.Ledger]) -> None:
    _, ledger = github
    question = open_question(ledger, QuestionKind.PULL_REQUEST.value)
    with judged(ledger, Who("stranger-gh", "github", None), ACTION, done=None):
        refused = _review(ledger, question, "stranger-gh")
    assert isinstance(refused, AccessDeniedError)
    assert "github user stranger-gh is not one of this team's people" in str(refused)
    assert status_of(ledger, question.question_id) == "open"
