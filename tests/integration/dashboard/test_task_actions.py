"""The task page's actions as JSON: cancel, retry, reopen, and the new-task form's preview.

Each is the CLI's request through `TaskRequests` with the caller as the actor:
a person's role decides (a refusal is a 403 naming the role, and audited),
bad input is refused naming the field with nothing stored, a session needs its
CSRF token, and the audit row names the person and `dashboard`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from agent_team import db
from tests.integration.dashboard.conftest import (
    NOW,
    FakeCoordinator,
    Seeded,
    auth,
    csrf_of,
    sign_in,
    team_client,
)

Team = tuple[TestClient, dict[str, str]]
WAITING, DONE, FAILED = "tB", "tA", "tD"  # seeded: waiting on tB:q1, done, failed
QUESTION = "tB:q1"


@pytest.fixture
def team(seeded: Seeded, coordinator: FakeCoordinator) -> Iterator[Team]:
    roster = (
        ("ada", "owner", None, None),
        ("mo", "maintainer", None, None),
        ("cy", "contributor", None, None),
        ("vi", "viewer", None, None),
    )
    with team_client(seeded, coordinator, roster) as made:
        yield made


def audit_rows(ledger: db.Ledger, action: str) -> list[tuple[str, str, str]]:
    return [(r.actor, r.via, r.target) for r in db.list_audit(ledger, action=action)]


def refusals(ledger: db.Ledger) -> list[tuple[str, str, str]]:
    return [
        (r.actor, r.target, json.loads(r.detail or "{}")["action"])
        for r in db.list_audit(ledger, action="refused")
    ]


def status(ledger: db.Ledger, task_id: str) -> str:
    task = db.get_task(ledger, task_id)
    assert task is not None
    return task.status


def expire(ledger: db.Ledger) -> None:
    assert db.expire_question(ledger, question_id=QUESTION)


# -- cancel ------------------------------------------------------------------------------


def test_a_maintainer_cancels_and_the_audit_row_names_them(
    team: Team, coordinator: FakeCoordinator
) -> None:
    client, keys = team
    done = client.post(f"/api/task/{WAITING}/cancel", headers=auth(keys["mo"]))
    assert done.status_code == 202, done.text
    assert done.json() == {"task_id": WAITING, "queued": "cancel"}
    assert db.get_command(coordinator.ledger, f"cancel:{WAITING}") is not None
    assert audit_rows(coordinator.ledger, "cancel") == [("mo", "dashboard", WAITING)]
    assert coordinator.wake.is_set()  # the worker is told at once


def test_a_contributor_may_not_cancel_and_the_refusal_is_audited(
    team: Team, coordinator: FakeCoordinator
) -> None:
    client, keys = team
    refused = client.post(f"/api/task/{WAITING}/cancel", json={}, headers=auth(keys["cy"]))
    assert refused.status_code == 403
    assert refused.json()["needed_role"] == "maintainer"
    assert db.get_command(coordinator.ledger, f"cancel:{WAITING}") is None
    assert refusals(coordinator.ledger) == [("cy", WAITING, "cancel")]


@pytest.mark.parametrize(
    ("task_id", "body", "code", "says"),
    [
        (DONE, None, 422, "already done"),
        ("nope", None, 404, "no task"),
        (WAITING, {"why": "x"}, 400, "why"),
    ],
)
def test_a_cancel_that_cannot_be_done_is_refused_and_stores_nothing(
    team: Team, coordinator: FakeCoordinator, task_id: str, body: object, code: int, says: str
) -> None:
    client, keys = team
    refused = client.post(f"/api/task/{task_id}/cancel", json=body, headers=auth(keys["mo"]))
    assert refused.status_code == code, refused.text
    assert says in refused.json()["error"]
    assert audit_rows(coordinator.ledger, "cancel") == []
    assert db.get_command(coordinator.ledger, f"cancel:{task_id}") is None


def test_a_session_cancels_only_with_its_csrf_token(
    client: TestClient, coordinator: FakeCoordinator
) -> None:
    assert sign_in(client, next_path=f"/task/{WAITING}").status_code == 303
    page = client.get(f"/task/{WAITING}").text
    forged = client.post(f"/api/task/{WAITING}/cancel")
    assert forged.status_code == 403 and "CSRF" in forged.json()["error"]
    assert db.get_command(coordinator.ledger, f"cancel:{WAITING}") is None
    done = client.post(f"/api/task/{WAITING}/cancel", headers={"X-CSRF-Token": csrf_of(page)})
    assert done.status_code == 202, done.text
    # Before people are set up, the shared token acts as `token`, as every write does.
    assert audit_rows(coordinator.ledger, "cancel") == [("token", "dashboard", WAITING)]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"/api/task/{FAILED}/retry", None),
        (f"/api/questions/{QUESTION}/reopen", {"deadline": "1h"}),
        ("/api/preview", {"markdown": "# hi"}),
    ],
)
def test_every_action_needs_the_sessions_csrf_token(
    client: TestClient, coordinator: FakeCoordinator, path: str, body: object
) -> None:
    expire(coordinator.ledger)
    sign_in(client)
    page = client.get(f"/task/{WAITING}").text
    forged = client.post(path, json=body, headers={"X-CSRF-Token": "0" * 64})
    assert forged.status_code == 403 and "CSRF" in forged.json()["error"]
    assert status(coordinator.ledger, FAILED) == "failed"
    question = db.get_question(coordinator.ledger, QUESTION)
    assert question is not None and question.status == "expired"
    done = client.post(path, json=body, headers={"X-CSRF-Token": csrf_of(page)})
    assert done.status_code in (200, 202), done.text


def test_writes_need_a_key(client: TestClient) -> None:
    for path in (
        f"/api/task/{WAITING}/cancel",
        f"/api/task/{FAILED}/retry",
        f"/api/questions/{QUESTION}/reopen",
        "/api/preview",
    ):
        assert client.post(path, json={}).status_code == 401, path


# -- retry -------------------------------------------------------------------------------


def test_a_maintainer_retries_a_failed_task(team: Team, coordinator: FakeCoordinator) -> None:
    client, keys = team
    done = client.post(f"/api/task/{FAILED}/retry", headers=auth(keys["mo"]))
    assert done.status_code == 202, done.text
    assert done.json()["command_id"].startswith(f"retry:{FAILED}:")
    assert status(coordinator.ledger, FAILED) == "queued"
    assert audit_rows(coordinator.ledger, "retry") == [("mo", "dashboard", FAILED)]


@pytest.mark.parametrize(
    ("who", "task_id", "code", "says"),
    [
        ("cy", FAILED, 403, "needs maintainer"),
        ("mo", WAITING, 422, "only parked and failed tasks are retried"),
        ("mo", DONE, 422, "only parked and failed tasks are retried"),
        ("mo", "nope", 404, "no task"),
    ],
)
def test_a_retry_that_cannot_be_done_is_refused_and_queues_nothing(
    team: Team, coordinator: FakeCoordinator, who: str, task_id: str, code: int, says: str
) -> None:
    client, keys = team
    refused = client.post(f"/api/task/{task_id}/retry", headers=auth(keys[who]))
    assert refused.status_code == code, refused.text
    assert says in refused.json()["error"]
    assert status(coordinator.ledger, FAILED) == "failed"
    assert audit_rows(coordinator.ledger, "retry") == []
    if code == 403:
        assert refused.json()["needed_role"] == "maintainer"
        assert refusals(coordinator.ledger) == [(who, task_id, "retry")]


# -- reopen ------------------------------------------------------------------------------


def test_a_maintainer_reopens_an_expired_question_with_a_deadline(
    team: Team, coordinator: FakeCoordinator
) -> None:
    client, keys = team
    expire(coordinator.ledger)
    done = client.post(
        f"/api/questions/{QUESTION}/reopen", json={"deadline": "2h"}, headers=auth(keys["mo"])
    )
    assert done.status_code == 200, done.text
    question = done.json()["question"]
    assert question["status"] == "open"
    assert question["deadline_at"] == db.to_iso(NOW + timedelta(hours=2))
    assert audit_rows(coordinator.ledger, "reopen") == [("mo", "dashboard", QUESTION)]


def test_a_reopen_without_a_deadline_gets_a_day_as_the_cli_does(
    team: Team, coordinator: FakeCoordinator
) -> None:
    client, keys = team
    expire(coordinator.ledger)
    done = client.post(f"/api/questions/{QUESTION}/reopen", headers=auth(keys["mo"]))
    assert done.status_code == 200, done.text
    assert done.json()["question"]["deadline_at"] == db.to_iso(NOW + timedelta(hours=24))


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"deadline": "soon"}, "deadline"),
        ({"deadline": "30s"}, "deadline"),
        ({"deadline": "400d"}, "deadline"),
        ({"deadline": 24}, "deadline"),
        ({"deadline": "1h", "note": "x"}, "note"),
    ],
)
def test_a_bad_deadline_is_refused_naming_the_field(
    team: Team, coordinator: FakeCoordinator, body: dict[str, object], says: str
) -> None:
    client, keys = team
    expire(coordinator.ledger)
    refused = client.post(f"/api/questions/{QUESTION}/reopen", json=body, headers=auth(keys["mo"]))
    assert refused.status_code == 400, refused.text
    assert refused.json()["field"] == says
    question = db.get_question(coordinator.ledger, QUESTION)
    assert question is not None and question.status == "expired"
    assert audit_rows(coordinator.ledger, "reopen") == []


def test_only_an_expired_question_reopens_and_only_for_a_maintainer(
    team: Team, coordinator: FakeCoordinator
) -> None:
    client, keys = team
    still_open = client.post(f"/api/questions/{QUESTION}/reopen", headers=auth(keys["mo"]))
    assert still_open.status_code == 409 and "only expired" in still_open.json()["error"]
    missing = client.post("/api/questions/tB:q9/reopen", headers=auth(keys["mo"]))
    assert missing.status_code == 404
    expire(coordinator.ledger)
    refused = client.post(f"/api/questions/{QUESTION}/reopen", headers=auth(keys["cy"]))
    assert refused.status_code == 403 and refused.json()["needed_role"] == "maintainer"
    assert refusals(coordinator.ledger) == [("cy", QUESTION, "reopen")]
    assert audit_rows(coordinator.ledger, "reopen") == []


# -- the preview -------------------------------------------------------------------------


def test_the_preview_renders_as_the_task_page_does_and_escapes_everything(
    client: TestClient,
) -> None:
    shown = client.post(
        "/api/preview",
        json={"markdown": "# Plan\n*why* <script>alert(1)</script>\n- **a**"},
        headers=auth(),
    )
    assert shown.status_code == 200, shown.text
    html = shown.json()["html"]
    assert "<h3>Plan</h3>" in html and "<em>why</em>" in html and "<strong>a</strong>" in html
    assert "<script" not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize(
    ("body", "code"),
    [({"markdown": 7}, 400), ({"markdown": "x" * 70_000}, 400), ({"text": "x"}, 400)],
)
def test_a_bad_preview_names_the_field(client: TestClient, body: object, code: int) -> None:
    refused = client.post("/api/preview", json=body, headers=auth())
    assert refused.status_code == code and "field" in refused.json()
    not_json = client.post("/api/preview", content=b"x", headers=auth())
    assert not_json.status_code == 415


# -- what the pages offer ----------------------------------------------------------------


def test_the_task_page_offers_only_what_its_viewer_may_do(team: Team) -> None:
    client, keys = team
    signed_out = client.get(f"/task/{WAITING}").text
    assert "Sign in to cancel this task" in signed_out and "Yes, cancel the task" not in signed_out
    assert sign_in(client, keys["cy"], f"/task/{WAITING}").status_code == 303
    as_contributor = client.get(f"/task/{WAITING}").text
    assert "Yes, cancel the task" not in as_contributor
    assert sign_in(client, keys["mo"], f"/task/{WAITING}").status_code == 303
    as_maintainer = client.get(f"/task/{WAITING}").text
    assert f'data-action="/api/task/{WAITING}/cancel"' in as_maintainer
    failed = client.get(f"/task/{FAILED}").text
    assert f'data-action="/api/task/{FAILED}/retry"' in failed and "failed in plan" in failed
    assert "Yes, cancel the task" not in failed  # a failed task is finished


def test_an_expired_question_offers_a_reopen_form(
    client: TestClient, coordinator: FakeCoordinator
) -> None:
    expire(coordinator.ledger)
    signed_out = client.get(f"/task/{WAITING}").text
    assert f"agent-team reopen {QUESTION} --deadline 24h" in signed_out
    assert "Sign in to reopen it" in signed_out
    sign_in(client)
    page = client.get(f"/task/{WAITING}").text
    assert 'data-action="/api/questions/tB%3Aq1/reopen"' in page
    assert 'name="deadline"' in page and 'value="24h"' in page


def test_the_inbox_answers_retries_inline_for_a_signed_in_viewer(client: TestClient) -> None:
    signed_out = client.get("/inbox").text
    assert "data-answer-form" not in signed_out and "agent-team answer tB:q1" in signed_out
    sign_in(client)
    page = client.get("/inbox").text
    assert 'data-action="/api/questions/tB%3Aq1/answer"' in page and "Send reply" in page
    assert "Which login page?" in page  # the question is there to reply to
    assert 'data-action="/api/task/tD/retry"' in page


def test_the_new_task_page_needs_a_sign_in_and_a_contributor(team: Team) -> None:
    client, keys = team
    assert "Sign in to submit a task" in client.get("/tasks/new").text
    sign_in(client, keys["vi"], "/tasks/new")
    assert "needs the contributor role" in client.get("/tasks/new").text
    sign_in(client, keys["cy"], "/tasks/new")
    page = client.get("/tasks/new").text
    assert 'data-action="/api/tasks"' in page and "data-idempotent" in page


def test_the_automations_page_offers_its_controls_by_role(team: Team) -> None:
    client, keys = team
    assert "Sign in to add or change automations" in client.get("/automations").text
    sign_in(client, keys["mo"], "/automations")
    assert "New automation" not in client.get("/automations").text  # creating is an owner's
    sign_in(client, keys["ada"], "/automations")
    assert 'data-action="/api/automations"' in client.get("/automations").text


def test_a_failed_task_past_the_checkpoint_retention_is_not_offered_a_retry(
    seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    from agent_team.dashboard import DashboardContext, create_app
    from tests.integration.dashboard.conftest import make_settings

    ctx = DashboardContext(
        make_settings(seeded.path, checkpoint_retention="1h"),  # tD failed a day ago
        coordinator=coordinator,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    with TestClient(create_app(ctx)) as client:
        sign_in(client)
        assert f"/api/task/{FAILED}/retry" not in client.get(f"/task/{FAILED}").text
        assert f"/api/task/{FAILED}/retry" not in client.get("/inbox").text


@pytest.mark.parametrize(
    ("plan", "editor"),
    [("- Store the email in a cookie\n- Add a test", True), ("- Push with ghp_" + "a" * 36, False)],
)
def test_no_plan_editor_over_a_plan_that_had_to_be_masked(
    seeded: Seeded, coordinator: FakeCoordinator, plan: str, editor: bool
) -> None:
    """Saving a masked plan would build the mask: the page offers no editor then."""
    payload = json.dumps({"text": "Review the plan", "plan_markdown": plan})
    assert db.create_task(coordinator.ledger, task_id="tM", kind="code", title="Masked")
    db.ensure_question(
        coordinator.ledger,
        question_id="tM:q1",
        thread_id="tM",
        turn=1,
        kind="plan_decision",
        transport="local",
        deadline_at=None,
        payload_json=payload,
    )
    with team_client(seeded, coordinator, (("ada", "owner", None, None),)) as (client, keys):
        assert sign_in(client, keys["ada"], "/task/tM").status_code == 303
        page = client.get("/task/tM").text
    assert ("data-plan-original" in page) is editor
