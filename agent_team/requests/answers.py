"""The answer grammar of each question kind, shared by every transport.

A person types (or clicks) an answer; this module turns it into the one
normalised value the graph receives, or refuses it with a message listing
what is accepted. Refusal happens before anything is stored, so a bad
answer leaves the question open.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agent_team import db
from agent_team.common.timefmt import utc_text
from agent_team.exceptions import InvalidAnswerError
from agent_team.models.schemas import Plan
from agent_team.task_model import QuestionKind, QuestionStatus

__all__ = [
    "ANSWER_MODELS",
    "PLAN_DECISION_HELP",
    "PR_DECISION_HELP",
    "PUBLISH_HELP",
    "PULL_REQUEST_HELP",
    "ClarifyAnswer",
    "FailedCheck",
    "FeedbackItem",
    "PlanDecisionAnswer",
    "PrDecisionAnswer",
    "PublishAnswer",
    "PullRequestAnswer",
    "closed_message",
    "parse_answer",
]

PLAN_DECISION_HELP = (
    "answer with one of: `approve [comment]`, `revise <feedback>`, "
    "`edit <the full plan>`, `reject [reason]`"
)
PUBLISH_HELP = "answer with one of: `publish [comment]`, `revise <feedback>`, `reject [reason]`"
PR_DECISION_HELP = (
    "answer with one of: `fix [note]` (one follow-up commit), `ignore` (leave it as it is), "
    "`take over` (the agent stops working on this pull request)"
)
PULL_REQUEST_HELP = (
    "this gate is answered by GitHub: review the pull request, merge it or close it; "
    "to stop the task: `agent-team cancel <task>`"
)

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
    "revise": "revise",
    "changes": "revise",
    "request changes": "revise",
    "changes requested": "revise",
    "redo": "revise",
    "reject": "reject",
    "no": "reject",
    "cancel": "reject",
    "👎": "reject",
}

_PR_DECISION_WORDS: dict[str, str] = {
    "fix": "fix",
    "fix it": "fix",
    "retry": "fix",
    "try again": "fix",
    "ignore": "ignore",
    "leave it": "ignore",
    "skip": "ignore",
    "take over": "takeover",
    "takeover": "takeover",
    "mine": "takeover",
    "stop": "takeover",
}

# What may follow an approval word other than `publish`: punctuation and spaces only.
_STANDS_ALONE = re.compile(r"[\s.!]*")


def _split_keyword(text: str, words: dict[str, str]) -> tuple[str, str] | None:
    lowered = text.lower()
    for phrase in sorted(words, key=len, reverse=True):
        if lowered == phrase or re.match(rf"{re.escape(phrase)}(?=[\s:,.!-]|$)", lowered):
            # Drop one separator after the keyword, but keep a leading "- " bullet of a plan.
            rest = re.sub(r"^\s*[:,.!]?\s*", "", text[len(phrase) :], count=1)
            return words[phrase], rest.strip()
    return None


def _decision_from_text(data: Any, words: dict[str, str], what: str, accepted: str) -> Any:
    """Typed text ("lgtm, nice") -> {"decision", "text"}; structured input passes through."""
    if not isinstance(data, str):
        return data
    found = _split_keyword(data.strip(), words)
    if found is None:
        raise ValueError(f"{data.strip()[:40]!r} is not {what}; {accepted}")
    return {"decision": found[0], "text": found[1]}


class ClarifyAnswer(BaseModel):
    """Free text with the missing details."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    text: str

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        return {"text": data} if isinstance(data, str) else data

    @field_validator("text")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the answer is empty; reply with the information asked for")
        return value.strip()


class PlanDecisionAnswer(BaseModel):
    """approve / revise / edit / reject, with the text each needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    decision: Literal["approve", "revise", "edit", "reject"]
    text: str = ""

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        return _decision_from_text(data, _PLAN_WORDS, "a plan decision", PLAN_DECISION_HELP)

    @model_validator(mode="after")
    def _text_where_needed(self) -> PlanDecisionAnswer:
        if self.decision == "revise" and not self.text.strip():
            raise ValueError("`revise` needs feedback: `revise <what to change>`")
        if self.decision == "edit":
            if not self.text.strip():
                raise ValueError("`edit` needs the full plan: `edit <the plan text>`")
            Plan.from_text(self.text)  # refuse a plan with no steps now, not mid-build
        return self


class PublishAnswer(BaseModel):
    """publish / revise / reject of an exact Confluence change."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    decision: Literal["publish", "revise", "reject"]
    text: str = ""

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        parsed = _decision_from_text(data, _PUBLISH_WORDS, "a publish decision", PUBLISH_HELP)
        if isinstance(data, str) and parsed.get("decision") == "publish":
            # A publish is a write nobody can take back: only `publish` takes a comment.
            # "yes but not yet" or "ok, but fix the heading first" is not an approval.
            if re.match(r"publish(?=[\s:,.!-]|$)", data.strip().lower()):
                return parsed
            if not _STANDS_ALONE.fullmatch(parsed["text"]):
                raise ValueError(
                    f"{data.strip()[:40]!r} is not a plain approval; to publish with a comment "
                    f"write `publish <comment>`, otherwise {PUBLISH_HELP}"
                )
            parsed["text"] = ""
        return parsed

    @model_validator(mode="after")
    def _feedback_for_revise(self) -> PublishAnswer:
        if self.decision == "revise" and not self.text.strip():
            raise ValueError("`revise` needs feedback: `revise <what to change>`")
        return self


class FeedbackItem(BaseModel):
    """One review, review comment or PR comment that asks for a change."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str = Field(min_length=1, max_length=200)  # its `pr_events` key
    kind: Literal["review", "review_comment", "comment"]
    id: int
    user: str = Field(min_length=1, max_length=100)
    body: str = Field(max_length=4000)
    path: str | None = Field(default=None, max_length=1000)
    line: int | None = None
    # The first comment of its review thread: where the reply goes, which thread resolves.
    thread_comment_id: int | None = None
    url: str | None = Field(default=None, max_length=1000)


class FailedCheck(BaseModel):
    """A red check on the head commit, with what its log says (redacted)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, max_length=300)
    conclusion: str = Field(max_length=50)
    url: str | None = Field(default=None, max_length=1000)
    excerpt: str = Field(default="", max_length=4000)
    rerun: bool = False  # its failed jobs were rerun once on this head already


class PullRequestAnswer(BaseModel):
    """What happened on the pull request: the watcher's answer to the PR gate.

    People do not type it (the text form is refused with how to answer instead):
    GitHub answers, through the watcher, as the reviewer who wrote the feedback.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    decision: Literal["merged", "closed", "feedback", "ci_failed"]
    text: str = Field(default="", max_length=4000)
    head_sha: str | None = Field(default=None, max_length=64)
    items: tuple[FeedbackItem, ...] = Field(default=(), max_length=50)
    checks: tuple[FailedCheck, ...] = Field(default=(), max_length=20)

    @model_validator(mode="before")
    @classmethod
    def _not_typed(cls, data: Any) -> Any:
        if isinstance(data, str):
            raise ValueError(PULL_REQUEST_HELP)
        return data

    @model_validator(mode="after")
    def _what_each_needs(self) -> PullRequestAnswer:
        if self.decision == "feedback" and not self.items:
            raise ValueError("feedback names at least one review or comment")
        if self.decision == "ci_failed" and not self.checks:
            raise ValueError("a CI failure names at least one failed check")
        return self


class PrDecisionAnswer(BaseModel):
    """fix / ignore / take over, when the loop after the PR needs a person.

    `merged` and `closed` are GitHub's: the watcher ends the question with them
    when the PR is merged or closed meanwhile (a person cannot type them).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    decision: Literal["fix", "ignore", "takeover", "merged", "closed"]
    text: str = Field(default="", max_length=4000)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        return _decision_from_text(data, _PR_DECISION_WORDS, "a decision", PR_DECISION_HELP)


ANSWER_MODELS: dict[str, type[BaseModel]] = {
    QuestionKind.CLARIFY.value: ClarifyAnswer,
    QuestionKind.PLAN_DECISION.value: PlanDecisionAnswer,
    QuestionKind.CONFLUENCE_APPROVAL.value: PublishAnswer,
    QuestionKind.PULL_REQUEST.value: PullRequestAnswer,
    QuestionKind.PR_DECISION.value: PrDecisionAnswer,
}


def _reason(exc: ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    ctx_error = (error.get("ctx") or {}).get("error")
    if isinstance(ctx_error, InvalidAnswerError | ValueError):
        return str(ctx_error)
    return str(error.get("msg", "invalid answer")).removeprefix("Value error, ")


def parse_answer(kind: str, text: str | dict[str, Any]) -> dict[str, Any]:
    """Normalise a person's answer for a question of `kind`.

    The same models validate the resume value inside the graph
    (`interrupt(response_schema=...)`), so a value the coordinator accepted is
    never refused by the gate node, and a refused one is never saved.

    Returns:
        clarify: `{"text": ...}`; plan_decision: `{"decision": approve|revise|
        edit|reject, "text": ...}`; confluence_approval: `{"decision":
        publish|revise|reject, "text": ...}`.

    Raises:
        InvalidAnswerError: the answer does not fit; the message says what does.
    """
    model = ANSWER_MODELS.get(kind)
    if model is None:
        raise InvalidAnswerError(f"unknown question kind {kind!r}")
    try:
        return model.model_validate(text).model_dump()
    except ValidationError as exc:
        raise InvalidAnswerError(_reason(exc)) from None


def _moment(stamp: str | None) -> str:
    """A ledger time in a message: to the second (the ledger keeps microseconds)."""
    return utc_text(db.from_iso(stamp)) if stamp else "an unknown time"


def closed_message(question: db.Question) -> str:
    """What to tell a person whose answer arrived too late, by the question's state."""
    qid = question.question_id
    if question.status == QuestionStatus.ANSWERED:
        return (
            f"question {qid} was already answered by {question.answered_via} "
            f"at {_moment(question.answered_at)}; nothing changed"
        )
    if question.status == QuestionStatus.EXPIRED:
        return (
            f"question {qid} expired at {_moment(question.deadline_at)}; "
            f"reopen it: agent-team reopen {qid}"
        )
    if question.status == QuestionStatus.SUPERSEDED:
        return f"question {qid} was superseded: the task moved on; nothing changed"
    return (
        f"question {qid} is past its deadline ({_moment(question.deadline_at)}); "
        f"an operator can reopen it once it expires: agent-team reopen {qid}"
    )
