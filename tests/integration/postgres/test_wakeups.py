"""Commands queued on one instance wake the others at once (LISTEN/NOTIFY), and only on commit.

Each instance here is a ledger of its own on one database, as two daemons
would hold: a listener thread on one, writes through the other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.db.wakeups import COMMANDS_CHANNEL, announce_commands
from agent_team.exceptions import LedgerError
from agent_team.requests import inbox
from agent_team.service.wiring import build_coordinator
from tests.integration.pipeline.conftest import LONG_BODY, Clock, RecordingTransport
from tests.waiting import wait_for


class Wakes:
    """Counts `on_wake` calls; `wait_for(n)` polls with a deadline."""

    def __init__(self) -> None:
        self.count = 0
        self._cond = threading.Condition()

    def __call__(self) -> None:
        with self._cond:
            self.count += 1
            self._cond.notify_all()

    def wait_for(self, n: int, timeout_s: float = 10.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.count >= n, timeout=timeout_s)


@contextmanager
def listening(ledger: db.Ledger) -> Iterator[Wakes]:
    """A listener thread on `ledger`, connected (its first wake seen) before the test goes on."""
    wakes, stop = Wakes(), threading.Event()
    thread = threading.Thread(target=ledger.listen_for_commands, args=(wakes, stop), daemon=True)
    thread.start()
    try:
        assert wakes.wait_for(1), "the listener never connected"
        yield wakes
    finally:
        stop.set()
        thread.join(timeout=5)
        assert not thread.is_alive(), "the listener did not stop within a second of `stop`"


@pytest.fixture
def two(pg_url: str) -> Iterator[tuple[db.Ledger, db.Ledger]]:
    db.init_db(pg_url)
    with db.open_ledger(pg_url) as listener, db.open_ledger(pg_url) as writer:
        yield listener, writer


def settle(wakes: Wakes, expected: int) -> None:
    """Wait for `expected` wakes, then a little more to see that no other comes."""
    assert wakes.wait_for(expected), f"{wakes.count} wake(s), wanted {expected}"
    time.sleep(0.3)
    assert wakes.count == expected


def test_every_write_that_makes_a_command_runnable_wakes_the_other_instance(
    two: tuple[db.Ledger, db.Ledger],
) -> None:
    listener, writer = two
    with listening(listener) as wakes:
        task_id = inbox.submit_task(writer, title="Remember the email", body=LONG_BODY)
        settle(wakes, 2)  # the task's start command

        (claimed,) = db.claim_commands(writer, consumer="w", limit=1, lease_s=30)
        settle(wakes, 2)  # a claim makes nothing runnable
        assert db.fail_command(
            writer, command_id=claimed.command_id, error="x", retry=True, consumer="w"
        )
        settle(wakes, 3)  # handed back for another try
        (claimed,) = db.claim_commands(writer, consumer="w", limit=1, lease_s=30)
        assert db.release_command(writer, command_id=claimed.command_id, consumer="w")
        settle(wakes, 4)  # handed back by a sweep
        (claimed,) = db.claim_commands(writer, consumer="w", limit=1, lease_s=30)
        assert db.complete_command(writer, command_id=claimed.command_id, consumer="w")
        settle(wakes, 4)  # done: nothing to run

        db.ensure_question(
            writer,
            question_id=f"{task_id}:q1",
            thread_id=task_id,
            turn=1,
            kind="plan_decision",
            transport="local",
            deadline_at=None,
            payload_json=None,
        )
        assert db.answer_question(
            writer, question_id=f"{task_id}:q1", answer_json='"approve"', answered_via="cli"
        )
        settle(wakes, 5)  # the answer's resume
        assert not db.answer_question(
            writer, question_id=f"{task_id}:q1", answer_json='"reject"', answered_via="cli"
        )
        assert not db.enqueue_command(
            writer, command_id=db.resume_command_id(f"{task_id}:q1"), kind="resume", task_id=task_id
        )
        settle(wakes, 5)  # a lost compare-and-set and a duplicate enqueue queue nothing


def test_a_write_that_rolls_back_wakes_nobody(two: tuple[db.Ledger, db.Ledger]) -> None:
    listener, writer = two

    class Abandon(Exception):
        pass

    def queue_then_fail(tx: db.Transaction) -> None:
        tx.execute(
            "INSERT INTO commands (command_id, kind, task_id, payload_json, state, created_at) "
            "VALUES ('c-x', 'start', 't-x', '{}', 'pending', '2026-01-01T00:00:00.000000Z')"
        )
        announce_commands(tx, writer.dialect)
        raise Abandon

    with listening(listener) as wakes:
        with pytest.raises(Abandon):
            writer.write(queue_then_fail)
        settle(wakes, 1)
        assert db.get_command(writer, "c-x") is None


def test_the_listener_comes_back_after_its_connection_is_cut(
    two: tuple[db.Ledger, db.Ledger], pg_url: str
) -> None:
    listener, writer = two
    with listening(listener) as wakes:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            cut = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query = %s",
                (f"LISTEN {COMMANDS_CHANNEL}",),
            ).fetchall()
        assert cut == [(True,)]
        assert wakes.wait_for(2), "no wake after reconnecting (for what came in meanwhile)"
        before = wakes.count
        inbox.submit_task(writer, title="After the cut", body=LONG_BODY)
        assert wakes.wait_for(before + 1), "commands no longer wake the listener"


def test_sqlite_has_no_channel_and_returns_at_once(tmp_path: Path) -> None:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as ledger:
        assert ledger.dialect.announce_commands == ""
        started = time.monotonic()
        ledger.listen_for_commands(Wakes(), threading.Event())
        assert time.monotonic() - started < 1


def test_an_idle_instance_starts_a_task_queued_elsewhere_long_before_its_poll(
    pg_url: str, tmp_path: Path
) -> None:
    """Instance B polls its inbox every 30 s; a task submitted on A runs on B at once."""
    settings = load_settings(
        database_url=pg_url,
        db_path=tmp_path / "agent-team.db",
        state_dir=tmp_path / "state",
        poll_s=30,
    )
    b = build_coordinator(settings, transport=RecordingTransport(), clock=Clock())
    stop = threading.Event()
    threads = [
        threading.Thread(target=b.serve, args=(stop,), kwargs={"poll_s": 30}, daemon=True),
        threading.Thread(target=b.listen_for_commands, args=(stop,), daemon=True),
    ]
    try:
        for thread in threads:
            thread.start()
        wait_for(lambda: b.wakeups >= 1, "B's listener to connect", timeout_s=20)
        with db.open_ledger(pg_url) as a:  # another instance: nothing of B's is touched
            started = time.monotonic()
            task_id = inbox.submit_task(a, title="Remember the email", body=LONG_BODY)
            wait_for(
                read_or_false(lambda: _status(a, task_id) == "waiting"),
                "the task to reach its gate",
                timeout_s=20,
            )
            assert time.monotonic() - started < 10, "B waited for its poll"
            (question,) = db.list_questions(a, status="open", thread_id=task_id)
            inbox.submit_answer(
                a, question.question_id, "approve", via="cli:tester", now=datetime.now(UTC)
            )
            wait_for(
                read_or_false(lambda: _status(a, task_id) == "done"),
                "the answer to be applied",
                timeout_s=20,
            )
            assert time.monotonic() - started < 20
        assert b.wakeups >= 3  # connected, the start, the resume
    finally:
        stop.set()
        b.wake.set()
        for thread in threads:
            thread.join(timeout=10)
        b.close()


def _status(ledger: db.Ledger, task_id: str) -> str | None:
    task = db.get_task(ledger, task_id)
    return task.status if task is not None else None


def read_or_false(condition: Callable[[], bool]) -> Callable[[], bool]:
    """`condition` for `wait_for`, False while the ledger refuses the read (and so polled on)."""

    def reading() -> bool:
        try:
            return condition()
        except LedgerError:
            return False

    return reading


@pytest.mark.parametrize("notify", [True, False])
def test_the_daemon_listens_unless_told_not_to(pg_url: str, tmp_path: Path, notify: bool) -> None:
    from agent_team.service.daemon import Daemon

    settings = load_settings(
        database_url=pg_url,
        db_path=tmp_path / "agent-team.db",
        state_dir=tmp_path / "state",
        dashboard_port=0,
        pg_notify=notify,
    )
    daemon = Daemon(settings)
    try:
        assert [loop.name for loop in daemon.loops] == (
            ["worker", "budget-outbox", "heartbeat", "command-wakeups"]
            if notify
            else ["worker", "budget-outbox", "heartbeat"]
        )
        assert daemon.health.facts()["instance"] == daemon.coordinator.instance
    finally:
        daemon.close()


def test_the_listener_asks_the_server_now_and_then_so_a_silent_cut_is_noticed(
    two: tuple[db.Ledger, db.Ledger], pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_team.db import postgres_ledger

    monkeypatch.setattr(postgres_ledger, "LISTEN_PING_S", 0.2)
    listener, _writer = two
    with listening(listener), psycopg.connect(pg_url, autocommit=True) as admin:
        wait_for(
            lambda: (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND query = 'SELECT 1'"
                ).fetchone()
                == (1,)
            ),
            "the listening session to ping the server",
            timeout_s=20,
        )
