"""Fuzz and load: hostile uploads, malformed bodies, wrong tokens and slow clients mixed into a
question load, against the same load alone.

    .venv/bin/python benchmarks/hostile.py --out benchmarks/hostile

The worker runs as deployed (gunicorn with worker/serve/gunicorn_conf.py, 2 processes, the
sample corpus, both tokens set). Phase "baseline": 4 closed-loop question clients for
``--seconds``. Phase "under attack": the same clients while attackers loop over every hostile
input of tests/test_hostile.py (a heading line of 5,000 spaces, <br> runs, 3,000 nested divs,
Word files nested 5,000 deep / with a DTD bomb / broken / of 20,000 paragraphs, NUL bytes in a
file and its name, a 2,100-page PDF, JSON nested 50,000 deep on both webhooks, wrong tokens)
and 50 connections drip a header one byte a second. Reports every status seen, 5xx (must be
0), worker restarts (must be 0: same worker pids, no "Booting worker" after the start) and the
questions' p50/p95 in both phases.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load import QUESTIONS, free_port, percentile  # noqa: E402
from tests.test_cli import make_pdf  # noqa: E402
from tests.test_hostile import LAUGHS, PARAGRAPH, docx_of  # noqa: E402

API = "bench-retrieve-" + "r" * 24
ADMIN = "bench-ingest-" + "i" * 24


def hostile_uploads() -> list[tuple[str, bytes]]:
    return [
        ("heading.md", ("# a" + " " * 5000 + "b\n").encode() * 2),
        ("breaks.md", ("x" + " " * 50_000 + "y\n").encode()),
        ("deep.html", ("<div>" * 3000 + "x" + "</div>" * 3000).encode()),
        ("nested.docx", docx_of("<w:tbl><w:tr><w:tc>" * 5000 + PARAGRAPH.format("x") + "</w:tc></w:tr></w:tbl>" * 5000)),
        ("laughs.docx", docx_of(PARAGRAPH.format("&lol9;"), prolog=LAUGHS)),
        ("broken.docx", docx_of("", document="<w:document><w:body><w:p>")),
        ("long.docx", docx_of(PARAGRAPH.format("a") * 20_000)),
        ("nul.md", b"# Rules\n\nNo \x00 here.\n"),
        ("na\x00me.md", b"# Rules\n\nFine text.\n"),
        ("pages.pdf", make_pdf([["page"]] * 2100)),
    ]


def hostile_bodies() -> list[tuple[str, bytes, dict[str, str]]]:
    deep = ('{"query": ' + "[" * 50_000 + "]" * 50_000 + "}").encode()
    json_type = {"Content-Type": "application/json"}
    return [
        ("/webhook/arc-retrieval", deep, {**json_type, "X-ARC-Token": API}),
        ("/webhook/arc-ingest", deep, {**json_type, "X-ARC-Token": ADMIN}),
        ("/webhook/arc-retrieval", b'{"query": "unterminated', {**json_type, "X-ARC-Token": API}),
        ("/webhook/arc-retrieval", b'{"query": "fence"}', {**json_type, "X-ARC-Token": "wrong-" + "w" * 30}),
        ("/webhook/arc-ingest", json.dumps({"text": "<div>" * 3000, "format": "html", "document_type": "other"})
         .encode(), {**json_type, "X-ARC-Token": ADMIN}),
    ]


def start(data: Path, port: int, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k not in ("DATABASE_URL",
                                                                                       "OPENAI_API_KEY", "LLM_API_KEY")}
    env.update({"ARC_DATA_DIR": str(data), "ARC_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "2",
                "ARC_API_TOKEN": API, "ARC_INGEST_TOKEN": ADMIN, "ARC_LOAD_SAMPLE": "1", "ARC_LOG_LEVEL": "WARNING"})
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:worker.serve.gunicorn_conf",
                                    "worker.serve.app:create_app()"], env=env, cwd=ROOT, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return process
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise SystemExit("worker did not become ready")


def worker_pids(master: int) -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == master and "postgres" not in stat[:stat.rindex(")")]:
                pids.add(int(entry.name))
    return pids


def questions(url: str, stop: threading.Event, latencies: list[float], statuses: Counter, n: int) -> None:
    session = requests.Session()
    sent = 0
    while not stop.is_set():
        started = time.perf_counter()
        try:
            r = session.post(f"{url}/webhook/arc-retrieval", json={"query": QUESTIONS[(n + sent) % len(QUESTIONS)]},
                             headers={"X-ARC-Token": API}, timeout=60)
            statuses[r.status_code] += 1
            if r.status_code == 200:
                latencies.append((time.perf_counter() - started) * 1000)
        except requests.RequestException as exc:
            statuses[f"connection error {type(exc).__name__}"] += 1
        sent += 1


def attacker(url: str, stop: threading.Event, statuses: Counter, n: int) -> None:
    uploads, bodies = hostile_uploads(), hostile_bodies()
    i = n
    while not stop.is_set():
        if i % 2:
            name, content = uploads[i // 2 % len(uploads)]
            label = name.replace("\x00", "\\0")
        else:
            route, body, headers = bodies[i // 2 % len(bodies)]
            label = route.rsplit("-", 1)[1]
        started = time.monotonic()
        try:
            if i % 2:
                r = requests.post(f"{url}/webhook/arc-ingest", headers={"X-ARC-Token": ADMIN},
                                  data={"document_type": "other"}, files={"file": (name, io.BytesIO(content))},
                                  timeout=180)
            else:
                r = requests.post(f"{url}{route}", data=body, headers=headers, timeout=180)
            statuses[f"{label} {r.status_code}"] += 1
            if r.status_code >= 500:
                statuses["5xx"] += 1
        except requests.RequestException as exc:
            statuses[f"{label} connection error {type(exc).__name__} after {time.monotonic() - started:.0f} s"] += 1
        i += 1


def slow_loris(port: int, stop: threading.Event, count: int) -> None:
    socks: list[socket.socket] = []
    header = b"POST /webhook/arc-retrieval HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000
    sent = 0
    while not stop.is_set():
        while len(socks) < count:  # reconnect those the worker closed after ARC_CLIENT_TIMEOUT
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break
        for sock in list(socks):
            try:
                sock.send(header[sent % len(header):sent % len(header) + 1])
            except OSError:
                socks.remove(sock)
                sock.close()
        sent += 1
        stop.wait(1.0)
    for sock in socks:
        sock.close()


def phase(url: str, port: int, seconds: float, attack: bool) -> dict:
    stop = threading.Event()
    latencies: list[float] = []
    asked, attacked = Counter(), Counter()
    threads = [threading.Thread(target=questions, args=(url, stop, latencies, asked, n)) for n in range(4)]
    if attack:
        threads += [threading.Thread(target=attacker, args=(url, stop, attacked, n)) for n in range(3)]
        threads.append(threading.Thread(target=slow_loris, args=(port, stop, 50)))
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(150)
    return {"questions": sum(asked.values()), "question_statuses": {str(k): v for k, v in asked.items()},
            "p50_ms": round(percentile(latencies, 50), 1), "p95_ms": round(percentile(latencies, 95), 1),
            "question_5xx": sum(v for k, v in asked.items() if isinstance(k, int) and k >= 500),
            "attack_requests": sum(v for k, v in attacked.items() if k != "5xx"),
            "attack_5xx": attacked.get("5xx", 0),
            "attack_statuses": dict(sorted((k, v) for k, v in attacked.items() if k != "5xx"))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "hostile")
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        log = Path(folder) / "worker.log"
        process = start(Path(folder) / "data", port, log)
        url = f"http://127.0.0.1:{port}"
        try:
            pids = worker_pids(process.pid)
            for question in QUESTIONS:  # warm both processes
                requests.post(f"{url}/webhook/arc-retrieval", json={"query": question},
                              headers={"X-ARC-Token": API}, timeout=30)
            booted = log.read_text().count("Booting worker")
            results = {"baseline": phase(url, port, args.seconds, attack=False),
                       "under_attack": phase(url, port, args.seconds, attack=True)}
            text = log.read_text()
            results["worker_restarts"] = text.count("Booting worker") - booted + len(pids - worker_pids(process.pid))
            results["worker_timeouts_in_log"] = text.count("WORKER TIMEOUT")
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=60)
    results["command"] = f".venv/bin/python benchmarks/hostile.py --seconds {args.seconds:g}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
