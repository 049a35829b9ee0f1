"""The phase a task waits in, read from its question's kind instead of the checkpoint."""

from __future__ import annotations

from agent_team.graph import GATE_NODES, NODE_PHASES, QUESTION_PHASES
from agent_team.task_model import QuestionKind


def test_every_question_kind_waits_in_the_phase_of_a_gate_node() -> None:
    assert set(QUESTION_PHASES) == set(QuestionKind)
    gate_phases = {NODE_PHASES[node] for node in GATE_NODES}
    assert set(QUESTION_PHASES.values()) == gate_phases, "one gate node per kind of question"
