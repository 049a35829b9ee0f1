"""The structured answers the pipeline asks models for.

These pydantic models are sent to providers as tool schemas (through
`with_structured_output`), so their class docstrings and field descriptions
are written *to the model*: they are part of the prompt. Notes for developers
live in comments.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from agent_team.exceptions import InvalidAnswerError
from agent_team.models._text import bullet_item, sentences

__all__ = ["ClarifyDecision", "ConfluenceDraft", "Plan"]


class ClarifyDecision(BaseModel):
    """Decide whether the issue is clear enough to plan. If it is not, ask one question."""

    clear: bool = Field(
        description="True when the issue says what to do and how to tell it is done."
    )
    question: str | None = Field(
        default=None,
        description="When clear is false: the single most useful question for the issue's "
        "author. Leave empty when clear is true.",
    )

    @model_validator(mode="after")
    def _question_when_unclear(self) -> ClarifyDecision:
        # An unclear verdict with nothing to ask would leave the gate with no question.
        question = (self.question or "").strip()
        if not self.clear and not question:
            raise ValueError("question is required (and must not be blank) when clear is false")
        # A clear issue asks nothing; drop whatever the model put there.
        self.question = question if not self.clear else None
        return self


def _clean_items(items: list[str]) -> list[str]:
    return [" ".join(item.split()) for item in items if item.strip()]


class Plan(BaseModel):
    """An implementation plan for the issue: a one-paragraph summary, ordered steps, risks."""

    summary: str = Field(min_length=1, description="One paragraph: what will change and why.")
    steps: list[str] = Field(
        min_length=1, description="Ordered, concrete steps; each one line, imperative mood."
    )
    risks: list[str] = Field(
        default_factory=list,
        description="What could go wrong or is unknown (missing tests, data migrations, ...).",
    )

    @field_validator("summary")
    @classmethod
    def _summary_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("summary must not be blank")
        return value.strip()

    @field_validator("steps")
    @classmethod
    def _steps_not_blank(cls, value: list[str]) -> list[str]:
        # Blank entries are noise from a model, not steps; a plan needs at least one real one.
        cleaned = _clean_items(value)
        if not cleaned:
            raise ValueError("a plan needs at least one non-blank step")
        return cleaned

    @field_validator("risks")
    @classmethod
    def _risks_not_blank(cls, value: list[str]) -> list[str]:
        return _clean_items(value)

    def to_markdown(self) -> str:
        """The plan as Markdown for people: title, summary, numbered steps, risks.

        `Plan.from_text` reads this format back to the same plan, so a reviewer
        can copy it into an `edit` answer and change only what they need.
        """
        summary = self.summary
        if bullet_item(summary) is not None or _heading(summary) is not None:
            summary = f"Summary: {summary}"  # else it would read back as a step or a heading
        lines = ["# Plan", "", summary, "", "## Steps", ""]
        lines += [f"{number}. {step}" for number, step in enumerate(self.steps, start=1)]
        lines += ["", "## Risks", ""]
        lines += [f"- {risk}" for risk in self.risks] or [_NO_RISKS]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_text(cls, text: str) -> Plan:
        """Read a plan a person wrote (the `edit <full plan text>` answer).

        Rules, in order:

        - Lines under a heading that starts with "Risk" (`## Risks`, `Risks:`,
          `**Risks**`) are risks, bullet or not, until the next heading.
          `Risks: a; b` on one line gives two risks. "None" / "None identified"
          there means no risks.
        - Other bullet (`-`, `*`, `+`) and numbered (`1.`, `1)`) lines are the
          steps, in order; an indented line right under one continues it.
        - The summary is the text after a `Summary:` label if there is one,
          else the first paragraph of prose before the first step, else the
          first step.
        - With no bullet lines at all, every sentence of the prose after the
          summary paragraph is a step (or of the summary paragraph itself when
          it is the only prose).
        - Other headings (`# Plan`, `## Steps`) are dropped.

        Args:
            text: the plan as typed.

        Returns:
            The plan.

        Raises:
            InvalidAnswerError: the text has no steps (it is empty, or holds only risks).
        """
        parsed = _parse_plan_text(text)
        if not parsed["steps"]:
            raise InvalidAnswerError(
                "the plan text has no steps; write each step on its own '- ' or '1.' line "
                "(or as sentences), with risks under a 'Risks' heading"
            )
        return cls.model_validate(parsed)


_NO_RISKS = "None identified."
_NONE_RISK = re.compile(r"^(?:none|none identified|n/a|-)\.?$", re.IGNORECASE)
_MARKDOWN_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<name>.*?)\s*#*\s*$")
_LABEL_HEADING = re.compile(
    r"^\s*(?:\*\*|__)?(?P<name>summary|steps|plan|approach|tasks|risks?)(?:\*\*|__)?\s*:?"
    r"\s*(?:\*\*|__)?\s*(?P<rest>.*?)\s*$",
    re.IGNORECASE,
)


def _heading(line: str) -> tuple[str, str] | None:
    """(section, inline text) for a heading line, or None for any other line."""
    match = _MARKDOWN_HEADING.match(line)
    if match:
        name, rest = match.group("name"), ""
    else:
        match = _LABEL_HEADING.match(line)
        if not match:
            return None
        name, rest = match.group("name"), match.group("rest")
        # "Plan the rollout" is prose that happens to start with a label word: a label
        # heading has nothing after it, or its text after a colon.
        if rest and ":" not in line:
            return None
    lowered = name.strip("*_: ").lower()
    if lowered.startswith("risk"):
        return "risks", rest
    if lowered == "summary":
        return "summary", rest
    return "body", rest


def _parse_plan_text(text: str) -> dict[str, Any]:
    section = "body"
    summary_lines: list[str] = []
    risks: list[str] = []
    steps: list[str] = []
    paragraphs: list[list[str]] = []  # prose in the body, split at blank lines
    prose_before_steps = 0  # paragraphs seen before the first step
    previous_was_step = False
    paragraph_open = False

    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            previous_was_step = paragraph_open = False
            if section == "summary" and summary_lines:
                section = "body"  # the summary is one paragraph
            continue
        heading = _heading(line) if bullet_item(line) is None else None
        if heading is not None:
            section, rest = heading
            previous_was_step = paragraph_open = False
            if rest and section == "risks":
                risks += [part.strip() for part in rest.split(";") if part.strip()]
            elif rest and section == "summary":
                summary_lines.append(rest)
            continue
        item = bullet_item(line)
        if section == "risks":
            risks.append(item if item is not None else line.strip())
        elif section == "summary" and item is None:
            summary_lines.append(line.strip())
        elif item is not None:
            if not steps:
                prose_before_steps = len(paragraphs)
            steps.append(item)
            previous_was_step, paragraph_open = True, False
        elif previous_was_step and raw[:1].isspace():
            steps[-1] += " " + line.strip()
        else:
            if not paragraph_open:
                paragraphs.append([])
                paragraph_open = True
            paragraphs[-1].append(line.strip())
            previous_was_step = False

    prose = [" ".join(paragraph) for paragraph in paragraphs]
    summary = " ".join(summary_lines)
    first_prose_used = False
    if not summary and prose and (not steps or prose_before_steps > 0):
        summary, first_prose_used = prose[0], True
    if not steps:
        remaining = prose[1:] if first_prose_used else prose
        steps = [s for paragraph in (remaining or prose[:1]) for s in sentences(paragraph)]
    if not summary and steps:
        summary = steps[0]
    return {
        "summary": summary,
        "steps": steps,
        "risks": [risk for risk in risks if not _NONE_RISK.match(risk.strip())],
    }


class ConfluenceDraft(BaseModel):
    """A Confluence page documenting the change, with a Mermaid diagram of it.

    For a new page, give the whole body as an ADF document. For an existing
    page (a <page> block is present) leave body_adf empty: only its Mermaid
    diagram is changed, or a new one is added after the heading you name.
    """

    title: str = Field(min_length=1, description="The page title (new pages only matter).")
    summary: str = Field(
        min_length=1, description="One paragraph: what the page documents or what changed."
    )
    mermaid: str = Field(
        min_length=1,
        description="Mermaid source of a diagram of the change (e.g. `flowchart TD ...`), "
        "without code fences.",
    )
    body_adf: str = Field(
        default="",
        description="New pages: the complete body as an Atlassian Document Format JSON "
        'document ({"type": "doc", "version": 1, "content": [...]}) that includes the '
        'diagram as a codeBlock with attrs.language "mermaid". Existing pages: empty.',
    )
    heading: str | None = Field(
        default=None,
        description="Existing pages without a Mermaid diagram: the exact text of the heading "
        "to put the new diagram after.",
    )

    @field_validator("title", "summary", "mermaid")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()
