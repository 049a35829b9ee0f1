"""The offline model's rules, its usage numbers, and langchain's structured-output path on it."""

from __future__ import annotations

import math
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from agent_team.models.offline import CLEAR_MIN_WORDS, OfflineChatModel
from agent_team.models.prompts import clarify_messages, plan_messages
from agent_team.models.schemas import ClarifyDecision, Plan
from agent_team.models.tokens import message_text

ELEVEN = "one two three four five six seven eight nine ten eleven"
TWELVE = ELEVEN + " twelve"


def _structured(schema: type[BaseModel], messages: list[BaseMessage]) -> dict[str, Any]:
    result = OfflineChatModel().with_structured_output(schema, include_raw=True).invoke(messages)
    assert isinstance(result, dict)
    assert result["parsing_error"] is None
    return result


def clarify(
    body: str, clarifications: list[tuple[str, str]] | None = None, title: str = "T"
) -> ClarifyDecision:
    parsed = _structured(ClarifyDecision, clarify_messages(title, body, clarifications or []))[
        "parsed"
    ]
    assert isinstance(parsed, ClarifyDecision)
    return parsed


def plan(
    body: str,
    title: str = "Title",
    clarifications: list[tuple[str, str]] | None = None,
    feedback: str | None = None,
) -> Plan:
    messages = plan_messages(title, body, clarifications or [], feedback, None)
    parsed = _structured(Plan, messages)["parsed"]
    assert isinstance(parsed, Plan)
    return parsed


# --- clarify -----------------------------------------------------------------------------


def test_eleven_words_asks_twelve_does_not() -> None:
    assert CLEAR_MIN_WORDS == 12
    asked = clarify(ELEVEN)
    assert not asked.clear
    assert asked.question == (
        f"What should be done, and how will we know it is done? (The issue says only: '{ELEVEN}')"
    )
    assert clarify(TWELVE) == ClarifyDecision(clear=True, question=None)


def test_title_words_do_not_count() -> None:
    assert not clarify(ELEVEN, title="a very long title with many many words in it").clear


def test_clarification_answers_count_towards_the_words() -> None:
    assert not clarify("Fix login", [("What?", "SSO users get a 500 on")]).clear  # 2 + 7 words
    assert clarify("Fix login", [("What?", "SSO users get a 500 on every login attempt now")]).clear


def test_question_texts_ignore_the_question_words() -> None:
    # Only answers count: a long question must not make a short issue clear.
    assert not clarify("Fix it", [("a b c d e f g h i j k l m n", "no")]).clear


def test_a_second_round_says_why_the_answer_was_not_enough_and_asks_something_else() -> None:
    # #31 (7): the second round repeated the first question word for word.
    first = clarify("Add a greeting")
    assert first.question is not None
    second = clarify("Add a greeting", [(first.question, "ok  \N{GRINNING FACE}")])
    assert second.question is not None and second.question != first.question
    assert second.question == (
        "Your answer ('ok \N{GRINNING FACE}') still leaves the issue too short to plan: "
        "5 words so far, 12 needed. Which files or behaviour should change, and what check "
        "shows it works?"
    )
    third = clarify("Add a greeting", [(first.question, "ok"), (second.question, "yes please")])
    assert third.question is not None and "('yes please')" in third.question


def test_empty_body_question() -> None:
    assert clarify("").question == (
        "What should be done, and how will we know it is done? (The issue has no description.)"
    )


def test_escaped_body_is_read_back_exactly() -> None:
    decision = clarify("Fix <b> & </body> tags")
    assert decision.question is not None
    assert "(The issue says only: 'Fix <b> & </body> tags')" in decision.question


# --- plan --------------------------------------------------------------------------------


def test_bullets_become_steps_in_order() -> None:
    body = "Context line.\n\n- Add retry\n* Add jitter\n+ Log failures\nTrailing prose."
    assert plan(body).steps == ["Add retry", "Add jitter", "Log failures"]


def test_numbered_lines_become_steps() -> None:
    assert plan("Do:\n1. First\n2) Second\n10. Tenth").steps == ["First", "Second", "Tenth"]


def test_without_bullets_sentences_become_steps() -> None:
    assert plan("Cache the counts. Add an index! Is it fast?").steps == [
        "Cache the counts.",
        "Add an index!",
        "Is it fast?",
    ]


def test_clarification_answers_add_to_the_issue_text() -> None:
    steps = plan("Fix login.", clarifications=[("What?", "SSO users get a 500.")]).steps
    assert steps == ["Fix login.", "SSO users get a 500."]


def test_empty_issue_has_one_step_from_the_title() -> None:
    assert plan("", title="Upgrade pydantic").steps == ["Implement: Upgrade pydantic"]


def test_summary_is_the_title_or_the_first_step() -> None:
    assert plan("Do it. Then more.", title="Speed up").summary == "Speed up"
    assert plan("Do it. Then more.", title="").summary == "Do it."


def test_feedback_adds_a_last_step() -> None:
    result = plan("- a\n- b", feedback="Split step a\ninto two.")
    assert result.steps == ["a", "b", "Address review feedback: Split step a into two."]


def test_risks() -> None:
    assert plan("Add a retry.").risks == ["No automated tests mentioned"]
    assert plan("Add a retry with a Test.").risks == [
        "No specific risks found; watch for regressions in nearby code"
    ]
    assert plan("Add a column; needs a database migration.").risks == [
        "No automated tests mentioned",
        "Changes stored data: needs a migration and a way back",
    ]
    assert (
        plan("Fix it.", clarifications=[("?", "with unit tests")])
        .risks[0]
        .startswith("No specific")
    )


# --- usage and determinism ---------------------------------------------------------------


def test_usage_is_chars_over_four_of_prompt_and_reply() -> None:
    messages = plan_messages("T", "- a\n- b", [], None, None)
    raw = _structured(Plan, messages)["raw"]
    assert isinstance(raw, AIMessage)
    usage = raw.usage_metadata
    assert usage is not None
    assert usage["input_tokens"] == math.ceil(len(message_text(messages)) / 4)
    args_json = '{"risks": ["No automated tests mentioned"], "steps": ["a", "b"], "summary": "T"}'
    assert raw.tool_calls[0]["args"] == {
        "summary": "T",
        "steps": ["a", "b"],
        "risks": ["No automated tests mentioned"],
    }
    assert usage["output_tokens"] == math.ceil(len(args_json) / 4)
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


@pytest.mark.parametrize("schema", [ClarifyDecision, Plan])
def test_same_prompt_same_answer_and_usage(schema: type[BaseModel]) -> None:
    messages = (
        clarify_messages("T", "short body", [])
        if schema is ClarifyDecision
        else plan_messages("T", "- a\n- b", [("q", "a")], "more", None)
    )
    first, second = _structured(schema, messages), _structured(schema, messages)
    assert first["parsed"] == second["parsed"]
    assert first["raw"].tool_calls == second["raw"].tool_calls
    assert first["raw"].usage_metadata == second["raw"].usage_metadata


def test_different_prompts_get_different_tool_call_ids() -> None:
    one = _structured(Plan, plan_messages("T", "- a", [], None, None))["raw"]
    two = _structured(Plan, plan_messages("T", "- b", [], None, None))["raw"]
    assert one.tool_calls[0]["id"] != two.tool_calls[0]["id"]


# --- the langchain surface ---------------------------------------------------------------


def test_without_tools_it_answers_plain_text_with_usage() -> None:
    reply = OfflineChatModel().invoke([HumanMessage(content="hello")])
    assert isinstance(reply, AIMessage)
    assert reply.tool_calls == []
    assert isinstance(reply.content, str) and "Offline model" in reply.content
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["input_tokens"] == 2


def test_unknown_tool_gets_no_tool_call() -> None:
    class Other(BaseModel):
        x: int

    result = OfflineChatModel().with_structured_output(Other, include_raw=True).invoke("hi")
    assert isinstance(result, dict)
    assert result["parsed"] is None
    assert result["raw"].tool_calls == []


def test_tool_choice_picks_between_bound_tools() -> None:
    bound = OfflineChatModel().bind_tools([ClarifyDecision, Plan], tool_choice="Plan")
    reply = bound.invoke(plan_messages("T", "- a", [], None, None))
    assert [call["name"] for call in reply.tool_calls] == ["Plan"]
    first = OfflineChatModel().bind_tools([ClarifyDecision, Plan], tool_choice="any")
    reply = first.invoke(clarify_messages("T", "b", []))
    assert [call["name"] for call in reply.tool_calls] == ["ClarifyDecision"]


def test_structured_output_without_include_raw() -> None:
    parsed = (
        OfflineChatModel()
        .with_structured_output(Plan)
        .invoke(plan_messages("T", "1. a", [], None, None))
    )
    assert parsed == Plan(summary="T", steps=["a"], risks=["No automated tests mentioned"])


def test_prompt_without_tags_is_all_body() -> None:
    parsed = OfflineChatModel().with_structured_output(Plan).invoke("- x\n- y")
    assert isinstance(parsed, Plan)
    assert parsed.steps == ["x", "y"]
