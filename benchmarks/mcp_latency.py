"""What the Model Context Protocol adds over the webhook: the same questions, one at a time, side by
side in one run, to the webhook (gunicorn, one process), to the MCP server over streamable HTTP
(``arc-retrieval mcp --http``, stateless, the SDK's own client) and over stdio (``arc-retrieval
mcp``, as Claude Desktop runs it), all on one embedded database holding the sample corpus.

    .venv/bin/python benchmarks/mcp_latency.py --out benchmarks/mcp_latency

Tuned to measure the protocol, not the cache: rate limit and result cache off, every question
asked once untimed first (so every timed call embeds from the embedding cache and runs the hybrid
SQL), then the question set in rounds, interleaving the three faces so load drift hits them alike.
Latency is client-side, from sending the call to having the parsed answer; "pipeline" is the
webhook's own ``timings_ms.total`` (the search itself).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import QUESTIONS, TUNED, free_port, percentile, start_worker, stop_worker  # noqa: E402

SEARCH_TOOL = "search_governing_documents"


def start_mcp(data: Path, port: int, env: dict[str, str]):
    import subprocess

    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "mcp", "--http", "--port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("POST", "/mcp", body="{}", headers={"Content-Type": "application/json"})
            if conn.getresponse().status in (400, 401, 406):
                return process
        except OSError:
            pass
        time.sleep(0.3)
    stop_worker(process)
    raise SystemExit("MCP server did not start")


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(percentile(values, 50), 2), "p95_ms": round(percentile(values, 95), 2),
            "mean_ms": round(sum(values) / len(values), 2)}


async def measure(webhook_port: int, mcp_url: str, stdio: StdioServerParameters, rounds: int) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", webhook_port, timeout=30)

    def webhook(question: str) -> dict:
        conn.request("POST", "/webhook/arc-retrieval", body=json.dumps({"query": question}),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        body = json.loads(response.read())
        assert response.status == 200, body
        return body

    times: dict[str, list[float]] = {"webhook": [], "mcp_http": [], "mcp_stdio": []}
    pipeline: list[float] = []
    statuses: dict[str, dict[str, int]] = {k: {} for k in times}
    http_client = Client(streamable_http_client(mcp_url, http_client=httpx2.AsyncClient(timeout=30)))
    async with http_client as over_http, Client(stdio) as over_stdio:
        faces = {"mcp_http": over_http, "mcp_stdio": over_stdio}
        for question in QUESTIONS:  # untimed: every embedding cached, every process warm
            webhook(question)
            for client in faces.values():
                await client.call_tool(SEARCH_TOOL, {"query": question})
        for _ in range(rounds):
            for question in QUESTIONS:
                start = time.perf_counter()
                body = webhook(question)
                times["webhook"].append((time.perf_counter() - start) * 1000)
                pipeline.append(body["timings_ms"]["total"])
                statuses["webhook"][body["status"]] = statuses["webhook"].get(body["status"], 0) + 1
                for name, client in faces.items():
                    start = time.perf_counter()
                    result = await client.call_tool(SEARCH_TOOL, {"query": question})
                    times[name].append((time.perf_counter() - start) * 1000)
                    assert not result.is_error, result.content
                    status = result.structured_content["status"]
                    statuses[name][status] = statuses[name].get(status, 0) + 1
    return {"latency": {name: summary(values) for name, values in times.items()},
            "webhook_pipeline": summary(pipeline), "statuses": statuses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="arc-mcp-bench-") as folder:
        data = Path(folder)
        webhook_port, mcp_port = free_port(), free_port()
        worker = start_worker(data, webhook_port, 1, TUNED)
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENAI_API_KEY", "LLM_API_KEY") and not k.startswith("ARC_")}
        env.update({"ARC_DATA_DIR": str(data), "ARC_LOG_LEVEL": "WARNING", **TUNED,
                    "DATABASE_URL": f"postgresql://postgres:@/postgres?host={data / 'pgdata'}"})
        mcp = start_mcp(data, mcp_port, env)
        try:
            stdio = StdioServerParameters(command=sys.executable, args=["-m", "worker.cli", "mcp"], env=env)
            result = anyio.run(measure, webhook_port, f"http://127.0.0.1:{mcp_port}/mcp", stdio, args.rounds)
        finally:
            stop_worker(mcp)
            stop_worker(worker)
    result["command"] = f".venv/bin/python benchmarks/mcp_latency.py --out {args.out} --rounds {args.rounds}"
    result["questions"] = len(QUESTIONS)
    # other work on the machine moves every column alike; the load says how much there was
    result["machine"] = f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    (args.out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# MCP tool call vs webhook ({result['machine']}, sequential, {args.rounds} rounds of "
             f"{len(QUESTIONS)} questions)", "", f"    {result['command']}", "",
             "| face | calls | p50 ms | p95 ms | mean ms |", "|---|---|---|---|---|"]
    for name, s in result["latency"].items():
        lines.append(f"| {name} | {s['n']} | {s['p50_ms']} | {s['p95_ms']} | {s['mean_ms']} |")
    p = result["webhook_pipeline"]
    lines += ["", f"The webhook's own pipeline time (timings_ms.total): p50 {p['p50_ms']} ms, p95 {p['p95_ms']} ms.",
              f"Statuses: {json.dumps(result['statuses'])}"]
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
