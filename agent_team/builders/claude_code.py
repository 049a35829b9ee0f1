"""A builder that runs the Claude Code CLI headless in the worktree.

`claude -p <prompt> --output-format stream-json --verbose --max-turns N`
runs the agent to completion, printing one JSON message per line as it works
(`system`, `assistant` with each model response's `usage`, `user` with tool
results) and last Claude Code's documented "result" message:

    {"type": "result", "subtype": "success", "is_error": false,
     "result": "<final text>", "session_id": "...", "num_turns": 3,
     "duration_ms": 1234, "total_cost_usd": 0.0123,
     "usage": {"input_tokens": 3, "output_tokens": 6,
               "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
     "modelUsage": {"<model id>": {"inputTokens": 3, "outputTokens": 6,
                                   "costUSD": 0.0123, ...}}}

`subtype` is `success` or `error_*` (e.g. `error_max_turns`,
`error_during_execution`); a failed API call can come back as `success` with
`is_error: true` and the message in `result`. Older versions named the cost
`cost_usd`, and `--output-format json --verbose` prints a JSON array of every
message ending with the result, so the parser accepts all of these and
tolerates any missing field.

Why the stream: the build is usually a day's biggest cost, and the result
message tells it only at the end. Each `assistant` line's usage is priced as
it arrives (`SpendWatch`); once the sum passes what was left of today's cap
when the build started, the run is stopped (`proc.stop_tagged`) and the task
parks `budget_exhausted` with the spend it made recorded.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from dataclasses import dataclass
from typing import Any

from agent_team.builders.base import BuildResult, BuildTask, BuildUsage, SpendWatch, Worktree
from agent_team.builders.command import write_plan_file
from agent_team.builders.proc import (
    ProcessStopped,
    ProcessTimeout,
    run_process,
    stop_tagged,
)
from agent_team.builders.sandbox import NoSandbox, Sandbox
from agent_team.builders.worktree import SCRATCH_DIR, record_build
from agent_team.common.redact import redact, tail
from agent_team.common.stops import stopped_error
from agent_team.exceptions import BuildError, BuilderUnavailableError

__all__ = ["ClaudeCodeBuilder", "ClaudeRun", "CostMeter", "build_prompt", "parse_claude_output"]

log = logging.getLogger(__name__)

# One argv string may be at most 128 KiB on Linux (MAX_ARG_STRLEN); a longer
# plan is given by file instead.
_INLINE_PLAN_MAX = 100_000
# A streamed line longer than this (a huge tool result) is skipped, not kept whole.
_LINE_MAX = 8 * 1024 * 1024
_ERROR_TAIL = 2000
# In `subscription` mode these would make Claude Code bill the API instead.
_API_KEY_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
# What Claude Code reads to reach its API: handed into its sandbox when the daemon has them.
KEY_VARS = (*_API_KEY_VARS, "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL")


@dataclass(frozen=True)
class ClaudeRun:
    """The fields we use from Claude Code's result message; absent ones are empty."""

    is_error: bool
    subtype: str
    result: str
    errors: tuple[str, ...] = ()
    session_id: str | None = None
    num_turns: int | None = None
    total_cost_usd: float | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def usage(self, billing_mode: str) -> BuildUsage:
        """This run's usage as the budget ledger wants it."""
        return BuildUsage(
            model=f"claude-code:{self.model}" if self.model else "claude-code",
            input_tokens=self.input_tokens
            + self.cache_read_input_tokens
            + self.cache_creation_input_tokens,
            output_tokens=self.output_tokens,
            usd_cost=self.total_cost_usd or 0.0,
            billing_mode=billing_mode,
            cache_read_input_tokens=self.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens,
        )


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0
    return int(value)


def _money(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def _result_message(stdout: str) -> dict[str, Any] | None:
    candidates: list[Any] = []
    try:
        candidates.append(json.loads(stdout))
    except ValueError:
        # Not one JSON document: look for a result line (stream-json, or a
        # warning printed before the JSON), newest first.
        for line in reversed(stdout.splitlines()):
            try:
                candidates.append(json.loads(line))
            except ValueError:
                continue
    for candidate in candidates:
        items = list(reversed(candidate)) if isinstance(candidate, list) else [candidate]
        dicts = [item for item in items if isinstance(item, dict)]
        for item in dicts:
            if item.get("type") == "result":
                return item
        for item in dicts:
            if "is_error" in item or "result" in item:
                return item
    return None


def parse_claude_output(stdout: str) -> ClaudeRun | None:
    """Read Claude Code's `--output-format json` output.

    Args:
        stdout: everything the CLI printed on stdout.

    Returns:
        The run, or `None` when no result message could be found.
    """
    message = _result_message(stdout)
    if message is None:
        return None
    subtype = str(message.get("subtype") or "")
    result = message.get("result")
    errors = message.get("errors")
    usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
    raw_models = message.get("modelUsage")
    models = {
        str(name): stats
        for name, stats in (raw_models.items() if isinstance(raw_models, dict) else [])
        if isinstance(stats, dict)
    }
    # The model that cost the most did the work (a small one may have helped).
    model = max(
        models,
        key=lambda name: (
            _money(models[name].get("costUSD")) or 0.0,
            _count(models[name].get("outputTokens")),
        ),
        default=None,
    )
    cost = _money(message.get("total_cost_usd"))
    if cost is None:
        cost = _money(message.get("cost_usd"))
    if cost is None and models:
        costs = [_money(stats.get("costUSD")) for stats in models.values()]
        known = [value for value in costs if value is not None]
        cost = sum(known) if known else None

    def tokens(snake: str, camel: str) -> int:
        if usage is not None:
            return _count(usage.get(snake))
        return sum(_count(stats.get(camel)) for stats in models.values())

    num_turns = message.get("num_turns")
    session_id = message.get("session_id")
    return ClaudeRun(
        is_error=message.get("is_error") is True or subtype.startswith("error"),
        subtype=subtype,
        result=result
        if isinstance(result, str)
        else ("" if result is None else json.dumps(result)),
        errors=tuple(str(error) for error in errors) if isinstance(errors, list) else (),
        session_id=session_id if isinstance(session_id, str) else None,
        num_turns=_count(num_turns) if num_turns is not None else None,
        total_cost_usd=cost,
        model=model,
        input_tokens=tokens("input_tokens", "inputTokens"),
        output_tokens=tokens("output_tokens", "outputTokens"),
        cache_read_input_tokens=tokens("cache_read_input_tokens", "cacheReadInputTokens"),
        cache_creation_input_tokens=tokens(
            "cache_creation_input_tokens", "cacheCreationInputTokens"
        ),
    )


class CostMeter:
    """Prices Claude Code's streamed `assistant` messages as they are printed.

    One API response can be printed as several `assistant` lines (one per
    content block) carrying the same message id and usage, so usage is kept
    per message id. It reads stdout alone (`run_process(on_stdout=...)`).
    """

    def __init__(
        self,
        tag: str,
        *,
        limit_usd: float | None,
        price_usd: Any = None,
    ) -> None:
        self.tag = tag
        self.limit_usd = limit_usd
        self.price_usd = price_usd
        self.tripped = False
        self._pending = b""
        self._usage: dict[str, tuple[str, dict[str, int]]] = {}
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        """Meter one chunk of stdout; never raises (a raising sink is dropped by `proc`)."""
        try:
            with self._lock:
                self._pending += chunk
                *lines, self._pending = self._pending.split(b"\n")
                if len(self._pending) > _LINE_MAX:
                    self._pending = b""
                for line in lines:
                    self._line(line)
        except Exception:
            log.exception("claude-code: could not meter a line of its output")

    def _line(self, line: bytes) -> None:
        try:
            item = json.loads(line)
        except ValueError:
            return
        if not isinstance(item, dict) or item.get("type") != "assistant":
            return
        message = item.get("message")
        if not isinstance(message, dict):
            return
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        key = str(message.get("id") or f"#{len(self._usage)}")
        earlier = self._usage.get(key, ("", {}))[1]
        counts = {
            name: _count(usage.get(name))
            for name in (
                "input_tokens",
                "output_tokens",
                "cache_read_input_tokens",
                "cache_creation_input_tokens",
            )
        }
        # Lines of one response repeat its usage: keep the most any of them said, so a
        # later line (printed by something else on the same stream) cannot lower it.
        counts = {name: max(value, earlier.get(name, 0)) for name, value in counts.items()}
        self._usage[key] = (str(message.get("model") or ""), counts)
        if self.limit_usd is not None and not self.tripped and self.cost_usd() > self.limit_usd:
            self.tripped = True
            stop_tagged(self.tag, "budget")

    def cost_usd(self) -> float:
        """The list price of everything streamed so far (unpriced models count 0)."""
        if self.price_usd is None:
            return 0.0
        total = 0.0
        for model, c in self._usage.values():
            price = self.price_usd(
                model,
                c["input_tokens"],
                c["output_tokens"],
                c["cache_read_input_tokens"],
                c["cache_creation_input_tokens"],
            )
            total += price or 0.0
        return total

    def usage(self, billing_mode: str) -> BuildUsage | None:
        """What the streamed messages add up to; None if none was seen."""
        with self._lock:
            if not self._usage:
                return None
            models = [model for model, _ in self._usage.values() if model]
            totals = {
                name: sum(c[name] for _, c in self._usage.values())
                for name in next(iter(self._usage.values()))[1]
            }
            cost = self.cost_usd()
        top = max(set(models), key=models.count) if models else None
        return BuildUsage(
            model=f"claude-code:{top}" if top else "claude-code",
            input_tokens=totals["input_tokens"]
            + totals["cache_read_input_tokens"]
            + totals["cache_creation_input_tokens"],
            output_tokens=totals["output_tokens"],
            usd_cost=cost,
            billing_mode=billing_mode,
            cache_read_input_tokens=totals["cache_read_input_tokens"],
            cache_creation_input_tokens=totals["cache_creation_input_tokens"],
        )


def build_prompt(task: BuildTask, plan_markdown: str) -> str:
    """The instruction Claude Code gets: the task, the plan, and the rules of the run."""
    if len(plan_markdown.encode("utf-8")) <= _INLINE_PLAN_MAX:
        plan = plan_markdown.strip()
    else:
        plan = f"The plan is too long to repeat here: read it from `{SCRATCH_DIR}/plan.md`."
    return (
        f"You are implementing an approved plan for task {task.task_id}: {task.title}\n\n"
        f"## Task\n\n{task.body.strip() or '(no description)'}\n\n"
        f"## Approved plan\n\n{plan}\n\n"
        "## How to work\n\n"
        "Implement this plan in the current repository. Commit nothing: agent-team commits "
        f"your changes when you finish. Do not change `{SCRATCH_DIR}/`. "
        "End with a short summary of what you changed."
    )


class ClaudeCodeBuilder:
    """Runs `claude -p <prompt> --output-format json` in the worktree.

    In `subscription` billing mode `ANTHROPIC_API_KEY` and
    `ANTHROPIC_AUTH_TOKEN` are removed from its environment, because Claude
    Code prefers an API key over the logged-in subscription and would bill the
    API. The cost it reports is kept in the result's `usage` either way.
    """

    name = "claude-code"
    needs_checkout = True  # it works in a real checkout of the branch

    def __init__(
        self,
        binary: str,
        timeout_s: float,
        billing_mode: str,
        *,
        permission_mode: str = "acceptEdits",
        sandbox: Sandbox | None = None,
        max_turns: int = 50,
        spend: SpendWatch | None = None,
    ) -> None:
        """Keep the CLI's settings.

        Args:
            binary: the CLI's name on PATH or its path (`AGENT_TEAM_CLAUDE_BIN`).
            timeout_s: seconds before the run is killed (`AGENT_TEAM_BUILD_TIMEOUT_S`).
            billing_mode: `api` or `subscription` (`AGENT_TEAM_BILLING_MODE`).
            permission_mode: Claude Code's `--permission-mode`; `acceptEdits`
                lets it edit files with nobody there to approve.
            sandbox: where it runs (`AGENT_TEAM_SANDBOX`); None: on the host.
            max_turns: Claude Code's `--max-turns` (`AGENT_TEAM_CLAUDE_MAX_TURNS`).
            spend: how to follow its streamed cost against today's cap; None: not followed.
        """
        self.binary = binary
        self.timeout_s = timeout_s
        self.billing_mode = billing_mode
        self.permission_mode = permission_mode
        self.sandbox: Sandbox = sandbox or NoSandbox()
        self.max_turns = max_turns
        self.spend = spend

    def _unavailable(self, why: str) -> BuilderUnavailableError:
        return BuilderUnavailableError(
            f"the Claude Code CLI `{self.binary}` {why}; install Claude Code "
            "(npm install -g @anthropic-ai/claude-code), set AGENT_TEAM_CLAUDE_BIN to its path, "
            "or choose AGENT_TEAM_BUILDER=offline"
        )

    def run(self, task: BuildTask, plan_markdown: str, worktree: Worktree) -> BuildResult:
        """Run Claude Code on the plan and record what it changed.

        Args:
            task: the task.
            plan_markdown: the approved plan.
            worktree: the task's worktree (its folder is Claude Code's working folder).

        Returns:
            The recorded build; `usage` holds the reported tokens and cost.

        Raises:
            BuilderUnavailableError: the CLI is not installed or cannot be run.
            BuildError: it reported an error, exited non-zero, timed out, or
                printed no result we could read.
        """
        executable = shutil.which(self.binary)
        if executable is None:
            raise self._unavailable("was not found")
        plan_file = write_plan_file(worktree.path, plan_markdown)
        drop = _API_KEY_VARS if self.billing_mode == "subscription" else ()
        argv = [
            executable,
            "-p",
            build_prompt(task, plan_markdown),
            "--output-format",
            "stream-json",
            "--verbose",
            "--max-turns",
            str(self.max_turns),
            "--permission-mode",
            self.permission_mode,
        ]
        meter = CostMeter(
            task.task_id,
            limit_usd=self.spend.remaining_usd() if self.spend is not None else None,
            price_usd=self.spend.price_usd if self.spend is not None else None,
        )
        node = shutil.which("node")  # its interpreter, if it lives in a hidden folder
        binaries = [executable, *([node] if node else [])]
        try:
            with self.sandbox.enter(
                worktree, builder=self.name, env={}, keys=KEY_VARS, drop=drop, binaries=binaries
            ) as jail:
                done = run_process(
                    jail.argv(argv),
                    cwd=worktree.path,
                    env=jail.env,
                    timeout_s=self.timeout_s,
                    on_output=worktree.output,
                    on_stdout=meter.feed,
                    tag=task.task_id,
                    on_stop=jail.on_stop,
                )
        except ProcessStopped as exc:
            run = parse_claude_output(exc.stdout)
            usage = run.usage(self.billing_mode) if run is not None else None
            raise stopped_error(
                exc.reason, "Claude Code run", usage=usage or meter.usage(self.billing_mode)
            ) from None
        except ProcessTimeout as exc:
            raise BuildError(
                f"Claude Code timed out after {self.timeout_s:g} s and was stopped; raise "
                "AGENT_TEAM_BUILD_TIMEOUT_S or split the plan. Output tail: "
                f"{redact(tail(exc.stderr or exc.stdout, _ERROR_TAIL))}"
            ) from None
        except (FileNotFoundError, PermissionError) as exc:
            raise self._unavailable(f"could not be started ({exc.strerror})") from exc
        finally:
            shutil.rmtree(plan_file.parent, ignore_errors=True)

        run = parse_claude_output(done.stdout)
        if run is None:
            detail = redact(tail((done.stderr.strip() or done.stdout).strip(), _ERROR_TAIL))
            if done.returncode != 0:
                raise BuildError(f"Claude Code exited with code {done.returncode}: {detail}")
            raise BuildError(
                "Claude Code printed no JSON result we could read; check that "
                f"`{self.binary} -p ... --output-format stream-json --verbose` works "
                "(update Claude Code). "
                f"Output tail: {detail}"
            )
        if run.is_error or done.returncode != 0:
            text = run.result or "; ".join(run.errors) or done.stderr.strip()
            cost = f", cost ${run.total_cost_usd:.4f}" if run.total_cost_usd is not None else ""
            raise BuildError(
                f"Claude Code reported an error ({run.subtype or 'no subtype'}, exit "
                f"{done.returncode}{cost}): {redact(tail(text, _ERROR_TAIL))}",
                usage=run.usage(self.billing_mode),
            )
        result_text = redact(run.result.strip())
        summary = next((line for line in result_text.splitlines() if line.strip()), "")
        return record_build(
            task,
            worktree,
            plan_markdown,
            builder=self.name,
            summary=summary or "Claude Code finished without a summary.",
            output=tail(result_text),
            usage=run.usage(self.billing_mode),
        )
