"""Notes on a task: a contributor leaves one from the task page or the JSON API; everyone
who may read the task sees it on the page, in /api/task and in `show`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from agent_team import db
from tests.integration.dashboard.conftest import (
    FakeCoordinator,
    Seeded,
    auth,
    csrf_of,
    sign_in,
    team_client,
)

TASK = "tB"  # the seeded task waiting on a clarify answer


@pytest.fixture
def keys(
    seeded: Seeded, coordinator: FakeCoordinator
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    roster = (("ada", "owner", None, None), ("cy", "contributor", None, None))
    with team_client(seeded, coordinator, (*roster, ("vi", "viewer", None, None))) as made:
        yield made


def _notes(ledger: db.Ledger) -> list[tuple[str, str, str]]:
    return [(r.actor, r.via, r.detail_dict["text"]) for r in db.list_task_notes(ledger, TASK)]


def test_a_contributor_adds_a_note_and_a_viewer_may_not(
    keys: tuple[TestClient, dict[str, str]], coordinator: FakeCoordinator
) -> None:
    client, minted = keys
    path = f"/api/task/{TASK}/notes"
    made = client.post(
        path, json={"text": "  Staging is down until 3pm  "}, headers=auth(minted["cy"])
    )
    assert made.status_code == 201, made.text
    note = made.json()["note"]
    assert (note["who"], note["via"], note["text"]) == (
        "cy",
        "dashboard",
        "Staging is down until 3pm",
    )
    refused = client.post(path, json={"text": "me too"}, headers=auth(minted["vi"]))
    assert refused.status_code == 403 and refused.json()["needed_role"] == "contributor"
    assert _notes(coordinator.ledger) == [("cy", "dashboard", "Staging is down until 3pm")]
    (refusal,) = [r for r in db.list_audit(coordinator.ledger) if r.action == "refused"]
    assert (refusal.actor, refusal.target, json.loads(refusal.detail or "{}")["action"]) == (
        "vi",
        TASK,
        "note",
    )
    report = client.get(f"/api/task/{TASK}").json()
    assert [(n["who"], n["text"]) for n in report["notes"]] == [("cy", "Staging is down until 3pm")]


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"text": "   "}, 400, "text"),
        ({"text": "x" * 4001}, 400, "text"),
        ({"text": 7}, 400, "text"),
        ({}, 400, "text"),
        ({"text": "hi", "extra": 1}, 400, "extra"),
        ({"text": "hi", "name": "someone-else"}, 400, "name"),
    ],
)
def test_a_bad_note_is_refused_naming_the_field_and_stores_nothing(
    keys: tuple[TestClient, dict[str, str]],
    coordinator: FakeCoordinator,
    body: dict[str, object],
    status: int,
    says: str,
) -> None:
    client, minted = keys
    refused = client.post(f"/api/task/{TASK}/notes", json=body, headers=auth(minted["cy"]))
    assert refused.status_code == status, refused.text
    assert says in refused.text
    assert _notes(coordinator.ledger) == []


def test_a_note_on_an_unknown_task_is_404_and_writes_need_a_key(
    keys: tuple[TestClient, dict[str, str]], coordinator: FakeCoordinator
) -> None:
    client, minted = keys
    missing = client.post("/api/task/nope/notes", json={"text": "hi"}, headers=auth(minted["cy"]))
    assert missing.status_code == 404
    anonymous = client.post(f"/api/task/{TASK}/notes", json={"text": "hi"})
    assert anonymous.status_code == 401
    assert db.list_task_notes(coordinator.ledger, "nope") == []
    assert _notes(coordinator.ledger) == []


def test_the_task_page_shows_notes_and_a_signed_in_form(
    keys: tuple[TestClient, dict[str, str]], coordinator: FakeCoordinator
) -> None:
    client, minted = keys
    page = client.get(f"/task/{TASK}").text
    assert "No notes yet." in page and "Sign in to add a note" in page
    assert sign_in(client, minted["cy"], f"/task/{TASK}").status_code == 303
    page = client.get(f"/task/{TASK}").text
    assert 'data-field="text"' in page and f"/api/task/{TASK}/notes" in page
    added = client.post(
        f"/api/task/{TASK}/notes",
        json={"text": "<script>alert(1)</script> look at the flaky test"},
        headers={"X-CSRF-Token": csrf_of(page)},
    )
    assert added.status_code == 201, added.text
    page = client.get(f"/task/{TASK}").text
    assert "look at the flaky test" in page and "<script>alert(1)" not in page
    assert "cy via dashboard" in page
    no_csrf = client.post(f"/api/task/{TASK}/notes", json={"text": "forged"})
    assert no_csrf.status_code == 403
    assert [text for _who, _via, text in _notes(coordinator.ledger)] == [
        "<script>alert(1)</script> look at the flaky test"
    ]


def test_a_note_on_a_finished_task_is_refused_with_the_reason(
    keys: tuple[TestClient, dict[str, str]], coordinator: FakeCoordinator
) -> None:
    client, minted = keys
    refused = client.post(
        "/api/task/tA/notes", json={"text": "too late"}, headers=auth(minted["cy"])
    )
    assert refused.status_code in (409, 422), refused.text
    assert "is done" in refused.json()["error"] and "nothing was stored" in refused.json()["error"]
    assert db.list_task_notes(coordinator.ledger, "tA") == []


def test_a_finished_tasks_page_offers_no_note_form(
    keys: tuple[TestClient, dict[str, str]],
) -> None:
    client, minted = keys
    assert sign_in(client, minted["cy"], "/task/tA").status_code == 303
    page = client.get("/task/tA").text
    assert "takes no more notes" in page and "data-note-form" not in page
