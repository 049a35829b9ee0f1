"""The answers' hot path: which requests skip Bolt's dispatch, parsed as Bolt parses them.

Why: in a burst of clicks on one question, Bolt's dispatch (its middleware
chain, listener matching, argument injection, a `WebClient` and context per
request) cost more CPU than our handler's own ledger reads (measured: about
0.2 of 0.35 ms per late answer), and every request of the burst waits for
that CPU behind the others. The two requests a burst is made of, a click on
one of our answer buttons (`block_actions`) and a reply in a question's
thread (an Events API `message`), are recognised here; the listener verifies
their signature itself and calls the same `AnswerHandler` methods Bolt would
have called. Everything else (the modal, URL verification, SSL checks, other
events, anything odd) still goes through Bolt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl

from agent_team.integrations.slack.blocks import ACTION_PREFIX

__all__ = ["HotRequest", "classify"]


@dataclass(frozen=True)
class HotRequest:
    """A request the listener answers without Bolt: the parsed body and what it carries."""

    kind: Literal["action", "message"]
    body: dict[str, Any]
    item: dict[str, Any]  # the action (`actions[0]`, as Bolt picks it) or the event


def classify(body: bytes, content_type: str | None) -> HotRequest | None:
    """The hot request in `body`, or None for anything Bolt should see (or that is malformed).

    Parsed like Bolt's `parse_body`: JSON when the content type says so or the
    body starts with `{`, else a form whose `payload` field is JSON.
    """
    try:
        text = body.decode("utf-8")
        parsed = _parse(text, content_type)
    except (UnicodeDecodeError, ValueError):
        return None  # Bolt's path answers malformed bodies (401 unsigned, 200 signed)
    if not isinstance(parsed, dict):
        return None
    kind = parsed.get("type")
    if kind == "block_actions":
        actions = parsed.get("actions")
        action = actions[0] if isinstance(actions, list) and actions else None
        if isinstance(action, dict) and str(action.get("action_id") or "").startswith(
            ACTION_PREFIX
        ):
            return HotRequest("action", parsed, action)
    elif kind == "event_callback":
        event = parsed.get("event")
        if isinstance(event, dict) and event.get("type") == "message":
            return HotRequest("message", parsed, event)
    return None


def _parse(text: str, content_type: str | None) -> Any:
    if not text:
        return None
    if content_type == "application/json" or text.startswith("{"):
        return json.loads(text)
    if "payload" not in text:
        return None
    payload = dict(parse_qsl(text, keep_blank_values=True)).get("payload")
    return json.loads(payload) if payload is not None else None
