"""Roles on the one request path: the same table answers for the dashboard, the CLI and GitHub.

With no person set up every surface works as before; once people exist, what a
person may do follows their role, and a refusal names the role and is audited.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.exceptions import AccessDeniedError
from agent_team.requests.actors import INTERNAL, Actor
from agent_team.requests.roles import authorize
from tests.integration.dashboard.conftest import FakeCoordinator, Seeded, auth, team_client


@pytest.fixture
def team(
    seeded: Seeded, coordinator: FakeCoordinator
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    roster = (
        ("ada", "owner", None, None),
        ("mo", "maintainer", "U0MO", "mo-gh"),
        ("cy", "contributor", "U0CY", "cy-gh"),
        ("vi", "viewer", None, None),
    )
    with team_client(seeded, coordinator, roster) as made:
        yield made


def _open_plan_question(ledger: db.Ledger) -> db.Question:
    assert db.create_task(ledger, task_id="tZ", kind="code", title="A plan to review")
    db.ensure_question(
        ledger,
        question_id="tZ:q1",
        thread_id="tZ",
        turn=1,
        kind="plan_decision",
        transport="local",
        deadline_at=None,
        payload_json='{"text": "Review the plan"}',
    )
    question = db.get_question(ledger, "tZ:q1")
    assert question is not None
    return question


def test_a_contributor_submits_but_may_not_approve_a_plan_a_maintainer_may(
    team: tuple[TestClient, dict[str, str]], coordinator: FakeCoordinator
) -> None:
    client, keys = team
    assert (
        client.post("/api/tasks", json={"title": "By cy"}, headers=auth(keys["cy"])).status_code
        == 201
    )
    refused = client.post("/api/tasks", json={"title": "By vi"}, headers=auth(keys["vi"]))
    assert refused.status_code == 403 and refused.json()["needed_role"] == "contributor"
    plan = _open_plan_question(coordinator.ledger)
    path = f"/api/questions/{plan.question_id}/answer"
    denied = client.post(path, json={"answer": "approve"}, headers=auth(keys["cy"]))
    assert denied.status_code == 403, denied.text
    assert "maintainer" in denied.json()["error"]
    still = db.get_question(coordinator.ledger, plan.question_id)
    assert still is not None and still.status == "open"
    ok = client.post(path, json={"answer": "approve"}, headers=auth(keys["mo"]))
    assert ok.status_code == 200, ok.text
    refusals = [
        (r.actor, r.via, json.loads(r.detail)["action"])
        for r in db.list_audit(coordinator.ledger)
        if r.action == "refused"
    ]
    assert ("vi", "dashboard", "submit") in refusals
    assert ("cy", "dashboard", "answer:plan_decision") in refusals


def test_identities_map_to_people_and_unknown_ones_fail_closed(
    team: tuple[TestClient, dict[str, str]], coordinator: FakeCoordinator
) -> None:
    ledger = coordinator.ledger
    authorize(ledger, Actor("U0MO", "slack"), "answer:plan_decision", "q")
    authorize(ledger, Actor("Mo-GH", "github"), "answer:pull_request", "q")
    with pytest.raises(AccessDeniedError, match="maintainer"):
        authorize(ledger, Actor("U0CY", "slack"), "cancel", "t")
    with pytest.raises(AccessDeniedError, match="not one of this team's people"):
        authorize(ledger, Actor("U0STRANGER", "slack"), "answer:clarify", "q")
    with pytest.raises(AccessDeniedError):
        authorize(ledger, Actor("stranger", "github"), "answer:pull_request", "q")
    # Code acting for itself, GitHub's watcher telling of a merge, the local operator.
    authorize(ledger, INTERNAL, "cancel", "t")
    authorize(ledger, Actor("acme/app", "github"), "answer:pull_request", "q")
    authorize(ledger, Actor("root", "cli"), "people", "x")
    with pytest.raises(AccessDeniedError):  # --as a person: their role
        authorize(ledger, Actor("cy", "cli", as_person=True), "retry", "t")
    # The local operator is an owner even when a person shares their user name.
    authorize(ledger, Actor("cy", "cli"), "retry", "t")
    # A token naming nobody (a removed person's, the shared one) fails closed.
    for via in ("dashboard", "langgraph-api"):
        for name in ("token", "zed"):
            with pytest.raises(AccessDeniedError, match="not one of this team's people"):
                authorize(ledger, Actor(name, via), "submit", "t")


def test_with_nobody_set_up_roles_do_not_apply(coordinator: FakeCoordinator) -> None:
    authorize(coordinator.ledger, Actor("U0ANY", "slack"), "answer:plan_decision", "q")
    authorize(coordinator.ledger, Actor("someone", "dashboard"), "cancel", "t")
