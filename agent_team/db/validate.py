"""Checks on values before they reach SQL, so a refusal names the field and what is allowed."""

from __future__ import annotations

import json
from enum import StrEnum

from agent_team.exceptions import LedgerInputError, ModelsDownError

__all__ = ["require_json", "require_member", "require_park_reason"]


def require_member(value: str, allowed: type[StrEnum], what: str) -> str:
    """Return `value` if it is one of the enum's values, else raise LedgerInputError."""
    choices = [member.value for member in allowed]
    if value not in choices:
        raise LedgerInputError(f"{what} {value!r} is not one of: {', '.join(choices)}")
    return value


def require_json(text: str | None, what: str) -> None:
    """Raise LedgerInputError unless `text` is None or parses as JSON."""
    if text is None:
        return
    try:
        json.loads(text)
    except (TypeError, ValueError) as exc:
        raise LedgerInputError(f"{what} is not valid JSON ({exc}); nothing was stored") from exc


def require_park_reason(reason: str | None) -> str:
    """The reason a task parks with: it says how the task goes on, so there must be one.

    `model_unavailable` is refused here: only `park_for_models` parks that way,
    because it also sets the pause after which the task continues by itself.
    """
    if not reason:
        raise LedgerInputError("a parked task needs a parked_reason saying how to unpark it")
    if reason == ModelsDownError.parked_reason:
        raise LedgerInputError("park a task on its models with park_for_models (it sets the pause)")
    return reason
