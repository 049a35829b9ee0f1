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


def _client(seeded: Seeded, coordinator: FakeCoordinator, **settings: object) -> TestClient:
    ctx = DashboardContext(
        make_settings(seeded.path, **settings),  # type: ignore[arg-type]
        coordinator=coordinator,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    return TestClient(create_app(ctx))


def test_once_people_decide_a_token_acts_only_as_a_person(
    seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    tokens = "ada:ada-env-token-0a1b,zed:zed-env-token-9f8e"
    with _client(seeded, coordinator, token="shared-token-77", dashboard_tokens=tokens) as client:
        # Nobody set up: every token works as it always did, the shared one with a name.
        for token in ("ada-env-token-0a1b", "zed-env-token-9f8e", "shared-token-77"):
            made = client.post("/api/tasks", json={"title": "before"}, headers=auth(token))
            assert made.status_code == 201, made.text
        people = PeopleRequests(coordinator.ledger)
        people.add("ada", "owner", actor=INTERNAL)
        before = db.table_counts(coordinator.ledger)["tasks"]
        assert (
            client.post("/api/tasks", json={"title": "ada"}, headers=auth("ada-env-token-0a1b"))
        ).status_code == 201
        # zed is nobody (never added, or removed): their token no longer acts at all.
        zed = client.post("/api/tasks", json={"title": "zed"}, headers=auth("zed-env-token-9f8e"))
        assert zed.status_code == 403 and "not one of this team's people" in zed.json()["error"]
        # The shared token may not say who it is: refused for every write.
        shared = client.post(
            "/api/questions/x/answer",
            json={"answer": "approve", "name": "ada"},
            headers=auth("shared-token-77"),
        )
        assert shared.status_code == 403 and "shared (unnamed)" in shared.json()["error"]
        assert db.table_counts(coordinator.ledger)["tasks"] == before + 1
    refusals = [(r.actor, r.via) for r in db.list_audit(coordinator.ledger, action="refused")]
    assert refusals == [("zed", "dashboard")]


def test_revoking_an_imported_token_ends_it_though_the_setting_still_holds_it(
    seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    people = PeopleRequests(coordinator.ledger)
    people.add("ada", "owner", actor=INTERNAL)
    people.import_tokens([("ada", OLD)], role="viewer", actor=INTERNAL)
    with _client(seeded, coordinator, token=None, dashboard_tokens=f"ada:{OLD}") as client:
        ok = client.post("/api/tasks", json={"title": "x"}, headers=auth(OLD))
        assert ok.status_code == 201
        people.revoke_keys("ada", actor=INTERNAL)
        gone = client.post("/api/tasks", json={"title": "x"}, headers=auth(OLD))
        assert gone.status_code == 401
    # Importing again neither fails nor brings it back.
    (again,) = people.import_tokens([("ada", OLD)], role="viewer", actor=INTERNAL)
    assert (again.added_as, again.key_id) == (None, None)
    assert [k.revoked_at is not None for k in db.list_keys(coordinator.ledger)] == [True]


def test_a_key_in_use_notes_its_last_use_now_and_then(
    seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    people = PeopleRequests(coordinator.ledger)
    people.add("ada", "owner", actor=INTERNAL)
    key = people.add_key("ada", actor=INTERNAL).key
    (row,) = db.list_keys(coordinator.ledger)
    assert row.last_used_at is None
    with _client(seeded, coordinator, token=None) as client:
        for _ in range(3):
            assert client.get("/api/budget", headers=auth(key)).status_code == 200
            client.post("/api/tasks", json={"title": "x"}, headers=auth(key))
    (row,) = db.list_keys(coordinator.ledger)
    assert row.last_used_at == db.to_iso(NOW)
