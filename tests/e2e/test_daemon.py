"""The daemon as a process: systemd notify, SIGTERM during a run, health of its loops."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.requests import inbox
from agent_team.service.daemon import Daemon, Loop
from tests.e2e.conftest import LONG_BODY
from tests.e2e.daemon_process import daemon_env, free_port, reap, start_daemon
from tests.waiting import wait_for


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose (its parent, the daemon, is gone; init reaps it).
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(30)
    yield sock, path
    sock.close()


def receive_until(sock: socket.socket, wanted: str) -> list[str]:
    seen: list[str] = []
    while True:
        message = sock.recv(4096).decode()
        seen.append(message)
        if wanted in message.splitlines():
            return seen


def approve_then_await_the_build(conn: db.Ledger, task_id: str, started: Path) -> None:
    """The daemon asks the plan question; approve it and wait for the build to begin."""
    wait_for(
        lambda: bool(db.list_questions(conn, status="open", thread_id=task_id)),
        what="the plan question",
        timeout_s=30,
    )
    (question,) = db.list_questions(conn, status="open", thread_id=task_id)
    inbox.submit_answer(conn, question.question_id, "approve", via="cli:t", now=db.utc_now())
    wait_for(started.exists, what="the build command to start", timeout_s=30)


def finish_after_a_restart(conn: db.Ledger, task_id: str, env: dict[str, str], home: Path) -> None:
    """A new daemon continues the task to done, then stops cleanly."""
    restarted = start_daemon(env=env, cwd=home)
    try:
        wait_for(
            lambda: (t := db.get_task(conn, task_id)) is not None and t.status == "done",
            what="the task to finish after the restart",
            timeout_s=30,
        )
        restarted.send_signal(signal.SIGTERM)
        assert restarted.wait(timeout=30) == 0
    finally:
        reap(restarted)


def test_systemd_notify_ready_watchdog_stopping(
    tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, path = notify_socket
    port = free_port()
    env = daemon_env(tmp_path, port)
    env.update(NOTIFY_SOCKET=path, WATCHDOG_USEC="200000")  # feed every 0.1 s
    proc = start_daemon(env=env, cwd=tmp_path, output="pipes")
    try:
        ready = receive_until(sock, "READY=1")
        assert any(
            line.startswith("STATUS=running 0 / waiting 0")
            for m in ready
            for line in m.splitlines()
        )
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
        receive_until(sock, "WATCHDOG=1")
        proc.send_signal(signal.SIGTERM)
        receive_until(sock, "STOPPING=1")
        assert proc.wait(timeout=30) == 0
    finally:
        reap(proc)


@pytest.mark.slow
def test_sigterm_during_a_build_exits_0_and_the_task_resumes(tmp_path: Path) -> None:
    port = free_port()
    go = tmp_path / "go"
    started = tmp_path / "build-started"
    env = daemon_env(tmp_path, port)
    env.update(
        AGENT_TEAM_BUILDER="command",
        AGENT_TEAM_BUILD_COMMAND=(
            f"echo $$ > {tmp_path / 'build.pid'}; touch {started}; "
            f"while [ ! -f {go} ]; do sleep 0.05; done; echo built > out.txt"
        ),
        AGENT_TEAM_STOP_GRACE_S="0.5",
    )
    ledger = tmp_path / "agent-team.db"
    db.init_db(ledger)
    conn = db.open_ledger(ledger)
    try:
        task_id = inbox.submit_task(conn, title="Remember the email", body=LONG_BODY)
        proc = start_daemon(env=env, cwd=tmp_path, output=tmp_path / "daemon-1.log")
        try:
            approve_then_await_the_build(conn, task_id, started)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, (tmp_path / "daemon-1.log").read_text()
        finally:
            reap(proc)
        task = db.get_task(conn, task_id)
        assert task is not None and task.status == "running" and task.phase == "build"
        # The cut-off build command did not outlive the daemon.
        build_pid = int((tmp_path / "build.pid").read_text())
        wait_for(
            lambda: not pid_alive(build_pid), what="the build command to be killed", timeout_s=30
        )

        go.touch()
        finish_after_a_restart(conn, task_id, env, tmp_path)
        rows = db.list_transitions(conn, task_id)
        assert all(row.exited_at for row in rows)
        assert [row.to_phase for row in rows].count("done") == 1
    finally:
        conn.close()


@pytest.mark.slow
def test_ctrl_c_says_what_it_waits_for_and_a_second_one_stops_the_build_now(
    tmp_path: Path,
) -> None:
    # #31 (4): the first Ctrl-C waited in silence, a second only repeated the line, and the
    # message promised a resume where the build starts again from its beginning.
    port = free_port()
    go, started, runs = tmp_path / "go", tmp_path / "build-started", tmp_path / "build-runs"
    env = daemon_env(tmp_path, port)
    env.update(
        AGENT_TEAM_BUILDER="command",
        AGENT_TEAM_BUILD_COMMAND=(
            f"echo $$ > {tmp_path / 'build.pid'}; echo run >> {runs}; touch {started}; "
            f"while [ ! -f {go} ]; do sleep 0.05; done; echo built > out.txt"
        ),
        AGENT_TEAM_STOP_GRACE_S="600",  # far longer than this test waits for anything
        AGENT_TEAM_LOG_LEVEL="info",
    )
    ledger = tmp_path / "agent-team.db"
    db.init_db(ledger)
    log = tmp_path / "daemon-1.log"
    try:
        with db.open_ledger(ledger) as conn:
            task_id = inbox.submit_task(conn, title="Remember the email", body=LONG_BODY)
            proc = start_daemon(env=env, cwd=tmp_path, output=log)
            try:
                approve_then_await_the_build(conn, task_id, started)

                proc.send_signal(signal.SIGINT)
                waiting = f"stopping: waiting up to 600 s for 1 run ({task_id}) to finish; press"
                wait_for(lambda: waiting in log.read_text(), what="the first stop's line")
                assert proc.poll() is None, "it waits for the build"
                proc.send_signal(signal.SIGINT)
                assert proc.wait(timeout=60) == 0, log.read_text()
            finally:
                reap(proc)
            said = log.read_text()
            assert f"stopped 1 run ({task_id}) (told to stop now)" in said, said
            assert "a build that was cut off runs again from its beginning" in said
            assert "recovery sweep: delivered 0" in said and "SweepReport(" not in said
            # Stopped, not failed: nothing recorded, the command back to pending.
            task = db.get_task(conn, task_id)
            assert task is not None and (task.status, task.phase) == ("running", "build")
            assert not any(row.status == "failed" for row in db.list_transitions(conn, task_id))
            assert {c.state for c in db.list_commands(conn, task_id=task_id)} == {"done", "pending"}
            build_pid = int((tmp_path / "build.pid").read_text())
            wait_for(lambda: not pid_alive(build_pid), what="the build to be killed", timeout_s=30)

            go.touch()
            finish_after_a_restart(conn, task_id, env, tmp_path)
    finally:
        go.touch()  # a build left waiting (an assertion failed) ends instead of lingering
    # What the message said: the build ran again from its beginning.
    assert runs.read_text().splitlines() == ["run", "run"]


def test_a_dying_loop_is_restarted_and_reported(tmp_path: Path) -> None:
    settings = load_settings(
        db_path=tmp_path / "agent-team.db",
        state_dir=tmp_path / "state",
        dashboard_port=0,
        poll_s=0.1,
    )
    daemon = Daemon(settings)
    calls: list[int] = []

    def flaky(stop: threading.Event, first: bool) -> None:
        calls.append(1)
        raise RuntimeError("the flaky loop broke with token ghp_" + "a" * 36)

    daemon.loops.append(Loop("flaky", flaky))
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(daemon.run()), daemon=True)
    thread.start()
    try:
        wait_for(lambda: daemon.bound is not None, what="the HTTP server", timeout_s=30)
        url = daemon.url + "readyz"
        wait_for(lambda: len(calls) >= 2, what="a restart of the flaky loop", timeout_s=30)
        response = httpx.get(url, timeout=10)
        assert response.status_code == 503
        body = response.text
        assert "flaky" in body and "the flaky loop broke" in body
        assert "ghp_" + "a" * 36 not in body, "errors in /readyz are redacted"
        live = httpx.get(daemon.url + "healthz", timeout=10)
        assert live.status_code == 200 and live.json()["status"] == "degraded"
        assert "ghp_" + "a" * 36 not in live.text, "errors in /healthz are redacted"
    finally:
        daemon.request_stop()
        thread.join(timeout=60)
    assert codes == [0]


def test_spend_rows_the_database_refused_are_replayed_at_start_and_counted(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "agent-team.db"
    db.init_db(ledger)
    outbox = tmp_path / db.OUTBOX_FILENAME  # where a refused row went, beside the ledger
    now = db.utc_now()
    row = {
        "thread_id": "t-stranded",
        "stage": "plan",
        "model": "anthropic:claude-sonnet-4-5",
        "billing_mode": "api",
        "input_tokens": 1000,
        "output_tokens": 100,
        "usd_cost": 0.0045,
        "recorded_at": db.to_iso(now),
        "day_bucket": db.day_bucket(now),
    }
    outbox.write_text(json.dumps(row) + "\n")
    assert db.outbox_spend(outbox, day=now, billing_mode="api") == db.OutboxSpend(
        rows=1, usd=0.0045, tokens=1100
    )
    settings = load_settings(
        db_path=ledger, state_dir=tmp_path / "state", dashboard_port=0, poll_s=0.1
    )
    daemon = Daemon(settings)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(daemon.run()), daemon=True)
    thread.start()
    try:
        conn = db.open_ledger(ledger)
        try:
            wait_for(
                lambda: bool(db.task_usage(conn, thread_id="t-stranded")),
                what="the stranded row in the ledger",
                timeout_s=30,
            )
        finally:
            conn.close()
        wait_for(lambda: not outbox.exists(), what="the emptied outbox to go", timeout_s=30)
        wait_for(lambda: daemon.bound is not None, what="the HTTP server", timeout_s=30)
        wait_for(
            lambda: (
                httpx.get(daemon.url + "healthz", timeout=10)
                .json()["facts"]
                .get("budget_outbox_rows")
                == 0
            ),
            what="/healthz to say the outbox is empty",
            timeout_s=30,
        )
        metrics = httpx.get(daemon.url + "metrics", timeout=10).text
        assert "\nagent_team_budget_outbox_rows 0.0" in metrics  # said by the loop, not absent
    finally:
        daemon.request_stop()
        thread.join(timeout=60)
    assert codes == [0]


def test_spend_the_ledger_refuses_goes_on_counts_and_is_written_back_when_it_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database refuses budget rows (a trigger stands in for a full table): the model
    calls go on, the rows wait in the outbox and count against the cap, and once the
    database takes rows again the daemon's loop writes them back and `/metrics` says 0."""
    import sqlite3

    from agent_team.service import daemon as daemon_module

    monkeypatch.setattr(daemon_module, "OUTBOX_REPLAY_S", 0.2)
    ledger = tmp_path / "agent-team.db"
    db.init_db(ledger)
    with sqlite3.connect(ledger) as raw:
        raw.execute(
            "CREATE TRIGGER refuse_spend BEFORE INSERT ON budget_ledger "
            "BEGIN SELECT RAISE(ABORT, 'the ledger refuses spend rows'); END"
        )
    outbox = tmp_path / db.OUTBOX_FILENAME
    settings = load_settings(
        db_path=ledger, state_dir=tmp_path / "state", dashboard_port=0, poll_s=0.1
    )
    daemon = Daemon(settings)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(daemon.run()), daemon=True)
    thread.start()
    conn = db.open_ledger(ledger)
    try:
        task_id = inbox.submit_task(conn, title="Remember the email", body=LONG_BODY)
        # Clarify and plan ran although their rows were refused: the task waits at its gate.
        wait_for(
            lambda: db.list_questions(conn, status="open", thread_id=task_id),
            what="the plan gate, reached with every spend row refused",
            timeout_s=60,
        )
        assert db.task_usage(conn, thread_id=task_id) == []
        today = db.utc_now()
        stranded = db.outbox_spend(outbox, day=today, billing_mode="api")
        assert stranded.rows == 2 and stranded.tokens > 0  # clarify and plan
        wait_for(lambda: daemon.bound is not None, what="the HTTP server", timeout_s=30)
        wait_for(
            lambda: "\nagent_team_budget_outbox_rows 2.0" in metrics(daemon),
            what="/metrics to count the rows waiting",
            timeout_s=30,
        )
        with sqlite3.connect(ledger) as raw:
            raw.execute("DROP TRIGGER refuse_spend")  # the ledger takes rows again

        wait_for(
            lambda: "\nagent_team_budget_outbox_rows 0.0" in metrics(daemon),
            what="/metrics to say the outbox is empty",
            timeout_s=30,
        )
        rows = db.task_usage(conn, thread_id=task_id)
        assert sorted(row.stage for row in rows) == ["clarify", "plan"]
        assert sum(row.input_tokens + row.output_tokens for row in rows) == stranded.tokens
        assert db.tokens_spent(conn, day=today, billing_mode="api") == stranded.tokens
        assert not outbox.exists()
    finally:
        conn.close()
        daemon.request_stop()
        thread.join(timeout=60)
    assert codes == [0]


def metrics(daemon: Daemon) -> str:
    return httpx.get(daemon.url + "metrics", timeout=10).text
