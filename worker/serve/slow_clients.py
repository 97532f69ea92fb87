"""A gunicorn worker class that reads each request before it takes a thread.

gunicorn's ``gthread`` worker hands a connection to a thread as soon as its first byte arrives,
and the thread then blocks until the header is complete: 100 clients sending a header one byte
a second held every thread, and ``/healthz`` timed out 7 times in 9. Here the main
loop, which already multiplexes sockets, reads the header (and a body up to
``ARC_MAX_BODY_BYTES``) without blocking; only a complete request reaches a thread. A client
that has not sent it within ``ARC_CLIENT_TIMEOUT`` seconds is disconnected. Larger bodies
(document uploads, behind the admin token) are read by the thread, as gunicorn reads them.

Requests pipelined behind another on a kept-alive connection are not supported (no client of
the worker pipelines): such a connection is closed at its deadline.
"""

from __future__ import annotations

import contextlib
import errno
import json
import re
import selectors
import socket
import time
from functools import partial
from typing import Any

from gunicorn.http.errors import LimitRequestHeaders, LimitRequestLine
from gunicorn.workers.gthread import TConn, ThreadWorker

from .hosts import BROWSER_HEADERS, CONTENT_SECURITY_POLICY

_HEADER_END = b"\r\n\r\n"
# past this without a header end, the thread's parser answers (gunicorn refuses large headers)
_MAX_HEADER_BYTES = 64 * 1024
_RECV_BYTES = 64 * 1024
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d{1,12})[ \t]*\r\n", re.I)
_TRANSFER_ENCODING = re.compile(rb"\r\ntransfer-encoding:", re.I)


class BufferedSocket:
    """The client socket, with the bytes the main loop read in advance served first."""

    def __init__(self, raw: socket.socket, data: bytes):
        self.raw = raw
        self._data = bytearray(data)

    def feed(self, data: bytes) -> None:
        self._data += data

    def recv(self, size: int, flags: int = 0) -> bytes:
        if self._data:
            chunk = bytes(self._data[:size])
            if not flags & socket.MSG_PEEK:
                del self._data[:size]
            return chunk
        return self.raw.recv(size, flags)

    def recv_into(self, buffer: Any, size: int = 0, flags: int = 0) -> int:
        chunk = self.recv(size or len(buffer), flags)
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def __getattr__(self, name: str) -> Any:  # send, sendall, fileno, setblocking, close ...
        return getattr(self.raw, name)


def request_complete(buffer: bytes | bytearray, body_limit: int) -> bool:
    """Whether a thread can serve what has arrived without waiting on the client: the header,
    and the body when it is small enough to be held here."""
    end = buffer.find(_HEADER_END)
    if end < 0:
        return len(buffer) > _MAX_HEADER_BYTES
    header = buffer[: end + 2]
    if _TRANSFER_ENCODING.search(header):
        return True  # chunked: the thread reads it
    length = _CONTENT_LENGTH.search(header)
    size = int(length.group(1)) if length else 0
    return size > body_limit or len(buffer) - (end + 4) >= size


class BufferingThreadWorker(ThreadWorker):
    """``gthread`` with the header (and small bodies) read by the main loop; see the module."""

    def handle_error(self, req: Any, client: Any, addr: Any, exc: Exception) -> None:
        """An over-long request line or header answered in JSON, with the security headers."""
        answer = too_long(exc, self.cfg)
        if answer is None:
            super().handle_error(req, client, addr, exc)
            return
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        with contextlib.suppress(OSError):
            client.setblocking(True)
            client.sendall(answer)

    def init_process(self) -> None:
        from ..config import Settings

        settings = Settings.from_env()
        self.client_timeout = settings.limits.client_timeout
        self.body_limit = settings.limits.max_body_bytes
        self._reading: dict[TConn, tuple[float, bytearray]] = {}
        super().init_process()  # runs the loop

    def accept(self, listener: socket.socket) -> None:
        try:
            client, address = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        self._read_request(TConn(self.cfg, client, address, listener.getsockname()))

    def on_client_socket_readable(self, conn: TConn, client: Any) -> None:
        """A kept-alive connection's next request: read by the main loop too."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._read_request(conn)

    def _read_request(self, conn: TConn) -> None:
        raw = conn.sock.raw if isinstance(conn.sock, BufferedSocket) else conn.sock
        raw.setblocking(False)
        self._reading[conn] = (time.monotonic() + self.client_timeout, bytearray())
        self.poller.register(raw, selectors.EVENT_READ, partial(self._on_bytes, conn))

    def _on_bytes(self, conn: TConn, raw: socket.socket) -> None:
        try:
            data = raw.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client left
            self._drop(conn)
            return
        _, buffer = self._reading[conn]
        buffer += data
        if not request_complete(buffer, self.body_limit):
            return
        self.poller.unregister(raw)
        del self._reading[conn]
        if isinstance(conn.sock, BufferedSocket):
            conn.sock.feed(bytes(buffer))
        else:
            conn.sock = BufferedSocket(raw, bytes(buffer))
        conn.data_ready = True
        self.enqueue_req(conn)

    def _drop(self, conn: TConn) -> None:
        self._reading.pop(conn, None)
        raw = conn.sock.raw if isinstance(conn.sock, BufferedSocket) else conn.sock
        with contextlib.suppress(OSError, KeyError, ValueError):
            self.poller.unregister(raw)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        """Besides gunicorn's own: clients that have not sent their request in time."""
        super().murder_pending()
        now = time.monotonic()
        for conn in [c for c, (deadline, _) in self._reading.items() if deadline <= now]:
            self._drop(conn)


def refusal_bytes(status: int, reason: str, code: str, message: str, field: str) -> bytes:
    """A whole HTTP answer in the worker's error shape (``ErrorResponse``) with the headers every
    answer carries, for a request refused before the app sees it."""
    body = json.dumps({"error": code, "message": message, "field": field, "request_id": None}).encode()
    headers = {
        "Connection": "close",
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        **BROWSER_HEADERS,
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    }
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1") + body


def too_long(exc: Exception, cfg: Any) -> bytes | None:
    """gunicorn's refusal of an over-long request line (414) or header (431), in JSON; None for
    any other error (gunicorn answers those itself)."""
    if isinstance(exc, LimitRequestLine):
        message = (
            f"request line: over {cfg.limit_request_line} bytes (the method, path and query); "
            "send long values in a JSON body instead"
        )
        return refusal_bytes(414, "URI Too Long", "uri_too_long", message, "request_line")
    if isinstance(exc, LimitRequestHeaders):
        message = (
            f"headers: {str(exc).lower()} (at most {cfg.limit_request_fields} headers of "
            f"{cfg.limit_request_field_size} bytes each)"
        )
        return refusal_bytes(431, "Request Header Fields Too Large", "headers_too_large", message, "headers")
    return None
