"""The pipeline graph in-process: gates, answers, clarify rounds, and idempotent re-runs.

`build_graph` is compiled with hand-made `GraphDeps` over a real ledger and a
`SqliteSaver` on its own connection; the coordinator is not involved, so these
tests pin down what the nodes themselves do on each answer and on a re-run.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_team import db
from agent_team.models.offline import CLEAR_MIN_WORDS
from agent_team.models.schemas import Plan
from agent_team.requests.actors import INTERNAL
from agent_team.requests.task_requests import TaskRequests
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    SHORT_BODY,
    UNCLEAR_ARGS,
    MakeHarness,
    tool_chat,
    usage_calls,
)

APPROVE: dict[str, Any] = {"decision": "approve", "text": ""}
REVIEWED = [
    ("intake", "running"),
    ("clarify", "running"),
    ("plan", "running"),
    ("plan_review", "running"),
]


def words(n: int) -> str:
    return " ".join(f"word{i}" for i in range(1, n + 1))


def test_the_plan_gate_interrupts_with_its_question_and_one_row(make_harness: MakeHarness) -> None:
    h = make_harness()
    result = h.start("t1", LONG_BODY)

    (interrupt,) = result["__interrupt__"]
    value = interrupt.value
    assert value["question_id"] == "t1:q1"
    assert value["kind"] == "plan_decision"
    assert value["text"] == "Review the plan for: Remember the email"
    assert "1. Store the email in a cookie" in value["plan_markdown"]
    assert "approve [comment]" in value["help"]

    (row,) = h.questions("t1")
    assert (row.question_id, row.turn, row.kind) == ("t1:q1", 1, "plan_decision")
    assert row.status == "open"
    assert row.transport == "local" and row.channel_ref is None
    assert row.payload == {k: v for k, v in value.items() if k not in ("question_id", "kind")}
    assert row.deadline_at is not None
    assert db.from_iso(row.deadline_at) == h.clock.now + h.deps.deadlines["plan_decision"]
    assert h.build.calls == []
    assert h.caller.calls == 2  # clarify + plan
    assert h.journey("t1") == REVIEWED


def test_approve_builds_once_and_reaches_done(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", LONG_BODY)
    planned = Plan.model_validate(h.values("t1")["plan"])

    result = h.resume("t1", APPROVE)

    assert "__interrupt__" not in result
    assert len(h.build.calls) == 1
    task, plan_markdown = h.build.calls[0]
    assert (task.task_id, task.title, task.body) == ("t1", "Remember the email", LONG_BODY)
    assert plan_markdown == planned.to_markdown()
    assert result["outcome"] == "done"
    assert result["decision"] == "approve"
    assert result["build"]["commit"] == "0" * 40
    assert h.graph.get_state(h.config("t1")).next == ()
    assert h.journey("t1") == [*REVIEWED, ("build", "running"), ("done", "running")]
    assert h.caller.calls == 2, "approving calls no model"
    assert len(h.questions("t1")) == 1


def test_revise_plans_again_with_the_feedback_and_asks_turn_2(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", LONG_BODY)
    first = h.pending("t1").value

    result = h.resume("t1", {"decision": "revise", "text": "add a rollback step"})

    (interrupt,) = result["__interrupt__"]
    second = interrupt.value
    assert second["question_id"] == "t1:q2" and second["kind"] == "plan_decision"
    assert "Address review feedback: add a rollback step" in second["plan_markdown"]
    assert "Address review feedback" not in first["plan_markdown"]
    assert h.caller.calls == 3, "the plan node ran again (and only it)"
    assert usage_calls(h.conn, "t1") == {"clarify": 1, "plan": 2}
    assert h.build.calls == []
    assert [(q.question_id, q.turn) for q in h.questions("t1")] == [("t1:q1", 1), ("t1:q2", 2)]
    assert h.values("t1")["plan_feedback"] == "add a rollback step"

    h.resume("t1", APPROVE)
    assert len(h.build.calls) == 1
    assert "Address review feedback: add a rollback step" in h.build.calls[0][1]


def test_revise_sends_the_feedback_and_previous_plan_to_the_model(
    make_harness: MakeHarness,
) -> None:
    chat = tool_chat()
    h = make_harness(chat)
    h.start("t1", LONG_BODY)
    h.resume("t1", {"decision": "revise", "text": "split <step> one"})

    plan_prompts = [text for tool, text in chat.prompts if tool == "Plan"]
    assert len(plan_prompts) == 2
    assert "<feedback>" not in plan_prompts[0]
    assert "<feedback>\nsplit &lt;step&gt; one\n</feedback>" in plan_prompts[1]
    assert "<previous_plan>" in plan_prompts[1] and "Step one" in plan_prompts[1]


def test_edit_replaces_the_plan_with_the_humans_text(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", LONG_BODY)
    text = "Keep it small.\n- Use localStorage instead\n- Ship it\n\nRisks: old browsers"

    result = h.resume("t1", {"decision": "edit", "text": text})

    expected = Plan.from_text(text)
    assert result["plan"] == expected.model_dump()
    assert result["plan_source"] == "human"
    assert [md for _, md in h.build.calls] == [expected.to_markdown()]
    assert "Store the email in a cookie" not in h.build.calls[0][1]
    assert h.caller.calls == 2, "an edit is not sent to the model"
    assert result["outcome"] == "done"


def test_reject_cancels_and_never_builds(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", LONG_BODY)

    result = h.resume("t1", {"decision": "reject", "text": "not now"})

    assert result["outcome"] == "cancelled"
    assert h.build.calls == []
    assert h.journey("t1") == [*REVIEWED, ("done", "running")]
    assert h.graph.get_state(h.config("t1")).next == ()


@pytest.mark.parametrize(
    ("count", "kind"),
    [(CLEAR_MIN_WORDS - 1, "clarify"), (CLEAR_MIN_WORDS, "plan_decision")],
)
def test_clarify_asks_for_11_words_and_not_for_12(
    make_harness: MakeHarness, count: int, kind: str
) -> None:
    assert CLEAR_MIN_WORDS == 12
    h = make_harness()
    result = h.start("t1", words(count))

    (interrupt,) = result["__interrupt__"]
    assert interrupt.value["kind"] == kind
    assert [q.kind for q in h.questions("t1")] == [kind]
    if kind == "clarify":
        assert interrupt.value["text"].startswith("What should be done, and how will we know")
        assert words(count) in interrupt.value["text"]
        assert h.caller.calls == 1, "no plan before the answer"
    else:
        assert h.caller.calls == 2


def test_a_clarify_answer_reaches_the_plan(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", SHORT_BODY)
    answer = "Remember the email address on the login form so returning users type less."

    result = h.resume("t1", {"text": answer})

    (interrupt,) = result["__interrupt__"]
    assert interrupt.value["question_id"] == "t1:q2"
    assert interrupt.value["kind"] == "plan_decision"
    assert answer in interrupt.value["plan_markdown"]
    values = h.values("t1")
    assert values["clarifications"] == [
        {"question": h.questions("t1")[0].payload["text"], "answer": answer}
    ]
    assert (values["clarify_rounds"], values["turn"]) == (1, 1)
    assert usage_calls(h.conn, "t1") == {"clarify": 2, "plan": 1}


def test_a_second_clarify_round_says_why_and_never_repeats_the_first_question(
    make_harness: MakeHarness,
) -> None:
    # #31 (7): the second round asked the first question again, word for word.
    h = make_harness()  # the offline model
    first = h.start("t1", SHORT_BODY)["__interrupt__"][0].value["text"]

    second = h.resume("t1", {"text": "ok"})["__interrupt__"][0].value

    assert second["kind"] == "clarify" and second["text"] != first
    assert second["text"].startswith("Your answer ('ok') still leaves the issue too short")
    assert [q.payload["text"] for q in h.questions("t1")] == [first, second["text"]]


def test_a_model_that_repeats_its_question_gets_the_earlier_exchange_and_is_not_echoed(
    make_harness: MakeHarness,
) -> None:
    chat = tool_chat(clarify=[UNCLEAR_ARGS])  # asks the same question every round
    h = make_harness(chat, max_clarify_rounds=3)
    first = h.start("t1", LONG_BODY)["__interrupt__"][0].value["text"]

    second = h.resume("t1", {"text": "the login page"})["__interrupt__"][0].value["text"]
    third = h.resume("t1", {"text": "the login page"})["__interrupt__"][0].value["text"]

    # The model was given the first question and its answer...
    (_, prompt) = [p for p in chat.prompts if p[0] == "ClarifyDecision"][1]
    assert f"<question>{first}</question>" in prompt
    assert "<answer>the login page</answer>" in prompt
    # ...and what it asked again is posted with why, never as it was.
    assert second.startswith(first) and second != first
    assert "round 2: the answer 'the login page' did not settle it" in second
    assert "round 3" in third and len({first, second, third}) == 3


@pytest.mark.parametrize("max_rounds", [0, 1, 2, 3])
def test_clarify_rounds_are_capped_even_if_the_model_keeps_asking(
    make_harness: MakeHarness, max_rounds: int
) -> None:
    chat = tool_chat(clarify=[UNCLEAR_ARGS])  # never satisfied
    h = make_harness(chat, max_clarify_rounds=max_rounds)
    result = h.start("t1", LONG_BODY)
    asked = 0
    while result["__interrupt__"][0].value["kind"] == "clarify":
        asked += 1
        assert asked <= max_rounds, "asked past max_clarify_rounds"
        result = h.resume("t1", {"text": f"answer {asked}"})

    assert asked == max_rounds
    assert result["__interrupt__"][0].value["kind"] == "plan_decision"
    assert result["__interrupt__"][0].value["question_id"] == f"t1:q{max_rounds + 1}"
    assert chat.calls_for("ClarifyDecision") == max_rounds
    assert chat.calls_for("Plan") == 1
    assert [q.kind for q in h.questions("t1")] == ["clarify"] * max_rounds + ["plan_decision"]


def test_rerunning_a_gate_node_asks_nothing_new_and_calls_no_model(
    make_harness: MakeHarness,
) -> None:
    h = make_harness()
    h.start("t1", LONG_BODY)
    before = (h.caller.calls, h.questions("t1"), h.journey("t1"), h.pending("t1").id)

    # Running the thread again without an answer re-runs the waiting gate node.
    again = h.graph.invoke(None, h.config("t1"), durability="sync")

    assert again["__interrupt__"][0].value["question_id"] == "t1:q1"
    assert (h.caller.calls, h.questions("t1"), h.journey("t1"), h.pending("t1").id) == before

    h.resume("t1", APPROVE)  # the resume re-runs plan_review from its first line
    assert h.caller.calls == before[0], "no model call on resume"
    assert h.questions("t1") == before[1], "the question row was not written again"
    assert usage_calls(h.conn, "t1") == {"clarify": 1, "plan": 1}
    assert len(h.build.calls) == 1


def test_transitions_are_recorded_once_per_node_across_resumes(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", words(CLEAR_MIN_WORDS - 1))
    h.resume("t1", {"text": "Also prefill the email field from a cookie on the next visit."})
    h.resume("t1", APPROVE)

    rows = db.list_transitions(h.conn, "t1")
    assert [(r.from_phase, r.to_phase) for r in rows] == [
        (None, "intake"),
        ("intake", "clarify"),
        ("clarify", "plan"),
        ("plan", "plan_review"),
        ("plan_review", "build"),
        ("build", "done"),
    ]
    assert [r.exited_at is None for r in rows] == [False] * 5 + [True]


def test_a_string_resume_value_is_held_to_the_answer_grammar(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", LONG_BODY)
    result = h.resume("t1", "lgtm")
    assert result["decision"] == "approve"
    assert len(h.build.calls) == 1


def test_an_invalid_string_resume_value_is_refused(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", LONG_BODY)
    waiting = h.pending("t1").id

    # InvalidAnswerError today; a pydantic ValidationError wrapping it if the gate validates
    # with `interrupt(response_schema=...)`. Both are ValueErrors.
    with pytest.raises(ValueError, match="not a plan decision"):
        h.resume("t1", "maybe")
    assert h.build.calls == []
    assert h.pending("t1").id == waiting, "the graph still reports the same interrupt"


def test_a_refused_resume_value_does_not_poison_the_next_answer(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", LONG_BODY)
    with pytest.raises(ValueError, match="not a plan decision"):
        h.resume("t1", "maybe")

    result = h.resume("t1", "lgtm")

    assert result["decision"] == "approve"
    assert len(h.build.calls) == 1


def test_a_note_left_while_the_plan_waits_reaches_the_next_plan(make_harness: MakeHarness) -> None:
    h = make_harness()
    h.start("t1", LONG_BODY)
    assert "Take into account" not in h.pending("t1").value["plan_markdown"]
    TaskRequests(h.conn).note("t1", "The staging DB is read-only until Friday", actor=INTERNAL)

    result = h.resume("t1", {"decision": "revise", "text": "add a rollback step"})

    (interrupt,) = result["__interrupt__"]
    revised = interrupt.value["plan_markdown"]
    assert "Take into account: The staging DB is read-only until Friday" in revised
    assert revised.index("Take into account") < revised.index("Address review feedback")


def test_notes_reach_the_model_apart_from_the_issue_and_escaped(
    make_harness: MakeHarness,
) -> None:
    chat = tool_chat()
    h = make_harness(chat)
    h.start("t1", LONG_BODY)
    TaskRequests(h.conn).note("t1", "use <b>v2</b> of the API", actor=INTERNAL)
    h.resume("t1", {"decision": "revise", "text": "again"})

    first, second = [text for tool, text in chat.prompts if tool == "Plan"]
    assert "<notes_from_people>" not in first
    assert "<notes_from_people>\n<note>use &lt;b&gt;v2&lt;/b&gt; of the API</note>" in second
