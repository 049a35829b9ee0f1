"""What the daemon asks of browsers: a strict CSP, no sniffing, no referrer, no framing;
JSON writes only as JSON; no form that could put a token in a URL."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from agent_team.dashboard.security_headers import CONTENT_SECURITY_POLICY
from tests.integration.dashboard.conftest import auth


@pytest.mark.parametrize(
    "path", ["/", "/task/tA", "/inbox", "/automations", "/api/tasks", "/healthz", "/nowhere"]
)
def test_every_response_carries_the_security_headers(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"


@pytest.mark.parametrize("path", ["/", "/task/tA", "/inbox", "/automations", "/login"])
def test_pages_have_no_inline_script_or_style(client: TestClient, path: str) -> None:
    html = client.get(path, headers=auth()).text
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []  # every script is a file
    assert " style=" not in html and "<style" not in html
    assert not re.search(r"\son[a-z]+=", html)  # no inline event handlers


def test_every_form_posts_or_carries_no_secret(client: TestClient) -> None:
    html = client.get("/task/tB", headers=auth()).text + client.get("/", headers=auth()).text
    forms = re.findall(r"<form[^>]*>", html)
    assert forms
    for form in forms:
        if 'method="get"' in form:
            assert "filter" in form  # the task filter: status, kind, words; nothing secret
        else:
            assert 'method="post"' in form, form


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded", b"answer=approve&name=x"),
        ("text/plain", b'{"answer": "approve", "name": "x"}'),
        ("", b'{"answer": "approve", "name": "x"}'),
    ],
)
def test_json_endpoints_take_only_json(client: TestClient, content_type: str, body: bytes) -> None:
    before = client.get("/api/task/tB").json()
    headers = {**auth(), "Content-Type": content_type} if content_type else auth()
    for path in ("/api/questions/tB:q1/answer", "/api/tasks"):
        response = client.post(path, content=body, headers=headers)
        assert response.status_code == 415, (path, response.text)
        assert "application/json" in response.json()["error"]
    assert client.get("/api/task/tB").json() == before
