"""`outgoing`: the redaction of a Confluence write's body, ADF string included."""

from __future__ import annotations

import json
from typing import Any

from agent_team.common.redact import MASK, redact
from agent_team.integrations.confluence import adf
from agent_team.integrations.confluence.client import outgoing

PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def body(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": "Notes",
        "body": {"representation": "atlas_doc_format", "value": adf.dumps(doc)},
    }


def texts(*words: str) -> dict[str, Any]:
    return {
        "type": "doc",
        "version": 1,
        "content": [{"type": "paragraph", "content": [{"type": "text", "text": w} for w in words]}],
    }


def test_a_clean_body_is_sent_byte_for_byte_even_where_its_json_text_looks_like_a_credential() -> (
    None
):
    """`http://a` then `b@c` in two nodes: as one JSON text they look like a URL with a password.

    A pattern run over the text would eat the quotes between them and send broken
    JSON; parsed, each string is clean and the body goes out exactly as drafted.
    """
    payload = body(texts("see http://a", "b@c"))
    value = payload["body"]["value"]
    assert redact(value) != value, "the trap: redacting the text would change it"
    assert outgoing(payload) == payload


def test_a_token_in_a_node_is_redacted_in_that_node_only() -> None:
    payload = body(texts(f"key {PAT}", "http://a", "b@c"))
    sent = outgoing({**payload, "title": f"Notes {PAT}"})
    assert sent["title"] == f"Notes {MASK}"
    doc = json.loads(sent["body"]["value"])
    assert [n["text"] for n in doc["content"][0]["content"]] == [f"key {MASK}", "http://a", "b@c"]
    assert sent["body"]["representation"] == "atlas_doc_format"


def test_known_secrets_are_redacted_too() -> None:
    sent = outgoing({"version": {"number": 2, "message": "by s3cr3t-value"}}, ("s3cr3t-value",))
    assert sent == {"version": {"number": 2, "message": f"by {MASK}"}}
