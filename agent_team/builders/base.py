"""What every builder takes and returns.

A builder turns an approved plan into commits on a task branch. Its result is
recorded *in git* (a commit with an `Agent-Team-Plan` trailer, see
`agent_team.builders.worktree`), so the pipeline can look it up after a crash
instead of running the builder a second time (docs/architecture.md §4).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeGuard, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from agent_team.builders.proc import OutputSink

__all__ = [
    "BuildFiles",
    "BuildResult",
    "BuildTask",
    "BuildUsage",
    "Builder",
    "FileBuilder",
    "OutputSink",
    "SpendWatch",
    "TaskBranch",
    "Worktree",
    "builds_without_checkout",
    "plan_hash",
]


@dataclass(frozen=True)
class BuildTask:
    """The task a builder works on.

    Attributes:
        task_id: the task's id (the LangGraph thread id); may hold any characters.
        title: one line for people (commit subjects, the offline plan header).
        body: the task's description.
        repo: the repository this task builds in, as stored with the task: a
            path, a URL or `owner/name` (`agent_team.common.repo_spec`); a `Path`
            is a local path; `None` means the configured default.
    """

    task_id: str
    title: str
    body: str = ""
    repo: Path | str | None = None


@dataclass(frozen=True)
class Worktree:
    """A task's working copy, as `run_build` prepared it for a builder.

    Attributes:
        repo: the repository the worktree belongs to (a clone's top folder, or a
            bare mirror of a remote).
        path: the worktree folder (`state_dir/worktrees/<key>`).
        branch: its branch, `agent-team/<key>`.
        key: the task id made safe for paths and branch names (see `task_key`).
        recorded: the build records `commit_all` made through this object, as
            `(commit, plan hash)`, oldest first. `run_build` reads it to know
            whether the builder recorded its work without asking git again.
        output: where a builder sends what its process prints while it runs
            (`run_process(..., on_output=worktree.output)`), so people can watch
            the build; `run_build` sets it, None means nobody watches.
    """

    repo: Path
    path: Path
    branch: str
    key: str
    recorded: list[tuple[str, str]] = field(default_factory=list, compare=False, repr=False)
    output: OutputSink | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TaskBranch:
    """Where a task's builds are recorded, without a checkout: its repository and branch.

    What `run_build` works with for a builder that needs no worktree
    (`FileBuilder`); `find_build` and `note_build` take it as they take a `Worktree`.

    Attributes:
        repo: the repository (a clone's top folder, or a bare mirror).
        branch: the task branch, `agent-team/<key>`.
        key: the task id made safe for paths and branch names (see `task_key`).
        start: where the branch starts if it is new: `HEAD`, or a mirror's
            fetched head (`agent_team.builders.repos.REMOTE_HEAD`).
    """

    repo: Path
    branch: str
    key: str
    start: str = "HEAD"


@dataclass(frozen=True)
class BuildFiles:
    """What a `FileBuilder` made: whole files to put on the task branch, and what it says.

    Attributes:
        files: repository-relative POSIX paths (`docs/x.md`) to their full text
            (UTF-8, mode 100644); every other file of the branch stays as it is.
        summary: a few lines for people; becomes the record's commit body.
        output: what the builder printed (already redacted; not committed).
    """

    files: Mapping[str, str]
    summary: str
    output: str = ""


class BuildUsage(BaseModel):
    """What a builder's model calls cost, for the budget ledger.

    `usd_cost` is what the builder reported (0 when it reported nothing);
    `input_tokens` counts every prompt token, cached or not, and the cache split
    is kept beside it.
    """

    model_config = ConfigDict(frozen=True)

    model: str
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    usd_cost: float = Field(default=0.0, ge=0)
    billing_mode: str | None = None
    cache_read_input_tokens: int = Field(default=0, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)


@dataclass(frozen=True)
class SpendWatch:
    """How a priced builder follows its own spend against today's cap while it runs.

    Attributes:
        remaining_usd: what is left of today's USD cap now (read when the build
            starts); None when no USD cap applies (subscription billing).
        price_usd: the list price of one model response's tokens: model id,
            input, output, cache-read and cache-write tokens -> USD, or None
            for a model with no known price.
    """

    remaining_usd: Callable[[], float | None]
    price_usd: Callable[[str, int, int, int, int], float | None]


class BuildResult(BaseModel):
    """One recorded build: the commit that holds it and what the builder said.

    `reused` is true when the build was found in git rather than run now; its
    `usage` is then the original run's, so a caller that already recorded that
    cost must not record it again.
    """

    model_config = ConfigDict(frozen=True)

    builder: str
    branch: str
    commit: str
    summary: str
    output: str = ""
    plan_hash: str
    reused: bool = False
    usage: BuildUsage | None = None


@runtime_checkable
class Builder(Protocol):
    """Turns a plan into changes in a worktree and records them as one commit.

    `run` works in `worktree.path`, must leave the worktree with a commit
    carrying the plan's trailer (use `agent_team.builders.worktree.record_build`
    with the `worktree` it was given) and return its result.
    It raises `BuildError` when the work failed and `BuilderUnavailableError`
    when it cannot run on this machine at all.
    """

    name: str

    def run(self, task: BuildTask, plan_markdown: str, worktree: Worktree) -> BuildResult:
        """Build `plan_markdown` for `task` inside `worktree` and record it."""
        ...


@runtime_checkable
class FileBuilder(Builder, Protocol):
    """A builder whose whole work is a few files it can name without a worktree.

    Why: checking out a worktree per task is most of what a build costs when
    the builder only writes a known file (the offline builder). With
    `needs_checkout = False`, `run_build` asks `files()` instead of `run()` and
    records the files on the task branch with git plumbing, never checking out
    anything (`agent_team.builders.plumbing`). `run()` must still work when a
    caller hands it a worktree.
    """

    needs_checkout: bool

    def files(self, task: BuildTask, plan_markdown: str) -> BuildFiles:
        """The files that build `plan_markdown` for `task`, and what to say about them."""
        ...


def builds_without_checkout(builder: Builder) -> TypeGuard[FileBuilder]:
    """Whether `run_build` records `builder`'s files without giving it a worktree.

    Yes for a builder with `needs_checkout = False` and a `files()` method
    (`FileBuilder`); any other builder, including one written before those
    existed, gets its worktree.
    """
    return isinstance(builder, FileBuilder) and not builder.needs_checkout


def plan_hash(plan_markdown: str) -> str:
    """A short, stable fingerprint of a plan: the key a build is recorded under.

    Line endings and surrounding blank space are normalised first, so the same
    plan re-rendered on another platform maps to the same build.

    Args:
        plan_markdown: the approved plan.

    Returns:
        The first 16 hex digits of the SHA-256 of the normalised plan.
    """
    normalised = plan_markdown.replace("\r\n", "\n").replace("\r", "\n").strip()
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()[:16]
