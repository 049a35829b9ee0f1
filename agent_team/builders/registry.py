"""Pick the configured builder, and run a build at most once per plan.

`run_build` is what the `build` node calls. It is safe to call again after a
crash: the build is recorded as a commit on the task branch and looked up
before the builder runs (docs/architecture.md §4), under a per-task lock so two
processes cannot both build the same task. Builds of different tasks run at
the same time; those sharing a repository take its lock only while a worktree
is added or removed, or its mirror fetched (see `agent_team.builders.worktree`
and `agent_team.builders.repos`).

A builder that needs no checkout (`needs_checkout`, the offline builder) gets
no worktree: its files are recorded on the branch with git plumbing
(`agent_team.builders.plumbing`). The others work in a worktree, which is
removed when the task ends (`agent_team.builders.cleanup`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from agent_team.builders.base import (
    Builder,
    BuildResult,
    BuildTask,
    SpendWatch,
    builds_without_checkout,
    plan_hash,
)
from agent_team.builders.claude_code import ClaudeCodeBuilder
from agent_team.builders.command import CommandBuilder
from agent_team.builders.live_log import open_build_log
from agent_team.builders.offline import OfflineBuilder
from agent_team.builders.plumbing import build_on_branch, open_branch
from agent_team.builders.sandbox import Sandbox
from agent_team.builders.worktree import (
    BUILDER_TRAILER,
    _prepare,
    commit_all,
    find_build,
    note_build,
    task_lock,
)
from agent_team.common.git_host import GitHost
from agent_team.exceptions import ConfigError

__all__ = ["BUILDER_NAMES", "PRICED_BUILDERS", "is_priced", "make_builder", "run_build"]

BUILDER_NAMES = ("offline", "command", "claude-code")
# Builders that report what their model calls cost: the day's cap is checked before
# they start (`nodes.build`). `offline` and `command` report no cost.
PRICED_BUILDERS = frozenset({"claude-code"})
_BILLING_MODES = ("api", "subscription")


def make_builder(
    name: str,
    *,
    build_command: str | None,
    build_timeout_s: float,
    claude_bin: str,
    billing_mode: str,
    sandbox: Sandbox | None = None,
    claude_max_turns: int = 50,
    spend: SpendWatch | None = None,
) -> Builder:
    """The builder the settings ask for.

    Args:
        name: `offline`, `command` or `claude-code` (`AGENT_TEAM_BUILDER`).
        build_command: the `command` builder's shell command (`AGENT_TEAM_BUILD_COMMAND`).
        build_timeout_s: seconds a build may take (`AGENT_TEAM_BUILD_TIMEOUT_S`).
        claude_bin: the Claude Code CLI (`AGENT_TEAM_CLAUDE_BIN`).
        billing_mode: `api` or `subscription` (`AGENT_TEAM_BILLING_MODE`).
        sandbox: where a builder that runs a process runs it (`make_sandbox`);
            None: on the host.
        claude_max_turns: Claude Code's turn limit (`AGENT_TEAM_CLAUDE_MAX_TURNS`).
        spend: how claude-code follows its streamed cost against today's cap.

    Raises:
        ConfigError: an unknown builder, a `command` builder with no command,
            a timeout that is not positive, or an unknown billing mode.
    """
    if build_timeout_s <= 0:
        raise ConfigError("AGENT_TEAM_BUILD_TIMEOUT_S must be a number of seconds above 0")
    if name == "offline":
        return OfflineBuilder()
    if name == "command":
        if build_command is None or not build_command.strip():
            raise ConfigError(
                "AGENT_TEAM_BUILD_COMMAND is not set; the `command` builder needs the shell "
                "command to run in the worktree (or choose AGENT_TEAM_BUILDER=offline)"
            )
        return CommandBuilder(build_command, build_timeout_s, sandbox=sandbox)
    if name == "claude-code":
        if billing_mode not in _BILLING_MODES:
            raise ConfigError(f"AGENT_TEAM_BILLING_MODE must be one of {', '.join(_BILLING_MODES)}")
        return ClaudeCodeBuilder(
            claude_bin,
            build_timeout_s,
            billing_mode,
            sandbox=sandbox,
            max_turns=claude_max_turns,
            spend=spend,
        )
    raise ConfigError(
        f"AGENT_TEAM_BUILDER: unknown builder {name!r}; choose one of {', '.join(BUILDER_NAMES)}"
    )


def is_priced(builder: Builder) -> bool:
    """Whether `builder` spends from the daily budget (see `PRICED_BUILDERS`)."""
    return builder.name in PRICED_BUILDERS


def run_build(
    builder: Builder,
    task: BuildTask,
    plan_markdown: str,
    *,
    repo_path: Path | None,
    state_dir: Path,
    git_host: GitHost | None = None,
) -> BuildResult:
    """Build an approved plan once: reuse the recorded build if there is one.

    Prepares the task's worktree, returns the recorded build of this plan
    (`reused=True`, the builder is not run) if the branch has one, else runs
    the builder. A builder that did not record its work (one not written
    against `record_build`) gets it committed for it, once, with the trailer;
    an empty change still gets an empty record commit. A builder that needs no
    checkout (`FileBuilder` with `needs_checkout = False`) gets no worktree:
    its `files()` are recorded on the branch directly, with the same commit
    message and trailers.

    Args:
        builder: from `make_builder`.
        task: the task.
        plan_markdown: the approved plan.
        repo_path: the configured repository, used when the task names none.
        state_dir: where worktrees, mirrors and generated repositories live.
        git_host: the GitHub host (where `owner/name` lives) and the token git
            may send there (None: github.com, no token).

    Returns:
        The build.

    Raises:
        BuildError: the builder or git failed; nothing was recorded, so the
            next call runs the builder again.
        BuilderUnavailableError: the builder (or git) cannot run here.
        RepoUnavailableError: the task's remote repository could not be fetched
            (nothing was built; the task parks).
    """
    digest = plan_hash(plan_markdown)
    git_host = git_host or GitHost()
    if builds_without_checkout(builder):
        # No build log either: such a builder runs no process, so nothing prints to watch.
        with task_lock(state_dir, task.task_id):
            target = open_branch(task, repo_path=repo_path, state_dir=state_dir, git_host=git_host)
            built = build_on_branch(builder, task, plan_markdown, target)
        note_build(target, state_dir)
        return built
    with task_lock(state_dir, task.task_id):
        worktree = _prepare(task, repo_path=repo_path, state_dir=state_dir, git_host=git_host)
        found = find_build(worktree, digest)
        if found is not None:
            return found
        # What the builder prints is kept as it comes, for the dashboard and `show --follow`.
        with open_build_log(state_dir, task.task_id) as output:
            watched = replace(worktree, output=output)
            result = builder.run(task, plan_markdown, watched)
        # A builder that recorded through `record_build` with the worktree it was
        # given shows in `watched.recorded`; only for another one ask git.
        recorded = any(plan == digest for _, plan in watched.recorded)
        if not recorded and find_build(worktree, digest) is None:
            sha = commit_all(
                worktree,
                f"agent-team: {' '.join(task.title.split())[:72] or worktree.key}\n\n"
                f"{result.summary}",
                digest,
                trailers={BUILDER_TRAILER: builder.name},
            )
            result = result.model_copy(
                update={"commit": sha, "branch": worktree.branch, "plan_hash": digest}
            )
    note_build(worktree, state_dir)
    return result
