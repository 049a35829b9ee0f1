"""A provider-free token estimate, used before a call (budget check) and when a reply has no usage.

Why characters / 4: it is the usual rule of thumb for English text with BPE
tokenizers, needs no tokenizer package per provider, and is deterministic, so
the offline model's "usage" and the budget estimate agree exactly in tests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["CHARS_PER_TOKEN", "estimate_tokens", "message_text", "reply_text"]

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimate the tokens of a text as ceil(characters / 4).

    Args:
        text: any text.

    Returns:
        The estimate; 0 only for the empty string.
    """
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _content_text(message: BaseMessage) -> str:
    # `content` is a string or a list of blocks (text, images, ...); only text is counted.
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


def message_text(messages: Sequence[BaseMessage]) -> str:
    """The text of a prompt as one string: every message's text, one per line."""
    return "\n".join(_content_text(message) for message in messages)


def reply_text(message: BaseMessage) -> str:
    """The text a reply spent output tokens on: its content plus its tool calls' arguments."""
    text = _content_text(message)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            text += json.dumps(call["args"], sort_keys=True, ensure_ascii=False)
    return text
