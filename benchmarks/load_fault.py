"""Load-and-fault run: steady traffic through gunicorn while Postgres restarts underneath.

    .venv/bin/python benchmarks/load_fault.py --out benchmarks/load_fault

Starts its own Postgres (the embedded server, in a folder of its own), the worker under gunicorn
pointed at it with DATABASE_URL, loads the sample corpus, then sends requests from 8 closed-loop
clients for --seconds (bounded in count too, loopback only). At a third of the run Postgres is
stopped (fast shutdown: open connections die) and started again 3 s later. Reports requests by
status code, p99, and the errors after recovery, which must be 0: every failure while the
database is away must be a 503 with Retry-After, never a 500 or a dropped connection.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import QUESTIONS, free_port, percentile, start_worker, stop_worker  # noqa: E402

from worker.store.embedded import EmbeddedPostgres  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("benchmarks/load_fault"))
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max-requests", type=int, default=50000)
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="fault-"))
    database = EmbeddedPostgres(base / "db")
    url = database.start()
    port = free_port()
    worker = start_worker(base / "worker", port, 2, {"DATABASE_URL": url})
    log: list[tuple[float, int, float, bool]] = []  # (t, status, ms, retry_after)
    lock = threading.Lock()
    t0 = time.monotonic()
    stop_at = t0 + args.seconds
    per_client = args.max_requests // args.clients

    def client(n: int) -> None:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in range(per_client):
            if time.monotonic() >= stop_at:
                break
            body = json.dumps({"query": QUESTIONS[(n + i) % len(QUESTIONS)]})
            start = time.perf_counter()
            try:
                conn.request("POST", "/webhook/arc-retrieval", body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                status, retry = response.status, response.getheader("Retry-After") is not None
            except (OSError, http.client.HTTPException):
                status, retry = 0, False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            with lock:
                log.append((time.monotonic() - t0, status, (time.perf_counter() - start) * 1000, retry))
            if status != 200:
                time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(args.clients)]
    for t in threads:
        t.start()
    time.sleep(args.seconds / 3)
    down_at = time.monotonic() - t0
    database.stop()
    time.sleep(3)
    database = EmbeddedPostgres(base / "db")
    database.start()
    up_at = time.monotonic() - t0
    for t in threads:
        t.join()
    stop_worker(worker)
    database.stop()

    grace = 2.0  # the pool notices the new server within its reconnect loop
    by_status = collections.Counter(status for _, status, _, _ in log)
    after = [entry for entry in log if entry[0] > up_at + grace]
    report = {
        "requests": len(log),
        "by_status": {str(k): v for k, v in sorted(by_status.items())},
        "p99_ms": round(percentile([ms for _, s, ms, _ in log if s == 200], 99), 1),
        "database_down_s": [round(down_at, 1), round(up_at, 1)],
        "errors_after_recovery": sum(1 for _, s, _, _ in after if s != 200),
        "requests_after_recovery": len(after),
        "non_503_failures": sum(1 for _, s, _, _ in log if s not in (200, 503)),
        "503_without_retry_after": sum(1 for _, s, _, r in log if s == 503 and not r),
    }
    print(json.dumps(report, indent=2))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "results.md").write_text("\n".join([
        "# Load with a Postgres restart in the middle", "",
        f"Command: `python benchmarks/load_fault.py --seconds {args.seconds:g} --clients {args.clients}`", "",
        f"- requests sent: {report['requests']}",
        f"- by status: {report['by_status']}",
        f"- p99 of successful requests: {report['p99_ms']} ms",
        f"- database down from {report['database_down_s'][0]} s to {report['database_down_s'][1]} s",
        f"- failures other than 503: {report['non_503_failures']}; 503s without Retry-After: "
        f"{report['503_without_retry_after']}",
        f"- errors after recovery (+{grace:g} s): {report['errors_after_recovery']} of "
        f"{report['requests_after_recovery']} requests", ""]))
    if report["errors_after_recovery"] or report["non_503_failures"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
