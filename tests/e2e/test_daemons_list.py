"""`agent-team daemons` on SQLite: the one daemon shows up while it runs, stopped after SIGTERM,
and stays up while a stop waits for its runs.

(Three daemons on PostgreSQL, one of them killed: `test_three_daemons.py`.)
"""

from __future__ import annotations

import json
import signal
import socket
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_team import __version__, db
from agent_team.config import load_settings
from agent_team.reports.daemons import daemons_report
from agent_team.service.daemon import Daemon
from tests.e2e.conftest import Cli
from tests.e2e.daemon_process import daemon_env, free_port, reap, start_daemon, wait_healthy
from tests.waiting import wait_for


def listed(cli: Cli) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(cli.run("daemons", "--json").stdout)
    return report


@pytest.mark.slow
def test_one_daemon_shows_up_then_stopped_after_sigterm(tmp_path: Path, cli: Cli) -> None:
    port = free_port()
    log = tmp_path / "daemon.log"
    proc = start_daemon(env=daemon_env(tmp_path, port), cwd=tmp_path, output=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(port, proc, log=log)
        instance = httpx.get(f"{url}/healthz", timeout=10).json()["facts"]["instance"]

        def holds_the_timers() -> dict[str, Any] | None:
            report = listed(cli)
            (daemon,) = report["daemons"]
            return daemon if daemon["loops"] == ["timers"] else None

        daemon = wait_for(holds_the_timers, "the daemon to hold the timers loop", timeout_s=30)
        assert daemon["instance_id"] == instance
        assert (daemon["host"], daemon["pid"]) == (socket.gethostname(), proc.pid)
        assert daemon["status"] == "up" and daemon["stopped_at"] is None
        assert daemon["version"] == __version__
        assert daemon["url"] == f"{url}/"
        assert daemon["tasks"] == []
        api = httpx.get(f"{url}/api/daemons", timeout=10).json()
        assert [(d["instance_id"], d["status"]) for d in api["daemons"]] == [(instance, "up")]
        table = cli.run("daemons").stdout
        assert instance in table and table.rstrip().endswith("1 up, 0 gone, 0 stopped")

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        reap(proc)

    report = listed(cli)
    (daemon,) = report["daemons"]
    assert (daemon["instance_id"], daemon["status"]) == (instance, "stopped")
    assert daemon["stopped_at"] is not None and daemon["loops"] == []
    assert report["counts"] == {"up": 0, "gone": 0, "stopped": 1}
    assert "stopped" in cli.run("daemons").stdout


def test_the_stop_grace_keeps_beating_then_marks_the_daemon_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs that take longer to finish than the lease must not make a stopping daemon gone."""
    path = tmp_path / "agent-team.db"
    settings = load_settings(
        db_path=path,
        state_dir=tmp_path / "state",
        dashboard_port=0,
        poll_s=0.1,
        lease_s=1,
        stop_grace_s=30,
    )
    daemon = Daemon(settings)
    finishing = threading.Event()  # the runs still going when the stop came
    monkeypatch.setattr(
        daemon.coordinator, "wait_idle", lambda timeout_s: finishing.wait(timeout_s)
    )
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(daemon.run()), daemon=True)
    thread.start()
    reader = db.open_ledger(path)
    try:
        wait_for(lambda: daemon.bound is not None, what="the HTTP server", timeout_s=30)
        stop_at = db.utc_now()
        daemon.request_stop()

        def seen_long_after_the_stop() -> bool:
            now = db.utc_now()
            with reader.snapshot() as view:
                (shown,) = daemons_report(view, now).daemons
            assert shown.status == "up", shown  # never gone while its runs finish
            return db.from_iso(shown.last_seen_at) > stop_at + timedelta(seconds=2)

        wait_for(seen_long_after_the_stop, "heartbeats during the stop's grace", timeout_s=30)
        finishing.set()
        thread.join(timeout=60)
        assert codes == [0]
        (row,) = db.list_daemons(reader)
        assert (row.instance_id, row.stopped_at is not None) == (daemon.me.instance_id, True)
    finally:
        finishing.set()
        daemon.request_stop()
        thread.join(timeout=60)
        reader.close()
