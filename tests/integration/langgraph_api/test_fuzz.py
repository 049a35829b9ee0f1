"""Property: no request to the LangGraph API is a 5xx, and a refused one changes nothing.

The JS SDK retries a 5xx up to four times, POSTs included, so a 5xx there
would repeat an answer; this drives every route of `/langgraph` on a live
daemon (real HTTP, real coordinator) with random bytes, truncated and deeply
nested JSON, plausible-looking commands, odd path parameters and keys.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_team import db
from agent_team.integrations.langgraph_api.routes import LangGraphApi, routes
from tests.integration.langgraph_api.conftest import ADA_KEY, Live, wait_for
from tests.ledger_rows import row_counts

_TEXT = st.one_of(
    st.sampled_from(["", "\x00", "\ud800", "\u202eevil", "x" * 3000, "../x", "approve", "🎉"]),
    st.text(max_size=30),
)
_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    _TEXT,
)
_KEYS = st.sampled_from(
    [
        "command", "resume", "type", "args", "status", "limit", "offset", "metadata", "values",
        "ids", "as_node", "stream_mode", "input", "sort_by", "sort_order", "action", "x",
    ]
)  # fmt: skip
_JSON = st.recursive(
    _LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=10,
)
_BODY = st.one_of(
    st.binary(max_size=120),
    _JSON.map(lambda v: json.dumps(v, allow_nan=True).encode("ascii")),
    _JSON.map(lambda v: json.dumps(v).encode("ascii")[:7]),
    st.sampled_from([b"[" * 3000 + b"]" * 3000, b'{"command": {"resume": ' * 200]),
)
_ROUTES = [
    (method, route.path)
    for route in routes(LangGraphApi.__new__(LangGraphApi))  # only the paths are read
    for method in sorted(getattr(route, "methods", None) or [])
    if method != "HEAD"
]


def _quiet(live: Live) -> None:
    """No command waiting or running: what a valid answer set going has finished."""

    def idle() -> bool:
        busy = [c for c in db.list_commands(live.conn) if c.state in ("pending", "claimed")]
        return not busy and live.daemon.coordinator.wait_idle(5)

    wait_for(idle, "the daemon to be idle")


def _fingerprint(live: Live) -> dict[str, int]:
    _quiet(live)
    return row_counts(live.conn)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    route=st.sampled_from(_ROUTES),
    thread=st.one_of(st.just("real"), _TEXT),
    body=_BODY,
    content_type=st.sampled_from(["application/json", "text/plain", ""]),
    key=st.sampled_from([ADA_KEY, "", "wrong", ADA_KEY + "\x00"]),
)
def test_no_input_is_a_server_error(
    live: Live, route: tuple[str, str], thread: str, body: bytes, content_type: str, key: str
) -> None:
    if not hasattr(live, "fuzz_task"):
        live.fuzz_task = live.submit(clarify=False)  # type: ignore[attr-defined]
        live.open_question(live.fuzz_task)  # type: ignore[attr-defined]
    method, template = route
    task = live.fuzz_task if thread == "real" else thread  # type: ignore[attr-defined]
    wire = quote(task.encode("utf-8", "surrogatepass"), safe="")
    path = re.sub(r"\{thread_id\}", wire or "%20", template).lstrip("/")
    headers: dict[str, str] = {}
    if content_type:
        headers["content-type"] = content_type
    if key:
        headers["x-api-key"] = key.replace("\x00", "")
    before = _fingerprint(live)
    response = live.http.request(
        method, path, content=body if method == "POST" else None, headers=headers
    )
    assert response.status_code < 500, (method, path, body[:120], response.text[:300])
    if response.status_code >= 400 or method == "GET":
        assert _fingerprint(live) == before, (method, path, response.status_code)
    if response.headers.get("content-type", "").startswith("application/json"):
        assert isinstance(response.json(), dict | list)
