"""A token moved into the ledger with `people import` signs its holder in as before, with
their role, once the setting is gone; a near miss or a revoked one does not."""

from __future__ import annotations

from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from agent_team.requests.actors import INTERNAL
from agent_team.requests.people import PeopleRequests
from tests.integration.dashboard.conftest import NOW, FakeCoordinator, Seeded, auth, make_settings

OLD = "old-team-token-6c1d0b"
VIEWER_OLD = "old-viewer-token-93aa71"


def test_an_imported_token_works_from_the_ledger_with_its_holders_role(
    seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    people = PeopleRequests(coordinator.ledger)
    people.add("ada", "owner", actor=INTERNAL)
    done = people.import_tokens([("ada", OLD), ("vic", VIEWER_OLD)], role="viewer", actor=INTERNAL)
    assert [(d.name, d.added_as) for d in done] == [("ada", None), ("vic", "viewer")]
    ctx = DashboardContext(
        make_settings(seeded.path, token=None),  # no token in the settings any more
        coordinator=coordinator,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    with TestClient(create_app(ctx)) as client:
        made = client.post("/api/tasks", json={"title": "still works"}, headers=auth(OLD))
        assert made.status_code == 201, made.text
        task = db.get_task(coordinator.ledger, made.json()["task_id"])
        assert task is not None
        viewer = client.post("/api/tasks", json={"title": "no"}, headers=auth(VIEWER_OLD))
        assert viewer.status_code == 403 and viewer.json()["needed_role"] == "contributor"
        near = client.post("/api/tasks", json={"title": "no"}, headers=auth(OLD + "x"))
        assert near.status_code == 401
        people.revoke_keys("ada", actor=INTERNAL)
        gone = client.post("/api/tasks", json={"title": "no"}, headers=auth(OLD))
        assert gone.status_code == 401
    (submitted,) = [r for r in db.list_audit(coordinator.ledger, action="submit")]
    assert (submitted.actor, submitted.via) == ("ada", "dashboard")
