"""Hostile neighbours against the real deployment (gunicorn with the project's config): slow
clients cannot starve the threads that answer questions, and OCR stops when its client leaves."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.helpers import SCANNED_LINES, joined, needs_tesseract, scanned_page
from tests.helpers import COMMANDS, ROOT, free_port, wait_until_serving
from tests.helpers import stop_process as stop_worker

# Each test starts the worker (or the eval command) in a process with its own Postgres and model.
pytestmark = pytest.mark.usefixtures("worker_process")


def start_worker(tmp_path: Path, **env_overrides: str) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    env.update({"ARC_DATA_DIR": str(tmp_path / "data"), "ARC_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "1",
                "ARC_THREADS": "8", "ARC_AUTH_DISABLED": "1", "ARC_RATE_LIMIT": "0", "ARC_CLIENT_TIMEOUT": "5",
                **env_overrides})
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(COMMANDS["gunicorn"], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(url, process)
    return process, url, log_path


def children(pid: int, name: str | None = None) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            if int(rest[1]) == pid and (name is None or comm == name):
                found.append(int(entry.name))
    return found


def test_100_slow_clients_do_not_starve_the_questions(tmp_path):
    """100 connections sending a header a byte every half second (more than the process's 8
    threads) while questions come in: every question is answered, none waits for a slow one,
    and the worker process is the same one at the end (no restart)."""
    process, url, log_path = start_worker(tmp_path)
    slow: list[socket.socket] = []
    stop = threading.Event()
    try:
        worker_pids = children(process.pid)
        port = int(url.rsplit(":", 1)[1])
        for _ in range(100):
            slow.append(socket.create_connection(("127.0.0.1", port)))
        header = b"POST /webhook/arc-retrieval HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000

        def drip() -> None:
            sent = 0
            while not stop.is_set() and sent < len(header):
                for sock in slow:
                    try:
                        sock.send(header[sent:sent + 1])
                    except OSError:
                        pass
                sent += 1
                stop.wait(0.5)

        dripper = threading.Thread(target=drip)
        dripper.start()
        time.sleep(2)  # every slow client has begun its header
        answered = []
        for question in ["How tall may a fence be?", "pool hours", "paint colours", "parking rules"] * 3:
            started = time.monotonic()
            r = requests.post(f"{url}/webhook/arc-retrieval", json={"query": question}, timeout=20)
            answered.append((r.status_code, time.monotonic() - started))
            time.sleep(0.3)
        assert [status for status, _ in answered] == [200] * 12
        assert max(seconds for _, seconds in answered) < 5, answered  # not queued behind a slow client
        assert requests.get(f"{url}/healthz", timeout=5).status_code == 200
        assert children(process.pid) == worker_pids, "a worker process was restarted"
        time.sleep(6)  # past ARC_CLIENT_TIMEOUT the slow clients have been disconnected
        assert all(_closed(sock) for sock in slow)
    finally:
        stop.set()
        for sock in slow:
            sock.close()
        stop_worker(process)
    assert "WORKER TIMEOUT" not in log_path.read_text()


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(1)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


@needs_tesseract
def test_ocr_stops_when_the_client_goes_away(tmp_path):
    process, url, _log_path = start_worker(tmp_path)
    pdf = joined(*[scanned_page(SCANNED_LINES)] * 12)
    boundary = "arcboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"document_type\"\r\n\r\nccr\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"scan.pdf\"\r\n"
            "Content-Type: application/pdf\r\n\r\n").encode() + pdf + f"\r\n--{boundary}--\r\n".encode()
    head = (f"POST /webhook/arc-ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary={boundary}"
            f"\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    try:
        (worker,) = children(process.pid)
        client = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])))
        client.sendall(head + body)
        deadline = time.monotonic() + 60
        while not children(worker, "tesseract"):
            assert time.monotonic() < deadline, "OCR never started"
            time.sleep(0.1)
        client.close()  # the caller gives up
        time.sleep(3)
        seen: set[int] = set()
        for _ in range(30):  # for 3 s more: nothing running, nothing started
            seen.update(children(worker, "tesseract"))
            time.sleep(0.1)
        assert not seen, f"tesseract kept running after the client left: {sorted(seen)}"
        metrics = requests.get(f"{url}/metrics", timeout=5).text
        assert "arc_ingest_cancelled_total 1.0" in metrics
        assert requests.post(f"{url}/webhook/arc-retrieval", json={"query": "animals"}, timeout=10).ok
    finally:
        stop_worker(process)


def test_a_short_token_stops_gunicorn_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    env.update({"ARC_DATA_DIR": str(tmp_path / "data"), "ARC_BIND": f"127.0.0.1:{free_port()}", "ARC_API_TOKEN": "x"})
    done = subprocess.run(COMMANDS["gunicorn"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert done.stdout + done.stderr == ("invalid configuration: ARC_API_TOKEN is 1 characters; use at least 24 "
                                         "(e.g. openssl rand -hex 32)\n")


def test_an_over_long_request_line_or_header_is_refused_in_json(tmp_path):
    """gunicorn refuses a request line over 4094 bytes (a long document id in a DELETE) and a
    header over 8190 before the app sees it: the worker's JSON error naming what was too long,
    with the headers every answer carries."""
    process, url, _ = start_worker(tmp_path)
    try:
        for response, status, field in (
            (requests.delete(f"{url}/webhook/arc-documents/{'a' * 5000}", timeout=30), 414, "request_line"),
            (requests.get(f"{url}/healthz", headers={"X-Long": "a" * 9000}, timeout=30), 431, "headers"),
        ):
            assert response.status_code == status, response.text[:200]
            assert response.headers["Content-Type"] == "application/json"
            body = response.json()
            assert body["field"] == field and body["message"].startswith(field.replace("_", " "))
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            assert response.headers["X-Frame-Options"] == "DENY"
            assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
        assert requests.get(f"{url}/healthz", timeout=30).status_code == 200  # the worker goes on
    finally:
        stop_worker(process)
