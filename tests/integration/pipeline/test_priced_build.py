"""A priced build starts only while today's cap is not reached.

The `command` builder reports no cost, so the test marks it priced
(`GraphDeps.build_priced`, as the wiring does for `claude-code`); its command
writes a marker file, which shows whether a build process ever started.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from agent_team import db
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    Clock,
    MakeCoordinator,
    RecordingTransport,
    open_question,
    task_of,
)

TOKEN_CAP = 100_000


def test_a_priced_build_waits_for_the_next_day_when_todays_cap_is_reached(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    marker = tmp_path / "build-started"
    clock = Clock()
    transport = RecordingTransport()
    coordinator = make_coordinator(
        clock=clock,
        transport=transport,
        builder="command",
        build_command=f"touch {shlex.quote(str(marker))}",
        daily_token_cap=TOKEN_CAP,
    )
    assert not coordinator.deps.build_priced, "the command builder reports no cost"
    coordinator.deps.build_priced = True
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    question = open_question(coordinator, task_id)
    # Other work spent the rest of today's cap (the offline model is capped in tokens).
    day = db.day_bucket(clock())
    used = db.tokens_spent(coordinator.ledger, day=day, billing_mode="api")
    db.record_usage(
        coordinator.ledger,
        thread_id="other",
        stage="build",
        model="claude-code:sonnet",
        billing_mode="api",
        input_tokens=TOKEN_CAP - used,
        output_tokens=0,
        usd_cost=0.0,
        recorded_at=clock(),
    )
    coordinator.answer(question.question_id, "approve")

    coordinator.tick(until_idle=True, timeout_s=60)

    task = task_of(coordinator, task_id)
    assert (task.status, task.parked_reason, task.phase) == ("parked", "budget_exhausted", "build")
    assert not marker.exists(), "no build process started"
    last = db.list_transitions(coordinator.ledger, task_id)[-1]
    assert (last.to_phase, last.status) == ("build", "parked")
    assert last.note is not None and "the build does not start" in last.note
    assert f"{TOKEN_CAP} tokens used on {day}" in last.note
    assert [event for _, event, _ in transport.notices][-1] == "parked"
    coordinator.tick(until_idle=True, timeout_s=60)
    assert not marker.exists() and task_of(coordinator, task_id).status == "parked"

    clock.advance(days=1)  # a new UTC day: under the cap again
    coordinator.tick(until_idle=True, timeout_s=60)

    task = task_of(coordinator, task_id)
    assert (task.status, task.phase) == ("done", "done")
    assert marker.exists(), "the build ran"
    assert [q.question_id for q in db.list_questions(coordinator.ledger, thread_id=task_id)] == [
        question.question_id
    ]


def test_a_priced_build_under_the_cap_starts_at_once(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    marker = tmp_path / "build-started"
    coordinator = make_coordinator(
        builder="command",
        build_command=f"touch {shlex.quote(str(marker))}",
        daily_token_cap=TOKEN_CAP,
    )
    coordinator.deps.build_priced = True
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(open_question(coordinator, task_id).question_id, "approve")

    coordinator.tick(until_idle=True, timeout_s=60)

    assert task_of(coordinator, task_id).status == "done"
    assert marker.exists()


def test_the_wiring_marks_only_claude_code_priced(
    make_coordinator: MakeCoordinator, tmp_path: Path
) -> None:
    claude = make_coordinator(builder="claude-code", claude_bin=str(tmp_path / "claude"))
    assert claude.deps.build_priced
    assert not make_coordinator(builder="offline").deps.build_priced
