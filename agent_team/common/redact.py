"""Scrub secrets from text before it reaches a log line, an error message or the ledger.

Why a pattern list and not only known values: builder and model output can
echo tokens we never saw (a user's env, a git remote URL), so we also remove
things shaped like credentials.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["MASK", "redact", "redact_deep", "tail"]

_PATTERNS = (
    re.compile(r"xox[abposr]-[A-Za-z0-9-]{8,}"),  # Slack tokens
    re.compile(r"xapp-[A-Za-z0-9-]{8,}"),  # Slack app-level tokens
    re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"github_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"sk-(?:ant-)?[A-Za-z0-9_-]{16,}"),  # Anthropic / OpenAI keys
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"atk_[a-z0-9]{12}_[A-Za-z0-9_-]{20,}"),  # our own keys (agent-team key add)
    re.compile(r"(?i)(authorization:\s*(?:bearer|basic|token)\s+)\S+"),
    re.compile(r"(?i)(https?://)[^/\s:@]+:[^/\s@]+(?=@)"),  # credentials in URLs
)
MASK = "[redacted]"


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Replace known secret values and credential-shaped strings with `[redacted]`."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + MASK, text)
    return text


def redact_deep(value: Any, secrets: Iterable[str | None] = ()) -> Any:
    """`redact` every string inside `value` (dicts' values, lists, tuples): what an API
    returns or a chat message carries, whole. Keys are ours and kept as they are."""
    known = tuple(secrets)
    if isinstance(value, str):
        return redact(value, known)
    if isinstance(value, dict):
        return {key: redact_deep(item, known) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_deep(item, known) for item in value]
    return value


def tail(text: str, limit: int = 4000) -> str:
    """The last `limit` characters, where the error usually is."""
    return text if len(text) <= limit else "…" + text[-limit:]
