"""Liveness and readiness of a live daemon whose ledger stops taking writes, and `doctor`.

The write fault is injected below our ledger's transaction code (its driver
call raises SQLite's "database or disk is full"), everything above it is the
real daemon: its HTTP server, its loops, its ledger, `doctor` over HTTP.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.db.sqlite_ledger import storage_error
from agent_team.exceptions import LedgerError
from agent_team.service.daemon import Daemon
from agent_team.service.doctor import check_dashboard_port
from tests.waiting import wait_for


def test_a_ledger_that_refuses_writes_is_not_ready_and_doctor_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(
        db_path=tmp_path / "agent-team.db",
        state_dir=tmp_path / "state",
        dashboard_port=0,
        poll_s=0.1,
    )
    daemon = Daemon(settings)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: daemon.bound is not None, what="the HTTP server", timeout_s=30)
        url = daemon.url
        ledger = daemon.coordinator.ledger
        kept = daemon.coordinator.start_task(title="Before the disk filled", body="x")
        wait_for(
            lambda: httpx.get(url + "readyz", timeout=10).status_code == 200,
            what="ready",
            timeout_s=30,
        )
        assert bound_settings(settings, daemon) is not None
        assert check_dashboard_port(bound_settings(settings, daemon)).ok

        real_write = ledger._write  # type: ignore[attr-defined]

        def disk_full(work: Any, *, flush: bool) -> Any:
            raise storage_error(sqlite3.OperationalError("database or disk is full"), ledger.path)

        monkeypatch.setattr(ledger, "_write", disk_full)
        with pytest.raises(LedgerError):
            daemon.coordinator.start_task(title="Refused", body="x")
        ready = httpx.get(url + "readyz", timeout=10)
        assert ready.status_code == 503 and "disk is full" in ready.text
        live = httpx.get(url + "healthz", timeout=10)
        assert live.status_code == 200  # liveness: the process serves; systemd leaves it be
        result = check_dashboard_port(bound_settings(settings, daemon))
        assert not result.ok and "not ready" in result.detail and "disk is full" in result.detail

        monkeypatch.setattr(ledger, "_write", real_write)  # room on the disk again
        wait_for(  # the daemon's own loops write again (lease renewals): no restart
            lambda: httpx.get(url + "readyz", timeout=10).status_code == 200,
            what="readiness after the fault",
            timeout_s=60,
        )
        result = check_dashboard_port(bound_settings(settings, daemon))
        assert result.ok and "recovered from a refused write" in result.detail, result.detail
        assert db.get_task(ledger, kept) is not None  # acknowledged before the fault: kept
    finally:
        daemon.request_stop()
        thread.join(timeout=30)


def bound_settings(settings: Any, daemon: Daemon) -> Any:
    assert daemon.bound is not None
    return settings.model_copy(update={"dashboard_port": daemon.bound[1]})
