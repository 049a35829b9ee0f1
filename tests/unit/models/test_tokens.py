"""The provider-free token estimate."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from agent_team.models.tokens import estimate_tokens, message_text, reply_text


def test_estimate_is_ceil_of_chars_over_four() -> None:
    assert [estimate_tokens("x" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_message_text_joins_messages_and_text_blocks() -> None:
    messages = [
        SystemMessage(content="sys"),
        HumanMessage(
            content=[
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {"url": "u"}},
                "b",
            ]
        ),
    ]
    assert message_text(messages) == "sys\nab"


def test_reply_text_counts_tool_call_arguments() -> None:
    reply = AIMessage(
        content="", tool_calls=[{"name": "Plan", "args": {"b": 1, "a": "é"}, "id": "1"}]
    )
    assert reply_text(reply) == '{"a": "é", "b": 1}'
