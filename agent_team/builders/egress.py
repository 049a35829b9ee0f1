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

import ipaddress
import logging
import shutil
import socket
import socketserver
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from agent_team.builders.proc import OutputSink
from agent_team.builders.sandbox_bridge import relay
from agent_team.common.hostnames import host_allowed

__all__ = ["EgressProxy", "resolve_target"]

log = logging.getLogger(__name__)

_HEAD_MAX = 16384
_CONNECT_TIMEOUT_S = 15.0
_HEAD_TIMEOUT_S = 30.0
_IDLE_TIMEOUT_S = 600.0
_MAX_CONNECTIONS = 64
_REFUSALS_TOLD = 100


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


def _internal(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


def resolve_target(host: str, port: int, *, exact: bool) -> tuple[str, int] | str:
    """The address to connect to, or why not.

    A name listed only under a `*.domain` entry must not lead inside (the host's
    loopback, a private network, the cloud metadata address): a wildcard DNS
    name can point anywhere. Listed exactly (`localhost`, `registry.lan`), the
    operator meant it. The checked address is the one connected to, so a name
    that changes its answer between the check and the connection changes nothing.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"cannot resolve {host}: {exc.strerror or exc}"
    addresses = [str(info[4][0]) for info in infos]
    if not exact and any(_internal(a) for a in addresses):
        return f"{host} resolves to an internal address; list it exactly to allow that"
    return addresses[0], port


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        if not self.server.slots.acquire(blocking=False):
            self.request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n")
            return
        try:
            self._handle(self.request)
        except OSError:
            pass  # the build closed its end, or went quiet past the timeout
        finally:
            self.server.slots.release()

    def _handle(self, client: socket.socket) -> None:
        client.settimeout(_HEAD_TIMEOUT_S)
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
            self.server.refused(host, port, "not in AGENT_TEAM_SANDBOX_ALLOW_HOSTS")
            client.sendall(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                b"agent-team sandbox: host not in AGENT_TEAM_SANDBOX_ALLOW_HOSTS\n"
            )
            return
        exact = host.strip().lower().rstrip(".") in self.server.allowed
        where = resolve_target(host, port, exact=exact)
        if isinstance(where, str):
            self.server.refused(host, port, where)
            client.sendall(
                b"HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n"
                + f"agent-team sandbox: {where}\n".encode()
            )
            return
        try:
            upstream = socket.create_connection(where, timeout=_CONNECT_TIMEOUT_S)
        except OSError as exc:
            why = f"{exc.strerror or exc}\n".encode("utf-8", "replace")
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n" + why)
            return
        with upstream:
            # A tunnel may go quiet for a while (a slow download), not for ever.
            upstream.settimeout(_IDLE_TIMEOUT_S)
            client.settimeout(_IDLE_TIMEOUT_S)
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
        # A build cannot tie up the daemon's threads: connections past this wait no slot.
        self.slots = threading.BoundedSemaphore(_MAX_CONNECTIONS)
        self._told: set[str] = set()
        self._told_lock = threading.Lock()
        super().__init__(str(path), _Handler)

    def refused(self, host: str, port: int, why: str) -> None:
        target = f"{host}:{port}"
        with self._told_lock:
            if target in self._told or len(self._told) >= _REFUSALS_TOLD:
                return  # said once per host and port, and not without end
            self._told.add(target)
        log.info("sandbox egress: refused %s (%s)", target, why)
        if self.output is not None:
            try:
                self.output(
                    f"agent-team sandbox: refused a connection to {target} ({why})\n".encode()
                )
            except Exception:  # the build's log must never break the proxy
                log.exception("sandbox egress: could not write to the build output")


class EgressProxy:
    """One build's proxy: serves on `socket_path` from a thread until `close()`.

    The socket lives in a folder of its own in the system's temporary folder, not
    under the state folder: a Unix socket's path may be at most 107 bytes, and a
    state folder with a long task key would pass that.

    Args:
        allowed: the checked allow-list (`parse_allow_hosts`).
        output: the task's build output, where refusals are written.
    """

    def __init__(self, allowed: Sequence[str], output: OutputSink | None = None) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="agent-team-egress-"))
        self.socket_path = self._folder / "proxy.sock"
        try:
            self._server = _Server(self.socket_path, allowed, output)
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="sandbox-egress", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> EgressProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
