"""A ledger that cannot be written (full disk, read-only mount) while Slack sends answers.

Found by bench/chaos.py: `/slack/events` answered 500 with a traceback per request
during a full disk. An outage is not a bug: 503 (Slack delivers it again), at most
one short line per source a minute, nothing stored, and the redelivery, once there is
room again, records the answer.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from agent_team import db
from agent_team.db.sqlite_ledger import storage_error
from tests.integration.slack.conftest import (
    ALICE,
    SlackWorld,
    block_action,
    message_event,
    view_submission,
)
from tests.ledger_rows import stored_rows

Send = Callable[[SlackWorld, db.Question], Any]


def button(world: SlackWorld, question: db.Question) -> Any:
    payload = block_action(
        question.channel_ref or "", ALICE, "agent_team.approve", question.question_id
    )
    return world.send(payload, form=True)


def thread_reply(world: SlackWorld, question: db.Question) -> Any:
    return world.send(message_event(question.channel_ref or "", ALICE, "approve"))


def modal(world: SlackWorld, question: db.Question) -> Any:
    metadata = f"{question.question_id}|{question.channel_ref}"
    return world.send(view_submission(ALICE, metadata, "split the migration in two"), form=True)


SENDS: dict[str, Send] = {"button": button, "thread reply": thread_reply, "modal": modal}


@pytest.mark.parametrize("kind", list(SENDS))
def test_an_answer_while_the_ledger_cannot_be_written_is_503_in_one_line_then_lands(
    world: SlackWorld,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    send = SENDS[kind]
    if kind == "thread reply":
        send(world, world.waiting_question("Warm the bot id"))  # learnt on Bolt's path
        world.settle()
    question = world.waiting_question()
    world.settle()
    before = stored_rows(world.conn)
    full = sqlite3.OperationalError("database or disk is full")  # what SQLite says then

    def disk_full(*args: Any, **kwargs: Any) -> Any:
        raise storage_error(full, world.conn.path)

    with monkeypatch.context() as patched, caplog.at_level(logging.INFO):
        patched.setattr(db, "answer_question", disk_full)
        replies = [send(world, question).status_code for _ in range(3)]

    assert replies == [503, 503, 503]
    assert stored_rows(world.conn) == before
    ours = [r for r in caplog.records if r.name.startswith("agent_team")]
    assert not [r for r in ours if r.exc_info is not None], "no traceback for an outage"
    (line,) = [r.getMessage() for r in ours if "unavailable" in r.getMessage()]
    assert "disk is full" in line and "\n" not in line and len(line) < 400

    assert send(world, question).status_code == 200  # Slack's redelivery, room again
    world.settle()
    answered = world.question(question.question_id)
    assert (answered.status, answered.answered_via) == ("answered", f"slack:{ALICE}")


def test_the_timers_redraw_pass_stops_at_the_first_outage_in_one_line(
    world: SlackWorld, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Questions answered elsewhere wait for their redraw; the ledger cannot record one."""
    asked = [world.waiting_question(f"Task {n}") for n in range(3)]
    for question in asked:
        world.coordinator.answer(question.question_id, "approve", via="cli")
    full = sqlite3.OperationalError("database or disk is full")
    tries: list[str] = []

    def disk_full(*args: Any, **kwargs: Any) -> Any:
        tries.append(str(kwargs.get("effect_id")))
        raise storage_error(full, world.conn.path)

    with monkeypatch.context() as patched, caplog.at_level(logging.INFO):
        patched.setattr(db, "begin_effect", disk_full)
        assert world.transport.reconcile_answered() == 0

    assert len(tries) == 1, "the pass stops: every other question would fail the same way"
    ours = [r for r in caplog.records if r.name.startswith("agent_team")]
    assert not [r for r in ours if r.exc_info is not None], "no traceback for an outage"
    assert [r.getMessage() for r in ours if "wait for the ledger" in r.getMessage()], ours
    assert not world.fake.of("chat.update")

    assert world.transport.reconcile_answered() == 3  # room again: every one redrawn
