"""`agent-team questions`: the gate questions, and what one of them asks you to weigh.

The list is a table, one line per question. What a question asks in full (a
plan to review, a pull request that needs a decision) is long: nine open
plans printed after the table were 231 lines. So it is printed for one
question (`questions ID`), or for every listed open one with `--plans`;
otherwise the table ends with a line saying how to see them.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer

from agent_team import db
from agent_team.cli.support import (
    context_of,
    deadline_cell,
    hint,
    id_table,
    open_ready,
    out,
    print_json,
    when,
)
from agent_team.common.invocation import command
from agent_team.exceptions import UnknownTaskError
from agent_team.reports.journey import answer_text, who_answered
from agent_team.task_model import QuestionKind, QuestionStatus

__all__ = ["plan_text", "pr_decision_text", "questions"]

# A PR decision in the terminal: this many checks, excerpt lines and review items at most.
_CLI_CHECKS, _CLI_EXCERPT_LINES, _CLI_ITEMS = 5, 15, 10


def questions(
    ctx: typer.Context,
    question_id: Annotated[
        str | None,
        typer.Argument(
            help="One question: listed, with what it asks in full (the plan, the pull request).",
            show_default=False,
        ),
    ] = None,
    status: Annotated[
        QuestionStatus | None,
        typer.Option(
            "--status",
            metavar="<status>",  # the choices in the help: as a type they are cut mid-word
            help="Only questions in this status: "
            + ", ".join(s.value for s in QuestionStatus)
            + ".",
        ),
    ] = None,
    task: Annotated[str | None, typer.Option("--task", help="Only this task's questions.")] = None,
    plans: Annotated[
        bool,
        typer.Option(
            "--plans", help="After the table, every listed open plan and pull request in full."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List gate questions, oldest first; `questions ID` shows what one asks in full."""
    with open_ready(ctx) as ledger:
        if question_id is not None:
            one = db.get_question(ledger, question_id)
            if one is None:
                raise UnknownTaskError(
                    f"no question {question_id!r}; list them with `agent-team questions`"
                )
            rows = [one]
        else:
            rows = db.list_questions(
                ledger, status=status.value if status else None, thread_id=task
            )
    if as_json:
        print_json([{**asdict(q), "answer": q.answer, "payload": q.payload} for q in rows])
        return
    if not rows:
        out.print("no questions" + (f" with status {status.value}" if status else ""))
        return
    now = context_of(ctx).now()
    table = id_table(
        "question",
        "task",
        "turn",
        "kind",
        "status",
        "deadline",
        "answered",
        "asks",
        ids=("question", "task"),
    )
    for q in rows:
        answered = (
            f"{when(q.answered_at)} by {who_answered(q.answered_via)}" if q.answered_at else ""
        )
        table.add_row(
            q.question_id,
            q.thread_id,
            str(q.turn),
            q.kind,
            q.status,
            deadline_cell(q.deadline_at, now, status=q.status),
            answered,
            _asks(q.kind, q.payload),
        )
    out.print(table)
    if question_id is not None:
        _print_in_full(rows[0], every=True)
        return
    detailed = [q for q in rows if q.status == QuestionStatus.OPEN and _has_detail(q)]
    if plans:
        for q in detailed:
            _print_in_full(q)
    elif detailed:
        out.print(
            hint(
                f"\n{len(detailed)} open question(s) above show a plan or a pull request: "
                f"`agent-team questions {detailed[0].question_id}` prints one in full, "
                "--plans all of them"
            )
        )


def _has_detail(question: db.Question) -> bool:
    return plan_text(question.payload) is not None or question.kind == QuestionKind.PR_DECISION


def _print_in_full(question: db.Question, *, every: bool = False) -> None:
    """The plan or the PR decision a question asks about; `every`: also once answered."""
    plan = plan_text(question.payload)
    if plan is not None:
        if question.status == QuestionStatus.OPEN:
            out.print(f"\nthe plan {question.question_id} asks you to review:\n{plan}")
        elif every:
            decided = answer_text(question.answer)
            out.print(f"\nthe plan {question.question_id} asked about ({decided}):\n{plan}")
    if question.kind == QuestionKind.PR_DECISION and (
        every or question.status == QuestionStatus.OPEN
    ):
        out.print("\n" + pr_decision_text(question.question_id, question.payload))
    if every and question.kind == QuestionKind.CLARIFY and question.answer is not None:
        out.print(f"\nanswer: {answer_text(question.answer)}")


def _asks(kind: str, payload: Any) -> str:
    """A question's line in the list; the PR gate says who answers it (GitHub, not you)."""
    data = payload if isinstance(payload, dict) else {}
    if kind == QuestionKind.PULL_REQUEST:
        return f"waiting on GitHub: {data.get('url') or 'the pull request'}"
    return str(data.get("text", ""))


def pr_decision_text(question_id: str, payload: Any) -> str:
    """What a person weighs before `fix`, `ignore` or `take over`, and how to say it."""
    data = payload if isinstance(payload, dict) else {}
    lines = [f"the pull request {question_id} needs a decision ({data.get('reason') or '?'}):"]
    lines.append(f"  {data.get('text') or ''}")
    checks = [c for c in data.get("checks") or () if isinstance(c, dict)]
    for check in checks[:_CLI_CHECKS]:
        where = f", log {check['url']}" if check.get("url") else ""
        lines.append(f"  failing check {check.get('name')} ({check.get('conclusion')}{where})")
        excerpt = str(check.get("excerpt") or "").strip("\n").splitlines()
        lines += [f"    | {line}" for line in excerpt[:_CLI_EXCERPT_LINES]]
        if len(excerpt) > _CLI_EXCERPT_LINES:
            lines.append(f"    | … {len(excerpt) - _CLI_EXCERPT_LINES} more lines")
    items = [i for i in data.get("items") or () if isinstance(i, dict)]
    for item in items[:_CLI_ITEMS]:
        body = " ".join(str(item.get("body") or "").split())
        lines.append(f"  review by {item.get('user')}: {body}")
    if len(checks) > _CLI_CHECKS or len(items) > _CLI_ITEMS:
        lines.append("  (more on the pull request)")
    lines.append(f"  answer: {command()} answer {question_id} fix [note] | ignore | take over")
    return "\n".join(lines)


def plan_text(payload: Any) -> str | None:
    """The plan a `plan_decision` question shows (its payload keeps it for redelivery)."""
    plan = payload.get("plan_markdown") if isinstance(payload, dict) else None
    return plan.strip() if isinstance(plan, str) and plan.strip() else None
