"""Pure logic of the builders: keys, plan hashes, Claude Code's JSON, settings, results."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_team.builders import (
    BuildResult,
    BuildTask,
    BuildUsage,
    ClaudeCodeBuilder,
    CommandBuilder,
    OfflineBuilder,
    make_builder,
    parse_claude_output,
    plan_hash,
    task_key,
)
from agent_team.builders.claude_code import build_prompt
from agent_team.builders.offline import under_title
from agent_team.exceptions import ConfigError
from agent_team.models.schemas import Plan

SAFE_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")

# --- task_key ------------------------------------------------------------------------------------


def test_a_safe_task_id_is_its_own_key() -> None:
    assert task_key("task-1") == "task-1"
    assert task_key("A_b-9") == "A_b-9"


def test_unsafe_characters_are_replaced_and_the_original_is_hashed_in() -> None:
    key = task_key("github:owner/repo#12")

    assert re.fullmatch(r"github-owner-repo-12-[0-9a-f]{10}", key)
    assert task_key("a/b") != task_key("a-b") == "a-b"
    assert task_key("a/b") != task_key("a\\b")


@pytest.mark.parametrize("task_id", ["", "///", "..", "-", "é"])
def test_ids_with_nothing_safe_still_get_a_key(task_id: str) -> None:
    assert re.fullmatch(r"task-[0-9a-f]{10}", task_key(task_id))


def test_long_ids_are_cut_and_stay_distinct() -> None:
    one, two = task_key("x" * 200 + "1"), task_key("x" * 200 + "2")

    assert one != two
    assert len(one) <= 71 and len(two) <= 71


@given(st.text(max_size=120))
def test_every_key_is_safe_and_stable(task_id: str) -> None:
    key = task_key(task_id)

    assert SAFE_KEY.match(key) and len(key) <= 71
    assert ".." not in key and not key.endswith(".lock")
    assert task_key(task_id) == key
    if key == task_id:
        assert SAFE_KEY.match(task_id)


# --- plan_hash -----------------------------------------------------------------------------------


def test_plan_hash_is_short_stable_and_ignores_line_endings() -> None:
    digest = plan_hash("# Plan\n\n1. step\n")

    assert re.fullmatch(r"[0-9a-f]{16}", digest)
    assert plan_hash("# Plan\r\n\r\n1. step\r\n") == digest
    assert plan_hash("\n# Plan\n\n1. step") == digest
    assert plan_hash("# Plan\n\n1. other step\n") != digest


# --- Claude Code output --------------------------------------------------------------------------

DOCUMENTED: dict[str, Any] = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "duration_ms": 1998,
    "duration_api_ms": 1976,
    "num_turns": 1,
    "result": "Hello CLI Test",
    "stop_reason": "end_turn",
    "session_id": "0e639165-79b1-4bd4-bb0f-4cb4c15115d4",
    "total_cost_usd": 0.0079825,
    "usage": {"input_tokens": 3, "cache_read_input_tokens": 15635, "output_tokens": 6},
    "modelUsage": {"claude-sonnet-4-5": {"inputTokens": 3, "outputTokens": 6, "costUSD": 0.008}},
}


def test_the_documented_result_is_read() -> None:
    run = parse_claude_output(json.dumps(DOCUMENTED))

    assert run is not None
    assert (run.is_error, run.subtype, run.result) == (False, "success", "Hello CLI Test")
    assert run.session_id == DOCUMENTED["session_id"] and run.num_turns == 1
    assert run.total_cost_usd == pytest.approx(0.0079825)
    assert (run.input_tokens, run.output_tokens, run.cache_read_input_tokens) == (3, 6, 15635)
    usage = run.usage("subscription")
    assert usage == BuildUsage(
        model="claude-code:claude-sonnet-4-5",
        input_tokens=15638,
        output_tokens=6,
        usd_cost=0.0079825,
        billing_mode="subscription",
        cache_read_input_tokens=15635,
    )


def test_missing_fields_are_tolerated() -> None:
    run = parse_claude_output('{"type": "result", "result": "done"}')

    assert run is not None and not run.is_error and run.result == "done"
    assert run.total_cost_usd is None and run.model is None and run.num_turns is None
    assert run.usage("api") == BuildUsage(model="claude-code", usd_cost=0.0, billing_mode="api")


def test_cost_and_tokens_fall_back_to_older_and_per_model_fields() -> None:
    legacy = parse_claude_output('{"type": "result", "result": "x", "cost_usd": 0.5}')
    per_model = parse_claude_output(
        json.dumps(
            {
                "type": "result",
                "modelUsage": {
                    "big": {"inputTokens": 10, "outputTokens": 5, "costUSD": 0.3},
                    "small": {"inputTokens": 4, "outputTokens": 1, "costUSD": 0.1},
                },
            }
        )
    )

    assert legacy is not None and legacy.total_cost_usd == 0.5
    assert per_model is not None
    assert per_model.total_cost_usd == pytest.approx(0.4)
    assert (per_model.input_tokens, per_model.output_tokens, per_model.model) == (14, 6, "big")


def test_a_verbose_array_and_stream_lines_are_read() -> None:
    messages = [
        {"type": "system", "subtype": "init"},
        {"type": "assistant", "message": {}},
        DOCUMENTED,
    ]
    lines = "warning: something\n" + "\n".join(json.dumps(m) for m in messages) + "\n"

    for text in (json.dumps(messages), lines):
        run = parse_claude_output(text)
        assert run is not None and run.result == "Hello CLI Test"


@pytest.mark.parametrize("text", ["", "Segmentation fault", '{"half": ', "[1, 2]", '"just text"'])
def test_garbage_gives_none(text: str) -> None:
    assert parse_claude_output(text) is None


def test_error_subtypes_and_bad_numbers() -> None:
    run = parse_claude_output(
        json.dumps(
            {
                "type": "result",
                "subtype": "error_during_execution",
                "errors": ["tool crashed"],
                "total_cost_usd": -1,
                "num_turns": True,
                "usage": {"input_tokens": "many", "output_tokens": 2.0},
                "result": {"not": "text"},
            }
        )
    )

    assert run is not None and run.is_error and run.errors == ("tool crashed",)
    assert run.total_cost_usd is None and run.num_turns == 0
    assert (run.input_tokens, run.output_tokens) == (0, 2)
    assert run.result == '{"not": "text"}'


def test_the_prompt_holds_the_task_and_plan_and_the_rule() -> None:
    task = BuildTask("t-1", "Add greeting", "Users want a hello.")

    prompt = build_prompt(task, "# Plan\n\n1. Hello\n")
    long_prompt = build_prompt(task, "x" * 200_000)

    assert "Add greeting" in prompt and "Users want a hello." in prompt
    assert "1. Hello" in prompt and "Commit nothing" in prompt
    assert len(long_prompt) < 5_000 and ".agent-team/plan.md" in long_prompt


# --- make_builder --------------------------------------------------------------------------------

SETTINGS: dict[str, Any] = {
    "build_command": None,
    "build_timeout_s": 60.0,
    "claude_bin": "claude",
    "billing_mode": "api",
}


def test_make_builder_builds_each_kind() -> None:
    offline = make_builder("offline", **SETTINGS)
    command = make_builder("command", **{**SETTINGS, "build_command": "make build"})
    claude = make_builder("claude-code", **{**SETTINGS, "billing_mode": "subscription"})

    assert isinstance(offline, OfflineBuilder) and offline.name == "offline"
    assert isinstance(command, CommandBuilder)
    assert (command.command, command.timeout_s) == ("make build", 60.0)
    assert isinstance(claude, ClaudeCodeBuilder)
    assert (claude.binary, claude.billing_mode, claude.timeout_s) == ("claude", "subscription", 60)


@pytest.mark.parametrize("command", [None, "", "   "])
def test_the_command_builder_needs_a_command(command: str | None) -> None:
    with pytest.raises(ConfigError, match="AGENT_TEAM_BUILD_COMMAND"):
        make_builder("command", **{**SETTINGS, "build_command": command})


def test_bad_settings_name_their_variable() -> None:
    with pytest.raises(ConfigError, match=r"AGENT_TEAM_BUILDER.*offline, command, claude-code"):
        make_builder("cursor", **SETTINGS)
    with pytest.raises(ConfigError, match="AGENT_TEAM_BUILD_TIMEOUT_S"):
        make_builder("offline", **{**SETTINGS, "build_timeout_s": 0})
    with pytest.raises(ConfigError, match="AGENT_TEAM_BILLING_MODE"):
        make_builder("claude-code", **{**SETTINGS, "billing_mode": "free"})


# --- results -------------------------------------------------------------------------------------


def test_a_result_survives_the_graph_state_round_trip() -> None:
    result = BuildResult(
        builder="claude-code",
        branch="agent-team/t",
        commit="a" * 40,
        summary="did it",
        output="log",
        plan_hash="0" * 16,
        usage=BuildUsage(model="claude-code:m", input_tokens=1, output_tokens=2, usd_cost=0.1),
    )

    assert BuildResult.model_validate(json.loads(json.dumps(result.model_dump(mode="json")))) == (
        result
    )


def test_the_plan_document_has_one_top_level_heading() -> None:
    # #31 (14): the plan's own `# Plan` sat beside the document's `# Plan: <title>`.
    plan = Plan(summary="Greet readers", steps=["Add the line", "Test it"]).to_markdown()
    task = BuildTask(task_id="t1", title="Add a greeting", body="")
    (document,) = OfflineBuilder().files(task, plan).files.values()
    headings = [line for line in document.splitlines() if line.startswith("#")]
    assert headings == ["# Plan: Add a greeting", "## Plan", "### Steps", "### Risks"]
    assert "1. Add the line" in document


def test_headings_inside_a_code_fence_stay_as_they_are() -> None:
    assert under_title("# A\n```\n# not a heading\n```\n## B") == (
        "## A\n```\n# not a heading\n```\n### B"
    )
