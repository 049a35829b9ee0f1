"""The body of a request to one of our loopback servers: by Content-Length, or chunked.

git sends large pushes chunked (`Transfer-Encoding: chunked`), which
`http.server` does not decode by itself.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

__all__ = ["read_body"]


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """Everything the client sent after the headers."""
    if handler.headers.get("transfer-encoding", "").lower() == "chunked":
        data = b""
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                handler.rfile.readline()
                return data
            data += handler.rfile.read(size)
            handler.rfile.readline()
    length = int(handler.headers.get("content-length") or 0)
    return handler.rfile.read(length) if length else b""
