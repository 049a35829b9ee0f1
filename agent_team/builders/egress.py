"""The sandbox's only way out: an HTTP proxy that lets through the hosts an operator listed.

Why a proxy and not firewall rules: a sandbox has no network of its own (a
new network namespace with only loopback), and opening one would need root
and per-host routes that go stale as addresses change. A proxy decides by
*name*, which is what an operator writes (`api.anthropic.com`, `*.pypi.org`),
resolves names on the host side (the sandbox needs no DNS), and sees every
refused name, which it writes on the task's build output so a person learns
what the agent tried to reach.

It listens on a Unix socket in a folder bound into the sandbox; a bridge inside
(`agent_team.builders.sandbox_bridge`) forwards a loopback port to it, and the
usual proxy variables point the builder's tools at that port. `CONNECT host:port`
tunnels (HTTPS) and absolute-form `GET http://host/...` requests (plain HTTP)
are both judged by host name.
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
from collections.abc import Sequence
from pathlib import Path

from agent_team.builders.proc import OutputSink
from agent_team.builders.sandbox_bridge import relay
from agent_team.common.hostnames import host_allowed

__all__ = ["EgressProxy"]

log = logging.getLogger(__name__)

_HEAD_MAX = 16384
_CONNECT_TIMEOUT_S = 15.0


def _split_host_port(target: str, default_port: int) -> tuple[str, int] | None:
    if target.startswith("["):  # [v6]:port
        host, _, rest = target[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else str(default_port)
    elif target.count(":") == 1:
        host, port = target.split(":")
    else:
        host, port = target, str(default_port)
    try:
        number = int(port)
    except ValueError:
        return None
    if not host or not 0 < number < 65536:
        return None
    return host, number


def _target_of(method: str, uri: str) -> tuple[str, int] | None:
    if method == "CONNECT":
        return _split_host_port(uri, 443)
    lowered = uri.lower()
    if not lowered.startswith("http://"):
        return None
    authority = uri[len("http://") :].split("/", 1)[0].rsplit("@", 1)[-1]
    return _split_host_port(authority, 80)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        client: socket.socket = self.request
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                return
            head += chunk
            if len(head) > _HEAD_MAX:
                client.sendall(b"HTTP/1.1 431 Request Header Fields Too Large\r\n\r\n")
                return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        target = _target_of(parts[0].upper(), parts[1]) if len(parts) == 3 else None
        if target is None:
            client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return
        host, port = target
        if not host_allowed(host, self.server.allowed):
            self.server.refused(host, port)
            client.sendall(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                b"agent-team sandbox: host not in AGENT_TEAM_SANDBOX_ALLOW_HOSTS\n"
            )
            return
        try:
            upstream = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S)
        except OSError as exc:
            why = f"{exc.strerror or exc}\n".encode("utf-8", "replace")
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n" + why)
            return
        with upstream:
            upstream.settimeout(None)
            self.server.allowed_count += 1
            if parts[0].upper() == "CONNECT":
                rest = head.split(b"\r\n\r\n", 1)[1]
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:  # origin-form to the server, as a proxy forwards plain HTTP
                path = "/" + parts[1].split("://", 1)[1].partition("/")[2]
                _, sep, rest = head.partition(b"\r\n")
                request_line = f"{parts[0]} {path} {parts[2]}".encode("latin-1")
                upstream.sendall(request_line + sep + rest)
            back = threading.Thread(target=relay, args=(upstream, client), daemon=True)
            back.start()
            relay(client, upstream)
            back.join()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: Path, allowed: Sequence[str], output: OutputSink | None) -> None:
        self.allowed = tuple(allowed)
        self.output = output
        self.refused_hosts: list[str] = []
        self.allowed_count = 0
        super().__init__(str(path), _Handler)

    def refused(self, host: str, port: int) -> None:
        self.refused_hosts.append(f"{host}:{port}")
        log.info("sandbox egress: refused %s:%d", host, port)
        if self.output is not None:
            try:
                self.output(
                    f"agent-team sandbox: refused a connection to {host}:{port} (not in "
                    "AGENT_TEAM_SANDBOX_ALLOW_HOSTS)\n".encode()
                )
            except Exception:  # the build's log must never break the proxy
                log.exception("sandbox egress: could not write to the build output")


class EgressProxy:
    """One build's proxy: serves on `socket_path` from a thread until `close()`.

    Args:
        socket_path: where to listen (a folder bound into the sandbox).
        allowed: the checked allow-list (`parse_allow_hosts`).
        output: the task's build output, where refusals are written.
    """

    def __init__(
        self, socket_path: Path, allowed: Sequence[str], output: OutputSink | None = None
    ) -> None:
        self.socket_path = socket_path
        self._server = _Server(socket_path, allowed, output)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="sandbox-egress", daemon=True
        )
        self._thread.start()

    @property
    def refused_hosts(self) -> list[str]:
        return list(self._server.refused_hosts)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self.socket_path.unlink(missing_ok=True)

    def __enter__(self) -> EgressProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
