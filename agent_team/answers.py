"""The answer grammar of each question kind, shared by every transport.

A person types (or clicks) an answer; this module turns it into the one
normalised value the graph receives, or refuses it with a message listing
what is accepted. Refusal happens before anything is stored, so a bad
answer leaves the question open.
"""

from __future__ import annotations

import re
from typing import Any

from agent_team.exceptions import InvalidAnswerError
from agent_team.task_model import QuestionKind

__all__ = ["PLAN_DECISION_HELP", "PUBLISH_HELP", "parse_answer"]

PLAN_DECISION_HELP = (
    "answer with one of: `approve [comment]`, `revise <feedback>`, "
    "`edit <the full plan>`, `reject [reason]`"
)
PUBLISH_HELP = "answer with one of: `publish [comment]`, `reject [reason]`"

# Longest phrases first, so "ship it" wins over a shorter prefix.
_PLAN_WORDS: dict[str, str] = {
    "request changes": "revise",
    "changes requested": "revise",
    "ship it": "approve",
    "looks good": "approve",
    "approve": "approve",
    "approved": "approve",
    "lgtm": "approve",
    "yes": "approve",
    "ok": "approve",
    "okay": "approve",
    "go": "approve",
    "+1": "approve",
    "👍": "approve",
    "revise": "revise",
    "changes": "revise",
    "redo": "revise",
    "edit": "edit",
    "replace": "edit",
    "reject": "reject",
    "rejected": "reject",
    "no": "reject",
    "cancel": "reject",
    "stop": "reject",
    "👎": "reject",
}
_PUBLISH_WORDS: dict[str, str] = {
    "publish": "publish",
    "approve": "publish",
    "approved": "publish",
    "yes": "publish",
    "lgtm": "publish",
    "ship it": "publish",
    "ok": "publish",
    "👍": "publish",
    "reject": "reject",
    "no": "reject",
    "cancel": "reject",
    "👎": "reject",
}


def _split_keyword(text: str, words: dict[str, str]) -> tuple[str, str] | None:
    lowered = text.lower()
    for phrase in sorted(words, key=len, reverse=True):
        if lowered == phrase or re.match(rf"{re.escape(phrase)}(?=[\s:,.!-]|$)", lowered):
            # Drop one separator after the keyword, but keep a leading "- " bullet of a plan.
            rest = re.sub(r"^\s*[:,.!]?\s*", "", text[len(phrase) :], count=1)
            return words[phrase], rest.strip()
    return None


def parse_answer(kind: str, text: str) -> dict[str, Any]:
    """Normalise a person's answer for a question of `kind`.

    Returns:
        clarify: `{"text": ...}`; plan_decision: `{"decision": approve|revise|
        edit|reject, "text": ...}`; confluence_approval: `{"decision":
        publish|reject, "text": ...}`.

    Raises:
        InvalidAnswerError: the answer does not fit; the message says what does.
    """
    cleaned = text.strip()
    if kind == QuestionKind.CLARIFY:
        if not cleaned:
            raise InvalidAnswerError("the answer is empty; reply with the information asked for")
        return {"text": cleaned}
    if kind == QuestionKind.PLAN_DECISION:
        found = _split_keyword(cleaned, _PLAN_WORDS)
        if found is None:
            raise InvalidAnswerError(
                f"{cleaned[:40]!r} is not a plan decision; {PLAN_DECISION_HELP}"
            )
        decision, rest = found
        if decision == "revise" and not rest:
            raise InvalidAnswerError("`revise` needs feedback: `revise <what to change>`")
        if decision == "edit" and not rest:
            raise InvalidAnswerError("`edit` needs the full plan: `edit <the plan text>`")
        return {"decision": decision, "text": rest}
    if kind == QuestionKind.CONFLUENCE_APPROVAL:
        found = _split_keyword(cleaned, _PUBLISH_WORDS)
        if found is None:
            raise InvalidAnswerError(f"{cleaned[:40]!r} is not a publish decision; {PUBLISH_HELP}")
        decision, rest = found
        return {"decision": decision, "text": rest}
    raise InvalidAnswerError(f"unknown question kind {kind!r}")
