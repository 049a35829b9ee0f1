"""A person's key from the ledger signs in to the dashboard; rotating or revoking it ends that."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from agent_team.requests.actors import INTERNAL
from agent_team.requests.people import PeopleRequests
from tests.integration.dashboard.conftest import (
    NOW,
    FakeCoordinator,
    Seeded,
    auth,
    make_settings,
    sign_in,
)


@pytest.fixture
def keyed(seeded: Seeded, coordinator: FakeCoordinator) -> Iterator[tuple[TestClient, str]]:
    """No configured token at all: the only way in is a key a person holds."""
    people = PeopleRequests(coordinator.ledger)
    people.add("ada", "owner", actor=INTERNAL)
    key = people.add_key("ada", actor=INTERNAL).key
    ctx = DashboardContext(
        make_settings(seeded.path, token=None),
        coordinator=coordinator,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    with TestClient(create_app(ctx)) as client:
        yield client, key


def test_a_key_works_as_a_bearer_and_signs_in(keyed: tuple[TestClient, str]) -> None:
    client, key = keyed
    made = client.post("/api/tasks", json={"title": "From a key"}, headers=auth(key))
    assert made.status_code == 201, made.text
    assert (
        client.post("/api/tasks", json={"title": "x"}, headers=auth(key + "x")).status_code == 401
    )
    response = sign_in(client, key)
    assert response.status_code == 303
    assert "signed in as <strong>ada</strong>" in client.get("/").text


@pytest.mark.parametrize("end", ["rotate", "revoke"])
def test_rotating_or_revoking_a_key_ends_its_sessions_at_once(
    keyed: tuple[TestClient, str], coordinator: FakeCoordinator, end: str
) -> None:
    client, key = keyed
    assert sign_in(client, key).status_code == 303
    assert "signed in as <strong>ada</strong>" in client.get("/").text
    people = PeopleRequests(coordinator.ledger)
    if end == "rotate":
        fresh = people.add_key("ada", actor=INTERNAL, rotate=True).key
    else:
        people.revoke_keys("ada", actor=INTERNAL)
    assert "signed in as" not in client.get("/").text
    assert client.post("/api/tasks", json={"title": "x"}, headers=auth(key)).status_code in (
        401,
        403,
    )
    if end == "rotate":
        assert (
            client.post("/api/tasks", json={"title": "y"}, headers=auth(fresh)).status_code == 201
        )
    actions = [row.action for row in db.list_audit(coordinator.ledger)]
    assert ("key_rotate" if end == "rotate" else "key_revoke") in actions
