"""The Claude Code builder against fake `claude` executables that speak its JSON format."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_team.builders import (
    BuildTask,
    BuildUsage,
    ClaudeCodeBuilder,
    find_build,
    plan_hash,
    prepare_worktree,
    run_build,
)
from agent_team.builders.base import SpendWatch
from agent_team.common.stops import forget_stop
from agent_team.exceptions import BuildError, BuilderUnavailableError, TaskStoppedError
from tests.integration.builders.helpers import changed_files

PLAN = "# Plan\n\n1. Create feature.txt.\n"
MODEL = "claude-sonnet-4-5-20250929"
SUCCESS: dict[str, Any] = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "duration_ms": 5321,
    "duration_api_ms": 5100,
    "num_turns": 4,
    "result": "Created feature.txt as planned.\n\nAll done.",
    "session_id": "0e639165-79b1-4bd4-bb0f-4cb4c15115d4",
    "total_cost_usd": 0.0421,
    "usage": {
        "input_tokens": 120,
        "cache_creation_input_tokens": 2000,
        "cache_read_input_tokens": 15000,
        "output_tokens": 480,
    },
    "modelUsage": {
        MODEL: {"inputTokens": 120, "outputTokens": 470, "costUSD": 0.04},
        "claude-haiku-4-5": {"inputTokens": 30, "outputTokens": 10, "costUSD": 0.0021},
    },
    "permission_denials": [],
}


def _fake_claude(tmp_path: Path, body: str, name: str = "claude") -> Path:
    """An executable that logs its argv, folder and API key to tmp_path, then runs `body` (sh)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    log = tmp_path / "claude-args.json"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, subprocess, sys\n"
        "seen = {'argv': sys.argv[1:], 'cwd': os.getcwd(),"
        " 'api_key': os.environ.get('ANTHROPIC_API_KEY')}\n"
        f"with open({str(log)!r}, 'w') as handle:\n"
        "    json.dump(seen, handle)\n"
        f"sys.exit(subprocess.call(['/bin/sh', '-c', {body!r}]))\n"
    )
    script.chmod(0o755)
    return script


def _log(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tmp_path / "claude-args.json").read_text())
    return data


def _printing(payload: Any, exit_code: int = 0, before: str = "") -> str:
    return f"{before}\nprintf '%s\\n' {shlex.quote(json.dumps(payload))}\nexit {exit_code}"


def test_a_successful_run_is_committed_with_its_usage(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    fake = _fake_claude(tmp_path, _printing(SUCCESS, before="echo feature > feature.txt"))
    builder = ClaudeCodeBuilder(str(fake), timeout_s=30, billing_mode="api")

    result = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    assert changed_files(wt.path, result.commit) == ["feature.txt"]
    assert result.builder == "claude-code" and not result.reused
    assert result.summary == "Created feature.txt as planned."
    assert "All done." in result.output
    usage = result.usage
    assert usage is not None
    assert usage.model == f"claude-code:{MODEL}"
    assert (usage.input_tokens, usage.output_tokens) == (120 + 2000 + 15000, 480)
    assert usage.cache_read_input_tokens == 15000
    assert usage.usd_cost == pytest.approx(0.0421)
    assert usage.billing_mode == "api"

    argv = _log(tmp_path)["argv"]
    assert argv[0] == "-p"
    assert argv[2:7] == ["--output-format", "stream-json", "--verbose", "--max-turns", "50"]
    assert PLAN.strip() in argv[1] and "Commit nothing" in argv[1] and task.title in argv[1]
    assert Path(_log(tmp_path)["cwd"]) == wt.path


def test_a_reused_claude_build_reports_the_original_usage(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    fake = _fake_claude(tmp_path, _printing(SUCCESS))
    builder = ClaudeCodeBuilder(str(fake), timeout_s=30, billing_mode="api")
    first = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)
    (tmp_path / "claude-args.json").unlink()

    again = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    assert not (tmp_path / "claude-args.json").exists(), "the builder ran a second time"
    assert again.reused and again.commit == first.commit
    assert again.usage == first.usage


def test_the_binary_is_found_on_path(
    task: BuildTask, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_claude(tmp_path, _printing(SUCCESS), name="my-claude")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")

    result = run_build(
        ClaudeCodeBuilder("my-claude", 30, "api"), task, PLAN, repo_path=None, state_dir=state_dir
    )

    assert result.usage is not None and result.usage.usd_cost > 0


@pytest.mark.parametrize(("mode", "key_seen"), [("api", "not-a-real-key"), ("subscription", None)])
def test_subscription_mode_hides_the_api_key(
    task: BuildTask,
    state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    key_seen: str | None,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key")
    fake = _fake_claude(tmp_path, _printing(SUCCESS))

    result = run_build(
        ClaudeCodeBuilder(str(fake), 30, mode), task, PLAN, repo_path=None, state_dir=state_dir
    )

    assert _log(tmp_path)["api_key"] == key_seen
    assert result.usage is not None and result.usage.billing_mode == mode


def test_is_error_raises_with_the_redacted_result(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    secret = "sk-ant-api03-" + "x" * 30
    failed = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "result": f"API Error: 401 invalid x-api-key {secret}",
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 40, "output_tokens": 7},
    }
    fake = _fake_claude(tmp_path, _printing(failed, exit_code=1))

    with pytest.raises(BuildError) as caught:
        run_build(
            ClaudeCodeBuilder(str(fake), 30, "api"), task, PLAN, repo_path=None, state_dir=state_dir
        )

    message = str(caught.value)
    assert "API Error: 401" in message and secret not in message and "[redacted]" in message
    usage = caught.value.usage
    assert isinstance(usage, BuildUsage), "the failed run's cost travels with the error"
    assert (usage.input_tokens, usage.output_tokens, usage.usd_cost) == (40, 7, 0.0123)
    wt = prepare_worktree(task, repo_path=None, state_dir=state_dir)
    assert find_build(wt, plan_hash(PLAN)) is None


def test_an_error_subtype_with_exit_zero_still_fails(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    payload = {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 30}
    fake = _fake_claude(tmp_path, _printing(payload))

    with pytest.raises(BuildError, match="error_max_turns"):
        run_build(
            ClaudeCodeBuilder(str(fake), 30, "api"), task, PLAN, repo_path=None, state_dir=state_dir
        )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("echo 'Segmentation fault (core dumped)'", "no JSON result"),
        ("echo '{\"half\": ' ; echo 'oops' >&2; exit 2", "exited with code 2"),
    ],
)
def test_garbage_output_raises(
    task: BuildTask, state_dir: Path, tmp_path: Path, body: str, expected: str
) -> None:
    fake = _fake_claude(tmp_path, body)

    with pytest.raises(BuildError, match=expected):
        run_build(
            ClaudeCodeBuilder(str(fake), 30, "api"), task, PLAN, repo_path=None, state_dir=state_dir
        )


def test_a_missing_binary_parks_the_task(task: BuildTask, state_dir: Path, tmp_path: Path) -> None:
    builder = ClaudeCodeBuilder(str(tmp_path / "no-such-claude"), 30, "api")

    with pytest.raises(BuilderUnavailableError) as caught:
        run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    assert caught.value.parked_reason == "builder_unavailable"
    message = str(caught.value)
    assert "AGENT_TEAM_CLAUDE_BIN" in message and "AGENT_TEAM_BUILDER=offline" in message
    assert "install Claude Code" in message


def _assistant(message_id: str, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """One streamed `assistant` line, as `--output-format stream-json --verbose` prints it."""
    return {
        "type": "assistant",
        "message": {
            "id": message_id,
            "model": MODEL,
            "role": "assistant",
            "content": [{"type": "text", "text": "working"}],
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
        "session_id": "s",
    }


def _per_mtok(model: str, i: int, o: int, cache_read: int, cache_write: int) -> float:
    """$1 per million input tokens, $10 per million output tokens, for the test's model."""
    assert model == MODEL
    return (i + cache_read + cache_write) / 1e6 + o * 10 / 1e6


def test_a_streamed_cost_past_what_is_left_today_stops_the_run(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    marker = "600.5151"
    # Two lines of one response (same id: counted once), then a second response, then it
    # would go on for ten minutes: $0.01 + $0.01 + ($0.02 + $0.01) = $0.04 > $0.025 left.
    lines = [
        _assistant("msg_1", 10_000, 0),
        _assistant("msg_1", 10_000, 0),
        _assistant("msg_2", 20_000, 1_000),
    ]
    body = "".join(f"printf '%s\\n' {shlex.quote(json.dumps(line))}\n" for line in lines)
    fake = _fake_claude(tmp_path, body + f"echo partial > partial.txt\nsleep {marker}\n")
    spend = SpendWatch(remaining_usd=lambda: 0.025, price_usd=_per_mtok)
    builder = ClaudeCodeBuilder(str(fake), 600, "api", spend=spend)

    with pytest.raises(TaskStoppedError) as stopped:
        run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    assert stopped.value.reason == "budget"
    assert "today's cap" in str(stopped.value)
    usage = stopped.value.usage
    assert isinstance(usage, BuildUsage)
    assert (usage.input_tokens, usage.output_tokens) == (30_000, 1_000)
    assert usage.usd_cost == pytest.approx(0.04)
    assert usage.model == f"claude-code:{MODEL}"
    forget_stop(task.task_id)


def test_a_streamed_cost_within_what_is_left_lets_the_run_finish(
    task: BuildTask, state_dir: Path, tmp_path: Path
) -> None:
    body = f"printf '%s\\n' {shlex.quote(json.dumps(_assistant('msg_1', 1_000, 10)))}\n"
    fake = _fake_claude(tmp_path, body + _printing(SUCCESS))
    spend = SpendWatch(remaining_usd=lambda: 1.0, price_usd=_per_mtok)

    result = run_build(
        ClaudeCodeBuilder(str(fake), 60, "api", spend=spend),
        task,
        PLAN,
        repo_path=None,
        state_dir=state_dir,
    )

    assert result.usage is not None and result.usage.usd_cost == pytest.approx(0.0421)
