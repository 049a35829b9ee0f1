"""Runs inside a sandbox: forwards a loopback port to the egress proxy's socket, runs the build.

Usage: `python -I -S sandbox_bridge.py <proxy socket> <port> <argv...>`.

Why inside: the sandbox's network namespace has only its own loopback, and
tools speak to a proxy over TCP (`HTTPS_PROXY=http://127.0.0.1:<port>`), not
over a Unix socket. So this listens on that port in the sandbox and copies
each connection to the socket bound in from the host, where
`agent_team.builders.egress` decides. It then runs the build's command as its
child and exits with its status. It uses the standard library only and no
`site` (`-S`), so it needs nothing of the daemon's virtual environment.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading

__all__ = ["main", "relay"]

_CHUNK = 65536


def relay(source: socket.socket, sink: socket.socket) -> None:
    """Copy `source` to `sink` until `source` ends, then end `sink`'s writing side.

    The egress proxy on the host uses it too.
    """
    try:
        while True:
            chunk = source.recv(_CHUNK)
            if not chunk:
                break
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve_one(client: socket.socket, proxy_path: str) -> None:
    with client:
        try:
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(proxy_path)
        except OSError:
            return
        with upstream:
            back = threading.Thread(target=relay, args=(upstream, client), daemon=True)
            back.start()
            relay(client, upstream)
            back.join()


def _accept(listener: socket.socket, proxy_path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_serve_one, args=(client, proxy_path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: sandbox_bridge.py <proxy socket> <port> <argv...>", file=sys.stderr)
        return 2
    proxy_path, port, command = argv[0], int(argv[1]), argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_accept, args=(listener, proxy_path), daemon=True).start()
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"agent-team sandbox: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
