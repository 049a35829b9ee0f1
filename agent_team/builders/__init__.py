"""Builders: coding-agent runners that turn an approved plan into a commit.

`make_builder()` picks one from the settings (`offline`, `command`,
`claude-code`); `run_build()` runs it at most once per plan and task, because
each build is recorded as a git commit with an `Agent-Team-Plan` trailer and
looked up before the builder runs. `remove_worktree()` removes a finished
task's worktree (the branch stays).

A task's repository is a local clone, the default one, or a remote built
from a mirror fetched before each new task branch (`repos`); which one the
task names is read by `agent_team.common.repo_spec`.
"""

from __future__ import annotations

from agent_team.builders.base import (
    Builder,
    BuildFiles,
    BuildResult,
    BuildTask,
    BuildUsage,
    FileBuilder,
    TaskBranch,
    plan_hash,
)
from agent_team.builders.claude_code import ClaudeCodeBuilder, parse_claude_output
from agent_team.builders.cleanup import remove_worktree
from agent_team.builders.command import CommandBuilder
from agent_team.builders.offline import OfflineBuilder
from agent_team.builders.proc import kill_running_children
from agent_team.builders.registry import BUILDER_NAMES, make_builder, run_build
from agent_team.builders.worktree import (
    Worktree,
    commit_all,
    find_build,
    prepare_worktree,
    record_build,
    task_key,
)

__all__ = [
    "BUILDER_NAMES",
    "BuildFiles",
    "BuildResult",
    "BuildTask",
    "BuildUsage",
    "Builder",
    "ClaudeCodeBuilder",
    "CommandBuilder",
    "FileBuilder",
    "OfflineBuilder",
    "TaskBranch",
    "Worktree",
    "commit_all",
    "find_build",
    "kill_running_children",
    "make_builder",
    "parse_claude_output",
    "plan_hash",
    "prepare_worktree",
    "record_build",
    "remove_worktree",
    "run_build",
    "task_key",
]
