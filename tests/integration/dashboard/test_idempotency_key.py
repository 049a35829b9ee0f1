"""`POST /api/tasks` with an `Idempotency-Key`: a retry gets the first answer, never a new task."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from tests.integration.dashboard.conftest import NOW, FakeCoordinator, Seeded, make_settings
from tests.ledger_rows import stored_rows

ADA = "ada-token-0123456789"
BOB = "bob-token-9876543210"
TASK = {"title": "Add a greeting", "body": "To the README", "repo": "acme/widgets"}


def _ctx(seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path) -> DashboardContext:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ada:{ADA}\nbob:{BOB}\n", encoding="utf-8")
    settings = make_settings(seeded.path, token=None, dashboard_tokens_file=tokens)
    return DashboardContext(settings, coordinator=coordinator, clock=lambda: NOW)  # type: ignore[arg-type]


@pytest.fixture
def client(seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(_ctx(seeded, coordinator, tmp_path))) as test_client:
        yield test_client


def _submit(client: TestClient, key: str | None, body: dict[str, Any], token: str = ADA) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post("/api/tasks", json=body, headers=headers)


def _rows(seeded: Seeded) -> dict[str, list[tuple[str, ...]]]:
    with db.open_ledger(seeded.path, readonly=True) as ledger:
        return stored_rows(ledger, (*_TABLES, "idempotency_keys"))


_TABLES = ("tasks", "commands", "audit_log")


def _tasks_titled(seeded: Seeded, title: str) -> list[db.Task]:
    with db.open_ledger(seeded.path, readonly=True) as ledger:
        return [task for task in db.list_tasks(ledger, limit=1000) if task.title == title]


def test_a_retry_with_the_same_key_replays_the_first_answer(
    client: TestClient, seeded: Seeded
) -> None:
    first = _submit(client, "0b6e-retry-1", TASK)
    assert first.status_code == 201, first.text
    assert "idempotent-replayed" not in first.headers
    again = [_submit(client, "0b6e-retry-1", TASK) for _ in range(3)]
    for response in again:
        assert (response.status_code, response.json()) == (201, first.json())
        assert response.headers["location"] == first.headers["location"]
        assert response.headers["idempotent-replayed"] == "true"
    (task,) = _tasks_titled(seeded, TASK["title"])
    assert task.id == first.json()["task_id"]
    with db.open_ledger(seeded.path, readonly=True) as ledger:
        assert [c.command_id for c in db.list_commands(ledger, task_id=task.id)] == [
            f"start:{task.id}"
        ]
        assert len(db.list_audit(ledger, target=task.id)) == 1


def test_without_a_key_every_submit_is_a_new_task(client: TestClient, seeded: Seeded) -> None:
    ids = {_submit(client, None, TASK).json()["task_id"] for _ in range(2)}
    assert len(ids) == 2 == len(_tasks_titled(seeded, TASK["title"]))


def test_concurrent_requests_with_one_key_make_one_task(client: TestClient, seeded: Seeded) -> None:
    for round_ in range(10):
        key = f"race-{round_}"
        barrier = threading.Barrier(2)
        answers: list[Any] = []

        def send(key: str, barrier: threading.Barrier, answers: list[Any]) -> None:
            barrier.wait()
            answers.append(_submit(client, key, {**TASK, "title": key}))

        threads = [threading.Thread(target=send, args=(key, barrier, answers)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [a.status_code for a in answers] == [201, 201]
        assert answers[0].json() == answers[1].json()
        (task,) = _tasks_titled(seeded, key)
        assert task.id == answers[0].json()["task_id"]


@pytest.mark.parametrize(
    "change",
    [{"title": "Another title"}, {"body": "another body"}, {"repo": "acme/other"}, {"repo": None}],
)
def test_a_different_request_under_the_same_key_is_a_422_and_stores_nothing(
    client: TestClient, seeded: Seeded, change: dict[str, Any]
) -> None:
    assert _submit(client, "k-1", TASK).status_code == 201
    before = _rows(seeded)
    other = {key: value for key, value in {**TASK, **change}.items() if value is not None}
    response = _submit(client, "k-1", other)
    assert response.status_code == 422, response.text
    assert response.json()["header"] == "Idempotency-Key"
    assert response.json()["error"].startswith("Idempotency-Key: ")
    assert _rows(seeded) == before


def test_keys_belong_to_their_caller(client: TestClient, seeded: Seeded) -> None:
    ada = _submit(client, "shared-name", TASK)
    bob = _submit(client, "shared-name", TASK, token=BOB)
    assert ada.status_code == bob.status_code == 201
    assert ada.json() != bob.json()
    assert len(_tasks_titled(seeded, TASK["title"])) == 2


@pytest.mark.parametrize("key", ["", "a b", "k" * 256, "naïve", "tab\there"])
def test_a_malformed_key_is_a_400_naming_the_header(
    client: TestClient, seeded: Seeded, key: str
) -> None:
    before = _rows(seeded)
    headers = [(b"Authorization", f"Bearer {ADA}".encode()), (b"Idempotency-Key", key.encode())]
    response = client.post("/api/tasks", json=TASK, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["header"] == "Idempotency-Key"
    assert _rows(seeded) == before


def test_a_restarted_or_second_daemon_honours_the_key(
    client: TestClient, seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path
) -> None:
    first = _submit(client, "durable", TASK)
    other = FakeCoordinator(seeded.path)  # another process's view of the same ledger
    try:
        with TestClient(create_app(_ctx(seeded, other, tmp_path))) as second:
            again = _submit(second, "durable", TASK)
    finally:
        other.ledger.close()
    assert (again.status_code, again.json()) == (201, first.json())
    assert len(_tasks_titled(seeded, TASK["title"])) == 1


def test_the_retention_pass_forgets_a_key_after_24_hours(
    client: TestClient, seeded: Seeded
) -> None:
    first = _submit(client, "daily", TASK)
    with db.open_ledger(seeded.path) as ledger:
        assert db.prune_idempotency_keys(ledger, older_than=NOW + db.KEY_WINDOW) == 1
    later = _submit(client, "daily", TASK)
    assert later.status_code == 201 and later.json() != first.json()
    assert "idempotent-replayed" not in later.headers
