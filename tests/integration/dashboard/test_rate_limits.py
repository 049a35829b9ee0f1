"""Limits on abuse: 429 with Retry-After before a key is checked or a body read.

The limiters count on the context's `ticks`, stopped here, so a window never
slides during a test however long the machine takes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from agent_team.requests.access import DashboardTokens
from tests.integration.dashboard.conftest import (
    NOW,
    FakeCoordinator,
    Seeded,
    auth,
    csrf_of,
    make_settings,
    sign_in,
)

ADA = "ada-token-0123456789"
BOB = "bob-token-9876543210"
ATTACKER = ("203.0.113.7", 40000)
COLLEAGUE = ("198.51.100.20", 40001)


def _app(seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path, **overrides: Any) -> Any:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ada:{ADA}\nbob:{BOB}\n", encoding="utf-8")
    settings = make_settings(seeded.path, token=None, dashboard_tokens_file=tokens, **overrides)
    ctx = DashboardContext(
        settings,
        coordinator=coordinator,  # type: ignore[arg-type]
        clock=lambda: NOW,
        ticks=lambda: 5000.0,
    )
    return create_app(ctx)


@pytest.fixture
def app(seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path) -> Starlette:
    return _app(seeded, coordinator, tmp_path)  # type: ignore[no-any-return]


@pytest.fixture
def counted_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every token the app compared: the work a refused request must not cost."""
    checked: list[str] = []
    original = DashboardTokens.match

    def match(self: DashboardTokens, given: str) -> Any:
        checked.append(given)
        return original(self, given)

    monkeypatch.setattr(DashboardTokens, "match", match)
    return checked


def _client(app: Starlette, client: tuple[str, int]) -> TestClient:
    return TestClient(app, client=client, follow_redirects=False)


def _login_csrf(client: TestClient) -> str:
    found = re.search(r'name="login_csrf" value="([^"]+)"', client.get("/login").text)
    assert found
    return found.group(1)


def _tasks(seeded: Seeded) -> int:
    with db.open_ledger(seeded.path, readonly=True) as ledger:
        return db.table_counts(ledger)["tasks"]


def test_a_thousand_wrong_sign_ins_from_one_address_get_429_while_others_sign_in(
    app: Starlette, counted_checks: list[str]
) -> None:
    with _client(app, ATTACKER) as attacker, _client(app, COLLEAGUE) as colleague:
        csrf = _login_csrf(attacker)
        statuses: list[int] = []
        retry_after: set[str] = set()
        for n in range(1000):
            response = attacker.post(
                "/login", data={"token": f"guess-{n:04d}", "next": "/", "login_csrf": csrf}
            )
            statuses.append(response.status_code)
            if response.status_code == 429:
                retry_after.add(response.headers["retry-after"])
        assert statuses[:20] == [401] * 20
        assert statuses[20:] == [429] * 980
        assert retry_after == {"60"}, "whole seconds until the oldest failure leaves the window"
        assert len(counted_checks) == 20, "a refused attempt never reaches the token check"

        refused = attacker.post("/login", data={"token": ADA, "next": "/", "login_csrf": csrf})
        assert refused.status_code == 429, "the right key too, from the address over its budget"
        assert "Too many sign-in attempts" in refused.text and ADA not in refused.text
        assert refused.headers["content-type"].startswith("text/html")

        signed_in = sign_in(colleague, ADA)
        assert signed_in.status_code == 303
        assert "signed in as <strong>ada</strong>" in colleague.get("/").text


def test_right_sign_ins_do_not_use_up_the_budget(app: Starlette) -> None:
    """An office behind one address signs in all morning: only failures count."""
    with _client(app, ATTACKER) as office:
        for _ in range(50):
            assert sign_in(office, BOB).status_code == 303
        assert sign_in(office, "wrong").status_code == 401


def test_wrong_bearer_keys_count_too_and_get_429_before_the_check(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path, counted_checks: list[str]
) -> None:
    app = _app(seeded, coordinator, tmp_path, dashboard_reads="token")
    with _client(app, ATTACKER) as attacker, _client(app, COLLEAGUE) as colleague:
        statuses = [
            attacker.get("/api/tasks", headers=auth(f"guess-{n}")).status_code for n in range(40)
        ]
        assert statuses == [401] * 20 + [429] * 20
        assert len(counted_checks) == 20
        refused = attacker.get("/api/tasks", headers=auth("guess-x"))
        assert refused.json()["retry_after_s"] == int(refused.headers["retry-after"]) == 60
        assert attacker.get("/api/tasks").status_code == 401, "no key: nothing to guess"
        assert colleague.get("/api/tasks", headers=auth(ADA)).status_code == 200


def test_a_key_an_open_read_never_checks_does_not_count(app: Starlette) -> None:
    with _client(app, ATTACKER) as client:
        answers = [client.get("/api/tasks", headers=auth(f"x{n}")).status_code for n in range(30)]
        assert set(answers) == {200}


def test_a_burst_of_submits_over_the_limit_stores_one_task_per_201(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path
) -> None:
    app = _app(seeded, coordinator, tmp_path, limit_writes_per_min=10)
    before = _tasks(seeded)
    with _client(app, ATTACKER) as ada, _client(app, ATTACKER) as bob:
        answers = [
            ada.post("/api/tasks", json={"title": f"burst {n}"}, headers=auth(ADA))
            for n in range(25)
        ]
        made = [r for r in answers if r.status_code == 201]
        refused = [r for r in answers if r.status_code == 429]
        assert (len(made), len(refused)) == (10, 15)
        assert all(r.headers["retry-after"] == "60" for r in refused)
        assert all("10 changes a minute" in r.json()["error"] for r in refused)
        assert _tasks(seeded) == before + len(made)
        # Per key: bob, at the same address, has a budget of his own.
        assert bob.post("/api/tasks", json={"title": "bob"}, headers=auth(BOB)).status_code == 201
    assert _tasks(seeded) == before + len(made) + 1


def test_a_refused_write_is_not_read(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path
) -> None:
    """Over the limit even a body the API would refuse (too big, not JSON) gets the 429."""
    app = _app(seeded, coordinator, tmp_path, limit_writes_per_min=1)
    with _client(app, ATTACKER) as ada:
        assert ada.post("/api/tasks", json={"title": "one"}, headers=auth(ADA)).status_code == 201
        response = ada.post(
            "/api/tasks", content=b"x" * 2_000_000, headers={**auth(ADA), "Content-Type": "text"}
        )
        assert response.status_code == 429


def test_anonymous_writes_count_per_address(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path
) -> None:
    app = _app(seeded, coordinator, tmp_path, limit_writes_per_min=3)
    with _client(app, ATTACKER) as attacker, _client(app, COLLEAGUE) as colleague:
        statuses = [attacker.post("/api/tasks", json={"title": "x"}).status_code for _ in range(5)]
        assert statuses == [401, 401, 401, 429, 429]
        assert colleague.post("/api/tasks", json={"title": "x"}).status_code == 401


def test_zero_turns_the_limits_off(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path
) -> None:
    app = _app(seeded, coordinator, tmp_path, limit_writes_per_min=0, limit_logins_per_min=0)
    with _client(app, ATTACKER) as client:
        assert all(sign_in(client, "wrong").status_code == 401 for _ in range(30))
        answers = [
            client.post("/api/tasks", json={"title": f"t{n}"}, headers=auth(ADA)).status_code
            for n in range(130)
        ]
        assert set(answers) == {201}


@pytest.fixture
def ipv6_clients(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path
) -> Iterator[tuple[TestClient, TestClient]]:
    app = _app(seeded, coordinator, tmp_path, dashboard_reads="token")
    one = _client(app, ("2001:db8:1:2::10", 40000))
    other = _client(app, ("2001:db8:1:2:ffff::1", 40000))
    with one, other:
        yield one, other


def test_an_ipv6_host_counts_by_its_64(ipv6_clients: tuple[TestClient, TestClient]) -> None:
    """One host holds a whole /64: new addresses in it are the same guesser."""
    one, other = ipv6_clients
    for n in range(20):
        assert one.get("/api/tasks", headers=auth(f"guess-{n}")).status_code == 401
    assert other.get("/api/tasks", headers=auth("guess-x")).status_code == 429


def test_a_429_on_the_langgraph_api_can_be_read_by_a_listed_origin_only(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path
) -> None:
    inbox = "https://inbox.example"
    app = _app(
        seeded,
        coordinator,
        tmp_path,
        limit_writes_per_min=2,
        langgraph_api=True,
        langgraph_api_origins=[inbox],
    )
    path = "/langgraph/threads/t1/runs/wait"
    with _client(app, ATTACKER) as client:
        for _ in range(2):  # within the budget (the API is not mounted here: 404)
            client.post(path, json={}, headers={"x-api-key": ADA, "Origin": inbox})
        listed = client.post(path, json={}, headers={"x-api-key": ADA, "Origin": inbox})
        other = client.post(
            path, json={}, headers={"x-api-key": ADA, "Origin": "https://evil.example"}
        )
    assert listed.status_code == other.status_code == 429
    assert listed.headers["access-control-allow-origin"] == inbox
    assert "retry-after" in listed.headers["access-control-expose-headers"]
    assert "Origin" in listed.headers["vary"]
    assert "access-control-allow-origin" not in other.headers


def test_no_header_buys_a_fresh_budget(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path
) -> None:
    """The budget follows the key the surface checks: a made-up Authorization beside the
    LangGraph API's x-api-key, or a second sign-in of the same key, adds nothing."""
    app = _app(seeded, coordinator, tmp_path, limit_writes_per_min=3)
    with _client(app, ATTACKER) as client:
        statuses = [
            client.post(
                "/langgraph/threads/t/runs",
                json={},
                headers={"x-api-key": ADA, "Authorization": f"Bearer made-up-{n}"},
            ).status_code
            for n in range(5)
        ]
        assert statuses[3:] == [429, 429], statuses
    with _client(app, COLLEAGUE) as first, _client(app, COLLEAGUE) as second:
        assert sign_in(first, BOB).status_code == 303
        assert sign_in(second, BOB).status_code == 303
        csrf = {c: csrf_of(c.get("/").text) for c in (first, second)}
        answers = [
            client.post(
                "/api/tasks", json={"title": "t"}, headers={"X-CSRF-Token": csrf[client]}
            ).status_code
            for client in (first, second, first, second)
        ]
        assert answers == [201, 201, 201, 429], answers


def test_cookies_we_did_not_sign_count_as_their_address(
    seeded: Seeded, coordinator: FakeCoordinator, tmp_path: Path
) -> None:
    app = _app(seeded, coordinator, tmp_path, limit_writes_per_min=3)
    with _client(app, ATTACKER) as client:
        statuses = [
            client.post(
                "/api/tasks",
                json={"title": "t"},
                headers={"Cookie": f"agent_team_session=forged-{n}"},
            ).status_code
            for n in range(5)
        ]
        assert statuses == [401, 401, 401, 429, 429]
