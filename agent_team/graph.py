"""build_graph(): the task pipeline as one LangGraph StateGraph (docs/architecture.md §2).

    intake -> clarify <-> clarify_gate
                 \\-> plan <-> plan_review -> build -> done
                               \\-(reject)----------> done

With a publisher configured (GitHub draft PRs) `build -> publish -> done`; with the PR
gate on too (`GraphDeps.pulls`, AGENT_TEAM_GITHUB_PR_GATE) the task stays open while
its pull request is (nodes/pull_request.py):

    publish -> pr_gate -(merged)-> [conf_draft ->] done      pr_gate -(closed)-> done
               pr_gate <-> follow_up, pr_decision
With the Confluence lane on (`GraphDeps.confluence`, AGENT_TEAM_CONFLUENCE_ENABLED):

    intake -(confluence task)-> conf_draft -> conf_gate -(publish)-> conf_write -> done
    build [-> publish] -> conf_draft          conf_gate -(revise)-> conf_draft
                                              conf_gate -(reject)-> done

With the lane off the graph is exactly the one above it (a test compares).
One `interrupt()` per gate node (`clarify_gate`, `plan_review`, `conf_gate`, `pr_gate`,
`pr_decision`);
model calls and builds live in their own nodes so a resume never repeats them.
"""

from __future__ import annotations

from functools import partial

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from agent_team.nodes.build import build
from agent_team.nodes.clarify import clarify, clarify_gate, route_after_clarify
from agent_team.nodes.common import GraphDeps
from agent_team.nodes.confluence_writer import (
    conf_draft,
    conf_gate,
    conf_write,
    route_after_conf_gate,
)
from agent_team.nodes.done import done
from agent_team.nodes.intake import intake, route_after_intake
from agent_team.nodes.plan import plan
from agent_team.nodes.plan_review import plan_review, route_after_review
from agent_team.nodes.publish import publish
from agent_team.nodes.pull_request import AFTER, follow_up, pr_decision, pr_gate, route_after_pr
from agent_team.task_model import Phase, QuestionKind, TaskKind, TaskState

__all__ = [
    "DURABLE_CHANNELS",
    "GATE_NODES",
    "NODE_PHASES",
    "QUESTION_PHASES",
    "build_graph",
    "route_after_intake",
    "route_after_intake_with_lane",
]

# Graph node -> the phase it belongs to (two nodes share `clarify`).
NODE_PHASES: dict[str, Phase] = {
    "intake": Phase.INTAKE,
    "clarify": Phase.CLARIFY,
    "clarify_gate": Phase.CLARIFY,
    "plan": Phase.PLAN,
    "plan_review": Phase.PLAN_REVIEW,
    "build": Phase.BUILD,
    "publish": Phase.BUILD,
    "conf_draft": Phase.CONF_DRAFT,
    "conf_gate": Phase.CONF_GATE,
    "conf_write": Phase.CONF_WRITE,
    "pr_gate": Phase.PR_OPEN,
    "follow_up": Phase.PR_OPEN,
    "pr_decision": Phase.PR_OPEN,
    "done": Phase.DONE,
}
GATE_NODES = frozenset({"clarify_gate", "plan_review", "conf_gate", "pr_gate", "pr_decision"})
# The node writes that are the protocol's durable points (docs/architecture.md §3): a gate's
# question and the answer it consumed (LangGraph keeps them under `__interrupt__` and `__resume__`),
# and the build's result, minutes of work. Every other checkpoint commits without a flush
# of its own (`db.fenced_savers`).
DURABLE_CHANNELS = frozenset({"__interrupt__", "__resume__", "build"})
# Question kind -> the phase of the gate node that asks it: where a task waits on it.
QUESTION_PHASES: dict[str, Phase] = {
    QuestionKind.CLARIFY: Phase.CLARIFY,
    QuestionKind.PLAN_DECISION: Phase.PLAN_REVIEW,
    QuestionKind.CONFLUENCE_APPROVAL: Phase.CONF_GATE,
    QuestionKind.PULL_REQUEST: Phase.PR_OPEN,
    QuestionKind.PR_DECISION: Phase.PR_OPEN,
}


def route_after_intake_with_lane(state: TaskState) -> str:
    """With the Confluence lane on, `confluence` tasks go straight to it (direct flow)."""
    if state.get("kind") == TaskKind.CONFLUENCE:
        return Phase.CONF_DRAFT.value
    return route_after_intake(state)


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

    lane = deps.confluence is not None
    graph.add_edge(START, "intake")
    if lane:
        graph.add_conditional_edges(
            "intake", route_after_intake_with_lane, ["clarify", "conf_draft"]
        )
    else:
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
    after_pr = "conf_draft" if lane else "done"
    if deps.publish is not None and deps.pulls is not None:
        # The PR is a gate: the task stays open until it is merged or closed.
        graph.add_node("pr_gate", partial(pr_gate, deps=deps))
        graph.add_node("follow_up", partial(follow_up, deps=deps))
        graph.add_node("pr_decision", partial(pr_decision, deps=deps))
        graph.add_edge("publish", "pr_gate")
        graph.add_conditional_edges(
            "pr_gate",
            route_after_pr,
            {
                AFTER: after_pr,
                "follow_up": "follow_up",
                "pr_decision": "pr_decision",
                "done": "done",
            },
        )
        graph.add_conditional_edges(
            "follow_up", route_after_pr, {"pr_gate": "pr_gate", "pr_decision": "pr_decision"}
        )
        graph.add_conditional_edges(
            "pr_decision",
            route_after_pr,
            {"follow_up": "follow_up", "pr_gate": "pr_gate", AFTER: after_pr, "done": "done"},
        )
    elif lane:
        graph.add_edge(after_build, "conf_draft")
    else:
        graph.add_edge(after_build, "done")
    if lane:
        # Post-build documentation flow: the lane runs after the build (and its PR's merge).
        graph.add_node("conf_draft", partial(conf_draft, deps=deps))
        graph.add_node("conf_gate", partial(conf_gate, deps=deps))
        graph.add_node("conf_write", partial(conf_write, deps=deps))
        graph.add_edge("conf_draft", "conf_gate")
        graph.add_conditional_edges(
            "conf_gate", route_after_conf_gate, ["conf_write", "conf_draft", "done"]
        )
        graph.add_edge("conf_write", "done")
    graph.add_edge("done", END)
    return graph.compile(checkpointer=checkpointer)
