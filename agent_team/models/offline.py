"""A deterministic local chat model, so the whole pipeline runs with no network (the default).

`OfflineChatModel` is a real langchain-core `BaseChatModel`: it implements
`bind_tools`, so the stock `with_structured_output(schema, include_raw=True)`
(tool-calling path) works on it exactly as on a provider's model, and every
reply carries `usage_metadata`, so budget accounting is exercised too.

It reads the prompt built by `agent_team.models.prompts` (the `<issue>`,
`<title>`, `<body>`, `<clarifications>`/`<answer>` and `<feedback>` tags) and
answers by these rules. "The issue text" is the body followed by every
clarification answer, each as its own paragraph. The title is never counted.

Clarify (tool `ClarifyDecision`):

- The issue is clear exactly when the issue text has at least 12 words
  (white-space separated). 11 words asks, 12 does not.
- The first question is "What should be done, and how will we know it is
  done? (The issue says only: '<body>')" with the body's white space collapsed,
  or "... (The issue has no description.)" for an empty body.
- After answers that still leave it unclear, the question says why the last
  one was not enough and asks for the rest: "Your answer ('<last answer>')
  still leaves the issue too short to plan: <n> words so far, 12 needed.
  Which files or behaviour should change, and what check shows it works?"
  (the answer's white space collapsed, cut at 80 characters).

Plan (tool `Plan`):

- Steps: the issue text's bullet (`-`, `*`, `+`) and numbered (`1.`, `1)`)
  lines, in order, markers removed. With none, each sentence of the issue text
  is a step. With no text at all, the one step is "Implement: <title>".
- Each `<note>` of a `<notes_from_people>` block adds a step after them:
  "Take into account: <note>".
- If a `<feedback>` block is present, a last step is added:
  "Address review feedback: <feedback>".
- Summary: the title; with no title, the first step.
- Risks, in this order, at least one:
  "No automated tests mentioned" when the issue text does not contain "test"
  (any case); "Changes stored data: needs a migration and a way back" when it
  mentions "migrat", "schema" or "database"; otherwise "No specific risks
  found; watch for regressions in nearby code".

Confluence draft (tool `ConfluenceDraft`):

- Steps as for the plan (bullets, else sentences, else "Implement: <title>"),
  at most 6; with `<feedback>`, "Address review feedback: <feedback>" is added.
- Title "Design: <title>" ("Design notes" with no title). Summary
  "This page documents: <title>." followed by the first sentence of the body.
- Mermaid: `flowchart TD`, node `n0["<title>"]`, then `n<i-1> --> n<i>["<step i>"]`
  for each step; labels keep letters, digits, spaces and `.,:;'-/_`.
- With no `<page>` block: `body_adf` is a compact ADF doc: heading (level 2)
  "Summary", the summary paragraph, heading "Diagram", the diagram as a
  `codeBlock` (language mermaid), heading "Steps", a bullet list of the steps.
  With a `<page>` block: `body_adf` is empty and `heading` is the page's first
  `<heading>` (None when it has none).

Usage (`usage_metadata`): input_tokens = ceil(characters of all message texts
joined by newlines / 4); output_tokens = ceil(characters of the reply / 4),
where a tool call's reply is its arguments as JSON with sorted keys;
total_tokens is their sum. Tool schemas are not counted.

Without a bound tool (or with a tool it has no rule for) it answers a short
fixed text and no tool call. Same prompt in, same answer and usage out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import unescape
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from agent_team.common.model_spec import OFFLINE_SPEC
from agent_team.models._text import bullet_item, sentences, words
from agent_team.models.schemas import ClarifyDecision, ConfluenceDraft, Plan
from agent_team.models.tokens import estimate_tokens, message_text, reply_text

__all__ = ["CLEAR_MIN_WORDS", "OFFLINE_SPEC", "OfflineChatModel"]

CLEAR_MIN_WORDS = 12

_TITLE = re.compile(r"<title>(.*?)</title>", re.DOTALL)
_BODY = re.compile(r"<body>\n(.*?)\n</body>", re.DOTALL)
_CLARIFICATIONS = re.compile(r"<clarifications>(.*?)</clarifications>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_FEEDBACK = re.compile(r"<feedback>\n(.*?)\n</feedback>", re.DOTALL)
_NOTES = re.compile(r"<notes_from_people>(.*?)</notes_from_people>", re.DOTALL)
_NOTE = re.compile(r"<note>(.*?)</note>", re.DOTALL)
_PAGE = re.compile(r"<page>\n(.*?)\n</page>", re.DOTALL)
_HEADING = re.compile(r"<heading>(.*?)</heading>", re.DOTALL)
_LABEL_CHARS = re.compile(r"[^A-Za-z0-9 .,:;'/_-]")
MAX_DRAFT_STEPS = 6


@dataclass(frozen=True)
class _Issue:
    title: str
    body: str
    answers: list[str]
    feedback: str | None
    raw: str = ""
    notes: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return "\n\n".join([self.body, *self.answers]).strip()


def _read_issue(prompt: str) -> _Issue:
    """What the prompt's tags say; a prompt without them is all body (for ad-hoc use)."""
    title = _TITLE.search(prompt)
    body = _BODY.search(prompt)
    block = _CLARIFICATIONS.search(prompt)
    feedback = _FEEDBACK.search(prompt)
    notes = _NOTES.search(prompt)
    return _Issue(
        title=unescape(title.group(1)).strip() if title else "",
        body=unescape(body.group(1)) if body else (prompt if title is None else ""),
        answers=[unescape(a) for a in _ANSWER.findall(block.group(1))] if block else [],
        feedback=unescape(feedback.group(1)).strip() if feedback else None,
        raw=prompt,
        notes=tuple(unescape(n).strip() for n in _NOTE.findall(notes.group(1))) if notes else (),
    )


_ANSWER_SHOWN = 80


def _clarify(issue: _Issue) -> ClarifyDecision:
    """The clarify rule: clear exactly when the issue text has at least 12 words.

    A second round never asks the first question again: it names the answer
    that was not enough and what is still missing.
    """
    count = words(issue.text)
    if count >= CLEAR_MIN_WORDS:
        return ClarifyDecision(clear=True, question=None)
    if issue.answers:
        last = " ".join(issue.answers[-1].split())
        if len(last) > _ANSWER_SHOWN:
            last = last[: _ANSWER_SHOWN - 1] + "…"
        return ClarifyDecision(
            clear=False,
            question=f"Your answer ('{last}') still leaves the issue too short to plan: "
            f"{count} words so far, {CLEAR_MIN_WORDS} needed. Which files or behaviour "
            "should change, and what check shows it works?",
        )
    body = " ".join(issue.body.split())
    said = f"The issue says only: '{body}'" if body else "The issue has no description."
    return ClarifyDecision(
        clear=False,
        question=f"What should be done, and how will we know it is done? ({said})",
    )


def _plan(issue: _Issue) -> Plan:
    """The plan rule: bullets (else sentences) become steps; fixed risks; feedback step last."""
    text = issue.text
    steps = [item for item in map(bullet_item, text.splitlines()) if item is not None]
    if not steps:
        steps = sentences(text)
    if not steps:
        steps = [f"Implement: {issue.title}" if issue.title else "Implement the request."]
    steps += [f"Take into account: {' '.join(note.split())}" for note in issue.notes]
    if issue.feedback:
        steps.append(f"Address review feedback: {' '.join(issue.feedback.split())}")
    lowered = text.lower()
    risks: list[str] = []
    if "test" not in lowered:
        risks.append("No automated tests mentioned")
    if any(word in lowered for word in ("migrat", "schema", "database")):
        risks.append("Changes stored data: needs a migration and a way back")
    if not risks:
        risks.append("No specific risks found; watch for regressions in nearby code")
    return Plan(summary=issue.title or steps[0], steps=steps, risks=risks)


def _label(text: str) -> str:
    cleaned = " ".join(_LABEL_CHARS.sub(" ", text).split())
    return cleaned[:60] or "step"


def _confluence(issue: _Issue) -> ConfluenceDraft:
    """The draft rule: plan-like steps, a flowchart of them, a small ADF page."""
    text = issue.text
    steps = [item for item in map(bullet_item, text.splitlines()) if item is not None]
    steps = (steps or sentences(text))[:MAX_DRAFT_STEPS] or [
        f"Implement: {issue.title}" if issue.title else "Implement the request."
    ]
    if issue.feedback:
        steps.append(f"Address review feedback: {' '.join(issue.feedback.split())}")
    title = f"Design: {issue.title}" if issue.title else "Design notes"
    first = sentences(issue.body)[:1]
    summary = " ".join([f"This page documents: {issue.title or 'the change'}.", *first])
    lines = ["flowchart TD", f'    n0["{_label(issue.title or "change")}"]']
    lines += [f'    n{i - 1} --> n{i}["{_label(step)}"]' for i, step in enumerate(steps, start=1)]
    mermaid = "\n".join(lines)
    page = _PAGE.search(issue.raw)
    if page is not None:
        headings = [unescape(h).strip() for h in _HEADING.findall(page.group(1))]
        return ConfluenceDraft(
            title=title,
            summary=summary,
            mermaid=mermaid,
            body_adf="",
            heading=headings[0] if headings else None,
        )

    def heading(words_: str) -> dict[str, object]:
        return {
            "type": "heading",
            "attrs": {"level": 2},
            "content": [{"type": "text", "text": words_}],
        }

    def para(words_: str) -> dict[str, object]:
        return {"type": "paragraph", "content": [{"type": "text", "text": words_}]}

    code = {"type": "text", "text": mermaid}
    items = [{"type": "listItem", "content": [para(step)]} for step in steps]
    doc = {
        "type": "doc",
        "version": 1,
        "content": [
            heading("Summary"),
            para(summary),
            heading("Diagram"),
            {"type": "codeBlock", "attrs": {"language": "mermaid"}, "content": [code]},
            heading("Steps"),
            {"type": "bulletList", "content": items},
        ],
    }
    body_adf = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    return ConfluenceDraft(title=title, summary=summary, mermaid=mermaid, body_adf=body_adf)


_RULES: dict[str, Callable[[_Issue], BaseModel]] = {
    ClarifyDecision.__name__: _clarify,
    Plan.__name__: _plan,
    ConfluenceDraft.__name__: _confluence,
}


def _tool_names(tools: Sequence[Any]) -> list[str]:
    names: list[str] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def _chosen_tool(names: list[str], tool_choice: Any) -> str | None:
    """The tool to answer with: the one `tool_choice` names, else the first we have a rule for."""
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        tool_choice = function.get("name") if isinstance(function, dict) else None
    if isinstance(tool_choice, str) and tool_choice in names and tool_choice in _RULES:
        return tool_choice
    return next((name for name in names if name in _RULES), None)


class OfflineChatModel(BaseChatModel):
    """A chat model that answers from fixed rules (see the module docstring); no network.

    Why a real `BaseChatModel` and not a stub: nodes and `ModelCaller` then run
    the exact code path they run against a provider (bind_tools,
    with_structured_output, usage_metadata), so offline runs test that path.
    """

    model_name: str = OFFLINE_SPEC

    @property
    def _llm_type(self) -> str:
        return "agent-team-offline"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools the way provider models do: as OpenAI-format tool schemas.

        Args:
            tools: pydantic classes, JSON schemas, functions or tools.
            tool_choice: a tool name, "any" or "auto".
            kwargs: passed on to `bind` (e.g. LangSmith's structured-output tag).

        Returns:
            This model with `tools` and `tool_choice` bound for `_generate`.
        """
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # The issue is in the last human message that has one; ad-hoc prompts use the last.
        human = [message_text([m]) for m in messages if isinstance(m, HumanMessage)]
        prompt = ([text for text in human if "<issue>" in text] or human or [""])[-1]
        tool = _chosen_tool(_tool_names(kwargs.get("tools") or []), kwargs.get("tool_choice"))
        if tool is None:
            names = ", ".join(_RULES)
            message = AIMessage(
                content=f"Offline model: no network, no free-form answers. Bind one of {names} "
                "(with_structured_output) for a structured answer."
            )
        else:
            args = _RULES[tool](_read_issue(prompt)).model_dump(mode="json")
            digest = hashlib.sha256(f"{tool}\n{prompt}".encode()).hexdigest()[:16]
            message = AIMessage(
                content="",
                tool_calls=[{"name": tool, "args": args, "id": f"offline-{digest}"}],
            )
        input_tokens = estimate_tokens(message_text(messages))
        output_tokens = estimate_tokens(reply_text(message))
        message.usage_metadata = UsageMetadata(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )
        message.response_metadata = {"model_name": self.model_name}
        return ChatResult(generations=[ChatGeneration(message=message)])
