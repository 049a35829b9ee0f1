"""Block Kit shapes: what each question kind shows, and outside text kept inert."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from agent_team.db import Question, Task
from agent_team.integrations.slack.blocks import (
    closed_blocks,
    dashboard_link,
    escape,
    outcome_line,
    question_blocks,
    question_fallback,
    revise_modal,
)
from agent_team.reports.plandiff import plan_versions


def task(**changes: str) -> Task:
    values = {
        "id": "t1",
        "kind": "code",
        "source": "github:o/r",
        "source_ref": "https://github.com/o/r/issues/3",
        "title": "Fix <!channel> login & more",
        "body": "",
        "status": "waiting",
        "phase": "plan_review",
        "parked_reason": None,
        "created_at": "2026-03-02T10:00:00.000000Z",
        "updated_at": "2026-03-02T10:00:00.000000Z",
    }
    values.update(changes)
    return Task(**values)  # type: ignore[arg-type]


def question(
    kind: str, payload: dict[str, Any], deadline_at: str | None = "2026-03-05T10:00:00.000000Z"
) -> Question:
    return Question(
        question_id="t1:1",
        thread_id="t1",
        turn=1,
        kind=kind,
        status="open",
        transport="slack",
        channel_ref=None,
        posted_at=None,
        deadline_at=deadline_at,
        answer_json=None,
        answered_at=None,
        answered_via=None,
        payload_json=json.dumps(payload),
    )


def actions(blocks: list[dict[str, object]]) -> list[str]:
    found = [b for b in blocks if b["type"] == "actions"]
    return [e["action_id"] for b in found for e in b["elements"]]  # type: ignore[attr-defined]


def test_plan_decision_has_the_plan_the_deadline_and_three_buttons() -> None:
    q = question("plan_decision", {"text": "Review the plan", "plan_markdown": "- step <b>"})
    blocks = question_blocks(q, task(), "http://dash.test/")
    text = json.dumps(blocks)
    assert actions(blocks) == ["agent_team.approve", "agent_team.revise", "agent_team.reject"]
    assert "- step &lt;b&gt;" in text
    assert "<!date^1772704800^" in text and "2026-03-05 10:00 UTC" in text
    assert "<http://dash.test/task/t1|dashboard>" in text
    assert "<https://github.com/o/r/issues/3|source>" in text
    assert "&lt;!channel&gt;" in text and "<!channel>" not in text


def test_confluence_approval_offers_publish_and_clarify_asks_for_a_reply() -> None:
    publish = question_blocks(question("confluence_approval", {"text": "Publish?"}), task(), None)
    assert actions(publish) == ["agent_team.publish", "agent_team.revise", "agent_team.reject"]
    clarify = question_blocks(question("clarify", {"text": "Which page?"}), task(), None)
    assert actions(clarify) == []
    assert "Reply in this thread" in json.dumps(clarify)
    assert "dashboard" not in json.dumps(clarify), "no dashboard URL configured, no link"


def test_closed_and_superseded_messages_have_no_buttons() -> None:
    q = question("plan_decision", {"text": "Review"})
    when = datetime(2026, 3, 2, tzinfo=UTC)
    line = outcome_line({"decision": "approve", "text": ""}, "slack:U1", when)
    assert line.startswith("✅ Approved by <@U1> at <!date^")
    assert actions(closed_blocks(q, task(), None, line)) == []
    revise = outcome_line({"decision": "revise", "text": "a <@U2> b"}, "slack:U1", when)
    assert "Changes requested" in revise and "a &lt;@U2&gt; b" in revise
    assert "Rejected via cli:&lt;x&gt;" in outcome_line({"decision": "reject"}, "cli:<x>", when)


def test_small_helpers() -> None:
    assert escape("a & <b>") == "a &amp; &lt;b&gt;"
    assert dashboard_link(None, "t1") is None
    assert dashboard_link("https://x.test/base/", "t1") == "https://x.test/base/task/t1"
    assert question_fallback(question("clarify", {"text": "Why?"}), task(title="T")) == "T: Why?"
    modal = revise_modal("t1:1", "C1:1.2", "plan_decision")
    assert modal["private_metadata"] == "t1:1|C1:1.2"
    assert modal["blocks"][0]["block_id"] == "feedback"


def test_long_text_is_clipped_to_what_slack_accepts() -> None:
    q = question("plan_decision", {"text": "x" * 5000, "plan_markdown": "y" * 5000})
    for block in question_blocks(q, task(), None):
        text = block.get("text")
        if isinstance(text, dict):
            assert len(text["text"]) <= 3000


def test_the_fallback_text_is_escaped_like_the_blocks() -> None:
    """The top-level `text` is mrkdwn too (push notices): no pings, no disguised links."""
    asked = question("clarify", {"text": "See <http://evil.test|the docs> & <!here>"})
    text = question_fallback(asked, task())
    assert "<" not in text and ">" not in text
    assert text == (
        "Fix &lt;!channel&gt; login &amp; more: "
        "See &lt;http://evil.test|the docs&gt; &amp; &lt;!here&gt;"
    )
    long = question_fallback(question("clarify", {"text": "&" * 400}), task(title="T"))
    assert long.endswith("&amp;…") and "&am…" not in long, "never cut inside an entity"


PLAN_V1 = "# Plan\n\nLogin\n\n## Steps\n\n1. Store the email\n2. Prefill <it>\n"
PLAN_V2 = "# Plan\n\nLogin\n\n## Steps\n\n1. Store the email\n2. Prefill <it> & test\n"


def plan_question(turn: int, plan: str, answer: str | None) -> Question:
    return Question(
        question_id=f"t1:q{turn}",
        thread_id="t1",
        turn=turn,
        kind="plan_decision",
        status="answered" if answer else "open",
        transport="slack",
        channel_ref=None,
        posted_at=None,
        deadline_at="2026-03-05T10:00:00.000000Z",
        answer_json=answer,
        answered_at="2026-03-02T10:00:00.000000Z" if answer else None,
        answered_via="slack:U1" if answer else None,
        payload_json=json.dumps({"text": "Review the plan", "plan_markdown": plan}),
    )


def sections(blocks: list[dict[str, object]]) -> list[str]:
    return [b["text"]["text"] for b in blocks if b["type"] == "section"]  # type: ignore[index]


def test_a_revised_plan_says_what_changed_since_the_plan_sent_back() -> None:
    first = plan_question(1, PLAN_V1, '{"decision": "revise", "text": "add <@U9> tests"}')
    second = plan_question(2, PLAN_V2, None)
    plans = plan_versions([first, second])

    blocks = question_blocks(second, task(), None, plans=plans)

    (changes,) = [s for s in sections(blocks) if "Changed since the last plan" in s]
    assert changes == (
        "*Changed since the last plan* (plan 1, revise by U1 via slack: add &lt;@U9&gt; tests):\n"
        "```- 2. Prefill &lt;it&gt;\n+ 2. Prefill &lt;it&gt; &amp; test```"
    )
    # The buttons stay last, and the redrawn message keeps the changes.
    assert actions(blocks) == ["agent_team.approve", "agent_team.revise", "agent_team.reject"]
    closed = closed_blocks(second, task(), None, "✅ Approved", plans=plans)
    assert changes in sections(closed)
    # The first plan revises nothing; without the versions there is nothing to compare.
    assert not any("Changed since" in s for s in sections(question_blocks(first, task(), None)))
    assert not any(
        "Changed since" in s for s in sections(question_blocks(first, task(), None, plans=plans))
    )
    assert not any("Changed since" in s for s in sections(question_blocks(second, task(), None)))


def test_a_long_plan_diff_is_cut_at_a_line_within_slacks_section_limit() -> None:
    steps = "\n".join(f"{n}. step {n} & <more> " + "x" * 60 for n in range(1, 300))
    first = plan_question(1, "# Plan\n\n1. only step\n", '{"decision": "revise", "text": ""}')
    second = plan_question(2, "# Plan\n\n0. keep ``` fences\n" + steps, None)

    blocks = question_blocks(second, task(), None, plans=plan_versions([first, second]))

    (changes,) = [s for s in sections(blocks) if "Changed since the last plan" in s]
    assert len(changes) <= 3000
    assert changes.endswith(" more changed lines```")
    body = changes.split("```", 1)[1].removesuffix("```")
    assert body.count("```") == 0  # a fence in the plan cannot close the block early
    *shown, note = body.splitlines()
    assert shown[0] == "- 1. only step" and shown[1] == "+ 0. keep `\u200b`` fences"
    assert all(line.startswith(("+ ", "- ")) for line in shown)
    assert all(line.endswith("x" * 60) for line in shown[2:])  # whole lines, never half of one
    assert "&amp; &lt;more&gt;" in shown[2]
    assert note == f"… and {301 - len(shown)} more changed lines"  # 299 steps, 2 more lines


PR_URL = "https://github.com/o/r/pull/7"


def pr_decision(**changes: Any) -> Question:
    payload: dict[str, Any] = {
        "text": f"CI is red on the pull request's head: lint. What should I do on {PR_URL}?",
        "title": "T",
        "reason": "ci_failed",
        "url": PR_URL,
        "checks": [
            {
                "name": "lint <x>",
                "conclusion": "failure",
                "url": "https://github.com/o/r/actions/runs/1",
                "excerpt": "E501 line too long\n``` not a fence & <b>",
                "rerun": False,
            }
        ],
        "items": [],
        "help": "answer with one of: `fix [note]`, `ignore`, `take over`",
    }
    payload.update(changes)
    return question("pr_decision", payload)


def test_a_pr_decision_shows_the_failing_check_its_log_the_link_and_three_buttons() -> None:
    blocks = question_blocks(pr_decision(), task(), None)
    texts = sections(blocks)
    assert actions(blocks) == ["agent_team.fix", "agent_team.ignore", "agent_team.takeover"]
    assert texts[1].startswith("CI is red on the pull request's head: lint.")
    assert f"Pull request: <{PR_URL}|{PR_URL}>" in texts
    (check,) = [t for t in texts if "lint" in t and "```" in t]
    assert check.startswith(
        "❌ *lint &lt;x&gt;* (failure) · <https://github.com/o/r/actions/runs/1|log>"
    )
    fenced = check.split("\n", 1)[1]
    assert fenced.startswith("```E501 line too long\n") and fenced.endswith("```")
    assert fenced[3:-3].count("```") == 0, "the excerpt cannot close its code block"
    assert "&amp; &lt;b&gt;" in fenced
    hint = json.dumps(blocks[-1])
    assert "Or reply in this thread" in hint and "take over" in hint
    assert "<!date^" in json.dumps(blocks), "it has a deadline"


def test_a_pr_decision_bounds_checks_excerpts_and_review_items_to_slacks_limits() -> None:
    checks = [
        {"name": f"job {n}", "conclusion": "failure", "excerpt": "<&>" * 3000} for n in range(8)
    ]
    items = [{"user": "u" * 300, "body": "<" * 4000} for _ in range(30)]
    blocks = question_blocks(pr_decision(checks=checks, items=items, reason="rounds"), task(), None)
    texts = sections(blocks)
    assert all(len(text) <= 3000 for text in texts)
    assert len(blocks) <= 50
    shown = [t for t in texts if t.startswith("❌ *job")]
    assert len(shown) == 5 and "… and 3 more failing checks" in texts
    assert all(t.endswith("…```") and "&amp;&gt;&lt;&amp" not in t[-12:] for t in shown)
    (review,) = [t for t in texts if t.startswith("*Review feedback*")]
    assert review.count("\n• *") == 10 and review.endswith("… and 20 more")


def test_a_pr_decision_on_review_rounds_lists_who_asked_for_what() -> None:
    asked = pr_decision(
        reason="rounds",
        checks=[],
        items=[{"user": "reviewer", "body": "Name the   test\nfile <please>"}],
    )
    texts = sections(question_blocks(asked, task(), None))
    assert "*Review feedback*\n• *reviewer*: Name the test file &lt;please&gt;" in texts


def test_a_pull_request_gate_is_a_notice_without_buttons_or_deadline() -> None:
    payload = {"text": f"Draft pull request #7 is open: {PR_URL}", "url": PR_URL, "number": 7}
    gate = question("pull_request", {**payload, "round": 0, "title": "T"}, deadline_at=None)
    blocks = question_blocks(gate, task(), None)
    text = json.dumps(blocks)
    assert actions(blocks) == []
    assert sections(blocks)[1] == (
        f"Draft pull request #7 is open: <{PR_URL}|{PR_URL}>; "
        "I follow its reviews and CI; it ends when merged or closed."
    )
    assert "Answer by" not in text and "no deadline" not in text
    assert "Reply in this thread" not in text
    assert "Not answered here: this gate is answered by GitHub" in text
    assert "agent-team cancel t1" in text, "it names the task to cancel"
    merged = outcome_line({"decision": "merged", "text": ""}, "github:o/r", datetime.now(UTC))
    assert merged.startswith("✅ Merged via github:o/r at ")


def test_pr_decision_outcomes_read_as_what_was_decided() -> None:
    when = datetime(2026, 3, 2, tzinfo=UTC)
    assert outcome_line({"decision": "takeover"}, "slack:U1", when).startswith(
        "✋ Taken over by <@U1>"
    )
    fix = outcome_line({"decision": "fix", "text": "rename it"}, "slack:U1", when)
    assert fix.startswith("🔧 Fix requested by <@U1>") and fix.endswith(": rename it")
    assert outcome_line({"decision": "ignore"}, "cli:ann", when).startswith(
        "💬 Ignored via cli:ann"
    )
