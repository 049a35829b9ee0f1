"""`GET /api/daemons`: every daemon on the ledger, up, gone or stopped, with what it holds."""

from __future__ import annotations

from datetime import timedelta

from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from tests.integration.dashboard.conftest import NOW, Seeded, make_settings


def _daemon(n: int, lease_s: float = 30.0) -> db.DaemonStart:
    return db.DaemonStart(
        instance_id=f"host-{n}:{n}:20260302T100000.000000Z",
        host=f"host-{n}",
        pid=n,
        version="9.9.9",
        url=f"http://host-{n}:8080/",
        lease_s=lease_s,
        started_at=NOW - timedelta(hours=n),
    )


def test_the_api_lists_each_daemon_with_its_status_and_what_it_holds(seeded: Seeded) -> None:
    up, killed, stopped = _daemon(1), _daemon(2), _daemon(3)
    with db.open_ledger(seeded.path) as ledger:
        db.register_daemon(ledger, up, now=NOW - timedelta(seconds=5))
        db.register_daemon(ledger, killed, now=NOW - timedelta(seconds=31))
        db.register_daemon(ledger, stopped, now=NOW - timedelta(minutes=9))
        db.daemon_stopped(ledger, stopped.instance_id, now=NOW - timedelta(minutes=8))
        assert db.acquire_lease(
            ledger, name="loop:timers", owner=up.instance_id, lease_s=60, now=NOW
        )
        assert db.acquire_lease(ledger, name="task:tB", owner=up.instance_id, lease_s=60, now=NOW)
    ctx = DashboardContext(settings=make_settings(seeded.path), clock=lambda: NOW)

    with TestClient(create_app(ctx)) as client:
        response = client.get("/api/daemons")

    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert body["at"] == db.to_iso(NOW)
    assert body["counts"] == {"up": 1, "gone": 1, "stopped": 1}
    listed = {d["host"]: d for d in body["daemons"]}
    assert [d["host"] for d in body["daemons"]] == ["host-1", "host-2", "host-3"]
    assert {host: d["status"] for host, d in listed.items()} == {
        "host-1": "up",
        "host-2": "gone",
        "host-3": "stopped",
    }
    assert listed["host-1"] == {
        "instance_id": up.instance_id,
        "host": "host-1",
        "pid": 1,
        "version": "9.9.9",
        "url": "http://host-1:8080/",
        "status": "up",
        "started_at": db.to_iso(NOW - timedelta(hours=1)),
        "last_seen_at": db.to_iso(NOW - timedelta(seconds=5)),
        "stopped_at": None,
        "lease_s": 30.0,
        "seen_s_ago": 5.0,
        "loops": ["timers"],
        "tasks": ["tB"],
    }
    assert listed["host-2"]["seen_s_ago"] == 31.0
    assert listed["host-3"]["stopped_at"] == db.to_iso(NOW - timedelta(minutes=8))


def test_no_daemon_is_an_empty_list(seeded: Seeded) -> None:
    ctx = DashboardContext(settings=make_settings(seeded.path), clock=lambda: NOW)
    with TestClient(create_app(ctx)) as client:
        body = client.get("/api/daemons").json()
    assert body == {
        "at": db.to_iso(NOW),
        "counts": {"up": 0, "gone": 0, "stopped": 0},
        "daemons": [],
    }
