"""Attacks on the doors: DNS rebinding, cross-site forms, open redirects after sign-in, replayed
and idle sessions, community tokens writing, missing browser headers, unsafe links stored, MCP
event streams held open, a foreign Host on the pages with tokens set, Origins of another scheme
or port, over-long request lines and headers, and booleans for numbers. Every attack is counted
as a success when it got what it came for; all must report 0. Controls (the legitimate request next to each attack) must succeed, so
a refusal is the door's doing, not a broken worker.

    .venv/bin/python benchmarks/hostile_doors.py --out benchmarks/hostile

Three servers as deployed, one after another on one embedded Postgres with the sample corpus:
gunicorn (worker/serve/gunicorn_conf.py, 2 processes) with no token on loopback (``make
run``); gunicorn with the admin and API tokens, a read and a write@ community token,
``ARC_TRUSTED_PROXIES=127.0.0.1`` and ``ARC_SESSION_IDLE_MINUTES=0.05``; ``arc-retrieval mcp
--http`` with the token and ``ARC_MCP_STREAM_SECONDS=5``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load import free_port  # noqa: E402

ADMIN = "doors-bench-admin-" + "a" * 24
READER = "doors-bench-reader-" + "r" * 24
WRITER = "doors-bench-writer-" + "w" * 24
ATTACKER = "attacker.example"
FENCE = "How tall can a backyard fence be?"
IDLE_MINUTES = 0.05
STREAM_SECONDS = 5


@dataclass
class Attempt:
    door: str
    attack: str
    success: bool  # the attack got what it came for
    seen: str


@dataclass
class Control:
    door: str
    request: str
    ok: bool
    seen: str


ATTEMPTS: list[Attempt] = []
CONTROLS: list[Control] = []


def attack(door: str, what: str, success: bool, seen: object) -> None:
    ATTEMPTS.append(Attempt(door, what, bool(success), str(seen)[:160]))


def control(door: str, what: str, ok: bool, seen: object) -> None:
    CONTROLS.append(Control(door, what, bool(ok), str(seen)[:160]))


def clean_env(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k not in (
        "DATABASE_URL", "OPENAI_API_KEY", "LLM_API_KEY")}
    env.update({"ARC_DATA_DIR": str(data), "ARC_LOG_LEVEL": "WARNING", "ARC_RATE_LIMIT": "0", **extra})
    return env


def serve(command: list[str], env: dict[str, str], ready: Callable[[], bool], log: Path) -> subprocess.Popen:
    with log.open("a") as out:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            if ready():
                return process
        except requests.RequestException:
            pass
        if process.poll() is not None:
            raise SystemExit(f"{command[-1]} exited: see {log}")
        time.sleep(0.5)
    raise SystemExit("the server did not become ready")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


GUNICORN = [sys.executable, "-m", "gunicorn", "-c", "python:worker.serve.gunicorn_conf", "worker.serve.app:create_app()"]


def gunicorn(data: Path, log: Path, **extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_env(data, ARC_BIND=f"127.0.0.1:{port}", WEB_CONCURRENCY="2", ARC_LOAD_SAMPLE="1", **extra)
    return serve(GUNICORN, env, lambda: requests.get(f"{url}/readyz", timeout=2).status_code == 200, log), url


def csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    return found.group(1) if found else ""


def ccrs_present(url: str, headers: dict[str, str] | None = None) -> bool:
    r = requests.get(f"{url}/webhook/arc-documents/ccrs", headers=headers or {}, timeout=30)
    return r.status_code == 200


# -- an open worker (make run): rebinding and other sites' forms -------------------------------

def open_worker(url: str) -> None:
    port = urlsplit(url).port
    rebound = {"Host": f"{ATTACKER}:{port}", "Origin": f"http://{ATTACKER}:{port}"}
    for method, path in (("GET", "/documents"), ("GET", "/questions"), ("GET", "/"), ("GET", "/ask"),
                         ("GET", "/webhook/arc-documents"), ("GET", "/metrics"), ("GET", "/openapi.json"),
                         ("POST", "/webhook/arc-retrieval"), ("POST", "/retrieval")):
        r = requests.request(method, url + path, headers=rebound, timeout=30,
                             json={"query": FENCE, "knowledge_id": "all",
                                   "retrieval_setting": {"top_k": 3, "score_threshold": 0}})
        attack("rebinding", f"{method} {path} as {ATTACKER}", r.ok, r.status_code)
    own = requests.get(f"{url}/documents", timeout=30)
    token = csrf(own.text)
    control("pages", "GET /documents as 127.0.0.1", own.status_code == 200 and token, own.status_code)
    r = requests.post(f"{url}/documents/ccrs/delete", headers=rebound, data={"csrf_token": token, "confirm": "ccrs"},
                      cookies=own.cookies, timeout=30, allow_redirects=False)
    attack("rebinding", "POST /documents/ccrs/delete as attacker (given a CSRF token)",
           not ccrs_present(url), f"{r.status_code}, ccrs still there: {ccrs_present(url)}")
    r = requests.delete(f"{url}/webhook/arc-documents/ccrs", headers=rebound, timeout=30)
    attack("rebinding", "DELETE /webhook/arc-documents/ccrs as attacker", not ccrs_present(url), r.status_code)
    for host in (f"localhost.{ATTACKER}:{port}", f"127.0.0.1.{ATTACKER}:{port}", f"0.0.0.0:{port}",
                 f"{ATTACKER}@127.0.0.1:{port}", f"[::1].{ATTACKER}"):
        r = requests.get(f"{url}/documents", headers={"Host": host}, timeout=30)
        attack("rebinding", f"GET /documents as {host}", r.ok, r.status_code)

    cross = {"Origin": f"http://{ATTACKER}"}
    r = requests.post(f"{url}/webhook/arc-ingest", headers=cross, timeout=60, data={"document_type": "ccr"},
                      files={"file": ("fence.md", io.BytesIO(b"# Fences\n\nFences may be 100 feet tall."))})
    attack("cross-site form", "POST /webhook/arc-ingest (multipart) from another site's page", r.ok, r.status_code)
    for origin in (f"http://{ATTACKER}", "null", f"http://localhost.{ATTACKER}:{port}"):
        r = requests.post(f"{url}/documents/ccrs/delete", headers={"Origin": origin}, cookies=own.cookies,
                          data={"csrf_token": token, "confirm": "ccrs"}, timeout=30, allow_redirects=False)
        attack("cross-site form", f"POST /documents/ccrs/delete, Origin {origin}", not ccrs_present(url), r.status_code)
    r = requests.post(f"{url}/ask", headers={"Origin": url}, cookies=own.cookies, data={"csrf_token": token,
                      "query": FENCE}, timeout=60)
    control("pages", "POST /ask from the worker's own page", r.status_code == 200, r.status_code)
    r = requests.post(f"{url}/webhook/arc-retrieval", json={"query": FENCE}, timeout=60)
    control("webhook", "POST /webhook/arc-retrieval as 127.0.0.1, no Origin (n8n)", r.status_code == 200, r.status_code)


# -- a worker with tokens: sign-in, sessions, scopes, headers, links --------------------------

REDIRECTS = ["/%09/evil.example", "/%0a/evil.example", "/%0d%0a/evil.example", "/\\evil.example", "\\\\evil.example",
             "/%5Cevil.example", "/%2F/evil.example", "%2F%2Fevil.example", "/%252F%252Fevil.example",
             "//evil.example", "///evil.example", "https://evil.example/", "http:evil.example",
             "javascript:alert(1)", "%20//evil.example", "/%00/evil.example"]


def browser_reads(location: str, base: str) -> str:
    """The host a browser goes to for a Location: it drops tabs and newlines and reads \\ as /."""
    cleaned = re.sub(r"[\t\n\r]", "", location).replace("\\", "/").lstrip(" \x00")
    return urlsplit(urljoin(base + "/login", cleaned)).netloc


def signed_in(url: str, next_target: str | None = None, headers: dict | None = None) -> tuple[requests.Session, str]:
    session = requests.Session()
    page = session.get(f"{url}/login", timeout=30, headers=headers or {}).text
    target = f"{url}/login" + (f"?next={next_target}" if next_target is not None else "")
    r = session.post(target, data={"token": ADMIN, "csrf_token": csrf(page)}, timeout=30, allow_redirects=False,
                     headers=headers or {})
    return session, r.headers.get("Location", "")


def tokened_worker(url: str) -> None:
    ours = urlsplit(url).netloc
    for target in REDIRECTS:
        _, location = signed_in(url, target)
        went = browser_reads(location, url)
        attack("sign-in redirect", f"next={target}", went != ours, f"Location {location!r}")
    _, location = signed_in(url, "/documents%3Fpage%3D1")
    control("sign-in redirect", "next=/documents?page=1", location == "/documents?page=1", location)

    keeper, _ = signed_in(url)
    listing = keeper.get(f"{url}/documents", timeout=30, allow_redirects=False)
    control("pages", "signed in: GET /documents", listing.status_code == 200, listing.status_code)
    token, saved = csrf(listing.text), keeper.cookies.get("session")
    keeper.post(f"{url}/logout", data={"csrf_token": token}, timeout=30, allow_redirects=False)
    opened = sum(requests.get(f"{url}/documents", cookies={"session": saved}, timeout=30,
                              allow_redirects=False).status_code == 200 for _ in range(10))
    attack("sessions", "signed-out cookie replayed, GET /documents x10 (both processes)", opened, f"{opened} opened")
    r = requests.post(f"{url}/documents/ccrs/delete", cookies={"session": saved}, timeout=30, allow_redirects=False,
                      data={"csrf_token": token, "confirm": "ccrs"})
    auth = {"X-ARC-Token": ADMIN}
    attack("sessions", "signed-out cookie replayed, POST delete", not ccrs_present(url, auth), r.status_code)
    idle, _ = signed_in(url)
    time.sleep(IDLE_MINUTES * 60 + 2)
    r = idle.get(f"{url}/documents", timeout=30, allow_redirects=False)
    attack("sessions", f"a session idle past ARC_SESSION_IDLE_MINUTES={IDLE_MINUTES:g}", r.status_code == 200,
           r.status_code)

    document = {"document_type": "ccr", "document_id": "bench-fence", "text": "# Fences\n\nFences may be 100 feet."}
    reader, writer = {"X-ARC-Token": READER}, {"X-ARC-Token": WRITER}
    r = requests.post(f"{url}/webhook/arc-ingest", json=document, headers=reader, timeout=60)
    attack("community tokens", "read token: POST /webhook/arc-ingest (JSON)", r.ok, r.status_code)
    r = requests.post(f"{url}/webhook/arc-ingest", headers=reader, data={"document_type": "ccr"}, timeout=60,
                      files={"file": ("fence.md", io.BytesIO(b"# Fences\n\nFences may be 100 feet."))})
    attack("community tokens", "read token: POST /webhook/arc-ingest (file)", r.ok, r.status_code)
    r = requests.delete(f"{url}/webhook/arc-documents/ccrs", headers=reader, timeout=30)
    attack("community tokens", "read token: DELETE /webhook/arc-documents/ccrs", r.ok, r.status_code)
    for token_, name in ((READER, "read"), (WRITER, "write@")):
        session = requests.Session()
        page = session.get(f"{url}/login", timeout=30).text
        r = session.post(f"{url}/login", data={"token": token_, "csrf_token": csrf(page)}, timeout=30,
                         allow_redirects=False)
        attack("community tokens", f"{name} token signs in to the pages", r.status_code == 302, r.status_code)
    for token_, name in ((READER, "read"), (WRITER, "write@")):
        r = requests.post(f"{url}/webhook/arc-retrieval", json={"query": FENCE}, headers={"X-ARC-Token": token_},
                          timeout=60)
        control("community tokens", f"{name} token asks a question", r.status_code == 200, r.status_code)
        r = requests.post(f"{url}/retrieval", headers={"Authorization": f"Bearer {token_}"}, timeout=60,
                          json={"knowledge_id": "all", "query": FENCE, "retrieval_setting": {"top_k": 3,
                                                                                              "score_threshold": 0}})
        control("community tokens", f"{name} token: Dify /retrieval", r.status_code == 200, r.status_code)
    r = requests.post(f"{url}/webhook/arc-ingest", json=document, headers=writer, timeout=60)
    control("community tokens", "write@ token ingests", r.status_code == 200, r.status_code)
    r = requests.delete(f"{url}/webhook/arc-documents/bench-fence", headers=writer, timeout=30)
    control("community tokens", "write@ token deletes its upload", r.status_code == 200, r.status_code)

    keeper, _ = signed_in(url)
    for path in ("/documents", "/ask", "/questions", "/documents/ccrs", "/login"):
        page = keeper.get(url + path, timeout=30)
        policy = page.headers.get("Content-Security-Policy", "")
        script_src = re.search(r"script-src ([^;]*)", policy)
        inline = re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page.text) or re.search(r"\son[a-z]+\s*=", page.text)
        attack("headers", f"GET {path}: inline script allowed or present",
               not script_src or "unsafe-inline" in script_src.group(1) or inline, policy[:60])
        attack("headers", f"GET {path}: may be framed", "frame-ancestors 'none'" not in policy
               or page.headers.get("X-Frame-Options") != "DENY", page.headers.get("X-Frame-Options"))
        attack("headers", f"GET {path}: MIME sniffing allowed", page.headers.get("X-Content-Type-Options") != "nosniff",
               page.headers.get("X-Content-Type-Options"))
        attack("headers", f"GET {path}: full address sent to other sites",
               page.headers.get("Referrer-Policy") not in ("same-origin", "no-referrer", "strict-origin"),
               page.headers.get("Referrer-Policy"))
    via_proxy = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"}
    session = requests.Session()
    page = session.get(f"{url}/login", headers=via_proxy, timeout=30)
    r = session.post(f"{url}/login", data={"token": ADMIN, "csrf_token": csrf(page.text)}, headers=via_proxy,
                     timeout=30, allow_redirects=False)
    cookie = r.headers.get("Set-Cookie", "")
    attack("headers", "session cookie behind the trusted https proxy without Secure", "Secure" not in cookie, cookie[:80])

    names_and_origins(url)
    refusals_in_house_style(url)

    linked = {
        "markdown": ("# Links\n\n[a](javascript:alert(1)) [b](JaVa&#x09;Script:alert(1)) ![c](data:text/html,x) "
                     "<vbscript:msgbox(1)>\n\n[d]: javascript&#58;alert(1)\n"),
        "text": "Links\n\nSee [a](javascript:alert(1)) and <a href=\"java\tscript:x\">b</a>.",
        "html": ('<h1>Links</h1><p><a href="java&#x09;script:alert(1)">a</a> <img src="data:image/png,x" alt="b">'
                 "</p>")}
    for name, text in linked.items():
        form = name
        doc = {"document_type": "other", "document_id": f"bench-links-{name}", "text": text, "format": form}
        r = requests.post(f"{url}/webhook/arc-ingest", json=doc, headers=auth, timeout=60)
        shown = requests.get(f"{url}/webhook/arc-documents/bench-links-{name}", headers=auth, timeout=30).json()
        stored = " ".join(c.get("content", "") for c in shown.get("chunks", []))
        low = stored.lower().replace("\t", "")
        attack("unsafe links", f"{name}: javascript:/vbscript:/data: kept in stored text",
               any(s in low for s in ("javascript", "vbscript", "data:", "&#")), stored[:100])
        control("unsafe links", f"{name}: ingested, words kept", r.status_code == 200 and stored, r.status_code)
        requests.delete(f"{url}/webhook/arc-documents/bench-links-{name}", headers=auth, timeout=30)


def names_and_origins(url: str) -> None:
    """With tokens set, the pages and sign-in still answer only the worker's names; an Origin of
    another scheme or port is another site's."""
    port = urlsplit(url).port
    foreign = {"Host": f"{ATTACKER}:{port}"}
    r = requests.get(f"{url}/login", headers=foreign, timeout=30)
    attack("tokens set: foreign Host", f"GET /login as {ATTACKER} (the real sign-in form)",
           r.ok and 'name="token"' in r.text, r.status_code)
    session = requests.Session()
    page = session.get(f"{url}/login", timeout=30).text
    r = session.post(f"{url}/login", data={"token": ADMIN, "csrf_token": csrf(page)}, headers=foreign, timeout=30,
                     allow_redirects=False)
    attack("tokens set: foreign Host", f"POST /login as {ATTACKER} (reads what the keeper types)",
           r.status_code in (200, 302), r.status_code)
    keeper, _ = signed_in(url)
    for path in ("/", "/documents", "/questions", "/ask"):
        r = keeper.get(url + path, headers=foreign, timeout=30, allow_redirects=False)
        attack("tokens set: foreign Host", f"GET {path} as {ATTACKER} with the keeper's cookie", r.ok, r.status_code)
    listing = keeper.get(f"{url}/documents", timeout=30)
    token = csrf(listing.text)
    control("pages", "signed in: GET /documents by its own name", listing.status_code == 200, listing.status_code)
    auth = {"X-ARC-Token": ADMIN}
    for origin in (f"https://127.0.0.1:{port}", f"HTTP://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}",
                   f"http://LOCALHOST:{port}"):
        r = keeper.post(f"{url}/documents/ccrs/delete", headers={"Origin": origin}, timeout=30,
                        data={"csrf_token": token, "confirm": "ccrs"}, allow_redirects=False)
        attack("Origin scheme and port", f"POST /documents/ccrs/delete, Origin {origin}",
               not ccrs_present(url, auth), r.status_code)
        r = requests.post(f"{url}/webhook/arc-ingest", headers={**auth, "Origin": origin}, timeout=60,
                          json={"document_type": "ccr", "document_id": "bench-origin", "text": "# Fences\n\n100 feet."})
        attack("Origin scheme and port", f"POST /webhook/arc-ingest, Origin {origin}", r.ok, r.status_code)
    r = keeper.post(f"{url}/ask", headers={"Origin": f"http://127.0.0.1:{port}"}, timeout=60,
                    data={"csrf_token": token, "query": FENCE})
    control("pages", "POST /ask, Origin the worker's own (scheme, name, port)", r.status_code == 200, r.status_code)


def _house_style(r: requests.Response, status: int) -> bool:
    try:
        body = r.json()
    except ValueError:
        return False
    return (r.status_code == status and bool(body.get("field")) and r.headers.get("X-Content-Type-Options") == "nosniff"
            and r.headers.get("X-Frame-Options") == "DENY")


def refusals_in_house_style(url: str) -> None:
    """Over-long request lines and headers, booleans for numbers."""
    auth = {"X-ARC-Token": ADMIN}
    r = requests.delete(f"{url}/webhook/arc-documents/{'a' * 5000}", headers=auth, timeout=30)
    attack("refusal outside JSON", "DELETE a 5,000-byte document id: refusal without JSON or security headers",
           not _house_style(r, 414), f"{r.status_code} {r.headers.get('Content-Type')}")
    r = requests.get(f"{url}/documents?q={'a' * 5000}", timeout=30)
    attack("refusal outside JSON", "GET a page with a 5,000-byte query: refusal without JSON or security headers",
           not _house_style(r, 414), f"{r.status_code} {r.headers.get('Content-Type')}")
    r = requests.get(f"{url}/healthz", headers={"X-Long": "a" * 9000}, timeout=30)
    attack("refusal outside JSON", "a 9,000-byte header: refusal without JSON or security headers",
           not _house_style(r, 431), f"{r.status_code} {r.headers.get('Content-Type')}")
    for field, body in (("top_k", {"top_k": True}), ("candidates", {"candidates": True}),
                        ("token_budget", {"token_budget": False}), ("min_relevance", {"min_relevance": True}),
                        ("weights.vector", {"weights": {"vector": True, "fts": 0.5}})):
        r = requests.post(f"{url}/webhook/arc-retrieval", json={"query": FENCE, **body}, headers=auth, timeout=60)
        named = r.status_code == 422 and r.json().get("field") == field
        attack("booleans as numbers", f"webhook {json.dumps(body)}", not named, f"{r.status_code} {r.text[:80]}")
    for setting in ({"top_k": True, "score_threshold": 0}, {"top_k": 3, "score_threshold": False}):
        r = requests.post(f"{url}/retrieval", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60,
                          json={"knowledge_id": "all", "query": FENCE, "retrieval_setting": setting})
        attack("booleans as numbers", f"Dify retrieval_setting {json.dumps(setting)}", r.status_code != 422,
               f"{r.status_code} {r.text[:80]}")
    r = requests.post(f"{url}/webhook/arc-retrieval", json={"query": FENCE, "top_k": 3}, headers=auth, timeout=60)
    control("webhook", "top_k 3 (a number) is answered", r.status_code == 200, r.status_code)


# -- the MCP server: held streams, rebinding ---------------------------------------------------

def mcp(url: str) -> None:
    stream_headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {ADMIN}"}
    held: dict[str, float] = {}

    def hold(key: str) -> None:
        started = time.monotonic()
        try:
            with requests.get(url, headers=stream_headers, stream=True, timeout=STREAM_SECONDS * 6) as r:
                held[key + " status"] = r.status_code
                for _ in r.iter_content(chunk_size=None):
                    pass
        except requests.RequestException:
            pass
        held[key] = time.monotonic() - started

    threads = [threading.Thread(target=hold, args=(f"stream {i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    third = requests.get(url, headers=stream_headers, stream=True, timeout=STREAM_SECONDS * 6)
    attack("MCP streams", "a third concurrent GET /mcp stream of one token (cap 2)", third.status_code == 200,
           third.status_code)
    third.close()
    for thread in threads:
        thread.join(STREAM_SECONDS * 8)
    for i in range(2):
        kept = held.get(f"stream {i}", float("inf"))
        attack("MCP streams", f"stream {i} held past ARC_MCP_STREAM_SECONDS={STREAM_SECONDS} + 5 s",
               kept > STREAM_SECONDS + 5, f"status {held.get(f'stream {i} status')}, closed after {kept:.1f} s")
    port = urlsplit(url).port
    r = requests.post(url, headers={"Host": f"{ATTACKER}:{port}", "Authorization": f"Bearer {ADMIN}",
                                    "Accept": "application/json, text/event-stream"}, timeout=30,
                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    attack("rebinding", f"POST /mcp as {ATTACKER}", r.status_code < 400, r.status_code)
    listing = {"Authorization": f"Bearer {ADMIN}", "Accept": "application/json, text/event-stream"}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    r = requests.post(url, headers={**listing, "Origin": f"http://127.0.0.1:{port}"}, json=ping, timeout=30)
    control("MCP", "POST /mcp, Origin its own (as the webhook takes it)", r.status_code == 200, r.status_code)
    for origin in (f"https://127.0.0.1:{port}", f"HTTP://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"):
        r = requests.post(url, headers={**listing, "Origin": origin}, json=ping, timeout=30)
        attack("Origin scheme and port", f"POST /mcp, Origin {origin}", r.status_code < 400, r.status_code)
    r = requests.post(url, headers={**listing, "MCP-Protocol-Version": "2025-06-18"}, timeout=60,
                      json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "search_governing_documents", "arguments": {"query": FENCE,
                                                                                           "top_k": True}}})
    result = r.json().get("result", {}) if r.ok else {}
    attack("booleans as numbers", "MCP search top_k true", r.ok and not result.get("isError"), str(result)[:80])
    r = requests.post(url, headers={"Authorization": f"Bearer {READER}", "Accept": "application/json, text/event-stream",
                                    "MCP-Protocol-Version": "2025-06-18"}, timeout=30,
                      json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    writes = [t["name"] for t in r.json().get("result", {}).get("tools", [])
              if not t.get("annotations", {}).get("readOnlyHint")] if r.ok else []
    control("MCP", "read community token lists the tools", r.status_code == 200, r.status_code)
    attack("community tokens", "MCP offers a tool that writes", writes, writes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "hostile")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        data, log = Path(folder) / "data", Path(folder) / "servers.log"
        process, url = gunicorn(data, log)
        try:
            open_worker(url)
        finally:
            stop(process)
        process, url = gunicorn(data, log, ARC_API_TOKEN=ADMIN, ARC_INGEST_TOKEN=ADMIN,
                                ARC_COMMUNITY_TOKENS=f"default:{READER};write@default:{WRITER}",
                                ARC_TRUSTED_PROXIES="127.0.0.1", ARC_SESSION_IDLE_MINUTES=str(IDLE_MINUTES))
        try:
            tokened_worker(url)
        finally:
            stop(process)
        port = free_port()
        mcp_url = f"http://127.0.0.1:{port}/mcp"
        env = clean_env(data, ARC_API_TOKEN=ADMIN, ARC_COMMUNITY_TOKENS=f"default:{READER}",
                        ARC_MCP_STREAM_SECONDS=str(STREAM_SECONDS))
        process = serve([sys.executable, "-m", "worker.cli", "mcp", "--http", "--port", str(port)], env,
                        lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok, log)
        try:
            mcp(mcp_url)
        finally:
            stop(process)
    results = {
        "command": ".venv/bin/python benchmarks/hostile_doors.py --out benchmarks/hostile",
        "attacks": len(ATTEMPTS), "successes": sum(a.success for a in ATTEMPTS),
        "controls": len(CONTROLS), "controls_failed": sum(not c.ok for c in CONTROLS),
        "seconds": round(time.monotonic() - started, 1),
        "by_door": {door: {"attacks": sum(a.door == door for a in ATTEMPTS),
                           "successes": sum(a.success for a in ATTEMPTS if a.door == door)}
                    for door in dict.fromkeys(a.door for a in ATTEMPTS)},
        "attempts": [asdict(a) for a in ATTEMPTS], "control_requests": [asdict(c) for c in CONTROLS]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "doors.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: v for k, v in results.items() if k not in ("attempts", "control_requests")}, indent=2))
    for a in ATTEMPTS:
        if a.success:
            print("SUCCEEDED:", a)
    for c in CONTROLS:
        if not c.ok:
            print("CONTROL FAILED:", c)


if __name__ == "__main__":
    main()
