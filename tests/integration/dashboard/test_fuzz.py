"""Property: no request to any endpoint is a 5xx, and a refused one changes nothing.

Hypothesis drives every route of the dashboard app (its JSON API, pages,
sign-in, health and metrics) through the real ASGI app on a real ledger:
random and truncated bytes, JSON nested far too deep, wrong content types,
unicode edge cases (NUL, lone surrogates, RTL marks), huge integers, odd path
parameters; with and without a token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Route
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from tests.integration.dashboard.conftest import NOW, TOKEN, Seeded, make_settings
from tests.ledger_rows import row_counts

_ODD_TEXT = st.sampled_from(
    ["", "\x00", "\ud800", "\u202e" + "evil", "x" * 5000, "../../etc/passwd", "%00", "🎉", "tA"]
)
_TEXT = st.one_of(_ODD_TEXT, st.text(max_size=40))
_NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
)
_JSON_LEAF = st.one_of(st.none(), st.booleans(), _NUMBER, _TEXT)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["title", "body", "kind", "answer", "name", "cron", "every", "x"]),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=12,
)


def _nested(depth: int) -> bytes:
    return b'{"title": ' + b"[" * depth + b"]" * depth + b"}"


def _encode(value: Any) -> bytes:
    # Lone surrogates are valid in JSON escapes; `json.dumps` writes them as `\ud800`.
    return json.dumps(value, allow_nan=True).encode("ascii")


_BODY = st.one_of(
    st.binary(max_size=200),
    _JSON.map(_encode),
    _JSON.map(_encode).map(lambda raw: raw[: max(0, len(raw) // 2)]),  # truncated
    st.sampled_from([_nested(50), _nested(2_000), _nested(50_000)]),
)
_CONTENT_TYPE = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "",
        "multipart/form-data",
        "application/x-www-form-urlencoded",
    ]
)
_PARAM = st.one_of(
    st.sampled_from(["9223372036854775808", "-9223372036854775809", "1e400", "0x10", "-1"]),
    _TEXT,
    _NUMBER.map(str),
)
_QUERY_KEYS = st.sampled_from(
    ["limit", "offset", "status", "kind", "q", "day", "id", "task", "after", "runs", "plan"]
)


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Any]]:
    from tests.integration.dashboard.conftest import seed_ledger

    seeded: Seeded = seed_ledger(tmp_path_factory.mktemp("fuzz") / "agent-team.db")
    ctx = DashboardContext(settings=make_settings(seeded.path), clock=lambda: NOW)
    app = create_app(ctx)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, seeded


def _routes() -> list[tuple[str, str]]:
    ctx = DashboardContext(settings=make_settings_for_routes(), clock=lambda: NOW)
    found: list[tuple[str, str]] = []
    for route in create_app(ctx).routes:
        if isinstance(route, Route):
            for method in sorted(route.methods or []):
                if method != "HEAD":
                    found.append((method, route.path))
    return found


def make_settings_for_routes() -> Any:
    from pathlib import Path

    return make_settings(Path("/nonexistent/agent-team.db"))


ROUTES = _routes()


def _wire(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _fingerprint(path: Any) -> dict[str, int]:
    with db.open_ledger(path) as ledger:
        return row_counts(ledger)


@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    route=st.sampled_from(ROUTES),
    params=st.lists(_PARAM, min_size=3, max_size=3),
    query=st.dictionaries(_QUERY_KEYS, _PARAM, min_size=1, max_size=4),
    body=_BODY,
    content_type=_CONTENT_TYPE,
    with_token=st.booleans(),
)
def test_no_input_is_a_server_error(
    fuzz_client: tuple[TestClient, Any],
    route: tuple[str, str],
    params: list[str],
    query: dict[str, str],
    body: bytes,
    content_type: str,
    with_token: bool,
) -> None:
    client, seeded = fuzz_client
    method, template = route
    values = iter(params)
    # What a client would put on the wire: UTF-8 bytes, lone surrogates included, escaped.
    path = re.sub(r"\{[^}]+\}", lambda _: quote(_wire(next(values)), safe=""), template)
    if query:
        path += "?" + urlencode({key: _wire(value) for key, value in query.items()})
    headers = {"Content-Type": content_type} if content_type else {}
    if with_token:
        headers["Authorization"] = f"Bearer {TOKEN}"
    before = _fingerprint(seeded.path)
    response = client.request(
        method,
        path,
        content=body if method != "GET" else None,
        headers=headers,
    )
    assert response.status_code < 500, (method, path, query, body[:200], response.text[:300])
    if response.status_code >= 400 or method == "GET":
        assert _fingerprint(seeded.path) == before, (method, path, response.status_code)
