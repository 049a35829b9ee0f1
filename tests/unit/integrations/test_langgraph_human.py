"""Agent Inbox's responses as our answers: each kind of question, each choice, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from agent_team.exceptions import InvalidAnswerError
from agent_team.integrations.langgraph_api.human import (
    CLARIFY_IGNORED,
    HumanResponse,
    answer_for,
    human_interrupt,
    parse_human_response,
)
from agent_team.models.schemas import Plan

PLAN = Plan(summary="Keep the email", steps=["Write a cookie", "Prefill"], risks=["Privacy"])
PLAN_PAYLOAD = {"text": "Review the plan", "plan_markdown": PLAN.to_markdown(), "title": "T"}
PAGE_PAYLOAD = {"text": "Publish?", "page_title": "Login", "mode": "create", "diff": "+ hello"}


def respond(kind: str, payload: dict[str, Any], value: Any) -> dict[str, Any]:
    return answer_for(kind, payload, parse_human_response(value))


def test_the_plan_interrupt_offers_every_choice_with_the_plan_as_args() -> None:
    interrupt = human_interrupt("plan_decision", PLAN_PAYLOAD)
    assert interrupt["action_request"]["args"] == {
        "summary": "Keep the email",
        "steps": "1. Write a cookie\n2. Prefill",
        "risks": "- Privacy",
    }
    # Sent back unchanged as an edit, the args are the same plan.
    edit = answer_for(
        "plan_decision", PLAN_PAYLOAD, HumanResponse(type="edit", args=interrupt["action_request"])
    )
    assert Plan.from_text(edit["text"]) == PLAN
    assert all(interrupt["config"].values())
    assert "1. Write a cookie" in interrupt["description"]
    assert interrupt["action_request"]["action"] == "Review the plan: T"  # tells tasks apart


def test_a_clarify_interrupt_offers_only_respond_and_ignore() -> None:
    interrupt = human_interrupt("clarify", {"text": "Which page?"})
    assert interrupt["config"] == {
        "allow_ignore": True,
        "allow_respond": True,
        "allow_edit": False,
        "allow_accept": False,
    }
    assert interrupt["description"].startswith("Which page?")


@pytest.mark.parametrize(
    ("value", "answer"),
    [
        ([{"type": "accept", "args": None}], {"decision": "approve", "text": ""}),
        (
            {"type": "response", "args": " more tests "},
            {"decision": "revise", "text": "more tests"},
        ),
        ([{"type": "ignore", "args": None}], {"decision": "reject", "text": ""}),
        ("lgtm", {"decision": "approve", "text": ""}),
    ],
)
def test_plan_choices(value: Any, answer: dict[str, Any]) -> None:
    assert respond("plan_decision", PLAN_PAYLOAD, value) == answer


@pytest.mark.parametrize(
    "args",
    [
        {"action": "Approve the plan", "args": {"summary": "S", "steps": ["a", "b"], "risks": []}},
        {"summary": "S", "steps": "1. a\n2. b", "risks": ""},
        {"summary": "S", "steps": '["a", "b"]'},
        {"summary": "S", "steps": "- a\n- b\n"},
    ],
)
def test_an_edited_plan_becomes_an_edit_with_the_same_steps(args: dict[str, Any]) -> None:
    answer = respond("plan_decision", PLAN_PAYLOAD, [{"type": "edit", "args": args}])
    assert answer["decision"] == "edit"
    assert Plan.from_text(answer["text"]).steps == ["a", "b"]


def test_clarify_choices() -> None:
    assert respond("clarify", {}, [{"type": "response", "args": "the login page"}]) == {
        "text": "the login page"
    }
    assert respond("clarify", {}, [{"type": "ignore", "args": None}]) == {"text": CLARIFY_IGNORED}
    for choice in ("accept", "edit"):
        with pytest.raises(InvalidAnswerError, match=f"does not take `{choice}`"):
            respond("clarify", {}, [{"type": choice, "args": {}}])


def test_confluence_choices() -> None:
    kind = "confluence_approval"
    assert respond(kind, PAGE_PAYLOAD, [{"type": "accept"}])["decision"] == "publish"
    assert respond(kind, PAGE_PAYLOAD, [{"type": "ignore"}])["decision"] == "reject"
    edit = respond(
        kind,
        PAGE_PAYLOAD,
        [{"type": "edit", "args": {"action": "x", "args": {"page_title": "Sign-in", "mode": "c"}}}],
    )
    assert edit == {"decision": "revise", "text": "Use the page title: Sign-in"}
    with pytest.raises(InvalidAnswerError, match="changes nothing"):
        respond(kind, PAGE_PAYLOAD, [{"type": "edit", "args": {"page_title": "Login"}}])


@pytest.mark.parametrize(
    "value",
    [
        [],
        [{"type": "accept"}, {"type": "accept"}],
        {"type": "approve"},
        {"type": "accept", "args": None, "extra": 1},
        42,
        None,
    ],
)
def test_shapes_that_are_not_a_response_are_refused(value: Any) -> None:
    with pytest.raises(InvalidAnswerError):
        parse_human_response(value)


@pytest.mark.parametrize(
    "response",
    [
        HumanResponse(type="response", args=""),
        HumanResponse(type="response", args={"text": "x"}),
        HumanResponse(type="edit", args="a plan"),
        HumanResponse(type="edit", args={"summary": "S", "steps": []}),
        HumanResponse(type="edit", args={"summary": "S", "steps": [1, 2]}),
    ],
)
def test_plan_responses_missing_what_they_need_are_refused(response: HumanResponse) -> None:
    with pytest.raises(InvalidAnswerError):
        answer_for("plan_decision", PLAN_PAYLOAD, response)
