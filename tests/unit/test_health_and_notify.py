"""Loop health records and the systemd notify datagrams."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

from agent_team.config import SystemdEnv
from agent_team.health.status import Health
from agent_team.service.systemd import Notifier


def test_health_tracks_start_death_restart_and_facts() -> None:
    health = Health()
    health.started("worker")
    assert health.all_alive()
    health.died("worker", "boom")
    (status,) = health.loops()
    assert (status.alive, status.restarts, status.last_error) == (False, 0, "boom")
    assert not health.all_alive()
    health.started("worker")
    (status,) = health.loops()
    assert (status.alive, status.restarts) == (True, 1)
    health.set_fact("intake_polls", 3)
    assert health.facts() == {"intake_polls": 3}


def test_notifier_is_silent_outside_systemd() -> None:
    notifier = Notifier(SystemdEnv(notify_socket=None))
    assert not notifier.enabled
    assert notifier.ready("x") is False
    assert notifier.watchdog_s is None


def test_notifier_sends_datagrams_to_a_path_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "n.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(path)
        server.settimeout(5)
        notifier = Notifier(SystemdEnv(notify_socket=path, watchdog_usec=4_000_000))
        assert notifier.watchdog_s == 4.0
        assert notifier.ready("running 0")
        lines = server.recv(4096).decode().splitlines()
        assert lines[0] == "READY=1" and "STATUS=running 0" in lines
        assert notifier.stopping()
        assert server.recv(4096).decode().splitlines()[0] == "STOPPING=1"


def test_notifier_speaks_to_an_abstract_socket() -> None:
    name = f"agent-team-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(5)
        assert Notifier(SystemdEnv(notify_socket="@" + name)).watchdog()
        assert server.recv(4096) == b"WATCHDOG=1"


def test_watchdog_for_another_pid_is_ignored() -> None:
    notifier = Notifier(SystemdEnv(notify_socket="/x", watchdog_usec=1_000_000, watchdog_pid=1))
    assert notifier.watchdog_s is None


def test_unreachable_socket_does_not_raise(tmp_path: Path) -> None:
    assert Notifier(SystemdEnv(notify_socket=str(tmp_path / "missing.sock"))).ready("x") is False
