"""Which names and origins are the worker's own: the webhook, the keeper's pages (and sign-in) and
the MCP endpoint agree, case by case (worker/serve/hosts.py).

- Loopback names in any spelling and the names of ARC_ALLOWED_HOSTS pass every door.
- The pages, the sign-in page and MCP answer no other name, whatever tokens are set (421); the
  APIs answer any name once ARC_API_TOKEN is set and ARC_ALLOWED_HOSTS is not (documented).
- A browser's Origin is the worker's own only with the scheme, name and port the request came
  in on, written as a browser writes it: https for an http worker, another port, an upper-case
  scheme or name, ``null`` are another site's (403).
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.helpers import make_settings
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.serve.mcp_server import MCP_PATH, McpFace, http_app

TOKEN = "names-token-0123456789abcdefghij"
PORT = "8080"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {TOKEN}"}

# (Host, whether it is the worker's own with no ARC_ALLOWED_HOSTS)
NAMES = [
    (f"127.0.0.1:{PORT}", True),
    (f"localhost:{PORT}", True),
    (f"LOCALHOST:{PORT}", True),
    (f"[::1]:{PORT}", True),
    ("localhost", True),
    ("localhost.", True),
    ("evil.example", False),
    (f"localhost.evil.example:{PORT}", False),
    (f"127.0.0.1.evil.example:{PORT}", False),
    (f"arc.example.org:{PORT}", False),
]
# (Origin, whether it is the worker's own for a request to 127.0.0.1:8080 over http)
ORIGINS = [
    (f"http://127.0.0.1:{PORT}", True),
    (f"http://127.0.0.1:{PORT}/", True),
    (f"https://127.0.0.1:{PORT}", False),
    (f"HTTP://127.0.0.1:{PORT}", False),
    (f"Http://127.0.0.1:{PORT}", False),
    ("http://127.0.0.1:9999", False),
    ("http://127.0.0.1", False),
    (f"http://localhost:{PORT}", False),
    (f"ws://127.0.0.1:{PORT}", False),
    ("http://evil.example", False),
    ("null", False),
]


def _settings(runtime: Runtime, tmp_path, **overrides: Any):
    return make_settings(tmp_path, runtime.db.url, api_token=TOKEN, ingest_token=TOKEN, **overrides)


class Doors:
    """The three doors of one configuration, each asked with a Host and an optional Origin;
    each answer reduced to 421 (not its name), 403 (not its origin) or "in"."""

    def __init__(self, runtime: Runtime, settings):
        rt = Runtime(settings, runtime.db, runtime.embedder)
        app = create_app(runtime=rt)
        app.config["TESTING"] = True
        self.flask = app.test_client()
        self.mcp = TestClient(http_app(McpFace.build(rt)), base_url=f"http://127.0.0.1:{PORT}")

    @staticmethod
    def _verdict(status: int) -> str:
        return str(status) if status in (421, 403) else "in"

    def webhook(self, host: str, origin: str | None = None) -> str:
        headers = {"X-ARC-Token": TOKEN, **({"Origin": origin} if origin else {})}
        r = self.flask.post("/webhook/arc-retrieval", json={"query": "fence"}, headers=headers,
                            environ_overrides={"HTTP_HOST": host})
        return self._verdict(r.status_code)

    def pages(self, host: str, origin: str | None = None) -> str:
        headers = {"Origin": origin} if origin else {}
        if origin is None:
            r = self.flask.get("/login", environ_overrides={"HTTP_HOST": host})
        else:  # a form posted: refused by name or origin before its CSRF token is read (400)
            r = self.flask.post("/login", data={"token": "x"}, headers=headers,
                                environ_overrides={"HTTP_HOST": host})
        return self._verdict(r.status_code)

    def mcp_door(self, host: str, origin: str | None = None) -> str:
        headers = {**MCP_HEADERS, "Host": host, **({"Origin": origin} if origin else {})}
        r = self.mcp.post(MCP_PATH, json=PING, headers=headers)
        return self._verdict(r.status_code)


@pytest.fixture()
def doors_open(sample_runtime, tmp_path):
    """Tokens set, ARC_ALLOWED_HOSTS unset (the Docker image's setup)."""
    doors = Doors(sample_runtime, _settings(sample_runtime, tmp_path))
    with doors.mcp:
        yield doors


@pytest.fixture()
def doors_listed(sample_runtime, tmp_path):
    """Tokens set and ARC_ALLOWED_HOSTS naming the worker's public name."""
    doors = Doors(sample_runtime, _settings(sample_runtime, tmp_path, allowed_hosts="arc.example.org"))
    with doors.mcp:
        yield doors


def test_the_pages_and_mcp_answer_only_their_names_whatever_tokens_are_set(doors_open):
    for host, own in NAMES:
        expected = "in" if own else "421"
        assert doors_open.pages(host) == expected, host
        assert doors_open.mcp_door(host) == expected, host
        # the APIs: any name, the token being what a rebinding page lacks
        assert doors_open.webhook(host) == "in", host


def test_with_allowed_hosts_the_three_doors_agree_on_every_name(doors_listed):
    for host, own in NAMES:
        expected = "in" if own or host.startswith("arc.example.org") else "421"
        verdicts = {door: getattr(doors_listed, door)(host) for door in ("webhook", "pages", "mcp_door")}
        assert set(verdicts.values()) == {expected}, (host, verdicts)


def test_the_three_doors_agree_on_every_origin(doors_open):
    for origin, own in ORIGINS:
        expected = "in" if own else "403"
        verdicts = {door: getattr(doors_open, door)(f"127.0.0.1:{PORT}", origin)
                    for door in ("webhook", "pages", "mcp_door")}
        assert set(verdicts.values()) == {expected}, (origin, verdicts)
    # the worker's page under another loopback name, asking by that name
    for door in ("webhook", "pages", "mcp_door"):
        assert getattr(doors_open, door)(f"localhost:{PORT}", f"http://localhost:{PORT}") == "in", door
