"""Validating GitHub's replies: the one base model and the one error for a bad field.

GitHub's JSON is external input. The readers (`pulls.py`, `ci.py`) turn each
reply into a small frozen record through these, so a field that is missing or
of the wrong type is a `GitHubError` naming it, never a KeyError deep in a
node; fields GitHub adds over time are ignored.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_team.integrations.github.intake import GitHubError

__all__ = ["Wire", "checked"]


class Wire(BaseModel):
    # GitHub adds fields over time: unknown ones are ignored, the ones we use are checked.
    model_config = ConfigDict(extra="ignore")


W = TypeVar("W", bound=Wire)


def checked(model: type[W], data: Any, what: str) -> W:
    """`data` validated as `model`.

    Raises:
        GitHubError: a field is missing or of the wrong type; the message names it.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        fields = ", ".join(".".join(map(str, e["loc"])) or "body" for e in exc.errors())
        raise GitHubError(f"GitHub sent a malformed {what} (bad {fields})") from None
