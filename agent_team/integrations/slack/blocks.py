"""Block Kit for questions, outcomes and notices: pure functions, no network, no ledger.

Kept apart from the transport so the message shapes are unit-tested alone,
and so the listener and the transport build the same message (the listener
redraws a question without its buttons after an answer).

Every piece of text that came from outside (an issue title, a plan, an
answer) is escaped for Slack's mrkdwn: `<!channel>` in an issue title must
not ping a channel, and `<http://x|y>` must not become a disguised link.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agent_team.db import Question, Task, from_iso
from agent_team.reports.journey import who_answered
from agent_team.reports.plandiff import DiffLine, PlanVersion, changes_text
from agent_team.requests.answers import PULL_REQUEST_HELP
from agent_team.task_model import QuestionKind

__all__ = [
    "ACTION_PREFIX",
    "BUTTON_ANSWERS",
    "REVISE_ACTION",
    "REVISE_BLOCK",
    "REVISE_CALLBACK",
    "REVISE_INPUT",
    "closed_blocks",
    "dashboard_link",
    "escape",
    "mention",
    "outcome_line",
    "pull_request_help",
    "question_blocks",
    "question_fallback",
    "revise_modal",
]

ACTION_PREFIX = "agent_team."
REVISE_ACTION = f"{ACTION_PREFIX}revise"
REVISE_CALLBACK = "agent_team.revise_modal"
REVISE_BLOCK = "feedback"
REVISE_INPUT = "text"
# Button action id -> the answer text it stands for (the answers grammar of each kind).
BUTTON_ANSWERS: dict[str, str] = {
    f"{ACTION_PREFIX}approve": "approve",
    f"{ACTION_PREFIX}publish": "publish",
    f"{ACTION_PREFIX}reject": "reject",
    f"{ACTION_PREFIX}fix": "fix",
    f"{ACTION_PREFIX}ignore": "ignore",
    f"{ACTION_PREFIX}takeover": "take over",
}

_SECTION_LIMIT = 2900  # Slack refuses section text over 3000 characters
_HEADERS = {
    QuestionKind.CLARIFY.value: "agent-team needs a detail",
    QuestionKind.PLAN_DECISION.value: "agent-team: review the plan",
    QuestionKind.CONFLUENCE_APPROVAL.value: "agent-team: approve the documentation change",
    QuestionKind.PULL_REQUEST.value: "agent-team: the draft pull request is open",
    QuestionKind.PR_DECISION.value: "agent-team: the pull request needs a decision",
}
_DECISION_WORDS = {
    "approve": "Approved",
    "edit": "Approved with an edited plan",
    "revise": "Changes requested",
    "reject": "Rejected",
    "publish": "Publish approved",
    # pr_decision, by a person
    "fix": "Fix requested",
    "ignore": "Ignored",
    "takeover": "Taken over",
    # pull_request, by GitHub (the watcher)
    "merged": "Merged",
    "closed": "Closed without merging",
    "feedback": "Review feedback",
    "ci_failed": "CI failed",
}
_DECISION_ICONS = {
    "approve": "✅",
    "edit": "✅",
    "publish": "✅",
    "merged": "✅",
    "reject": "⛔",
    "closed": "⛔",
    "fix": "🔧",
    "takeover": "✋",
    "ci_failed": "❌",
}
# A pr_decision shows at most this many failing checks and review items; each check's log
# excerpt gets its own section (a code block), cut to this many characters.
_MAX_CHECKS = 5
_MAX_ITEMS = 10
_EXCERPT_CHARS = 1200


def escape(text: str) -> str:
    """Escape the three characters Slack's mrkdwn treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mention(user_ids: Sequence[str]) -> str:
    return " ".join(f"<@{user}>" for user in user_ids)


def pull_request_help(task_id: str) -> str:
    """How the PR gate moves on (GitHub, not a reply), naming the task to cancel."""
    return PULL_REQUEST_HELP.replace("<task>", task_id)


def _clip(text: str, limit: int = _SECTION_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _slack_date(iso: str | None) -> str:
    """A date Slack shows in the reader's own time zone, with the UTC text as fallback."""
    if not iso:
        return "no deadline"
    when = from_iso(iso)
    fallback = when.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(when.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"


def dashboard_link(dashboard_url: str | None, task_id: str) -> str | None:
    if not dashboard_url:
        return None
    return f"{dashboard_url.rstrip('/')}/task/{task_id}"


def _link(url: str, label: str) -> str:
    # A URL from an issue is still outside input: drop the characters that break a link.
    clean = re.sub(r"[<>|\s]", "", url)
    return f"<{clean}|{escape(label)}>"


def _task_line(task: Task, dashboard_url: str | None) -> str:
    parts = [f"*{escape(task.title)}* (task `{task.id}`)"]
    if task.source_ref and task.source_ref.startswith(("http://", "https://")):
        parts.append(_link(task.source_ref, "source"))
    elif task.source_ref:
        parts.append(f"source: {escape(task.source_ref)}")
    link = dashboard_link(dashboard_url, task.id)
    if link:
        parts.append(_link(link, "dashboard"))
    return " · ".join(parts)


def _payload(question: Question) -> dict[str, Any]:
    payload = question.payload
    return payload if isinstance(payload, dict) else {}


def _code_line(line: DiffLine) -> str:
    # A fence inside a plan line would end the code block early: break it with a zero-width space.
    return escape(f"{line.op} {line.text}").replace("```", "`\u200b``")


def _changes_block(question: Question, plans: Sequence[PlanVersion]) -> dict[str, Any] | None:
    """For a revised plan: its changed lines against the plan the reviewer sent back."""
    shown = next((p for p in plans if p.question_id == question.question_id), None)
    if shown is None or shown.base is None:
        return None
    base = plans[shown.base - 1]
    asked = base.decision or base.status
    if base.answered_via:
        asked += f" by {who_answered(base.answered_via)}"
    if base.feedback:
        asked += f": {_clip(base.feedback, 300)}"
    head = f"*Changed since the last plan* (plan {base.number}, {escape(asked)}):\n"
    fence = "```"
    room = _SECTION_LIMIT - len(head) - 2 * len(fence)
    lines = changes_text(shown.diff, limit=room, render=_code_line)
    return {"type": "section", "text": {"type": "mrkdwn", "text": f"{head}{fence}{lines}{fence}"}}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _clip_escaped(escaped: str, limit: int) -> str:
    """Cut text already escaped for mrkdwn, never inside an entity (`&amp;`)."""
    if len(escaped) <= limit:
        return escaped
    return re.sub(r"&[a-z]{0,3}$", "", escaped[: limit - 1]) + "…"


def _fenced(text: str, limit: int) -> str:
    """Outside text as a code block of at most `limit` characters that it cannot close early."""
    body = escape(text.strip("\n")).replace("```", "`\u200b``")
    return f"```{_clip_escaped(body, limit - 6)}```"


def _pull_request_text(payload: dict[str, Any]) -> str:
    """The PR gate's notice: GitHub answers it, so it says what is followed, not what to do."""
    number = payload.get("number")
    url = str(payload.get("url") or "")
    where = _link(url, url) if url else "(no link)"
    text = (
        f"Draft pull request #{escape(str(number))} is open: {where}; "
        "I follow its reviews and CI; it ends when merged or closed."
    )
    rounds = payload.get("round")
    if isinstance(rounds, int) and rounds > 0:
        text += f" Follow-up rounds so far: {rounds}."
    return text


def _check_blocks(checks: Any) -> list[Any]:
    """One section per failing check (name, conclusion, log link, its excerpt), bounded."""
    if not isinstance(checks, list):
        return []
    blocks = []
    for check in checks[:_MAX_CHECKS]:
        if not isinstance(check, dict) or not check.get("name"):
            continue
        name = f"*{_clip_escaped(escape(str(check['name'])), 200)}*"
        line = f"❌ {name} ({escape(str(check.get('conclusion') or 'failure'))})"
        if check.get("url"):
            line += f" · {_link(str(check['url']), 'log')}"
        if check.get("rerun"):
            line += " · rerun once already"
        excerpt = str(check.get("excerpt") or "")
        if excerpt.strip():
            line += "\n" + _fenced(excerpt, min(_EXCERPT_CHARS, _SECTION_LIMIT - len(line) - 1))
        blocks.append(_section(line))
    if len(checks) > _MAX_CHECKS:
        blocks.append(_section(f"… and {len(checks) - _MAX_CHECKS} more failing checks"))
    return blocks


def _item_block(items: Any) -> list[Any]:
    """The review feedback a follow-up would address: who asked for what, bounded."""
    if not isinstance(items, list) or not items:
        return []
    lines = ["*Review feedback*"]
    for item in items[:_MAX_ITEMS]:
        if not isinstance(item, dict):
            continue
        # 10 items of at most 50 + 200 characters stay under the section limit.
        body = _clip_escaped(escape(" ".join(str(item.get("body") or "").split())), 200)
        user = _clip_escaped(escape(str(item.get("user") or "someone")), 50)
        lines.append(f"• *{user}*: {body}")
    if len(items) > _MAX_ITEMS:
        lines.append(f"… and {len(items) - _MAX_ITEMS} more")
    return [_section("\n".join(lines))]


def _pr_decision_blocks(payload: dict[str, Any]) -> list[Any]:
    blocks: list[Any] = []
    url = str(payload.get("url") or "")
    if url:
        blocks.append(_section(f"Pull request: {_link(url, url)}"))
    return [*blocks, *_check_blocks(payload.get("checks")), *_item_block(payload.get("items"))]


def _summary_blocks(
    question: Question,
    task: Task,
    dashboard_url: str | None,
    plans: Sequence[PlanVersion] = (),
) -> list[Any]:
    payload = _payload(question)
    if question.kind == QuestionKind.PULL_REQUEST:
        text = _pull_request_text(payload)
    else:
        text = _clip(escape(str(payload.get("text", ""))) or "-")
    blocks: list[Any] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": _HEADERS.get(question.kind, "agent-team asks")},
        },
        _section(_task_line(task, dashboard_url)),
        _section(text),
    ]
    if question.kind == QuestionKind.PR_DECISION:
        blocks += _pr_decision_blocks(payload)
    # The plan, or the exact change a publish approval is about.
    for key in ("plan_markdown", "preview", "diff", "summary"):
        value = payload.get(key)
        if isinstance(value, str) and value.strip():
            blocks.append(
                {"type": "section", "text": {"type": "mrkdwn", "text": _clip(escape(value))}}
            )
    changes = _changes_block(question, plans)
    if changes is not None:
        blocks.append(changes)
    return blocks


def question_fallback(question: Question, task: Task) -> str:
    """The notification text (shown where blocks are not: push notices, screen readers).

    Slack renders it as mrkdwn like the blocks, so the outside text is escaped
    too; clipped before escaping, so an entity is never cut in half.
    """
    text = str(_payload(question).get("text", "")) or question.kind
    return escape(_clip(f"{task.title}: {text}", 300))


def question_blocks(
    question: Question,
    task: Task,
    dashboard_url: str | None,
    *,
    plans: Sequence[PlanVersion] = (),
) -> list[Any]:
    """The question as posted: summary, deadline, and buttons or the reply hint.

    `plans` are the task's plan versions (`plandiff.plan_versions`): a plan
    that revises an earlier one shows what changed since it.
    """
    blocks = _summary_blocks(question, task, dashboard_url, plans)
    if question.kind == QuestionKind.PULL_REQUEST:
        # A notice: GitHub answers the gate, so no deadline, no buttons, no "reply here".
        note = f"Not answered here: {pull_request_help(question.thread_id)}"
        note += f" · question `{question.question_id}`"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": escape(note)}]})
        return blocks
    help_text = str(_payload(question).get("help", ""))
    blocks.append(
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"Answer by {_slack_date(question.deadline_at)} · "
                    f"question `{question.question_id}`",
                }
            ],
        }
    )
    buttons: list[tuple[str, str, str | None]] = []
    if question.kind == QuestionKind.PLAN_DECISION:
        buttons = [
            ("Approve", f"{ACTION_PREFIX}approve", "primary"),
            ("Request changes", REVISE_ACTION, None),
            ("Reject", f"{ACTION_PREFIX}reject", "danger"),
        ]
    elif question.kind == QuestionKind.CONFLUENCE_APPROVAL:
        buttons = [
            ("Publish", f"{ACTION_PREFIX}publish", "primary"),
            ("Request changes", REVISE_ACTION, None),
            ("Reject", f"{ACTION_PREFIX}reject", "danger"),
        ]
    elif question.kind == QuestionKind.PR_DECISION:
        buttons = [
            ("Fix", f"{ACTION_PREFIX}fix", "primary"),
            ("Ignore", f"{ACTION_PREFIX}ignore", None),
            ("Take over", f"{ACTION_PREFIX}takeover", "danger"),
        ]
    if buttons:
        elements = []
        for label, action_id, style in buttons:
            button: dict[str, Any] = {
                "type": "button",
                "text": {"type": "plain_text", "text": label},
                "action_id": action_id,
                "value": question.question_id,
            }
            if style:
                button["style"] = style
            elements.append(button)
        blocks.append(
            {"type": "actions", "block_id": f"answer:{question.question_id}", "elements": elements}
        )
    hint = "Reply in this thread" + (
        f" ({escape(help_text)})" if help_text else " with your answer"
    )
    if buttons:
        hint = "Or reply in this thread" + (f": {escape(help_text)}" if help_text else "")
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": hint}]})
    return blocks


def outcome_line(answer: Any, via: str | None, when: datetime) -> str:
    """`✅ Approved by @u at <date>`, from the normalised answer and `answered_via`.

    `via` is `slack:<user id>` (shown as a mention) or another channel's name
    (`cli`, `dashboard:...`), shown as text.
    """
    decision = str(answer.get("decision", "")) if isinstance(answer, dict) else ""
    word = _DECISION_WORDS.get(decision, "Answered")
    icon = _DECISION_ICONS.get(decision, "💬")
    who = ""
    if via and via.startswith("slack:"):
        who = f" by <@{via.removeprefix('slack:')}>"
    elif via:
        who = f" via {escape(via)}"
    line = f"{icon} {word}{who} at {_slack_date(when.isoformat())}"
    text = str(answer.get("text", "")) if isinstance(answer, dict) else ""
    if text:
        line += f": {_clip(escape(text), 500)}"
    return line


def closed_blocks(
    question: Question,
    task: Task,
    dashboard_url: str | None,
    line: str,
    *,
    plans: Sequence[PlanVersion] = (),
) -> list[Any]:
    """The question redrawn once it is closed: no buttons, the outcome underneath."""
    blocks = _summary_blocks(question, task, dashboard_url, plans)
    blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": line}})
    return blocks


def revise_modal(question_id: str, channel_ref: str, kind: str) -> dict[str, Any]:
    """The "Request changes" modal; `private_metadata` says which question it answers."""
    what = "plan" if kind == QuestionKind.PLAN_DECISION else "change"
    return {
        "type": "modal",
        "callback_id": REVISE_CALLBACK,
        "private_metadata": f"{question_id}|{channel_ref}",
        "title": {"type": "plain_text", "text": "Request changes"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": REVISE_BLOCK,
                "label": {"type": "plain_text", "text": f"What should change in the {what}?"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REVISE_INPUT,
                    "multiline": True,
                    "max_length": 3000,
                },
            }
        ],
    }
