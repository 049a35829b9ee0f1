"""Which URLs a page, a report or an API may hand on as a link.

A URL read from outside (GitHub, Confluence, a task's payload) is linked
only when it is http(s): a `javascript:` or `data:` one never reaches an href.
"""

from __future__ import annotations

__all__ = ["web_url"]


def web_url(url: object) -> str | None:
    """`url` when it is an http(s) URL, else None (not a string, another scheme, empty)."""
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None
