"""build_graph(): the task pipeline as one LangGraph StateGraph (DESIGN.md §2).

    intake -> clarify <-> clarify_gate
                 \\-> plan <-> plan_review -> build -> done
                               \\-(reject)----------> done

With a publisher configured (GitHub draft PRs) `build -> publish -> done`.
One `interrupt()` per gate node (`clarify_gate`, `plan_review`); model calls
and builds live in their own nodes so a resume never repeats them.
"""

from __future__ import annotations

from functools import partial

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from agent_team.nodes.build import build
from agent_team.nodes.clarify import clarify, clarify_gate, route_after_clarify
from agent_team.nodes.common import GraphDeps
from agent_team.nodes.done import done
from agent_team.nodes.intake import intake, route_after_intake
from agent_team.nodes.plan import plan
from agent_team.nodes.plan_review import plan_review, route_after_review
from agent_team.nodes.publish import publish
from agent_team.task_model import Phase, TaskState

__all__ = ["GATE_NODES", "NODE_PHASES", "build_graph", "route_after_intake"]

# Graph node -> the phase it belongs to (two nodes share `clarify`).
NODE_PHASES: dict[str, Phase] = {
    "intake": Phase.INTAKE,
    "clarify": Phase.CLARIFY,
    "clarify_gate": Phase.CLARIFY,
    "plan": Phase.PLAN,
    "plan_review": Phase.PLAN_REVIEW,
    "build": Phase.BUILD,
    "publish": Phase.BUILD,
    "done": Phase.DONE,
}
GATE_NODES = frozenset({"clarify_gate", "plan_review"})


def build_graph(
    deps: GraphDeps, checkpointer: BaseCheckpointSaver[str] | None
) -> CompiledStateGraph[TaskState, None, TaskState, TaskState]:
    """Compile the pipeline with `deps` bound into every node.

    Args:
        deps: the ledger, model caller, builder and settings the nodes use.
        checkpointer: a `SqliteSaver` on its own connection to the ledger file
            (None only in tests that do not resume).
    """
    graph = StateGraph(TaskState)
    graph.add_node("intake", partial(intake, deps=deps))
    graph.add_node("clarify", partial(clarify, deps=deps))
    graph.add_node("clarify_gate", partial(clarify_gate, deps=deps))
    graph.add_node("plan", partial(plan, deps=deps))
    graph.add_node("plan_review", partial(plan_review, deps=deps))
    graph.add_node("build", partial(build, deps=deps))
    graph.add_node("done", partial(done, deps=deps))

    graph.add_edge(START, "intake")
    graph.add_conditional_edges("intake", route_after_intake, ["clarify"])
    graph.add_conditional_edges("clarify", route_after_clarify, ["clarify_gate", "plan"])
    graph.add_edge("clarify_gate", "clarify")
    graph.add_edge("plan", "plan_review")
    graph.add_conditional_edges("plan_review", route_after_review, ["build", "plan", "done"])
    after_build = "build"
    if deps.publish is not None:
        graph.add_node("publish", partial(publish, deps=deps))
        graph.add_edge("build", "publish")
        after_build = "publish"
    graph.add_edge(after_build, "done")
    graph.add_edge("done", END)
    return graph.compile(checkpointer=checkpointer)
