"""Tasks as the LangGraph server's `Thread`, `ThreadState` and `Run` objects.

Everything comes from the ledger alone, so a finished task whose checkpoints
retention pruned still shows, and the picture is the same on every daemon of
a PostgreSQL cluster. The thread's status follows the task and its open
question: `interrupted` only while a question is open (so `tasks` and
`interrupts` are never empty then), `busy` while queued, running or between
an answer and its resume, `idle` once done or cancelled, `error` when failed
or parked (the reason in `values.error`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from agent_team import db
from agent_team.common.web_url import web_url
from agent_team.integrations.langgraph_api.human import GATE_NODES, human_interrupt
from agent_team.reports import task as reports
from agent_team.reports.plandiff import plan_versions
from agent_team.task_model import QuestionStatus, TaskStatus

__all__ = [
    "GRAPH_ID",
    "ThreadView",
    "interrupt_of",
    "iso",
    "run_id_for",
    "run_object",
    "thread_object",
    "thread_state",
    "thread_status",
    "thread_view",
]

GRAPH_ID = "agent-team"
_RUNS = uuid.UUID("0d9f3e58-54a3-4f43-9a3e-2f3c0e9b7a11")  # namespace of run ids


def iso(stamp: str) -> str:
    """A ledger time as ISO 8601 with its zone, as the SDKs parse it."""
    return db.from_iso(stamp).isoformat()


def run_id_for(question_id: str) -> str:
    """One run per answered question, the same id on every retry and every daemon."""
    return str(uuid.uuid5(_RUNS, question_id))


def thread_status(task: db.Task, open_question: db.Question | None) -> str:
    if open_question is not None:
        return "interrupted"
    if task.status in (TaskStatus.DONE, TaskStatus.CANCELLED):
        return "idle"
    if task.status in (TaskStatus.FAILED, TaskStatus.PARKED):
        return "error"
    return "busy"


def interrupt_of(question: db.Question) -> dict[str, Any]:
    """One LangGraph `Interrupt`: its id is the question id a resume names.

    The value is a one-element list of `HumanInterrupt`, as `interrupt([request])` makes
    it: Agent Inbox reads that shape from both `Thread.interrupts` and the state's tasks.
    """
    return {
        "id": question.question_id,
        "value": [human_interrupt(question.kind, question.payload)],
    }


@dataclass(frozen=True, slots=True)
class ThreadView:
    """A task with what its thread shows: questions and the latest transition."""

    task: db.Task
    questions: list[db.Question]
    transitions: list[db.Transition]
    effects: list[db.SideEffect]

    @property
    def open_question(self) -> db.Question | None:
        # A question is `interrupted` only while its task waits on it (not once it is done).
        if self.task.status != TaskStatus.WAITING:
            return None
        found = [q for q in self.questions if q.status == QuestionStatus.OPEN]
        return found[-1] if found else None

    @property
    def status(self) -> str:
        return thread_status(self.task, self.open_question)


def thread_view(reader: db.Reader, task: db.Task) -> ThreadView:
    return ThreadView(
        task=task,
        questions=db.list_questions(reader, thread_id=task.id),
        transitions=db.list_transitions(reader, task.id),
        effects=db.list_effects(reader, task_id=task.id),
    )


def metadata_of(task: db.Task) -> dict[str, Any]:
    """What `threads.search(metadata=...)` matches on; every thread has the graph id."""
    return {
        "graph_id": GRAPH_ID,
        "assistant_id": GRAPH_ID,
        "kind": task.kind,
        "source": task.source,
    }


def _plan(questions: list[db.Question]) -> str | None:
    """The plan the task follows: the newest version, a person's edit included (`plandiff`)."""
    plans = plan_versions(questions)
    return plans[-1].markdown if plans else None


def _values(view: ThreadView) -> dict[str, Any]:
    task = view.task
    done = [t for t in view.transitions if t.status == TaskStatus.DONE]
    result = done[-1].note if done else None
    links: list[dict[str, str]] = []
    build = reports.BuildRef.from_note(result)
    if build is not None:
        links.append({"kind": "build", "ref": f"{build.branch}@{build.commit}"})
    for effect in view.effects:
        outcome = effect.result if isinstance(effect.result, dict) else {}
        url = web_url(outcome.get("url") or outcome.get("page_url"))
        if url is not None:
            links.append({"kind": effect.kind, "url": url})
    values: dict[str, Any] = {
        "task_id": task.id,
        "title": task.title,
        "kind": task.kind,
        "source": task.source,
        "status": task.status,
        "phase": task.phase,
        "plan": _plan(view.questions),
        "result": result,
        "links": links,
    }
    if task.status in (TaskStatus.FAILED, TaskStatus.PARKED):
        last = view.transitions[-1] if view.transitions else None
        values["error"] = task.parked_reason or (last.note if last else None) or task.status
    # Agent Inbox renders every value; an empty one is left out rather than shown as null.
    return {key: value for key, value in values.items() if value is not None}


def _interrupts(view: ThreadView) -> dict[str, list[dict[str, Any]]]:
    question = view.open_question
    if question is None:
        return {}
    # Keyed by the gate node that asked, as the clients read it; the state's task
    # carries the task id.
    return {GATE_NODES.get(question.kind, question.kind): [interrupt_of(question)]}


def _task_id(question: db.Question) -> str:
    """The id of the graph task (the gate node's run) that asked `question`."""
    return str(uuid.uuid5(_RUNS, f"task:{question.question_id}"))


def thread_object(view: ThreadView) -> dict[str, Any]:
    task = view.task
    return {
        "thread_id": task.id,
        "created_at": iso(task.created_at),
        "updated_at": iso(task.updated_at),
        "state_updated_at": iso(task.updated_at),
        "metadata": metadata_of(task),
        "status": view.status,
        "values": _values(view),
        "interrupts": _interrupts(view),
        "config": {},
    }


def _checkpoint(task_id: str, checkpoint_id: str | None) -> dict[str, Any]:
    return {
        "thread_id": task_id,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "checkpoint_map": None,
    }


def thread_state(view: ThreadView, checkpoint_id: str | None) -> dict[str, Any]:
    """`ThreadState`: while a question is open, one task (the gate node) carrying it."""
    task = view.task
    question = view.open_question
    tasks: list[dict[str, Any]] = []
    following: list[str] = []
    if question is not None:
        node = GATE_NODES.get(question.kind, question.kind)
        following = [node]
        tasks.append(
            {
                "id": _task_id(question),
                "name": node,
                "path": ["__pregel_pull", node],
                "error": None,
                "interrupts": [interrupt_of(question)],
                "checkpoint": None,
                "state": None,
                "result": None,
            }
        )
    elif view.status == "busy":
        following = [task.phase]
    return {
        "values": _values(view),
        "next": following,
        "tasks": tasks,
        "checkpoint": _checkpoint(task.id, checkpoint_id),
        "parent_checkpoint": None,
        "metadata": {**metadata_of(task), "step": len(view.transitions)},
        "created_at": iso(task.updated_at),
        "interrupts": [interrupt_of(question)] if question is not None else [],
    }


def run_object(
    task: db.Task, question: db.Question, *, status: str, assistant_id: str
) -> dict[str, Any]:
    """The run an answer started: one per question, so a retry names the same run."""
    created = iso(question.answered_at or task.updated_at)
    return {
        "run_id": run_id_for(question.question_id),
        "thread_id": task.id,
        "assistant_id": assistant_id,
        "created_at": created,
        "updated_at": max(created, iso(task.updated_at)),
        "status": status,
        "metadata": {"question_id": question.question_id, "answered_via": question.answered_via},
        "multitask_strategy": "reject",
        "kwargs": {},
    }
