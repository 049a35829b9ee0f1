"""ClarifyDecision and Plan: validation, Markdown, and reading a plan a person typed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_team.exceptions import InvalidAnswerError
from agent_team.models.schemas import ClarifyDecision, Plan

# --- ClarifyDecision ---------------------------------------------------------------------


@pytest.mark.parametrize("question", [None, "", "   \n"])
def test_unclear_decision_needs_a_question(question: str | None) -> None:
    with pytest.raises(ValidationError, match="question is required"):
        ClarifyDecision(clear=False, question=question)


def test_unclear_decision_keeps_its_question_stripped() -> None:
    decision = ClarifyDecision(clear=False, question="  Which page?  ")
    assert decision.question == "Which page?"


def test_clear_decision_drops_any_question() -> None:
    assert ClarifyDecision(clear=True, question="Anything else?").question is None
    assert ClarifyDecision(clear=True).question is None


# --- Plan validation ---------------------------------------------------------------------


def test_plan_needs_a_step() -> None:
    with pytest.raises(ValidationError):
        Plan(summary="s", steps=[], risks=[])
    with pytest.raises(ValidationError, match="non-blank step"):
        Plan(summary="s", steps=["  ", ""], risks=[])


def test_plan_needs_a_summary() -> None:
    with pytest.raises(ValidationError, match="summary"):
        Plan(summary="  ", steps=["a"], risks=[])


def test_plan_cleans_blank_items_and_white_space() -> None:
    plan = Plan(summary=" s ", steps=["a ", "", " b\n c"], risks=["", " r "])
    assert plan == Plan(summary="s", steps=["a", "b c"], risks=["r"])


def test_plan_risks_default_to_none() -> None:
    assert Plan(summary="s", steps=["a"]).risks == []


def test_plan_schema_tells_the_model_steps_are_required() -> None:
    schema = Plan.model_json_schema()
    assert schema["properties"]["steps"]["minItems"] == 1
    assert set(schema["required"]) == {"summary", "steps"}


# --- to_markdown -------------------------------------------------------------------------


def test_to_markdown_layout() -> None:
    plan = Plan(summary="Retry the poller.", steps=["Add backoff", "Log failures"], risks=["x"])
    assert plan.to_markdown() == (
        "# Plan\n\nRetry the poller.\n\n## Steps\n\n1. Add backoff\n2. Log failures\n\n"
        "## Risks\n\n- x\n"
    )


def test_to_markdown_says_when_there_are_no_risks() -> None:
    assert "## Risks\n\nNone identified.\n" in Plan(summary="s", steps=["a"]).to_markdown()


# --- from_text ---------------------------------------------------------------------------


def test_from_text_bullets_and_numbers_are_steps_in_order() -> None:
    text = "Make the poller robust.\n\n- Add retry\n* Add jitter\n+ Log\n1. Alert\n2) Document\n"
    plan = Plan.from_text(text)
    assert plan.summary == "Make the poller robust."
    assert plan.steps == ["Add retry", "Add jitter", "Log", "Alert", "Document"]
    assert plan.risks == []


def test_from_text_risks_under_a_heading() -> None:
    text = "Summary here.\n\n1. Step one\n2. Step two\n\n## Risks\n- flaky network\nslow CI\n"
    plan = Plan.from_text(text)
    assert plan.steps == ["Step one", "Step two"]
    assert plan.risks == ["flaky network", "slow CI"]


@pytest.mark.parametrize("heading", ["Risks:", "**Risks**", "### Risk", "risks"])
def test_from_text_risk_heading_forms(heading: str) -> None:
    plan = Plan.from_text(f"- do it\n\n{heading}\n- breaks things\n")
    assert plan.steps == ["do it"]
    assert plan.risks == ["breaks things"]


def test_from_text_inline_risks_and_summary_labels() -> None:
    plan = Plan.from_text("Summary: Faster pages\n\n- Cache\n- Measure\nRisks: stale data; memory")
    assert plan == Plan(
        summary="Faster pages", steps=["Cache", "Measure"], risks=["stale data", "memory"]
    )


def test_from_text_none_means_no_risks() -> None:
    assert Plan.from_text("- a\n\nRisks: none").risks == []
    assert Plan.from_text("- a\n\n## Risks\n\nNone identified.\n").risks == []


def test_from_text_heading_ends_the_risks() -> None:
    plan = Plan.from_text("Intro.\n\n## Risks\n- r\n\n## Steps\n- a\n- b\n")
    assert plan.risks == ["r"]
    assert plan.steps == ["a", "b"]


def test_from_text_without_bullets_every_sentence_is_a_step() -> None:
    plan = Plan.from_text("Speed up the dashboard.\n\nCache the counts. Add an index! Is it fast?")
    assert plan.summary == "Speed up the dashboard."
    assert plan.steps == ["Cache the counts.", "Add an index!", "Is it fast?"]


def test_from_text_one_paragraph_is_summary_and_steps() -> None:
    plan = Plan.from_text("Add a retry. Log the failures.")
    assert plan.summary == "Add a retry. Log the failures."
    assert plan.steps == ["Add a retry.", "Log the failures."]


def test_from_text_only_bullets_uses_the_first_step_as_summary() -> None:
    plan = Plan.from_text("- Add a retry\n- Log failures")
    assert plan.summary == "Add a retry"
    assert plan.steps == ["Add a retry", "Log failures"]


def test_from_text_indented_line_continues_a_step() -> None:
    plan = Plan.from_text("Do it.\n\n1. Add retry\n   with backoff\n2. Log\n")
    assert plan.steps == ["Add retry with backoff", "Log"]


def test_from_text_drops_task_list_boxes() -> None:
    assert Plan.from_text("- [ ] first\n- [x] second").steps == ["first", "second"]


def test_from_text_prose_starting_with_a_label_word_is_not_a_heading() -> None:
    plan = Plan.from_text("Plan the rollout carefully.\n\n- Ship it")
    assert plan.summary == "Plan the rollout carefully."
    assert plan.steps == ["Ship it"]


@pytest.mark.parametrize("text", ["", "   \n\n", "## Risks\n- only risks\n", "# Plan\n"])
def test_from_text_without_steps_is_an_invalid_answer(text: str) -> None:
    with pytest.raises(InvalidAnswerError, match="no steps"):
        Plan.from_text(text)


def test_from_text_reads_to_markdown_back() -> None:
    plan = Plan(summary="Retry.", steps=["Add backoff", "Log failures"], risks=["flaky"])
    assert Plan.from_text(plan.to_markdown()) == plan


@pytest.mark.parametrize("summary", ["0) 0", "1. Retry first", "- a dash", "## not a heading"])
def test_a_summary_that_looks_like_a_step_or_heading_reads_back_as_the_summary(
    summary: str,
) -> None:
    plan = Plan(summary=summary, steps=["Add backoff"], risks=[])
    assert Plan.from_text(plan.to_markdown()) == plan


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789,'()", min_size=1, max_size=8)
_line = (
    st.lists(_word, min_size=1, max_size=6)
    .map(" ".join)
    .filter(
        lambda s: (
            s.split()[0].lower().strip("*_:")
            not in {"summary", "steps", "plan", "approach", "tasks", "risk", "risks", "none", "n/a"}
        )
    )
)


@given(
    summary=_line,
    steps=st.lists(_line, min_size=1, max_size=6),
    risks=st.lists(_line, max_size=4),
)
def test_from_text_round_trips_any_markdown_plan(
    summary: str, steps: list[str], risks: list[str]
) -> None:
    plan = Plan(summary=summary, steps=steps, risks=risks)
    assert Plan.from_text(plan.to_markdown()) == plan
