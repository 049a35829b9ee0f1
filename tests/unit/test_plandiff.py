"""Plan versions and the line diff shown after `revise`."""

from __future__ import annotations

import json

from agent_team import db
from agent_team.models.schemas import Plan
from agent_team.reports.plandiff import (
    EDIT,
    MODEL,
    DiffLine,
    changed,
    changes_text,
    diff_plans,
    plan_versions,
)

V1 = "# Plan\n\nRemember email\n\n## Steps\n\n1. Store the email in a cookie\n2. Prefill it\n"
V2 = (
    "# Plan\n\nRemember email\n\n## Steps\n\n1. Read the cookie spec\n"
    "2. Store the email in a cookie\n3. Prefill the field\n\n## Risks\n\n- None known\n"
)


def question(turn: int, kind: str, payload: dict[str, str], answer: str | None) -> db.Question:
    return db.Question(
        question_id=f"t1:q{turn}",
        thread_id="t1",
        turn=turn,
        kind=kind,
        status="answered" if answer else "open",
        transport="local",
        channel_ref=None,
        posted_at=None,
        deadline_at=None,
        answer_json=answer,
        answered_at="2026-03-02T10:00:00.000000Z" if answer else None,
        answered_via="cli:ada" if answer else None,
        payload_json=json.dumps(payload),
    )


def test_a_diff_marks_added_and_removed_lines_and_ignores_step_numbers() -> None:
    diff = diff_plans(V1, V2)
    assert diff == [
        DiffLine(" ", "# Plan"),
        DiffLine(" ", "Remember email"),
        DiffLine(" ", "## Steps"),
        DiffLine("+", "1. Read the cookie spec"),
        DiffLine(" ", "2. Store the email in a cookie"),  # renumbered, not changed
        DiffLine("-", "2. Prefill it"),
        DiffLine("+", "3. Prefill the field"),
        DiffLine("+", "## Risks"),
        DiffLine("+", "- None known"),
    ]
    assert changed(diff_plans(V1, V1)) == []


def test_changes_text_lists_only_changes_and_cuts_cleanly_at_a_line() -> None:
    diff = diff_plans(V1, V2)
    assert changes_text(diff, limit=3000) == (
        "+ 1. Read the cookie spec\n- 2. Prefill it\n+ 3. Prefill the field\n"
        "+ ## Risks\n+ - None known"
    )
    cut = changes_text(diff, limit=70)
    assert cut == "+ 1. Read the cookie spec\n- 2. Prefill it\n… and 3 more changed lines"
    assert len(cut) <= 70
    assert changes_text(diff_plans(V1, V1), limit=100) == "The plan text did not change."


def test_a_huge_plan_diff_fits_the_limit_and_says_how_much_is_left_out() -> None:
    big = "# Plan\n" + "\n".join(f"{n}. step {n} " + "x" * 80 for n in range(1, 200))
    diff = diff_plans("# Plan\n", big)
    text = changes_text(diff, limit=2900, render=lambda d: f"[{d.op}]{d.text}")
    assert len(text) <= 2900
    lines = text.splitlines()
    assert lines[0].startswith("[+]1. step 1 ")
    assert lines[-1].startswith("… and ") and lines[-1].endswith(" more changed lines")
    shown = len(lines) - 1
    assert lines[-1] == f"… and {199 - shown} more changed lines"


def test_every_plan_version_is_kept_with_its_diff_against_the_one_it_revises() -> None:
    questions = [
        question(1, "clarify", {"text": "Which page?"}, '{"text": "login"}'),
        question(
            2, "plan_decision", {"plan_markdown": V1}, '{"decision": "revise", "text": "spec"}'
        ),
        question(3, "plan_decision", {"plan_markdown": V2}, None),
    ]
    first, second = plan_versions(questions)
    assert (first.number, first.question_id, first.base, first.diff) == (1, "t1:q2", None, ())
    assert (first.decision, first.feedback, first.answered_via) == ("revise", "spec", "cli:ada")
    assert (second.number, second.question_id, second.base, second.status) == (
        2,
        "t1:q3",
        1,
        "open",
    )
    assert second.markdown == V2 and list(second.diff) == diff_plans(V1, V2)
    assert second.decision is None and second.feedback is None


def test_an_edited_plan_is_the_current_version_and_the_one_built() -> None:
    # #31 (1): after `edit`, every view showed the model's plan, not the one built.
    typed = "# Plan\n\nGreet readers.\n\n## Steps\n\n1. Add the greeting\n2. Test it\n"
    edit = json.dumps({"decision": "edit", "text": typed})
    questions = [question(1, "plan_decision", {"plan_markdown": V1}, edit)]

    asked, edited = plan_versions(questions)

    built = Plan.from_text(typed).to_markdown()  # what plan_review hands to the build
    assert (edited.number, edited.base, edited.source, edited.markdown) == (2, 1, EDIT, built)
    assert (edited.question_id, edited.answered_via) == ("t1:q1", "cli:ada")
    assert edited.decision is None and edited.feedback is None
    assert list(edited.diff) == diff_plans(V1, built)
    # The model's plan says how it was answered; the whole typed plan is not "feedback".
    assert (asked.source, asked.decision, asked.feedback) == (MODEL, "edit", None)
