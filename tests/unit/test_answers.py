"""The answer grammar every transport shares."""

from __future__ import annotations

import pytest

from agent_team.exceptions import InvalidAnswerError
from agent_team.requests.answers import ANSWER_MODELS, PlanDecisionAnswer, parse_answer


@pytest.mark.parametrize(
    ("text", "decision", "rest"),
    [
        ("approve", "approve", ""),
        ("Approve: looks right", "approve", "looks right"),
        ("LGTM!", "approve", ""),
        ("ship it, nice work", "approve", "nice work"),
        ("yes", "approve", ""),
        ("👍", "approve", ""),
        ("revise add a rollback step", "revise", "add a rollback step"),
        ("request changes: split step 2", "revise", "split step 2"),
        ("reject too risky", "reject", "too risky"),
        ("no", "reject", ""),
        ("edit\n- Use localStorage\n- Ship", "edit", "- Use localStorage\n- Ship"),
    ],
)
def test_plan_decisions_and_synonyms(text: str, decision: str, rest: str) -> None:
    assert parse_answer("plan_decision", text) == {"decision": decision, "text": rest}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("maybe", r"approve \[comment\]"),
        ("approvals are nice", "not a plan decision"),  # a keyword must stand alone
        ("revise", "needs feedback"),
        ("edit", "needs the full plan"),
        ("edit    ", "needs the full plan"),
        ("", "not a plan decision"),
    ],
)
def test_bad_plan_decisions_say_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(InvalidAnswerError, match=message):
        parse_answer("plan_decision", text)


def test_an_edit_whose_plan_has_no_steps_is_refused() -> None:
    with pytest.raises(InvalidAnswerError):
        parse_answer("plan_decision", "edit Risks: it might break the login page")


def test_clarify_is_free_text_but_not_empty() -> None:
    assert parse_answer("clarify", "  Use the EU region.  ") == {"text": "Use the EU region."}
    with pytest.raises(InvalidAnswerError, match="empty"):
        parse_answer("clarify", " \n ")


def test_publish_decisions() -> None:
    assert parse_answer("confluence_approval", "publish") == {"decision": "publish", "text": ""}
    assert parse_answer("confluence_approval", "lgtm")["decision"] == "publish"
    assert parse_answer("confluence_approval", "reject wrong page")["text"] == "wrong page"
    with pytest.raises(InvalidAnswerError, match=r"publish \[comment\]"):
        parse_answer("confluence_approval", "perhaps later")


def test_unknown_kind() -> None:
    with pytest.raises(InvalidAnswerError, match="unknown question kind"):
        parse_answer("poll", "yes")


def test_structured_values_validate_the_same_way() -> None:
    """What the graph receives through interrupt(response_schema=...) follows the grammar."""
    assert ANSWER_MODELS["plan_decision"] is PlanDecisionAnswer
    assert PlanDecisionAnswer.model_validate({"decision": "approve"}).text == ""
    with pytest.raises(ValueError):
        PlanDecisionAnswer.model_validate({"decision": "revise", "text": ""})
    with pytest.raises(ValueError):
        PlanDecisionAnswer.model_validate({"decision": "merge"})
    with pytest.raises(ValueError):
        PlanDecisionAnswer.model_validate({"decision": "approve", "extra": 1})


@pytest.mark.parametrize(
    "text",
    [
        "yes but not yet",
        "ok, but fix the heading first",
        "lgtm once the title is fixed",
        "approve after the review",
        "ship it tomorrow",
        "👍 but wait",
        "yes?",
    ],
)
def test_a_hedged_approval_does_not_publish(text: str) -> None:
    with pytest.raises(InvalidAnswerError, match=r"publish \[comment\]"):
        parse_answer("confluence_approval", text)


@pytest.mark.parametrize(
    ("text", "rest"),
    [
        ("publish", ""),
        ("publish looks right, thanks", "looks right, thanks"),
        ("Publish: but check the heading later", "but check the heading later"),
        ("yes", ""),
        ("Yes!", ""),
        ("ok.", ""),
        ("  lgtm !! ", ""),
        ("approve", ""),
        ("approved.", ""),
        ("Ship it!", ""),
        ("👍", ""),
    ],
)
def test_approval_words_stand_alone_and_publish_takes_a_comment(text: str, rest: str) -> None:
    assert parse_answer("confluence_approval", text) == {"decision": "publish", "text": rest}


def test_plan_decisions_still_take_a_comment_after_any_approval_word() -> None:
    assert parse_answer("plan_decision", "ok, but fix the heading first") == {
        "decision": "approve",
        "text": "but fix the heading first",
    }
