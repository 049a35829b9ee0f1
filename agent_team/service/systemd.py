"""systemd's notify protocol, spoken directly: one datagram per message to NOTIFY_SOCKET.

See sd_notify(3). Outside systemd (no NOTIFY_SOCKET) every call is a no-op,
so the daemon runs the same way in a terminal.
"""

from __future__ import annotations

import logging
import os
import socket

from agent_team.config import SystemdEnv

__all__ = ["Notifier"]

log = logging.getLogger(__name__)


class Notifier:
    """Sends READY=1, WATCHDOG=1, STATUS=..., STOPPING=1 to the service manager."""

    def __init__(self, env: SystemdEnv) -> None:
        self._address: str | None = None
        if env.notify_socket:
            # A leading "@" names an abstract socket, written with a NUL byte.
            self._address = (
                "\0" + env.notify_socket[1:]
                if env.notify_socket.startswith("@")
                else env.notify_socket
            )
        self.watchdog_s: float | None = None
        if env.watchdog_usec and (env.watchdog_pid in (None, os.getpid())):
            self.watchdog_s = env.watchdog_usec / 1_000_000

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def send(self, *lines: str) -> bool:
        """Send one notification; returns False (and logs) if it could not be sent."""
        if self._address is None:
            return False
        payload = "\n".join(lines).encode("utf-8")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(payload, self._address)
        except OSError as exc:
            log.warning("could not notify systemd: %s", exc)
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1", "STATUS=stopping")
