"""Shared fixtures for in-process graph and coordinator tests.

Graph tests compile `build_graph` with hand-made `GraphDeps` (a real ledger in
`tmp_path`, a `ModelCaller` over the offline model or a scripted fake, and a
`build` callable that counts its calls). Coordinator tests build a real
`Coordinator` from `load_settings(...)` with a settable clock.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from pydantic import Field

from agent_team import db
from agent_team.builders.base import BuildResult, BuildTask, plan_hash
from agent_team.config import load_settings
from agent_team.coordinator import Coordinator
from agent_team.graph import DURABLE_CHANNELS, build_graph
from agent_team.models.caller import ModelCaller
from agent_team.models.offline import OfflineChatModel
from agent_team.models.schemas import ClarifyDecision, Plan
from agent_team.nodes.common import GraphDeps
from agent_team.service.wiring import build_coordinator
from agent_team.task_model import TaskState
from tests.fakes.chat import ToolBindingFake

# 12+ words with bullets: clear for the offline model, which then plans the bullets.
LONG_BODY = (
    "The login page should remember the user's email address between visits.\n"
    "- Store the email in a cookie after a successful login\n"
    "- Prefill the email field when the cookie is present\n"
    "- Add a test that covers both paths\n"
)
SHORT_BODY = "Make login nicer."
PLAN_ARGS: dict[str, Any] = {"summary": "Do it", "steps": ["Step one"], "risks": []}
UNCLEAR_ARGS: dict[str, Any] = {"clear": False, "question": "What exactly?"}
CLEAR_ARGS: dict[str, Any] = {"clear": True, "question": None}


class Clock:
    """A settable aware-UTC clock for `GraphDeps.clock` and `Coordinator(clock=...)`."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


# -- chat models ----------------------------------------------------------------------------


def tool_reply(name: str, args: dict[str, Any]) -> AIMessage:
    """An AIMessage calling tool `name` with `args`, reporting a small usage."""
    message = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c-{name}"}])
    message.usage_metadata = UsageMetadata(input_tokens=10, output_tokens=5, total_tokens=15)
    return message


class ToolChat(ToolBindingFake):
    """langchain-core's list fake, taught to bind tools and answer per bound tool.

    `responses` holds AIMessages with tool calls; each call answers with the
    next response whose tool name is the bound tool's (the last one repeats),
    so clarify and plan replies never get mixed up. `error` is raised instead
    when set. `prompts` records (tool, human text) of every call.
    """

    error: Exception | None = None
    prompts: list[tuple[str, str]] = Field(default_factory=list)
    used: dict[str, int] = Field(default_factory=dict)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = kwargs.get("tools") or []
        name = tools[0]["function"]["name"] if tools else ""
        human = "\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage))
        self.prompts.append((name, human))
        if self.error is not None:
            raise self.error
        mine = [
            r
            for r in self.responses
            if isinstance(r, AIMessage) and r.tool_calls and r.tool_calls[0]["name"] == name
        ]
        assert mine, f"no scripted reply for tool {name!r}"
        index = min(self.used.get(name, 0), len(mine) - 1)
        self.used[name] = self.used.get(name, 0) + 1
        return ChatResult(generations=[ChatGeneration(message=mine[index])])

    def calls_for(self, tool: str) -> int:
        return sum(1 for name, _ in self.prompts if name == tool)


def tool_chat(
    *,
    clarify: Sequence[dict[str, Any]] = (CLEAR_ARGS,),
    plan: Sequence[dict[str, Any]] = (PLAN_ARGS,),
) -> ToolChat:
    """A ToolChat answering ClarifyDecision with `clarify` and Plan with `plan`, in turn."""
    responses: list[BaseMessage] = [tool_reply(ClarifyDecision.__name__, a) for a in clarify]
    responses += [tool_reply(Plan.__name__, a) for a in plan]
    return ToolChat(responses=responses)


# -- a counting build -------------------------------------------------------------------------


@dataclass
class CountingBuild:
    """Stands in for `run_build`: records every call and returns a fixed result."""

    calls: list[tuple[BuildTask, str]] = field(default_factory=list)

    def __call__(self, task: BuildTask, plan_markdown: str) -> BuildResult:
        self.calls.append((task, plan_markdown))
        return BuildResult(
            builder="counting",
            branch=f"agent-team/{task.task_id}",
            commit="0" * 40,
            summary="built",
            plan_hash=plan_hash(plan_markdown),
        )


# -- graph harness ----------------------------------------------------------------------------

DEADLINES = {"clarify": timedelta(hours=24), "plan_decision": timedelta(hours=72)}


@dataclass
class GraphHarness:
    """A compiled graph over a real ledger, with helpers to start and resume a task."""

    conn: db.Ledger
    caller: ModelCaller
    build: CountingBuild
    clock: Clock
    deps: GraphDeps
    graph: CompiledStateGraph[TaskState, None, TaskState, TaskState]

    @staticmethod
    def config(task_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": task_id}}

    def start(self, task_id: str, body: str, title: str = "Remember the email") -> dict[str, Any]:
        db.create_task(self.conn, task_id=task_id, kind="code", title=title, body=body)
        initial: TaskState = {"task_id": task_id, "kind": "code", "title": title, "body": body}
        result: dict[str, Any] = self.graph.invoke(initial, self.config(task_id), durability="sync")
        return result

    def pending(self, task_id: str) -> Any:
        """The one interrupt the task waits on."""
        (interrupt,) = self.graph.get_state(self.config(task_id)).interrupts
        return interrupt

    def resume(self, task_id: str, answer: Any) -> dict[str, Any]:
        interrupt = self.pending(task_id)
        result: dict[str, Any] = self.graph.invoke(
            Command(resume={interrupt.id: answer}), self.config(task_id), durability="sync"
        )
        return result

    def values(self, task_id: str) -> dict[str, Any]:
        return dict(self.graph.get_state(self.config(task_id)).values)

    def questions(self, task_id: str) -> list[db.Question]:
        return db.list_questions(self.conn, thread_id=task_id)

    def journey(self, task_id: str) -> list[tuple[str, str]]:
        return [(t.to_phase, t.status) for t in db.list_transitions(self.conn, task_id)]


MakeHarness = Callable[..., GraphHarness]


@pytest.fixture
def make_harness(tmp_path: Path) -> Iterator[MakeHarness]:
    """Factory: `make_harness(chat=None, max_clarify_rounds=2, token_cap=...)`."""
    opened: list[db.Ledger] = []

    def make(
        chat: BaseChatModel | None = None,
        *,
        max_clarify_rounds: int = 2,
        token_cap: int = 5_000_000,
        model: str = "offline",
    ) -> GraphHarness:
        path = tmp_path / "graph.db"
        db.init_db(path)
        conn = db.open_ledger(path)
        opened.append(conn)
        # On a connection of its own (docs/architecture.md §3), flushed where the daemon flushes.
        saver = conn.checkpointer(flush_only=DURABLE_CHANNELS)
        clock = Clock()
        caller = ModelCaller(
            conn,
            chat if chat is not None else OfflineChatModel(),
            model=model,
            billing_mode="api",
            daily_budget_usd=20.0,
            daily_token_cap=token_cap,
            clock=clock,
        )
        build = CountingBuild()
        deps = GraphDeps(
            ledger=conn,
            caller=caller,
            build=build,
            clock=clock,
            max_clarify_rounds=max_clarify_rounds,
            deadlines=dict(DEADLINES),
            outbox=tmp_path / "outbox.jsonl",
        )
        return GraphHarness(conn, caller, build, clock, deps, build_graph(deps, saver))

    yield make
    for connection in opened:
        connection.close()


# -- git ------------------------------------------------------------------------------------


def make_repo(path: Path) -> Path:
    """A git repository at `path` with one empty commit, ignoring the developer's git config."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
    }
    path.mkdir(parents=True)
    for args in (
        ["init", "-q", "-b", "main"],
        [
            "-c",
            "user.name=Tester",
            "-c",
            "user.email=tester@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first",
        ],
    ):
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)
    return path


# -- coordinator ------------------------------------------------------------------------------


@dataclass
class RecordingTransport:
    """A local-style transport that records deliveries and notices; can fail deliveries."""

    name: str = "local"
    fail_deliveries: int = 0
    delivered: list[str] = field(default_factory=list)
    notices: list[tuple[str, str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def deliver(self, question: db.Question, task: db.Task) -> str:
        with self.lock:
            if self.fail_deliveries > 0:
                self.fail_deliveries -= 1
                raise ConnectionError("transport down")
            self.delivered.append(question.question_id)
        return f"local:{question.question_id}"

    def notify(self, task: db.Task, event: str, text: str) -> None:
        with self.lock:
            self.notices.append((task.id, event, text))


@pytest.fixture(autouse=True)
def _no_agent_team_env(isolated_env: Path) -> None:
    """Settings come from the test alone (see tests/conftest.py)."""


MakeCoordinator = Callable[..., Coordinator]


@pytest.fixture
def make_coordinator(tmp_path: Path) -> Iterator[MakeCoordinator]:
    """Factory: `make_coordinator(clock=..., transport=..., **settings)`; closed after the test."""
    made: list[Coordinator] = []

    def make(
        *,
        clock: Clock | None = None,
        transport: RecordingTransport | None = None,
        **overrides: Any,
    ) -> Coordinator:
        settings = load_settings(
            db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state", **overrides
        )
        coordinator = build_coordinator(settings, transport=transport, clock=clock or Clock())
        made.append(coordinator)
        return coordinator

    yield make
    for coordinator in made:
        coordinator.close()


def task_of(coordinator: Coordinator, task_id: str) -> db.Task:
    task = db.get_task(coordinator.ledger, task_id)
    assert task is not None
    return task


def open_question(coordinator: Coordinator, task_id: str) -> db.Question:
    (question,) = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
    return question


def usage_calls(conn: db.Ledger, task_id: str) -> dict[str, int]:
    """Model calls recorded in the budget ledger for a task, by stage."""
    calls: dict[str, int] = {}
    for row in db.task_usage(conn, thread_id=task_id):
        calls[row.stage] = calls.get(row.stage, 0) + row.calls
    return calls


@contextmanager
def serving(coordinator: Coordinator, *, poll_s: float = 0.05) -> Iterator[Coordinator]:
    """The daemon's worker loop on a thread, as the daemon runs it; stopped and idle after."""
    stop = threading.Event()
    thread = threading.Thread(
        target=coordinator.serve, args=(stop,), kwargs={"poll_s": poll_s}, daemon=True
    )
    thread.start()
    try:
        yield coordinator
    finally:
        stop.set()
        coordinator.stop_waiting()
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert coordinator.wait_idle(60)


def status_is(coordinator: Coordinator, task_id: str, *statuses: str) -> db.Task | None:
    """The task, once its status is one of `statuses` (for `wait_for`); else None."""
    task = task_of(coordinator, task_id)
    return task if task.status in statuses else None
