"""Agent Inbox's responses as our answers: each kind of question, each choice, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from agent_team.exceptions import InvalidAnswerError
from agent_team.integrations.langgraph_api.human import (
    CLARIFY_IGNORED,
    GATE_NODES,
    HumanResponse,
    answer_for,
    human_interrupt,
    parse_human_response,
    resume_answer,
)
from agent_team.models.schemas import Plan
from agent_team.requests.answers import PULL_REQUEST_HELP

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


PR_URL = "https://github.com/o/r/pull/7"
DECISION_PAYLOAD = {
    "text": f"CI is red on the pull request's head: lint. What should the agent do on {PR_URL}?",
    "title": "T",
    "reason": "ci_failed",
    "url": PR_URL,
    "checks": [
        {
            "name": "lint",
            "conclusion": "failure",
            "url": "https://github.com/o/r/actions/runs/1",
            "excerpt": "E501 line too long\n```\nnot the end",
            "rerun": False,
        }
    ],
    "items": [{"user": "reviewer", "body": "Name the test file."}],
    "help": "answer with one of: `fix [note]`, `ignore`, `take over`",
}
GATE_PAYLOAD = {"text": f"Draft pull request #7 is open: {PR_URL}", "url": PR_URL, "number": 7}


def test_the_pr_kinds_belong_to_their_nodes() -> None:
    assert GATE_NODES["pull_request"] == "pr_gate"
    assert GATE_NODES["pr_decision"] == "pr_decision"


def test_a_pr_decision_interrupt_shows_the_check_its_log_and_the_reviews() -> None:
    interrupt = human_interrupt("pr_decision", DECISION_PAYLOAD)
    assert interrupt["action_request"] == {
        "action": "Decide on the pull request: T",
        "args": {"decision": "fix", "note": ""},
    }
    assert all(interrupt["config"].values())
    description = interrupt["description"]
    assert description.startswith("CI is red on the pull request's head: lint.")
    assert f"Pull request: {PR_URL}" in description
    assert "**Failing check: lint** (failure), log: https://github.com/o/r/actions/runs/1" in (
        description
    )
    # The excerpt's own fence cannot end the block: the block's fence is longer.
    assert "````\nE501 line too long\n```\nnot the end\n````" in description
    assert "- reviewer: Name the test file." in description
    assert "**Accept** makes one follow-up commit (fix)" in description


@pytest.mark.parametrize(
    ("value", "answer"),
    [
        ([{"type": "accept", "args": None}], {"decision": "fix", "text": ""}),
        ([{"type": "ignore", "args": None}], {"decision": "ignore", "text": ""}),
        ({"type": "response", "args": "take over"}, {"decision": "takeover", "text": ""}),
        (
            {"type": "response", "args": "fix wrap the line"},
            {"decision": "fix", "text": "wrap the line"},
        ),
        (
            [{"type": "edit", "args": {"action": "x", "args": {"decision": "Take  Over"}}}],
            {"decision": "takeover", "text": ""},
        ),
        (
            [{"type": "edit", "args": {"decision": "fix", "note": " keep the URL "}}],
            {"decision": "fix", "text": "keep the URL"},
        ),
        ("ignore", {"decision": "ignore", "text": ""}),
    ],
)
def test_pr_decision_choices(value: Any, answer: dict[str, Any]) -> None:
    assert respond("pr_decision", DECISION_PAYLOAD, value) == answer


@pytest.mark.parametrize(
    "response",
    [
        HumanResponse(type="response", args="sounds good"),
        HumanResponse(type="response", args=""),
        HumanResponse(type="edit", args={"decision": "merge"}),
        HumanResponse(type="edit", args={"decision": "fix", "note": 3}),
    ],
)
def test_pr_decision_responses_outside_the_grammar_are_refused(response: HumanResponse) -> None:
    with pytest.raises(InvalidAnswerError):
        answer_for("pr_decision", DECISION_PAYLOAD, response)


def test_the_pr_gate_is_read_only_and_every_response_gets_the_refusal() -> None:
    interrupt = human_interrupt("pull_request", GATE_PAYLOAD)
    assert not any(interrupt["config"].values())
    assert interrupt["action_request"]["args"] == {}
    assert interrupt["description"].startswith(
        f"Draft pull request #7 is open: {PR_URL}; I follow its reviews and CI; "
        "it ends when merged or closed."
    )
    for value in (
        [{"type": "accept"}],
        [{"type": "ignore"}],
        {"type": "response", "args": "merged"},
        {"type": "edit", "args": {"decision": "merged"}},
        "merged",
        {"decision": "merged"},
    ):
        with pytest.raises(InvalidAnswerError) as refused:
            resume_answer("pull_request", GATE_PAYLOAD, value)
        assert str(refused.value) == PULL_REQUEST_HELP
    with pytest.raises(InvalidAnswerError, match="answered by GitHub"):
        respond("pull_request", GATE_PAYLOAD, "merged")
