"""The doors, locked: the attacks a security review of the keeper's pages, the APIs, MCP and Dify
carried out, each refused.

- DNS rebinding: a request naming another Host gets 421 on every door but the health checks
  (the documented setups pass: loopback, the Docker image's token on 0.0.0.0, ARC_ALLOWED_HOSTS);
  a browser's request from another site's page gets 403 (its Origin).
- Sign-in sends the keeper to a path of this worker only, however the target is disguised.
- Sign-out and idle time end a session in every process: a saved cookie replayed is refused.
- Community tokens read; only write@ ones ingest and delete (webhook, documents API, pages,
  MCP and Dify, both ways).
- Headers: Secure cookie behind a trusted https proxy, CSP without inline script, no framing.
- Unsafe link schemes leave every format at ingest; idle MCP event streams are bounded.

Flask's test client where a request shape is the point; gunicorn and ``mcp --http`` over real
HTTP for the deployment's own behaviour (several processes, the Docker image's bind).
"""

from __future__ import annotations

import io
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import requests

from tests.helpers import make_settings
from tests.helpers import FENCE, calls, served_mcp, server_env
from tests.helpers import csrf
from worker.community_grants import CommunityGrant
from worker.config import ConfigError, Settings
from worker.serve.app import create_app

ROOT = Path(__file__).resolve().parent.parent
ADMIN = "doors-admin-token-0123456789abcdef"
READER = "doors-community-reader-0123456789"
WRITER = "doors-community-writer-0123456789"
ATTACKER = "attacker.example:8080"


def _app(runtime, tmp: Path, **overrides):
    settings = make_settings(tmp, runtime.db.url, **overrides)
    app = create_app(runtime=type(runtime)(settings, runtime.db, runtime.embedder))
    app.config["TESTING"] = True
    return app


@pytest.fixture()
def open_worker(sample_runtime, tmp_path):
    """``make run``: no token, loopback; every door open to whoever reaches it by its name."""
    return _app(sample_runtime, tmp_path).test_client()


@pytest.fixture()
def keeper_app(sample_runtime, tmp_path):
    return _app(sample_runtime, tmp_path, api_token=ADMIN, ingest_token=ADMIN,
                community_tokens=f"default:{READER};write@default:{WRITER}")


def sign_in(client, **kwargs) -> str:
    """Signs in; the CSRF token of the session."""
    page = client.get("/login", **kwargs).get_data(as_text=True)
    response = client.post("/login", data={"token": ADMIN, "csrf_token": csrf(page)}, **kwargs)
    assert response.status_code == 302, response.get_data(as_text=True)[:300]
    return csrf(client.get("/documents", **kwargs).get_data(as_text=True))


# -- DNS rebinding and other sites' pages ------------------------------------------------------

REBOUND = [("GET", "/"), ("GET", "/documents"), ("GET", "/questions"), ("GET", "/login"),
           ("GET", "/webhook/arc-documents"), ("GET", "/metrics"), ("GET", "/openapi.json"),
           ("POST", "/webhook/arc-retrieval"), ("POST", "/webhook/arc-ingest"), ("POST", "/retrieval"),
           ("POST", "/documents/ccrs/delete"), ("DELETE", "/webhook/arc-documents/ccrs"), ("GET", "/nowhere")]


def test_a_rebound_name_gets_421_on_every_door_of_an_open_worker(open_worker, sample_runtime):
    """The review's attack: with no token on loopback, a page whose name was re-pointed at
    127.0.0.1 read /documents (and its CSRF token) and deleted a document."""
    for method, path in REBOUND:
        response = open_worker.open(path, method=method, base_url=f"http://{ATTACKER}",
                                    headers={"Origin": f"http://{ATTACKER}"}, json={"query": FENCE})
        assert response.status_code == 421, (method, path, response.status_code)
        body = response.get_data(as_text=True)
        assert "csrf_token" not in body and "Design Guidelines" not in body
        assert response.get_json()["error"] == "misdirected_request"
    for host in ("localhost.attacker.example", "127.0.0.1.attacker.example", "evil.example@127.0.0.1",
                 "0.0.0.0:8080", "attacker.example", "[::1].attacker.example", "a b"):
        refused = open_worker.get("/documents", environ_overrides={"HTTP_HOST": host})
        assert refused.status_code == 421, host
    with psycopg.connect(sample_runtime.db.url) as conn:  # nothing was deleted
        assert conn.execute("select count(*) from knowledge_chunks where document_id = 'ccrs'").fetchone()[0] > 0
    # the health checks answer any name: a probe reaches a container by its address
    assert open_worker.get("/healthz", base_url=f"http://{ATTACKER}").status_code == 200
    # the worker's own names pass, any port
    for host in ("localhost:8080", "127.0.0.1:8080", "[::1]:8080", "localhost", "127.0.0.1"):
        assert open_worker.get("/documents", base_url=f"http://{host}").status_code == 200, host


def test_another_sites_page_cannot_post_to_an_open_worker(open_worker, sample_runtime):
    """A page of another site posting to http://127.0.0.1:8080 (a form needs no CORS): its
    Origin is not this worker's, so nothing it sends changes anything."""
    page = open_worker.get("/documents").get_data(as_text=True)
    token = csrf(page)
    for origin in ("http://attacker.example", "null", "http://localhost.attacker.example:8080",
                   "https://localhost:9999", "file://"):
        delete = open_worker.post("/documents/ccrs/delete", data={"csrf_token": token, "confirm": "ccrs"},
                                  headers={"Origin": origin})
        assert delete.status_code == 403, origin
        ingest = open_worker.post("/webhook/arc-ingest", headers={"Origin": origin}, data={
            "document_type": "ccr", "file": (io.BytesIO(b"# Fences\n\nFences may be 100 feet."), "x.md")})
        assert ingest.status_code == 403, origin
    with psycopg.connect(sample_runtime.db.url) as conn:
        assert conn.execute("select count(*) from knowledge_chunks where document_id = 'ccrs'").fetchone()[0] > 0
        assert conn.execute("select count(*) from knowledge_chunks where content like '%%100 feet%%'").fetchone()[0] == 0
    # the worker's own page (same name and port) and a client sending no Origin pass
    same = open_worker.post("/ask", data={"csrf_token": token, "query": FENCE}, headers={"Origin": "http://localhost"})
    assert same.status_code == 200
    assert open_worker.post("/webhook/arc-retrieval", json={"query": FENCE}).status_code == 200


def test_a_token_on_every_door_answers_any_name_unless_allowed_hosts_says(sample_runtime, tmp_path):
    """The Docker image: 0.0.0.0 with ARC_API_TOKEN, reached as localhost or by its container's
    name; a rebinding page has no token. ARC_ALLOWED_HOSTS narrows it to the names listed."""
    docker = _app(sample_runtime, tmp_path / "a", api_token=ADMIN).test_client()
    auth = {"X-ARC-Token": ADMIN}
    for host in ("localhost:8080", "arc-worker:8080", "arc.example.org"):
        r = docker.post("/webhook/arc-retrieval", json={"query": FENCE}, headers=auth, base_url=f"http://{host}")
        assert r.status_code == 200, host
    assert docker.post("/webhook/arc-retrieval", json={"query": FENCE},
                       base_url=f"http://{ATTACKER}").status_code == 401  # the token, as before

    listed = _app(sample_runtime, tmp_path / "b", api_token=ADMIN,
                  allowed_hosts="arc.example.org, arc-worker:8080,arc-mcp:*").test_client()
    for host, status in (("arc.example.org", 200), ("arc.example.org:443", 200), ("arc-worker:8080", 200),
                         ("arc-worker:9090", 421), ("localhost:8080", 200), (ATTACKER, 421), ("arc-mcp:1", 200)):
        r = listed.post("/webhook/arc-retrieval", json={"query": FENCE}, headers=auth, base_url=f"http://{host}")
        assert r.status_code == status, host
    with pytest.raises(ConfigError, match="ARC_ALLOWED_HOSTS"):
        Settings.from_env({"ARC_ALLOWED_HOSTS": "http://arc.example.org/"})


# -- where a sign-in goes ----------------------------------------------------------------------

@pytest.mark.parametrize("target", [
    "/%09/evil.example", "/\t/evil.example", "/\n/evil.example", "/\r\n/evil.example", "\\\\evil.example",
    "/\\evil.example", "/%5Cevil.example", "/%2F/evil.example", "/%2f%2fevil.example", "%2F%2Fevil.example",
    "/%252F%252Fevil.example", "//evil.example", "///evil.example", "https://evil.example/",
    "http:evil.example", "javascript:alert(1)", " //evil.example", "evil.example", "/\x00/evil.example",
    "/%00/evil.example", "/\x7f/evil.example"])
def test_sign_in_never_sends_the_keeper_to_another_site(keeper_app, target):
    client = keeper_app.test_client()
    page = client.get("/login").get_data(as_text=True)
    response = client.post("/login", query_string={"next": target}, data={"token": ADMIN, "csrf_token": csrf(page)})
    assert response.status_code == 302
    assert response.headers["Location"] == "/", (target, response.headers["Location"])


def test_sign_in_returns_to_the_page_asked_for(keeper_app):
    client = keeper_app.test_client()
    page = client.get("/login").get_data(as_text=True)
    response = client.post("/login", query_string={"next": "/documents?page=1&status=x"},
                           data={"token": ADMIN, "csrf_token": csrf(page)})
    assert response.headers["Location"] == "/documents?page=1&status=x"


# -- sessions that end -------------------------------------------------------------------------

def _cookie(client) -> str:
    return client.get_cookie("session").value


def test_a_signed_out_cookie_replayed_is_refused_by_every_process(keeper_app, sample_runtime, tmp_path):
    """The review's replay: a cookie saved before sign-out opened the pages and deleted a
    document afterwards. Two apps on one database stand for two gunicorn processes."""
    other_process = create_app(runtime=type(sample_runtime)(keeper_app.extensions["arc"].runtime.settings,
                                                            sample_runtime.db, sample_runtime.embedder))
    keeper = keeper_app.test_client()
    token = sign_in(keeper)
    saved = _cookie(keeper)
    assert keeper.post("/logout", data={"csrf_token": token}).status_code == 302

    for app in (keeper_app, other_process):
        replay = app.test_client()
        replay.set_cookie("session", saved)
        page = replay.get("/documents")
        assert page.status_code == 302 and "/login" in page.headers["Location"]
        delete = replay.post("/documents/ccrs/delete", data={"csrf_token": token, "confirm": "ccrs"})
        assert delete.status_code == 302 and "/login" in delete.headers["Location"]
        assert replay.get("/documents/upload/x/status").status_code == 401
    with psycopg.connect(sample_runtime.db.url) as conn:
        assert conn.execute("select count(*) from knowledge_chunks where document_id = 'ccrs'").fetchone()[0] > 0
        assert _session_hash(keeper_app, saved) not in {r[0] for r in conn.execute("select session_hash from keeper_sessions")}


def _session_hash(app, cookie: str) -> str:
    import hashlib

    from flask.sessions import SecureCookieSessionInterface

    session_id = SecureCookieSessionInterface().get_signing_serializer(app).loads(cookie)["sid"]
    return hashlib.sha256(session_id.encode()).hexdigest()


def test_a_session_signed_out_in_one_process_ends_in_the_other(keeper_app, sample_runtime):
    other_process = create_app(runtime=type(sample_runtime)(keeper_app.extensions["arc"].runtime.settings,
                                                            sample_runtime.db, sample_runtime.embedder))
    first = keeper_app.test_client()
    token = sign_in(first)
    second = other_process.test_client()
    second.set_cookie("session", _cookie(first))
    assert second.get("/documents").status_code == 200  # one session, seen by both
    assert second.post("/logout", data={"csrf_token": token}).status_code == 302
    assert first.get("/documents").status_code == 302


def test_an_idle_session_ends(keeper_app, sample_runtime):
    keeper = keeper_app.test_client()
    sign_in(keeper)
    assert keeper.get("/documents").status_code == 200
    idle = keeper_app.extensions["arc"].runtime.settings.auth.session_idle_minutes
    with psycopg.connect(sample_runtime.db.url) as conn:  # as if the keeper left the tab a while
        conn.execute("update keeper_sessions set last_seen = now() - make_interval(secs => %s)", (idle * 60 + 60,))
    response = keeper.get("/documents")
    assert response.status_code == 302 and "/login" in response.headers["Location"]
    assert keeper.get("/documents").status_code == 302  # and stays ended
    # a new sign-in starts a new session; the stale rows are cleared at sign-ins
    sign_in(keeper)
    with psycopg.connect(sample_runtime.db.url) as conn:
        stale = "select count(*) from keeper_sessions where last_seen < now() - make_interval(secs => %s)"
        assert conn.execute(stale, (idle * 60,)).fetchone()[0] == 0
    assert keeper.get("/documents").status_code == 200


def test_the_cookie_holds_no_usable_secret_and_the_table_no_session_id(keeper_app, sample_runtime):
    keeper = keeper_app.test_client()
    sign_in(keeper)
    from flask.sessions import SecureCookieSessionInterface

    session_id = SecureCookieSessionInterface().get_signing_serializer(keeper_app).loads(_cookie(keeper))["sid"]
    with psycopg.connect(sample_runtime.db.url) as conn:
        stored = [row[0] for row in conn.execute("select session_hash from keeper_sessions")]
    assert session_id not in stored and _session_hash(keeper_app, _cookie(keeper)) in stored


# -- community tokens: read by default, write when the entry says so ---------------------------

def test_the_community_token_grammar_reads_old_entries_as_read_only():
    tokens = Settings.from_env({"ARC_COMMUNITY_TOKENS": f"a,b:{READER}; write@c:{WRITER}; read@d:{'r' * 30}"})
    assert tokens.auth.community_tokens == {READER: CommunityGrant(communities=("a", "b")),
                                       WRITER: CommunityGrant(communities=("c",), write=True),
                                       "r" * 30: CommunityGrant(communities=("d",))}
    with_colon = Settings.from_env({"ARC_COMMUNITY_TOKENS": f"a:{READER}:with@colon"}).auth.community_tokens
    assert with_colon == {f"{READER}:with@colon": CommunityGrant(communities=("a",))}
    for bad in (f"admin@a:{READER}", f"write@:{READER}", f"@a:{READER}", "write@a:short"):
        with pytest.raises(ConfigError, match="ARC_COMMUNITY_TOKENS"):
            Settings.from_env({"ARC_COMMUNITY_TOKENS": bad})


def test_a_community_token_reads_and_only_a_write_one_ingests_and_deletes(keeper_app, sample_runtime):
    client = keeper_app.test_client()
    reader, writer = {"X-ARC-Token": READER}, {"X-ARC-Token": WRITER}
    document = {"document_type": "ccr", "document_id": "doors-fence", "text": "# Fences\n\nFences may be 100 feet."}
    for headers in (reader, writer):  # both read
        assert client.post("/webhook/arc-retrieval", json={"query": FENCE}, headers=headers).status_code == 200
        assert client.get("/webhook/arc-documents", headers=headers).status_code == 200
        assert client.get("/webhook/arc-documents/ccrs", headers=headers).status_code == 200
    refused = client.post("/webhook/arc-ingest", json=document, headers=reader)
    assert refused.status_code == 403 and "write@" in refused.get_json()["message"]
    upload = client.post("/webhook/arc-ingest", headers=reader, data={
        "document_type": "ccr", "file": (io.BytesIO(b"# Fences\n\nFences may be 100 feet."), "fence.md")})
    assert upload.status_code == 403
    assert client.delete("/webhook/arc-documents/ccrs", headers=reader).status_code == 403
    with psycopg.connect(sample_runtime.db.url) as conn:
        assert conn.execute("select count(*) from knowledge_chunks where content like '%%100 feet%%'").fetchone()[0] == 0
        assert conn.execute("select count(*) from knowledge_chunks where document_id = 'ccrs'").fetchone()[0] > 0

    assert client.post("/webhook/arc-ingest", json=document, headers=writer).status_code == 200
    deleted = client.delete("/webhook/arc-documents/doors-fence", headers=writer)
    assert deleted.status_code == 200 and deleted.get_json()["status"] == "deleted"
    # another community stays out of reach of a write token too
    assert client.post("/webhook/arc-ingest", json={**document, "community": "elsewhere"},
                       headers=writer).status_code == 403


def test_no_community_token_signs_in_to_the_pages(keeper_app):
    client = keeper_app.test_client()
    for token in (READER, WRITER):
        page = client.get("/login").get_data(as_text=True)
        response = client.post("/login", data={"token": token, "csrf_token": csrf(page)})
        assert response.status_code == 401, token
        assert client.get("/documents").status_code == 302


def test_dify_takes_both_kinds_of_community_token_to_read(keeper_app):
    client = keeper_app.test_client()
    body = {"knowledge_id": "all", "query": FENCE, "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}}
    for token in (READER, WRITER):
        r = client.post("/retrieval", json=body, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.get_json()["records"], token


@pytest.fixture(scope="module")
def mcp_doors(sample_runtime, tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("mcp-doors")
    yield from served_mcp(server_env(sample_runtime.db.url, tmp, ARC_API_TOKEN=ADMIN, ARC_RATE_LIMIT="0",
                                     ARC_COMMUNITY_TOKENS=f"default:{READER};write@default:{WRITER}",
                                     ARC_MCP_STREAM_SECONDS="2", ARC_MCP_STREAMS_PER_CLIENT="1"), tmp)


def test_mcp_takes_both_kinds_of_community_token_and_offers_no_tool_that_writes(mcp_doors):
    from tests.helpers import http_client, run

    for token in (READER, WRITER):
        search, listed = calls(mcp_doors, token, ("search_governing_documents", {"query": FENCE}),
                               ("list_governing_documents", {}))
        assert not search.is_error and search.structured_content["status"] == "success", token
        assert not listed.is_error and listed.structured_content["documents"], token

    async def tools():
        async with http_client(mcp_doors, {"Authorization": f"Bearer {WRITER}"}) as client:
            return (await client.list_tools()).tools

    assert all(t.annotations.read_only_hint and not t.annotations.destructive_hint for t in run(tools))


def _stream(url: str, token: str, opened: list, index: int) -> None:
    started = time.monotonic()
    with requests.get(url, headers={"Accept": "text/event-stream", "Authorization": f"Bearer {token}"},
                      stream=True, timeout=30) as response:
        opened[index] = [response.status_code, None]
        for _ in response.iter_content(chunk_size=None):
            pass
    opened[index][1] = time.monotonic() - started


def test_an_idle_mcp_event_stream_is_closed_and_a_client_holds_one_at_a_time(mcp_doors):
    """The review held a GET /mcp stream open 10 minutes. Here (ARC_MCP_STREAM_SECONDS=2,
    ARC_MCP_STREAMS_PER_CLIENT=1): the stream ends after 2 s, a second one of the same token
    while it is open gets 429, another client's is answered."""
    opened: list = [None, None]
    first = threading.Thread(target=_stream, args=(mcp_doors, READER, opened, 0))
    first.start()
    deadline = time.monotonic() + 10
    while opened[0] is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert opened[0] is not None and opened[0][0] == 200
    second = requests.get(mcp_doors, headers={"Accept": "text/event-stream", "Authorization": f"Bearer {READER}"},
                          timeout=10)
    assert second.status_code == 429 and "ARC_MCP_STREAMS_PER_CLIENT" in second.json()["message"]
    _stream(mcp_doors, WRITER, opened, 1)  # another client: its own allowance, closed after 2 s
    first.join(30)
    assert opened[1][0] == 200 and 1.5 < opened[1][1] < 10
    assert 1.5 < opened[0][1] < 10
    # once closed, the client may open the next
    _stream(mcp_doors, READER, opened, 0)
    assert opened[0][0] == 200


def test_mcp_still_refuses_a_rebound_name(mcp_doors):
    port = mcp_doors.split(":")[2].split("/")[0]
    r = requests.post(mcp_doors, json={}, headers={"Host": f"attacker.example:{port}",
                                                   "Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert r.status_code == 421


# -- headers -----------------------------------------------------------------------------------

def test_the_pages_forbid_inline_script_and_framing(keeper_app):
    client = keeper_app.test_client()
    sign_in(client)
    for path in ("/", "/documents", "/documents/ccrs", "/ask", "/questions", "/login", "/documents/nowhere"):
        response = client.get(path)
        policy = response.headers["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'" and directives["frame-ancestors"] == "'none'", path
        assert directives["default-src"] == "'none'" and directives["base-uri"] == "'none'"
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"
        page = response.get_data(as_text=True)
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page), path  # every script from a file
        assert not re.search(r"\son[a-z]+\s*=", page) and "javascript:" not in page, path
    api = client.post("/webhook/arc-retrieval", json={"query": FENCE}, headers={"X-ARC-Token": ADMIN})
    assert api.headers["X-Content-Type-Options"] == "nosniff"


def test_the_cookie_is_secure_behind_a_trusted_https_proxy_only(sample_runtime, tmp_path):
    app = _app(sample_runtime, tmp_path, api_token=ADMIN, ingest_token=ADMIN, trusted_proxies="10.0.0.0/8")
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}

    def cookie(address: str) -> str:
        response = app.test_client().get("/login", headers=forwarded, environ_base={"REMOTE_ADDR": address})
        return response.headers["Set-Cookie"]

    assert "Secure" in cookie("10.1.2.3")
    assert "Secure" not in cookie("192.0.2.7")  # anyone else's X-Forwarded-Proto is ignored
    # signed in through the proxy, the session cookie is Secure too
    client = app.test_client()
    page = client.get("/login", headers=forwarded, environ_base={"REMOTE_ADDR": "10.1.2.3"}).get_data(as_text=True)
    signed = client.post("/login", data={"token": ADMIN, "csrf_token": csrf(page)}, headers=forwarded,
                         environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert signed.status_code == 302 and "Secure" in signed.headers["Set-Cookie"]
    assert "HttpOnly" in signed.headers["Set-Cookie"] and "SameSite=Strict" in signed.headers["Set-Cookie"]


def test_a_trusted_proxy_names_the_host_checked(sample_runtime, tmp_path):
    app = _app(sample_runtime, tmp_path, trusted_proxies="127.0.0.1", allowed_hosts="arc.example.org")
    client = app.test_client()
    rebound = client.get("/documents", headers={"X-Forwarded-Host": ATTACKER})
    assert rebound.status_code == 421  # what the browser asked the proxy for
    assert client.get("/documents", headers={"X-Forwarded-Host": "arc.example.org"}).status_code == 200
    # the page's own origin through the proxy, with the Host it rewrote
    token = csrf(client.get("/documents").get_data(as_text=True))
    same = client.post("/ask", data={"csrf_token": token, "query": FENCE},
                       headers={"Origin": "https://arc.example.org", "X-Forwarded-Proto": "https"})
    assert same.status_code == 200
    untrusted = app.test_client().get("/documents", headers={"X-Forwarded-Host": "arc.example.org"},
                                      base_url=f"http://{ATTACKER}", environ_base={"REMOTE_ADDR": "192.0.2.7"})
    assert untrusted.status_code == 421  # a stranger's X-Forwarded-Host is not believed


# -- unsafe links, every format ----------------------------------------------------------------

UNSAFE = ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "java\tscript:alert(1)", "&#106;avascript:alert(1)",
          "javascript&#58;alert(1)", " vbscript:msgbox(1)", "data:text/html;base64,PHNjcmlwdD4=",
          "java&#x09;script:alert(1)"]


def _markdown_with(target: str) -> str:
    return (f"# Pool rules\n\nSee [the form]({target}) today. ![logo]({target}) <{target.strip()}>\n\n"
            f"[ref]: {target}\n\nWrite <a href=\"{target}\">here</a>. Keep [the site](https://example.org/a).\n")


@pytest.mark.parametrize("target", UNSAFE)
def test_unsafe_links_leave_markdown_text_and_html(target):
    from worker.ingest.readers import parse_formatted

    for form in ("markdown", "text"):
        text = " ".join(b.text for b in parse_formatted(_markdown_with(target), form).blocks)
        low = text.lower().replace("\t", "")
        assert "javascript" not in low and "vbscript" not in low and "data:" not in low and "&#" not in low, (form, text)
        assert "the form" in text and "here" in text and "(https://example.org/a)" in text
    html = (f'<h1>Pool</h1><p><a href="{target}">the form</a> <img src="{target}" alt="logo"> '
            f'<a href="https://example.org/a">site</a></p>')
    text = " ".join(b.text for b in parse_formatted(html, "html").blocks)
    assert "script" not in text.lower() and "data:" not in text and "the form" in text and "example.org" in text


def test_unsafe_links_leave_word_and_pdf_files(tmp_path):
    from tests.helpers import make_pdf
    from tests.helpers import W, docx_of
    from worker.ingest.readers import read_path

    pdf = tmp_path / "rules.pdf"
    pdf.write_bytes(make_pdf([["Fences may be 6 feet.", "See [the form]\\(javascript:alert\\(1\\)\\) now."]]))
    text = " ".join(b.text for b in read_path(pdf).blocks)
    assert "Fences may be 6 feet" in text and "javascript" not in text and "the form" in text
    docx = tmp_path / "rules.docx"
    link = ('<w:p><w:hyperlink r:id="rId9"><w:r><w:t>the form</w:t></w:r></w:hyperlink></w:p>'
            '<w:p><w:r><w:t>See [here](javascript:alert(1)) too.</w:t></w:r></w:p>')
    relationships = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
    document = f'<?xml version="1.0"?><w:document {W} {relationships}><w:body>{link}</w:body></w:document>'
    docx.write_bytes(docx_of("", document=document, parts={"word/_rels/document.xml.rels": (
        '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink"'
        ' Target="javascript:alert(1)" TargetMode="External"/></Relationships>')}))
    text = " ".join(b.text for b in read_path(docx).blocks)
    assert "javascript" not in text and "the form" in text and "here" in text


def test_stored_text_through_the_webhook_keeps_no_unsafe_link(open_worker, sample_runtime):
    r = open_worker.post("/webhook/arc-ingest", json={"document_type": "other", "document_id": "doors-links",
                                                      "text": _markdown_with("javascript:alert(document.cookie)")})
    assert r.status_code == 200, r.get_json()
    with psycopg.connect(sample_runtime.db.url) as conn:
        stored = " ".join(row[0] for row in conn.execute(
            "select content from knowledge_chunks where document_id = 'doors-links'"))
        conn.execute("delete from knowledge_chunks where document_id = 'doors-links'")
    assert stored and "javascript" not in stored and "the form" in stored


# -- as deployed: gunicorn on 0.0.0.0 with a token (the Docker image), two processes ------------

@pytest.fixture(scope="module")
def docker_like(sample_runtime, tmp_path_factory) -> Iterator[int]:
    from tests.helpers import stop_process as stop_worker
    from tests.helpers import COMMANDS, free_port, wait_until_serving

    tmp = tmp_path_factory.mktemp("doors-gunicorn")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    env.update({"DATABASE_URL": sample_runtime.db.url, "ARC_DATA_DIR": str(tmp), "ARC_BIND": f"0.0.0.0:{port}",
                "WEB_CONCURRENCY": "2", "ARC_API_TOKEN": ADMIN, "ARC_INGEST_WITH_API_TOKEN": "true",
                "ARC_RATE_LIMIT": "0"})
    with (tmp / "worker.log").open("w") as log:
        import subprocess

        process = subprocess.Popen(COMMANDS["gunicorn"], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", process)
        yield port
    finally:
        stop_worker(process)


def test_the_docker_setup_answers_curl_localhost_and_its_container_name(docker_like):
    """README "Docker": `curl localhost:8080/webhook/arc-retrieval -H 'X-ARC-Token: ...'`."""
    url = f"http://localhost:{docker_like}"
    r = requests.post(f"{url}/webhook/arc-retrieval", json={"query": FENCE}, headers={"X-ARC-Token": ADMIN}, timeout=60)
    assert r.status_code == 200 and r.json()["status"] == "success"
    named = requests.post(f"http://127.0.0.1:{docker_like}/webhook/arc-retrieval", json={"query": FENCE},
                          headers={"X-ARC-Token": ADMIN, "Host": f"arc-worker:{docker_like}"}, timeout=60)
    assert named.status_code == 200
    assert requests.get(f"{url}/readyz", timeout=10).status_code == 200


def test_a_replayed_cookie_is_refused_by_every_gunicorn_process(docker_like, sample_runtime):
    url = f"http://127.0.0.1:{docker_like}"
    keeper = requests.Session()
    page = keeper.get(f"{url}/login", timeout=10).text
    assert keeper.post(f"{url}/login", data={"token": ADMIN, "csrf_token": csrf(page)}, timeout=10,
                       allow_redirects=False).status_code == 302
    listing = keeper.get(f"{url}/documents", timeout=10, allow_redirects=False)
    assert listing.status_code == 200
    token, saved = csrf(listing.text), keeper.cookies.get("session")
    assert keeper.post(f"{url}/logout", data={"csrf_token": token}, timeout=10,
                       allow_redirects=False).status_code == 302
    for _ in range(12):  # new connections, spread over both processes
        replay = requests.get(f"{url}/documents", cookies={"session": saved}, timeout=10, allow_redirects=False)
        assert replay.status_code == 302 and "/login" in replay.headers["Location"]
        delete = requests.post(f"{url}/documents/ccrs/delete", cookies={"session": saved}, timeout=10,
                               data={"csrf_token": token, "confirm": "ccrs"}, allow_redirects=False)
        assert delete.status_code == 302 and "/login" in delete.headers["Location"]
    with psycopg.connect(sample_runtime.db.url) as conn:
        assert conn.execute("select count(*) from knowledge_chunks where document_id = 'ccrs'").fetchone()[0] > 0
