"""Our questions as Agent Inbox's `HumanInterrupt`, and its `HumanResponse` as our answers.

Agent Inbox renders an interrupt from four fields: an `action_request`
(`action` and the `args` a person may accept or edit), a `config` saying
which of accept / edit / respond / ignore it offers, and a Markdown
`description`. A person's choice comes back as `{type, args}`. Each question
kind offers only the choices our answer grammar can honour, and every reply
becomes the same normalised answer `answers.parse_answer` produces for Slack
or the CLI, so it is validated the same way and nothing new reaches the graph.

- plan decision: accept = approve; edit = edit (the steps, summary and risks
  as args); respond = revise with the text as feedback; ignore = reject.
- clarify: respond = the missing details; ignore = proceed with what is known.
- Confluence approval: accept = publish; respond = revise; ignore = reject;
  edit = revise with the edited title and wording as the feedback, because a
  publish is irreversible and must be approved on the exact page it writes:
  the writer drafts the edit and the person approves that draft.
- PR decision: accept = fix (one follow-up commit); ignore = ignore; respond =
  the answer grammar (`fix <note>`, `ignore`, `take over`), as a Slack reply;
  edit = the `decision` and `note` args, so take over is one field away too.
- pull request: shown, never answered here. GitHub answers the PR gate (the
  watcher), so it offers no choice and every response is refused with how to
  move the pull request on.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_team.exceptions import InvalidAnswerError
from agent_team.models.schemas import Plan
from agent_team.requests.answers import PR_DECISION_HELP, PULL_REQUEST_HELP, parse_answer
from agent_team.task_model import QuestionKind

__all__ = [
    "CLARIFY_IGNORED",
    "GATE_NODES",
    "HumanResponse",
    "answer_for",
    "human_interrupt",
    "parse_human_response",
    "resume_answer",
]

# The graph node that asks each kind of question: the key of `Thread.interrupts`.
GATE_NODES: dict[str, str] = {
    QuestionKind.CLARIFY.value: "clarify_gate",
    QuestionKind.PLAN_DECISION.value: "plan_review",
    QuestionKind.CONFLUENCE_APPROVAL.value: "conf_gate",
    QuestionKind.PULL_REQUEST.value: "pr_gate",
    QuestionKind.PR_DECISION.value: "pr_decision",
}
CLARIFY_IGNORED = "Proceed with what is known; there are no more details to add."
_MAX_DESCRIPTION = 20_000
_MAX_TITLE = 80
# A PR decision's description lists at most this many checks (each excerpt cut) and items.
_MAX_CHECKS = 5
_MAX_EXCERPT = 2_000
_MAX_ITEMS = 20
# An edited PR decision's `decision` arg, as a person may type it.
_PR_DECISIONS = {"fix": "fix", "ignore": "ignore", "take over": "takeover", "takeover": "takeover"}

ResponseType = Literal["accept", "edit", "response", "ignore"]


class HumanResponse(BaseModel):
    """What Agent Inbox sends as `command.resume`: `{type, args}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: ResponseType
    args: Any = None


def _allowed(kind: str) -> dict[str, bool]:
    if kind == QuestionKind.PULL_REQUEST.value:
        # Read-only: GitHub answers it (a review, a merge, a close), not a person.
        return {
            "allow_ignore": False,
            "allow_respond": False,
            "allow_edit": False,
            "allow_accept": False,
        }
    if kind == QuestionKind.CLARIFY.value:
        return {
            "allow_ignore": True,
            "allow_respond": True,
            "allow_edit": False,
            "allow_accept": False,
        }
    return {"allow_ignore": True, "allow_respond": True, "allow_edit": True, "allow_accept": True}


def _plan_args(payload: dict[str, Any]) -> dict[str, Any]:
    markdown = payload.get("plan_markdown")
    if not isinstance(markdown, str):
        return {}
    try:
        plan = Plan.from_text(markdown)
    except ValueError:
        return {"plan": markdown}
    # Lines of text, not lists: the Inbox edits each arg in a text box, and a person edits
    # "1. step" lines more easily than a JSON array. Lists are accepted back too.
    return {
        "summary": plan.summary,
        "steps": "\n".join(f"{n}. {step}" for n, step in enumerate(plan.steps, start=1)),
        "risks": "\n".join(f"- {risk}" for risk in plan.risks),
    }


def _description(payload: dict[str, Any], kind: str) -> str:
    """The question as the Inbox shows it, in Markdown, with what each choice does."""
    parts = [str(payload.get("text") or "")]
    if kind == QuestionKind.PLAN_DECISION.value and isinstance(payload.get("plan_markdown"), str):
        parts.append(payload["plan_markdown"])
        parts.append(
            "**Accept** approves the plan, **Edit** replaces it with your version, "
            "**Respond** asks for a revision with your feedback, **Ignore** rejects it."
        )
    elif kind == QuestionKind.CLARIFY.value:
        parts.append(
            "**Respond** with the missing details; **Ignore** lets the planner go on with "
            "what it has."
        )
    elif kind == QuestionKind.PULL_REQUEST.value:
        parts = [
            _pull_request_text(payload),
            f"GitHub answers this, not a person: {PULL_REQUEST_HELP}.",
        ]
    elif kind == QuestionKind.PR_DECISION.value:
        parts += _pr_decision_parts(payload)
    elif kind == QuestionKind.CONFLUENCE_APPROVAL.value:
        diff = payload.get("diff") or payload.get("preview")
        if isinstance(diff, str) and diff.strip():
            parts.append(f"```\n{diff}\n```")
        parts.append(
            "**Accept** publishes exactly this change, **Edit** or **Respond** asks the writer "
            "for a new draft (you approve that one), **Ignore** rejects it."
        )
    text = "\n\n".join(part for part in parts if part.strip())
    return text[:_MAX_DESCRIPTION]


def _pull_request_text(payload: dict[str, Any]) -> str:
    url = str(payload.get("url") or "")
    text = (
        f"Draft pull request #{payload.get('number')} is open: {url or '(no link)'}; "
        "I follow its reviews and CI; it ends when merged or closed."
    )
    rounds = payload.get("round")
    if isinstance(rounds, int) and rounds > 0:
        text += f" Follow-up rounds so far: {rounds}."
    return text


def _fence(text: str) -> str:
    """A code block that outside text cannot close: as long a fence as it needs."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _pr_decision_parts(payload: dict[str, Any]) -> list[str]:
    """What a person weighs: the pull request, the red checks and their logs, the reviews."""
    parts = []
    url = payload.get("url")
    if isinstance(url, str) and url:
        parts.append(f"Pull request: {url}")
    checks = [c for c in payload.get("checks") or () if isinstance(c, dict) and c.get("name")]
    for check in checks[:_MAX_CHECKS]:
        line = f"**Failing check: {check['name']}** ({check.get('conclusion') or 'failure'})"
        if check.get("url"):
            line += f", log: {check['url']}"
        excerpt = str(check.get("excerpt") or "").strip("\n")
        if excerpt.strip():
            line += "\n\n" + _fence(excerpt[:_MAX_EXCERPT])
        parts.append(line)
    if len(checks) > _MAX_CHECKS:
        parts.append(f"… and {len(checks) - _MAX_CHECKS} more failing checks")
    items = [i for i in payload.get("items") or () if isinstance(i, dict)]
    if items:
        lines = ["**Review feedback**"]
        for item in items[:_MAX_ITEMS]:
            body = " ".join(str(item.get("body") or "").split())
            lines.append(f"- {item.get('user') or 'someone'}: {body}")
        if len(items) > _MAX_ITEMS:
            lines.append(f"- … and {len(items) - _MAX_ITEMS} more")
        parts.append("\n".join(lines))
    parts.append(
        "**Accept** makes one follow-up commit (fix), **Ignore** leaves the pull request as it "
        "is, **Respond** takes an answer in words (`fix <note>`, `ignore`, `take over`), "
        "**Edit** sets `decision` (fix, ignore or take over) and an optional `note`. "
        "Take over: the agent stops working on this pull request."
    )
    return parts


def human_interrupt(kind: str, payload: Any) -> dict[str, Any]:
    """The `HumanInterrupt` Agent Inbox renders for one of our questions."""
    data = payload if isinstance(payload, dict) else {}
    if kind == QuestionKind.PLAN_DECISION.value:
        action, args = "Review the plan", _plan_args(data)
    elif kind == QuestionKind.CONFLUENCE_APPROVAL.value:
        action = "Approve the page"
        # No null args: the Inbox's edit view cannot show one.
        shown = {key: data.get(key) for key in ("page_title", "mode", "page_id")}
        args = {key: str(value) for key, value in shown.items() if value not in (None, "")}
    elif kind == QuestionKind.PR_DECISION.value:
        action, args = "Decide on the pull request", {"decision": "fix", "note": ""}
    elif kind == QuestionKind.PULL_REQUEST.value:
        number = data.get("number")
        action, args = f"Pull request #{number} open (GitHub answers)", {}
    else:
        action, args = "Answer a question", {}
    title = data.get("title")
    if isinstance(title, str) and title.strip():
        # The Inbox lists threads by their action: the task's title tells them apart.
        action = f"{action}: {title.strip()[:_MAX_TITLE]}"
    return {
        "action_request": {"action": action, "args": args},
        "config": _allowed(kind),
        "description": _description(data, kind),
    }


def parse_human_response(value: Any) -> HumanResponse | str:
    """A resume value as sent: a `HumanResponse`, a one-element list of one (the Inbox), or
    a plain string in our answer grammar (`approve`, `revise <feedback>`; handy in scripts).

    Raises:
        InvalidAnswerError: anything else, with what is accepted.
    """
    if isinstance(value, list):
        if len(value) != 1:
            raise InvalidAnswerError(
                f"resume with one response, not a list of {len(value)}: "
                '[{"type": "accept|edit|response|ignore", "args": ...}]'
            )
        value = value[0]
    if isinstance(value, str):
        return value
    try:
        return HumanResponse.model_validate(value)
    except ValidationError:
        raise InvalidAnswerError(
            'resume with {"type": "accept" | "edit" | "response" | "ignore", "args": ...} '
            "or an answer in words (`approve`, `revise <feedback>`)"
        ) from None


def _text_arg(response: HumanResponse, what: str) -> str:
    if not isinstance(response.args, str) or not response.args.strip():
        raise InvalidAnswerError(f"a `response` needs {what} as a non-empty string in `args`")
    return response.args.strip()


def _edited_args(response: HumanResponse) -> dict[str, Any]:
    """The `args` of an edit: `{action, args: {...}}` as the Inbox sends it, or the args."""
    args = response.args
    if isinstance(args, dict) and isinstance(args.get("args"), dict):
        args = args["args"]
    if not isinstance(args, dict):
        raise InvalidAnswerError('an `edit` needs `args`: {"action": ..., "args": {...}}')
    return args


def _lines(value: Any, field: str) -> list[str]:
    """A list field the Inbox may send as a list, a JSON list, or lines of text."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            decoded = None
        if isinstance(decoded, list):
            value = decoded
        else:
            return [line for line in value.splitlines() if line.strip()]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidAnswerError(f"`{field}` must be a list of strings or lines of text")
    return value


def _edited_plan(response: HumanResponse) -> str:
    """The edited plan as the Markdown an `edit <plan>` answer carries."""
    args = _edited_args(response)
    if isinstance(args.get("plan"), str):
        return str(args["plan"])
    summary = args.get("summary")
    if not isinstance(summary, str):
        raise InvalidAnswerError("an edited plan needs `summary` (text) and `steps`")
    steps = [_strip_marker(step) for step in _lines(args.get("steps"), "steps")]
    risks = [_strip_marker(risk) for risk in _lines(args.get("risks", []), "risks")]
    try:
        plan = Plan(summary=summary, steps=steps, risks=risks)
    except ValidationError as exc:
        raise InvalidAnswerError(f"the edited plan is not valid: {_first_error(exc)}") from None
    return plan.to_markdown()


def _strip_marker(line: str) -> str:
    """`1. step`, `- step` -> `step`, as a person editing lines of text writes them."""
    stripped = line.strip()
    head, _, rest = stripped.partition(" ")
    if rest and (head in ("-", "*", "+") or head.rstrip(".)").isdigit()):
        return rest.strip()
    return stripped


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in error.get("loc", ()))
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _edited_page(response: HumanResponse, payload: dict[str, Any]) -> str:
    """An edit of a Confluence change, as feedback for the writer's next draft."""
    args = _edited_args(response)
    asks: list[str] = []
    title = args.get("page_title")
    if isinstance(title, str) and title.strip() and title.strip() != payload.get("page_title"):
        asks.append(f"Use the page title: {title.strip()}")
    for key, value in args.items():
        if key in ("page_title", "mode", "page_id") or value in (None, ""):
            continue
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        asks.append(f"Change {key} to:\n{shown}")
    if not asks:
        raise InvalidAnswerError(
            "the edit changes nothing; use accept to publish as it is, or respond with feedback"
        )
    return "\n\n".join(asks)


def _not_offered(kind: str, choice: str) -> InvalidAnswerError:
    offered = [name.removeprefix("allow_") for name, on in _allowed(kind).items() if on]
    return InvalidAnswerError(
        f"a {kind} question does not take `{choice}`; send one of: "
        + ", ".join("response" if name == "respond" else name for name in offered)
    )


def resume_answer(kind: str, payload: Any, value: Any) -> dict[str, Any]:
    """The normalised answer a run's `command.resume` value gives a question of `kind`.

    The PR gate is refused whatever was sent, before its shape is judged: the person
    learns how the gate moves on, not how to shape a response it would refuse anyway.

    Raises:
        InvalidAnswerError: the value does not answer the question; nothing is stored.
    """
    if kind == QuestionKind.PULL_REQUEST.value:
        raise InvalidAnswerError(PULL_REQUEST_HELP)
    return answer_for(kind, payload, parse_human_response(value))


def answer_for(kind: str, payload: Any, response: HumanResponse | str) -> dict[str, Any]:
    """The normalised answer for a question of `kind`, validated as every transport's is.

    Raises:
        InvalidAnswerError: the response does not fit the question; nothing is stored.
    """
    if kind == QuestionKind.PULL_REQUEST.value:
        raise InvalidAnswerError(PULL_REQUEST_HELP)  # whatever was sent: GitHub answers it
    if isinstance(response, str):
        return parse_answer(kind, response)
    data = payload if isinstance(payload, dict) else {}
    choice = response.type
    if kind == QuestionKind.CLARIFY.value:
        if choice == "response":
            return parse_answer(kind, {"text": _text_arg(response, "the missing details")})
        if choice == "ignore":
            return parse_answer(kind, {"text": CLARIFY_IGNORED})
        raise _not_offered(kind, choice)
    if kind == QuestionKind.PLAN_DECISION.value:
        if choice == "accept":
            return parse_answer(kind, {"decision": "approve"})
        if choice == "edit":
            return parse_answer(kind, {"decision": "edit", "text": _edited_plan(response)})
        if choice == "response":
            return parse_answer(
                kind, {"decision": "revise", "text": _text_arg(response, "feedback")}
            )
        return parse_answer(kind, {"decision": "reject"})
    if kind == QuestionKind.CONFLUENCE_APPROVAL.value:
        if choice == "accept":
            return parse_answer(kind, {"decision": "publish"})
        if choice == "edit":
            return parse_answer(kind, {"decision": "revise", "text": _edited_page(response, data)})
        if choice == "response":
            return parse_answer(
                kind, {"decision": "revise", "text": _text_arg(response, "feedback")}
            )
        return parse_answer(kind, {"decision": "reject"})
    if kind == QuestionKind.PR_DECISION.value:
        if choice == "accept":
            return parse_answer(kind, {"decision": "fix"})
        if choice == "ignore":
            return parse_answer(kind, {"decision": "ignore"})
        if choice == "response":
            return parse_answer(kind, _text_arg(response, "`fix [note]`, `ignore` or `take over`"))
        return parse_answer(kind, _edited_decision(response))
    raise InvalidAnswerError(f"unknown question kind {kind!r}")


def _edited_decision(response: HumanResponse) -> dict[str, Any]:
    """An edited PR decision: `decision` (fix, ignore, take over) and an optional `note`."""
    args = _edited_args(response)
    wanted = " ".join(str(args.get("decision") or "").lower().split())
    decision = _PR_DECISIONS.get(wanted)
    if decision is None:
        raise InvalidAnswerError(f"`decision` must be fix, ignore or take over; {PR_DECISION_HELP}")
    note = args.get("note")
    if note is not None and not isinstance(note, str):
        raise InvalidAnswerError("`note` must be text")
    return {"decision": decision, "text": (note or "").strip()}
