"""The daemon's worker loop: woken at once in-process, polling for other processes' commands."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.coordinator import Coordinator
from agent_team.service.wiring import build_coordinator
from tests.waiting import wait_for

BODY = (
    "Remember the email address on the login page between visits.\n"
    "- Store it in a cookie\n- Prefill the field\n- Test both paths\n"
)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Coordinator, float]]:
    """A coordinator serving in a thread with a very long poll, so only `wake` is fast."""
    settings = load_settings(db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state")
    coordinator = build_coordinator(settings)
    stop = threading.Event()
    poll_s = 120.0
    thread = threading.Thread(
        target=coordinator.serve, args=(stop,), kwargs={"poll_s": poll_s}, daemon=True
    )
    thread.start()
    yield coordinator, poll_s
    stop.set()
    coordinator.wake.set()
    thread.join(timeout=30)
    assert not thread.is_alive()
    coordinator.close()


def status(coordinator: Coordinator, task_id: str) -> str:
    task = db.get_task(coordinator.ledger, task_id)
    assert task is not None
    return task.status


def delivered(coordinator: Coordinator, task_id: str) -> bool:
    """The task waits and its question has been delivered (status is set first)."""
    questions = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
    return bool(questions) and all(q.channel_ref for q in questions)


def test_in_process_submit_and_answer_wake_the_loop(running: tuple[Coordinator, float]) -> None:
    coordinator, poll_s = running
    started = time.monotonic()
    task_id = coordinator.start_task(title="Remember the email", body=BODY)
    wait_for(lambda: delivered(coordinator, task_id), "the question delivered", timeout_s=30)
    assert status(coordinator, task_id) == "waiting"
    (question,) = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
    assert question.channel_ref == f"local:{question.question_id}"
    coordinator.answer(question.question_id, "approve")
    wait_for(lambda: status(coordinator, task_id) == "done", "the task done", timeout_s=30)
    # Both steps finished without waiting out a single poll interval: `wake` did it.
    assert time.monotonic() - started < poll_s


def test_an_answer_from_another_process_is_found_by_polling(tmp_path: Path) -> None:
    settings = load_settings(db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state")
    coordinator = build_coordinator(settings)
    stop = threading.Event()
    thread = threading.Thread(
        target=coordinator.serve, args=(stop,), kwargs={"poll_s": 0.1}, daemon=True
    )
    thread.start()
    try:
        task_id = coordinator.start_task(title="Remember the email", body=BODY)
        wait_for(
            lambda: status(coordinator, task_id) == "waiting", "the task waiting", timeout_s=30
        )
        (question,) = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
        subprocess.run(
            [
                str(Path(sys.executable).with_name("agent-team")),
                "--db",
                str(settings.db_path),
                "answer",
                question.question_id,
                "lgtm",
                "--as",
                "other-process",
            ],
            check=True,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        wait_for(lambda: status(coordinator, task_id) == "done", "the task done", timeout_s=30)
        answered = db.get_question(coordinator.ledger, question.question_id)
        assert answered is not None and answered.answered_via == "cli:other-process"
    finally:
        stop.set()
        coordinator.wake.set()
        thread.join(timeout=30)
        coordinator.close()


def test_a_lease_given_up_by_its_own_run_is_not_reported_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state")
    coordinator = build_coordinator(settings)
    try:
        worker = coordinator.worker
        ledger = coordinator.ledger
        ended = db.acquire_lease(ledger, name="task:ended", owner=worker.consumer, lease_s=30)
        stolen = db.acquire_lease(ledger, name="task:stolen", owner=worker.consumer, lease_s=30)
        assert ended is not None and stolen is not None
        worker._held.update({"ended": ended, "stolen": stolen})
        real_renew = db.renew_leases

        def run_ends_meanwhile(*args: object, **kwargs: object) -> set[str]:
            # Between the renewer's look at the runs and its write: `ended`'s run finishes
            # and gives its lease up; `stolen`'s lease is taken by another instance.
            db.release_lease(ledger, ended)
            worker._held.pop("ended")
            db.release_lease(ledger, stolen)
            assert db.acquire_lease(ledger, name="task:stolen", owner="other", lease_s=30)
            return real_renew(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(db, "renew_leases", run_ends_meanwhile)
        with caplog.at_level("WARNING"):
            assert worker.renew() == set()
        lost = [r.getMessage() for r in caplog.records if "lease lost" in r.getMessage()]
        assert lost == ["task stolen: lease lost to another instance; its run will stop"]
    finally:
        worker._held.clear()
        coordinator.close()


def test_the_worker_keeps_no_lock_for_tasks_that_ran(tmp_path: Path) -> None:
    settings = load_settings(db_path=tmp_path / "agent-team.db", state_dir=tmp_path / "state")
    coordinator = build_coordinator(settings)
    try:
        for i in range(3):
            coordinator.start_task(title=f"Task {i}", body="Keep the lock map small, please.")
        coordinator.tick(until_idle=True, timeout_s=120)
        assert coordinator.worker._locks == {}
    finally:
        coordinator.close()
