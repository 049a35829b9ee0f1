"""What every node shares: its dependencies, phase entry, and the gate helper.

Nodes are re-run from their first line when a graph resumes, so everything
here is idempotent: entering the phase a task is already in is a no-op and
asking a question that exists returns the existing row.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from langgraph.types import interrupt
from pydantic import BaseModel

from agent_team import db
from agent_team.builders.base import BuildResult, BuildTask
from agent_team.builders.sandbox import NoSandbox, Sandbox
from agent_team.common.stops import stop_requested, stopped_error
from agent_team.common.testhooks import CRASH_EXIT_CODE, crash_if
from agent_team.integrations.confluence.lane import ConfluenceLane
from agent_team.models.caller import ModelCaller

if TYPE_CHECKING:
    from agent_team.nodes.pr_desk import PullRequestDesk
from agent_team.requests.answers import ANSWER_MODELS
from agent_team.task_model import Phase, QuestionKind, TaskState, TaskStatus, question_id_for

__all__ = ["CRASH_EXIT_CODE", "GraphDeps", "ask_human", "crash_point", "enter", "people_notes"]

log = logging.getLogger(__name__)


@dataclass
class GraphDeps:
    """Everything the nodes need, built once per process by the coordinator."""

    ledger: db.Ledger
    caller: ModelCaller
    build: Callable[[BuildTask, str], BuildResult]
    clock: Callable[[], datetime]
    # The builder reports a cost (`claude-code`): today's cap is checked before it starts.
    build_priced: bool = False
    transport: str = "local"
    billing_mode: str = "api"
    max_clarify_rounds: int = 2
    deadlines: dict[str, timedelta] = field(default_factory=dict)
    crash_at: str | None = None
    outbox: Any = None
    # After a build: push and open a pull request; returns what to keep (url, number) or
    # None. Must be idempotent (it records its side effects, docs/architecture.md §4).
    publish: Callable[[TaskState], dict[str, Any] | None] | None = None
    # The Confluence documentation lane (AGENT_TEAM_CONFLUENCE_ENABLED); None: no lane,
    # and the graph is exactly the one without it.
    confluence: ConfluenceLane | None = None
    # Where builds run (`AGENT_TEAM_SANDBOX`): the daemon names it at start and sweeps it.
    sandbox: Sandbox = field(default_factory=NoSandbox)
    # The loop after the pull request (nodes/pull_request.py): where follow-up commits go
    # (None: a task ends when its PR opens, as before) and how many review rounds run
    # before a person is asked.
    pulls: PullRequestDesk | None = None
    pr_rounds: int = 5
    ci_fixes: int = 2  # follow-ups for red CI on one head commit


def crash_point(deps: GraphDeps, phase: Phase, when: str) -> None:
    """Test hook (`AGENT_TEAM_CRASH_AT=<phase>:<before|after>`): die like `kill -9` here."""
    crash_if(deps.crash_at, f"{phase.value}:{when}")


def enter(deps: GraphDeps, state: TaskState, phase: Phase) -> None:
    """Record that the task entered `phase` (a no-op when a resumed node re-enters it).

    A task told to stop while its run went on (a cancel, `AGENT_TEAM_TASK_TIMEOUT`)
    stops here, at the next node, when nothing was running to kill.
    """
    reason = stop_requested(state["task_id"])
    if reason is not None:
        raise stopped_error(reason, f"run (before {phase.value})")
    db.enter_phase(deps.ledger, task_id=state["task_id"], phase=phase, status=TaskStatus.RUNNING)
    crash_point(deps, phase, "before")


def ask_human(
    deps: GraphDeps, state: TaskState, kind: QuestionKind, payload: dict[str, Any]
) -> dict[str, Any]:
    """Ask once per turn and wait: the gate protocol's step 1 (docs/architecture.md §3).

    The question row is inserted idempotently under a deterministic id, then
    `interrupt()` stops the graph. On resume LangGraph re-runs the node, the
    insert is a no-op, and `interrupt()` returns the normalised answer.
    """
    turn = state.get("turn", 0) + 1
    question_id = question_id_for(state["task_id"], turn)
    deadline = deps.deadlines.get(kind.value)
    db.ensure_question(
        deps.ledger,
        question_id=question_id,
        thread_id=state["task_id"],
        turn=turn,
        kind=kind.value,
        transport=deps.transport,
        deadline_at=deps.clock() + deadline if deadline else None,
        payload_json=json.dumps(payload, sort_keys=True),
    )
    # LangGraph validates the resume value against the answer model *before* saving it,
    # so a bad value is refused and the interrupt can be answered again.
    answer = interrupt(
        {"question_id": question_id, "kind": kind.value, **payload},
        response_schema=ANSWER_MODELS[kind.value],
    )
    assert isinstance(answer, BaseModel)
    return answer.model_dump()


def people_notes(deps: GraphDeps, task_id: str) -> list[str]:
    """The notes people left on the task so far, oldest first (`agent-team note`): read at
    each model stage, so a note written while the task waits reaches the next stage."""
    return [
        str(row.detail_dict.get("text", "")) for row in db.list_task_notes(deps.ledger, task_id)
    ]
