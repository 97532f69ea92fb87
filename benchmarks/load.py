"""Webhook load benchmark: the worker under gunicorn on loopback, driven by a closed-loop load
generator from one address (as n8n calls it).

    .venv/bin/python benchmarks/load.py --out benchmarks/load

First with **default settings** (nothing set but the data folder: rate limit, admission control
and the result cache as shipped) at 1, 8, 32 and 128 concurrent clients: 8 is what saturates
the machine, 32 is 4x that, 128 is far past it. Then **tuned** for measuring the pipeline itself
(rate limit and result cache off): "cached embeddings" (a fixed question set, warmed first, so
every request runs the hybrid SQL) and "local model" (every question is new: MiniLM runs on each
request). Reranker off (no LLM configured). Reports requests/s, refusals (429, with their
Retry-After), 5xx, latency percentiles of the answered requests and the worker's own overhead =
total - search - embed, from the per-stage timings the worker returns.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

QUESTIONS = [
    "What is the maximum fence height allowed in my backyard?", "Can I put solar panels on my roof?",
    "Which paint colours are approved?", "How big can a shed be?", "What are the setbacks for a shed?",
    "How do I apply for architectural approval?", "Can I park a boat in my driveway?",
    "What happens if I build without approval?", "Are chain link fences allowed?",
    "How long does the ARC take to decide?", "Can I appeal an ARC decision?", "What roof colours are allowed?",
    "Is artificial turf allowed in the front yard?", "What does Improvement mean?",
    "Where are drainage easements mentioned?", "Can I have a metal shed?",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


TUNED = {"ARC_RATE_LIMIT": "0", "ARC_SEARCH_CACHE_SECONDS": "0"}


def start_worker(data: Path, port: int, workers: int, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "LLM_API_KEY") and not k.startswith("ARC_")}
    env.update({"ARC_DATA_DIR": str(data), "WEB_CONCURRENCY": str(workers), "ARC_LOG_LEVEL": "WARNING",
                **(extra_env or {})})
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "serve", "--port", str(port), "--load-sample"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return process
        except OSError:
            pass
        time.sleep(0.3)
    stop_worker(process)
    raise SystemExit("worker did not become ready")


def stop_worker(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


class Client(threading.Thread):
    """One closed-loop client with a keep-alive connection."""

    def __init__(self, port: int, questions, stop_at: float, max_requests: int, results: list, unique: bool, n: int,
                 headers: dict[str, str] | None = None):
        super().__init__(daemon=True)
        self.port, self.questions, self.stop_at, self.max_requests = port, questions, stop_at, max_requests
        self.results, self.unique, self.n = results, unique, n
        self.headers = {"Content-Type": "application/json", **(headers or {})}

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = 0
        while time.monotonic() < self.stop_at and sent < self.max_requests:
            question = self.questions[(self.n + sent) % len(self.questions)]
            if self.unique:
                question = f"{question} (case {self.n}-{sent})"
            body = json.dumps({"query": question})
            start = time.perf_counter()
            try:
                conn.request("POST", "/webhook/arc-retrieval", body=body, headers=self.headers)
                response = conn.getresponse()
                payload = response.read()
                elapsed = (time.perf_counter() - start) * 1000
                timings = json.loads(payload).get("timings_ms", {}) if response.status == 200 else {}
                self.results.append((response.status, elapsed, timings, response.getheader("Retry-After")))
            except (OSError, http.client.HTTPException):
                self.results.append((0, (time.perf_counter() - start) * 1000, {}, None))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            sent += 1


def drive(port: int, clients: int, seconds: float, max_requests: int, unique: bool,
          headers: dict[str, str] | None = None) -> dict:
    results: list = []
    stop_at = time.monotonic() + seconds
    threads = [Client(port, QUESTIONS, stop_at, max_requests // clients, results, unique, i, headers)
               for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    ok = [r for r in results if r[0] == 200]
    latencies = [r[1] for r in ok]
    overhead = [r[2]["total"] - r[2].get("search", 0) - r[2].get("embed", 0) for r in ok if r[2]]
    refused = [r for r in results if r[0] == 429]
    return {
        "clients": clients, "requests": len(results), "ok": len(ok),
        "refused_429": len(refused), "refusals_with_retry_after": sum(1 for r in refused if r[3]),
        "server_errors_5xx": sum(1 for r in results if r[0] >= 500),
        "errors": sum(1 for r in results if r[0] not in (200, 429) and r[0] < 500),
        "rps": round(len(ok) / wall, 1),
        "p50_ms": round(percentile(latencies, 50), 2), "p95_ms": round(percentile(latencies, 95), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "worker_overhead_p50_ms": round(statistics.median(overhead), 2) if overhead else None,
        "search_p50_ms": round(statistics.median([r[2]["search"] for r in ok if r[2]]), 2) if ok else None,
        "embed_p50_ms": round(statistics.median([r[2]["embed"] for r in ok if r[2]]), 2) if ok else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("benchmarks/load"))
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--max-requests", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    runs = {}
    for setup, env, plan in (
            ("default settings", {}, [("cached embeddings", False, (1, 8, 32, 128))]),
            ("tuned: rate limit and result cache off", TUNED,
             [("cached embeddings", False, (1, 8, 32)), ("local model", True, (1, 8, 32))])):
        port = free_port()
        data = Path(tempfile.mkdtemp(prefix="load-"))
        process = start_worker(data, port, args.workers, env)
        try:
            drive(port, 4, 3, 400, unique=False)  # warm: plans, pools, embedding cache
            for label, unique, levels in plan:
                key = f"{setup}, {label}"
                runs[key] = [drive(port, c, args.seconds, args.max_requests, unique) for c in levels]
                for row in runs[key]:
                    print(key, json.dumps(row), flush=True)
        finally:
            stop_worker(process)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(runs, indent=2) + "\n")
    lines = [f"# Webhook under gunicorn ({args.workers} processes), loopback, one client address, 2-core machine", "",
             f"Command: `python benchmarks/load.py --seconds {args.seconds:g} --workers {args.workers}`", "",
             "Sample corpus, reranker off; the load generator shares the 2 cores. Latencies are of the "
             "answered (200) requests.", "",
             "| run | clients | answered/s | 429 (with Retry-After) | 5xx | p50 ms | p95 ms | p99 ms |"
             " worker overhead p50 ms | search p50 ms | embed p50 ms |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, rows in runs.items():
        for r in rows:
            lines.append(f"| {label} | {r['clients']} | {r['rps']} | {r['refused_429']} ({r['refusals_with_retry_after']}) |"
                         f" {r['server_errors_5xx']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} |"
                         f" {r['worker_overhead_p50_ms']} | {r['search_p50_ms']} | {r['embed_p50_ms']} |")
    (args.out / "results.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
