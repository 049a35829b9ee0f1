"""The database goes away mid-run and comes back: nothing is marked failed, the work resumes.

The ledger and checkpoints reach PostgreSQL through a loopback forwarder the
test cuts while a build runs, so every pooled connection breaks and new ones
are refused, as when the server restarts or the network drops.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from starlette.testclient import TestClient

from agent_team import db
from agent_team.config import load_settings
from agent_team.dashboard.app import DashboardContext, create_app
from agent_team.service.wiring import build_coordinator
from tests.integration.pipeline.conftest import Clock
from tests.integration.pipeline.test_failures import waiting_on_plan
from tests.tcp_proxy import TcpProxy
from tests.waiting import wait_for


def through(proxy: TcpProxy, url: str) -> str:
    parts = urlsplit(url)
    netloc = (
        f"{parts.username}@127.0.0.1:{proxy.port}" if parts.username else f"127.0.0.1:{proxy.port}"
    )
    return urlunsplit(parts._replace(netloc=netloc))


def test_an_outage_mid_build_fails_nothing_and_the_task_finishes(
    pg_url: str, tmp_path: Path
) -> None:
    parts = urlsplit(pg_url)
    go, started = tmp_path / "go", tmp_path / "build-started"
    with TcpProxy((parts.hostname or "127.0.0.1", parts.port or 5432)) as proxy:
        settings = load_settings(
            db_path=tmp_path / "agent-team.db",
            state_dir=tmp_path / "state",
            database_url=through(proxy, pg_url),
            builder="command",
            build_command=f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done",
            lease_s=1,
        )
        coordinator = build_coordinator(settings, clock=Clock())
        client = TestClient(create_app(DashboardContext(settings, coordinator=coordinator)))
        try:
            task_id, question_id = waiting_on_plan(coordinator)
            coordinator.answer(question_id, "approve", via="cli:tester")
            run = threading.Thread(target=coordinator.run_pending)
            run.start()
            wait_for(started.exists, "the build to start", timeout_s=60, step_s=0.05)

            proxy.cut()
            go.touch()
            wait_for(
                lambda: coordinator.worker.outages == 1, "the outage", timeout_s=60, step_s=0.05
            )
            down = client.get("/readyz")
            assert down.status_code == 503
            assert "cannot read the ledger" in down.json()["reasons"][0]
            live = client.get("/healthz")
            assert live.status_code == 200 and live.json()["status"] == "degraded"
            assert "cannot read the ledger" in live.json()["db"]["error"]
            proxy.restore()
            run.join(timeout=60)
            assert not run.is_alive()

            wait_for(  # reads again
                lambda: client.get("/healthz").json()["status"] == "ok",
                "the ledger to be read again",
                timeout_s=60,
                step_s=0.05,
            )
            # Not ready until a write succeeds again (this test has no daemon loops writing).
            assert "refused the last write" in client.get("/readyz").json()["reasons"][0]
            deadline = time.monotonic() + 60
            while (task := db.get_task(coordinator.ledger, task_id)) is None or (
                task.status != "done"
            ):
                assert time.monotonic() < deadline, task
                coordinator.tick(until_idle=True, timeout_s=30)
                time.sleep(0.2)
            assert client.get("/readyz").status_code == 200
            rows = db.list_transitions(coordinator.ledger, task_id)
            assert "failed" not in {row.status for row in rows}, rows
            assert [row.to_phase for row in rows].count("done") == 1
            (resume,) = [
                c
                for c in db.list_commands(coordinator.ledger, task_id=task_id)
                if c.kind == "resume"
            ]
            # Run again after the outage (a pooled connection broken by the cut may cost one
            # more round), never failed for good.
            assert resume.state == "done" and resume.attempts >= 2 and resume.error is None
            assert coordinator.worker.outages >= 1
        finally:
            client.close()
            coordinator.close()
