"""`/api/automations`, `/api/triage` and `/api/audit` on a real ledger file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from tests.integration.dashboard.conftest import NOW, auth, make_settings

BODY = "Look at the open dependency bumps and merge the safe ones, with a test run for each."
SPEC = {"name": "bumps", "title": "Review bumps", "body": BODY, "every": "1d"}


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    return path


@pytest.fixture
def client(ledger_path: Path) -> Iterator[TestClient]:
    """The dashboard outside the daemon: it opens the ledger per request."""
    ctx = DashboardContext(settings=make_settings(ledger_path), clock=lambda: NOW)
    with TestClient(create_app(ctx)) as test_client:
        yield test_client


def stored(path: Path) -> tuple[int, int]:
    with db.open_ledger(path) as ledger:
        every = db.list_automations(ledger) + db.list_automations(ledger, status="cancelled")
        return len(every), len(db.list_audit(ledger, limit=1000))


def test_writes_need_the_token_and_store_nothing_without_it(
    client: TestClient, ledger_path: Path
) -> None:
    assert client.post("/api/automations", json=SPEC).status_code == 401
    assert client.post("/api/automations/x/pause").status_code == 401
    assert client.get("/api/audit").status_code == 401
    assert stored(ledger_path) == (0, 0)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"every": "5x"}, "every"),
        ({"every": "10s"}, "every"),
        ({"every": None, "cron": "61 * * * *"}, "cron"),
        ({"timezone": "Nowhere/Land"}, "timezone"),
        ({"body": ""}, "body"),
        ({"name": "no/slashes"}, "name"),
        ({"overlap": 3}, "overlap"),
        ({"once": "yes"}, "once"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_field_is_422_naming_it_and_stores_nothing(
    client: TestClient, ledger_path: Path, change: dict[str, Any], field: str
) -> None:
    body = {k: v for k, v in {**SPEC, **change}.items() if v is not None}
    response = client.post("/api/automations", json=body, headers=auth())
    assert response.status_code in (400, 422), response.text
    assert response.json()["field"] == field
    assert response.json()["error"].startswith(f"{field}:")
    assert stored(ledger_path) == (0, 0)


def test_create_read_change_run_and_cancel_through_the_api(
    client: TestClient, ledger_path: Path
) -> None:
    made = client.post("/api/automations", json=SPEC, headers=auth())
    assert made.status_code == 201, made.text
    automation_id = made.json()["automation_id"]
    assert made.headers["location"] == f"/api/automations/{automation_id}"
    assert made.json()["schedule"] == "every 1d" and made.json()["status"] == "active"
    duplicate = client.post("/api/automations", json=SPEC, headers=auth())
    assert duplicate.status_code == 422 and duplicate.json()["field"] == "name"

    changed = client.patch(
        f"/api/automations/{automation_id}",
        json={"cron": "0 9 * * MON", "timezone": "Europe/Berlin"},
        headers=auth(),
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["schedule"] == "cron '0 9 * * MON' Europe/Berlin"
    assert client.post("/api/automations/bumps/pause", headers=auth()).json()["status"] == "paused"
    again = client.post("/api/automations/bumps/pause", headers=auth())
    assert again.status_code == 422 and again.json()["field"] == "status"
    assert client.post("/api/automations/bumps/resume", headers=auth()).status_code == 200

    run = client.post("/api/automations/bumps/run-now", headers=auth())
    assert run.status_code == 201 and run.json()["status"] == "created"
    one = client.get("/api/automations/bumps").json()
    assert [r["task_status"] for r in one["runs"]] == ["queued"]
    listed = client.get("/api/automations").json()["automations"]
    assert [a["last_run"]["run_id"] for a in listed] == [run.json()["run_id"]]
    assert client.post("/api/automations/bumps/cancel", headers=auth()).status_code == 200
    assert client.get("/api/automations").json()["automations"] == []
    assert client.get("/api/automations?status=cancelled").json()["automations"][0]["name"] == (
        "bumps"
    )
    assert client.get("/api/automations/nope").status_code == 404
    assert client.get("/api/automations?status=gone").status_code == 400

    audit = client.get("/api/audit?verify=1", headers=auth()).json()
    assert [row["action"] for row in reversed(audit["rows"])] == [
        "automation.create",
        "automation.update",
        "automation.pause",
        "automation.resume",
        "automation.run_now",
        "submit",
        "automation.run.created",
        "automation.cancel",
    ]
    assert {row["via"] for row in audit["rows"] if row["actor"] != "bumps"} == {"dashboard"}
    assert audit["verify"] == {"ok": True, "rows": 8, "broken_seq": None, "problem": None}
    assert (
        len(client.get("/api/audit?action=automation.&limit=2", headers=auth()).json()["rows"]) == 2
    )
    assert client.get("/api/audit?since=soon", headers=auth()).status_code == 400
    assert client.get("/api/audit?limit=0", headers=auth()).status_code == 400


def test_the_triage_endpoint_lists_what_needs_a_person(
    client: TestClient, ledger_path: Path
) -> None:
    with db.open_ledger(ledger_path) as ledger:
        db.create_task(ledger, task_id="t1", kind="code", title="Stuck build")
        db.set_task_status(ledger, "t1", "parked", parked_reason="builder_unavailable")
    body = client.get("/api/triage").json()
    (item,) = body["items"]
    assert (item["kind"], item["task_id"], item["fix"]) == (
        "parked",
        "t1",
        "fix the cause, then: agent-team retry t1",
    )
    assert body["now"] == db.to_iso(NOW)


def test_the_automations_page_shows_each_next_run_and_last_runs(
    client: TestClient, ledger_path: Path
) -> None:
    spec = {**SPEC, "title": "Review <i>bumps</i>"}
    assert client.post("/api/automations", json=spec, headers=auth()).status_code == 201
    run = client.post("/api/automations/bumps/run-now", headers=auth()).json()
    paused = {**SPEC, "name": "later", "cron": "0 9 * * MON", "every": None}
    made = client.post(
        "/api/automations", json={k: v for k, v in paused.items() if v}, headers=auth()
    )
    assert made.status_code == 201, made.text
    client.post("/api/automations/later/pause", headers=auth())

    page = client.get("/automations")

    assert page.status_code == 200
    html = page.text
    assert "bumps" in html and "every 1d" in html and "next run" in html
    assert f'href="/task/{run["task_id"]}"' in html and "run now" in html
    assert "Review &lt;i&gt;bumps&lt;/i&gt;" in html
    assert "no next run while paused" in html


@pytest.mark.parametrize(
    "repo", ["file://x", "ssh://h/x", "https://user:pw@h/o/n", "/no/such/clone", "/etc"]
)
def test_a_repository_it_cannot_take_is_422_naming_it(
    client: TestClient, ledger_path: Path, repo: str
) -> None:
    response = client.post("/api/automations", json={**SPEC, "repo": repo}, headers=auth())
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "repo" and response.json()["error"].startswith("repo: ")
    assert "pw@" not in response.text
    assert stored(ledger_path) == (0, 0)
    made = client.post(
        "/api/automations", json={**SPEC, "repo": "git@git.example:acme/w.git"}, headers=auth()
    )
    assert made.status_code == 201 and made.json()["repo"] == "git@git.example:acme/w.git"
