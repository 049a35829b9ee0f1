"""A real full disk under a live daemon: 503s, readiness, nothing acknowledged lost, recovery.

The daemon runs in a private mount namespace with its ledger and state on a
small tmpfs (`unshare --mount`, as root; CI runs as root). The test fills that
file system from inside the namespace (`nsenter`), submits until SQLite can
no longer grow its log, then frees the space; all over HTTP, as a team would.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.daemon_process import daemon_env, free_port, reap, start_daemon, wait_healthy

TOKEN = "ops:disk-full-token-0123456789"
BEARER = {"Authorization": "Bearer disk-full-token-0123456789"}
_SCRIPT = 'set -e; mount -t tmpfs -o size=6m tmpfs "$1"; shift; exec "$@"'


def _can_namespace() -> str | None:
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs in a private mount namespace (CI runs as root)"
    for tool in ("unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` (util-linux)"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount -t tmpfs -o size=1m tmpfs /mnt && touch /mnt/x'],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        return f"cannot mount a tmpfs in a mount namespace here: {probe.stderr.strip()[:200]}"
    return None


@pytest.fixture
def daemon_on_tmpfs(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    why = _can_namespace()
    if why is not None:
        pytest.skip(why)
    disk = tmp_path / "disk"
    disk.mkdir()
    port = free_port()
    env = daemon_env(tmp_path, port)
    env.update(
        AGENT_TEAM_DB_PATH=str(disk / "agent-team.db"),
        AGENT_TEAM_STATE_DIR=str(disk / "state"),
        AGENT_TEAM_DASHBOARD_TOKENS=TOKEN,
    )
    log = tmp_path / "daemon.log"
    # `unshare` execs the shell that mounts the tmpfs and execs the daemon: one pid throughout.
    inside = ["unshare", "--mount", "--propagation", "private",
              "sh", "-c", _SCRIPT, "sh", str(disk)]  # fmt: skip
    proc = start_daemon(env=env, cwd=tmp_path, output=log, inside=inside)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_healthy(
            port, proc, timeout_s=60, log=log, path="readyz", what="the daemon on its tmpfs"
        )
        yield proc, url, disk
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        finally:
            reap(proc)


def _ready(url: str) -> int:
    try:
        return httpx.get(url + "readyz", timeout=5).status_code
    except httpx.HTTPError:
        return 0


def _inside(proc: subprocess.Popen[str], command: str) -> None:
    """Run `command` in the daemon's mount namespace (its tmpfs); `unshare` execs the shell
    that execs the daemon, so the daemon has the pid we started."""
    subprocess.run(
        ["nsenter", "--target", str(proc.pid), "--mount", "sh", "-c", command],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_a_full_disk_is_503_and_not_ready_loses_nothing_and_recovers(
    daemon_on_tmpfs: tuple[subprocess.Popen[str], str, Path],
) -> None:
    proc, url, disk = daemon_on_tmpfs
    acknowledged: list[str] = []
    with httpx.Client(base_url=url, headers=BEARER, timeout=30) as client:
        for i in range(3):
            reply = client.post("/api/tasks", json={"title": f"Before {i}", "body": "x"})
            assert reply.status_code == 201
            acknowledged.append(reply.json()["task_id"])

        _inside(proc, f'head -c 100m /dev/zero > "{disk}/filler" || true')  # fill it
        body = "y" * 60_000
        refused = None
        for i in range(300):
            reply = client.post("/api/tasks", json={"title": f"Full {i}", "body": body})
            assert reply.status_code in (201, 503), reply.text
            if reply.status_code == 503:
                refused = reply
                break
            acknowledged.append(reply.json()["task_id"])
        assert refused is not None, "the ledger never refused a write on a full disk"
        assert "unavailable" in refused.json()["error"]
        ready = client.get("/readyz")
        assert ready.status_code == 503 and "refused the last write" in ready.text, ready.text
        assert client.get("/healthz").status_code == 200  # the process still serves

        _inside(proc, f'rm -f "{disk}/filler"')  # room again: no restart
        deadline = time.monotonic() + 60
        while _ready(url) != 200:
            assert time.monotonic() < deadline, client.get("/readyz").text
            time.sleep(0.2)
        after = client.post("/api/tasks", json={"title": "After", "body": "x"})
        assert after.status_code == 201
        acknowledged.append(after.json()["task_id"])
        listed = client.get("/api/tasks", params={"limit": 500}).json()
        assert {t["id"] for t in listed["tasks"]} >= set(acknowledged)
    assert proc.poll() is None, "the daemon must survive a full disk"
