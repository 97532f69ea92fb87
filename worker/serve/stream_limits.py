"""Bounds on the MCP server's ``GET /mcp`` event streams (ASGI middleware).

A client may open an event stream for messages the server starts. The server is stateless
(every request stands alone), so nothing is ever sent on it: an open stream only holds a
connection. Each one is closed after ``ARC_MCP_STREAM_SECONDS`` (a client that wants one opens
the next), and a client, counted by its token (else its address) as the rate limit counts it,
holds at most ``ARC_MCP_STREAMS_PER_CLIENT`` at once in a process; one more gets 429.
"""

from __future__ import annotations

import json
import threading
from collections import Counter

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .security import bearer_or_header, client_key


class StreamLimits:
    def __init__(self, app: ASGIApp, *, seconds: float, per_client: int, auth_header: str, path: str):
        self.app = app
        self.seconds = seconds
        self.per_client = per_client
        self.auth_header = auth_header
        self.path = path
        self.open: Counter[str] = Counter()
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        address = (scope.get("client") or ("unknown", 0))[0]
        client = client_key(bearer_or_header(Headers(scope=scope), self.auth_header), address)
        with self._lock:
            if self.open[client] >= self.per_client:
                full = True
            else:
                full = False
                self.open[client] += 1
        if full:
            await _too_many(send, self.per_client)
            return
        try:
            await self._bounded(scope, receive, send)
        finally:
            with self._lock:
                self.open[client] -= 1
                if self.open[client] <= 0:
                    del self.open[client]

    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = {"started": False, "ended": False}

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["ended"] = True
            await send(message)

        with anyio.move_on_after(self.seconds):
            await self.app(scope, receive, tracked)
        if state["started"] and not state["ended"]:  # the time is up: the stream ends cleanly
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _too_many(send: Send, per_client: int) -> None:
    body = json.dumps(
        {
            "error": "rate_limited",
            "message": f"this client already holds {per_client} event "
            "stream(s) (ARC_MCP_STREAMS_PER_CLIENT); close one first",
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", b"5"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
