"""Signing in to the dashboard: cookie, CSRF, redirects, revocation and who an answer is from."""

from __future__ import annotations

import base64
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from agent_team.dashboard.auth import LOGIN_CSRF_COOKIE, SESSION_COOKIE
from tests.integration.dashboard.conftest import (
    NOW,
    TOKEN,
    FakeCoordinator,
    Seeded,
    auth,
    csrf_of,
    make_settings,
    sign_in,
)

ADA = "ada-token-0123456789"
BOB = "bob-token-9876543210"


def _client(
    seeded: Seeded,
    coordinator: FakeCoordinator,
    base_url: str = "http://localhost",
    **overrides: Any,
) -> TestClient:
    settings = make_settings(seeded.path, **{"token": None, **overrides})
    ctx = DashboardContext(settings, coordinator=coordinator, clock=lambda: NOW)  # type: ignore[arg-type]
    return TestClient(create_app(ctx), base_url=base_url)


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text(f"# people who may answer\nada:{ADA}\nbob:{BOB}\n", encoding="utf-8")
    return path


@pytest.fixture
def named(seeded: Seeded, coordinator: FakeCoordinator, tokens_file: Path) -> Iterator[TestClient]:
    with _client(seeded, coordinator, dashboard_tokens_file=tokens_file) as client:
        yield client


def _set_cookie_headers(response: Any) -> list[str]:
    return [value for key, value in response.headers.multi_items() if key == "set-cookie"]


def _cookie(response: Any, name: str) -> str:
    (header,) = [h for h in _set_cookie_headers(response) if h.startswith(f"{name}=")]
    return header


def _answer(client: TestClient, question_id: str, body: dict[str, Any], **headers: str) -> Any:
    return client.post(f"/api/questions/{question_id}/answer", json=body, headers=headers)


def _answered_via(seeded: Seeded, question_id: str) -> str | None:
    with db.open_ledger(seeded.path, readonly=True) as ledger:
        question = db.get_question(ledger, question_id)
    assert question is not None
    return question.answered_via


# --- signing in ---------------------------------------------------------------------------------


def test_signing_in_sets_a_strict_httponly_cookie_and_goes_back(named: TestClient) -> None:
    response = sign_in(named, ADA, next_path="/task/tB")
    assert response.status_code == 303
    assert response.headers["location"] == "/task/tB"
    cookie = _cookie(response, SESSION_COOKIE)
    flags = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in flags and "samesite=strict" in flags and "path=/" in flags
    assert "secure" not in flags  # the dashboard's URL is not https
    assert ADA not in cookie
    page = named.get("/task/tB").text
    assert "signed in as <strong>ada</strong>" in page
    assert 'action="/logout"' in page and "Sign out" in page


@pytest.mark.parametrize(
    ("base_url", "secure"),
    [
        ("https://team.example", True),  # the request came over https
        ("http://team.example", True),  # by the https dashboard URL, TLS ended at a proxy
        ("http://127.0.0.1:8765", False),  # the same daemon opened locally
    ],
)
def test_the_cookie_is_secure_on_https(
    seeded: Seeded, coordinator: FakeCoordinator, tokens_file: Path, base_url: str, secure: bool
) -> None:
    with _client(
        seeded,
        coordinator,
        base_url=base_url,
        dashboard_tokens_file=tokens_file,
        dashboard_url="https://team.example/agent",
    ) as client:
        page = client.get("/login")
        flags = [p.strip().lower() for p in _cookie(page, LOGIN_CSRF_COOKIE).split(";")]
        assert ("secure" in flags) is secure and "samesite=strict" in flags
        if base_url.startswith("https"):
            response = sign_in(client, ADA)
            flags = [p.strip().lower() for p in _cookie(response, SESSION_COOKIE).split(";")]
            assert "secure" in flags and "httponly" in flags


@pytest.mark.parametrize(
    "target",
    ["//evil.example/x", "/\\evil.example", "https://evil.example/", "javascript:alert(1)", ""],
)
def test_sign_in_never_redirects_off_the_site(named: TestClient, target: str) -> None:
    response = sign_in(named, ADA, next_path=target)
    assert response.status_code == 303
    assert response.headers["location"] == "/"


def test_a_wrong_token_is_refused_without_echoing_it(named: TestClient) -> None:
    response = sign_in(named, "not-a-token-xyz")
    assert response.status_code == 401
    assert "not one of the dashboard&#39;s tokens" in response.text
    assert "not-a-token-xyz" not in response.text
    assert not [h for h in _set_cookie_headers(response) if h.startswith(SESSION_COOKIE)]


def test_a_sign_in_form_from_elsewhere_is_refused_as_csrf(named: TestClient) -> None:
    # Another site can post the form, but not with this site's SameSite=Strict cookie.
    response = named.post(
        "/login", data={"token": ADA, "next": "/", "login_csrf": "x" * 43}, follow_redirects=False
    )
    assert response.status_code == 403
    assert "CSRF check failed" in response.text
    assert not [h for h in _set_cookie_headers(response) if h.startswith(SESSION_COOKIE)]
    named.get("/login")  # now the cookie is set, but the field still does not match it
    response = named.post(
        "/login", data={"token": ADA, "next": "/", "login_csrf": "y" * 43}, follow_redirects=False
    )
    assert response.status_code == 403 and "CSRF" in response.text


def test_sign_in_is_off_without_tokens(seeded: Seeded, coordinator: FakeCoordinator) -> None:
    with _client(seeded, coordinator) as client:
        page = client.get("/login")
        assert "Sign-in is off" in page.text and "AGENT_TEAM_DASHBOARD_TOKENS" in page.text
        refused = client.post(
            "/login", data={"token": "anything", "login_csrf": "x"}, follow_redirects=False
        )
        assert refused.status_code == 403 and "Sign-in is off" in refused.text
        assert "Sign in to answer" not in client.get("/task/tB").text


def test_the_session_key_is_generated_into_the_state_folder_owner_only(
    seeded: Seeded, named: TestClient
) -> None:
    sign_in(named, ADA)
    key = seeded.path.parent / "state" / "dashboard-session-key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


# --- CSRF on signed-in writes --------------------------------------------------------------------


def test_a_signed_in_answer_is_attributed_to_the_tokens_name(
    named: TestClient, seeded: Seeded
) -> None:
    sign_in(named, ADA)
    csrf = csrf_of(named.get("/task/tB").text)
    response = _answer(named, "tB:q1", {"answer": "The one at /login"}, **{"X-CSRF-Token": csrf})
    assert response.status_code == 200, response.text
    assert response.json()["question"]["answered_via"] == "dashboard:ada"
    assert _answered_via(seeded, "tB:q1") == "dashboard:ada"
    page = named.get("/task/tB").text
    assert "answered by ada via dashboard" in page


@pytest.mark.parametrize("given", [None, "", "0" * 64])
def test_a_signed_in_write_without_the_csrf_token_is_403(
    named: TestClient, seeded: Seeded, given: str | None
) -> None:
    sign_in(named, ADA)
    headers = {} if given is None else {"X-CSRF-Token": given}
    for response in (
        _answer(named, "tB:q1", {"answer": "x"}, **headers),
        named.post("/api/tasks", json={"title": "x"}, headers=headers),
    ):
        assert response.status_code == 403
        assert response.json()["error"].startswith("CSRF check failed")
    assert _answered_via(seeded, "tB:q1") is None


def test_signing_out_needs_the_csrf_token_then_ends_the_session(named: TestClient) -> None:
    sign_in(named, ADA)
    csrf = csrf_of(named.get("/").text)
    refused = named.post("/logout", data={"csrf": "nope"}, follow_redirects=False)
    assert refused.status_code == 403 and "CSRF check failed" in refused.text
    assert "signed in as" in named.get("/").text
    response = named.post("/logout", data={"csrf": csrf}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/"
    assert _cookie(response, SESSION_COOKIE).lower().count("max-age=0") == 1
    page = named.get("/task/tB").text
    assert "signed in as" not in page
    assert 'href="/login?next=/task/tB">Sign in to answer</a>' in page
    assert _answer(named, "tB:q1", {"answer": "x"}, **{"X-CSRF-Token": csrf}).status_code == 401


# --- sessions end with their token --------------------------------------------------------------


def test_removing_a_token_from_the_file_ends_its_sessions_at_once(
    named: TestClient, tokens_file: Path
) -> None:
    sign_in(named, BOB)
    csrf = csrf_of(named.get("/").text)
    tokens_file.write_text(f"ada:{ADA}\n", encoding="utf-8")
    os.utime(tokens_file, ns=(1, 1))
    assert "signed in as" not in named.get("/").text
    response = _answer(named, "tB:q1", {"answer": "x"}, **{"X-CSRF-Token": csrf})
    assert response.status_code == 401 and "not signed in again" in response.json()["error"]


def test_a_restart_without_the_token_ends_its_sessions(
    seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    with _client(seeded, coordinator, dashboard_tokens=f"ada:{ADA},bob:{BOB}") as before:
        sign_in(before, BOB)
        cookie = before.cookies[SESSION_COOKIE]
        assert "signed in as <strong>bob</strong>" in before.get("/").text
    for tokens in (f"ada:{ADA}", f"ada:{ADA},bob:{BOB}-changed"):
        with _client(seeded, coordinator, dashboard_tokens=tokens) as after:
            after.cookies.set(SESSION_COOKIE, cookie)
            assert "signed in as" not in after.get("/").text
    with _client(seeded, coordinator, dashboard_tokens=f"ada:{ADA},bob:{BOB}") as same:
        same.cookies.set(SESSION_COOKIE, cookie)  # the same token after a restart: still in
        assert "signed in as <strong>bob</strong>" in same.get("/").text


def test_a_tampered_cookie_signs_nobody_in(named: TestClient) -> None:
    sign_in(named, BOB)
    cookie = named.cookies[SESSION_COOKIE]
    payload, _, rest = cookie.partition(".")
    forged = json.dumps({"n": "ada", "t": "0" * 32, "s": "x"}).encode()
    for value in (
        base64.urlsafe_b64encode(forged).decode().rstrip("=") + "." + rest,  # another payload
        payload + ".x" + rest,  # a changed signature
        "garbage",
    ):
        named.cookies.clear()
        named.cookies.set(SESSION_COOKIE, value)
        assert "signed in as" not in named.get("/").text


# --- the unnamed token ---------------------------------------------------------------------------


def test_signed_in_with_the_unnamed_token_the_name_is_asked(
    seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    with _client(seeded, coordinator, token=TOKEN) as client:
        sign_in(client, TOKEN)
        page = client.get("/task/tB").text
        assert "signed in as <strong>the shared token</strong>" in page
        assert 'name="name"' in page
        csrf = csrf_of(page)
        missing = _answer(client, "tB:q1", {"answer": "x"}, **{"X-CSRF-Token": csrf})
        assert missing.status_code == 400 and missing.json()["field"] == "name"
        done = _answer(client, "tB:q1", {"answer": "x", "name": "carol"}, **{"X-CSRF-Token": csrf})
        assert done.status_code == 200
        assert done.json()["question"]["answered_via"] == "dashboard:carol"


# --- the API with bearer tokens (scripts) ---------------------------------------------------------


def test_a_named_bearer_token_needs_no_name(named: TestClient, seeded: Seeded) -> None:
    response = _answer(named, "tB:q1", {"answer": "The one at /login"}, **auth(BOB))
    assert response.status_code == 200, response.text
    assert _answered_via(seeded, "tB:q1") == "dashboard:bob"


def test_a_named_bearer_token_may_repeat_its_own_name_but_not_another(named: TestClient) -> None:
    other = _answer(named, "tB:q1", {"answer": "x", "name": "ada"}, **auth(BOB))
    assert other.status_code == 400 and other.json()["field"] == "name"
    assert "'bob'" in other.json()["error"] and BOB not in other.text
    same = _answer(named, "tB:q1", {"answer": "x", "name": "bob"}, **auth(BOB))
    assert same.status_code == 200
    assert same.json()["question"]["answered_via"] == "dashboard:bob"


def test_the_unnamed_bearer_token_still_needs_a_name(client: TestClient) -> None:
    response = _answer(client, "tB:q1", {"answer": "x"}, **auth())
    assert response.status_code == 400
    assert response.json() == {
        "error": "name: is required with the unnamed token (a named token sets it)",
        "field": "name",
    }


def test_bearer_writes_need_no_csrf_token_and_a_wrong_one_is_401(named: TestClient) -> None:
    assert named.post("/api/tasks", json={"title": "x"}, headers=auth(ADA)).status_code == 201
    wrong = named.post("/api/tasks", json={"title": "x"}, headers=auth(ADA + "x"))
    assert wrong.status_code == 401 and ADA not in wrong.text
    assert "sign in on the dashboard" in wrong.json()["error"]


def test_the_login_page_keeps_its_csrf_cookie_across_tabs(named: TestClient) -> None:
    first = named.get("/login")
    value = named.cookies[LOGIN_CSRF_COOKIE]
    second = named.get("/login")
    assert named.cookies[LOGIN_CSRF_COOKIE] == value
    assert value in first.text and value in second.text
