"""JSON from outside the process, parsed so that no body can reach a 500.

Why not `json.loads` alone: a body nested a thousand levels deep makes it
raise `RecursionError` (and what walks the result afterwards may recurse
too), and `"\\ud800"` decodes to a lone surrogate that SQLite, Slack and
GitHub cannot encode, so the request failed deep inside with a traceback.
Here both are refused up front with an error that says where.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "BadJson", "loads_bounded"]

# Our own payloads nest a few levels; GitHub's issue events about six.
MAX_DEPTH = 32


class BadJson(ValueError):
    """The body is not JSON we accept; the message says why, and where when it can."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field  # the top-level key the fault is under, if any


def loads_bounded(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse `raw` as JSON, refusing deep nesting and text that is not valid Unicode.

    Raises:
        BadJson: not JSON, not UTF-8, nested deeper than `max_depth`, or a string
            (key or value) with a lone surrogate.
    """
    try:
        value = json.loads(raw)
    except RecursionError:
        raise BadJson(f"the JSON is nested too deeply (at most {max_depth} levels)") from None
    except UnicodeDecodeError:
        raise BadJson("the body is not UTF-8") from None
    except ValueError as exc:
        raise BadJson(f"the body is not valid JSON ({exc.args[0].split(':')[0]})") from None
    _check(value, max_depth)
    return value


def _check(value: Any, max_depth: int) -> None:
    """Walk without recursion: depth and every string's encodability."""
    # (value, depth, the top-level key it is under)
    stack: list[tuple[Any, int, str | None]] = [(value, 1, None)]
    while stack:
        item, depth, field = stack.pop()
        if isinstance(item, str):
            _encodable(item, field)
        elif isinstance(item, dict | list):
            if depth > max_depth:
                raise BadJson(f"the JSON is nested too deeply (at most {max_depth} levels)", field)
            if isinstance(item, dict):
                for key, child in item.items():
                    under = field if depth > 1 else key
                    _encodable(key, under)
                    stack.append((child, depth + 1, under))
            else:
                stack.extend((child, depth + 1, field) for child in item)


def _encodable(text: str, field: str | None) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        name = _printable(field) if field is not None else None
        where = f"{name}: " if name else ""
        raise BadJson(
            f"{where}text with an unpaired surrogate (U+D800 to U+DFFF) cannot be stored",
            name,
        ) from None


def _printable(text: str) -> str:
    return text[:60].encode("utf-8", "backslashreplace").decode("utf-8")
