"""Latency per question with a network between the worker and the database.

Starts a throwaway PostgreSQL 15 + pgvector cluster on a loopback port (Supabase's combination,
scripts/install-postgres15.sh), loads the sample corpus, and puts a small TCP proxy in front of
it that holds every packet from the worker for ``--delay-ms`` (one delay per round trip). Then,
in one run, for the previous release (a checkout given with ``--prev``) and for this tree, each
in its own process: every sample question asked once to warm the embedding cache, then asked
``--rounds`` times through the knowledge service with the search cache off (so each answer
searches), directly and through the proxy; then the same through Supabase's RPC route, the
PostgREST stand-in of the tests (``tests/postgrest_standin.py``) in front of the cluster, the
proxy in front of the stand-in. Each ``--token-budget`` asks every question again with that
budget (a caller-sized context, its passages carrying the sentences around them). Reports p50/p95
of the whole answer, the worker's own time (total less embedding and search) and the database
calls where the answer counts them.

    git worktree add --detach /tmp/prev 8afa120
    git worktree add --detach /tmp/prev-26e1f58 26e1f58
    .venv/bin/python benchmarks/round_trip.py --prev /tmp/prev --prev /tmp/prev-26e1f58 --token-budget 2000 --out benchmarks/round_trip

Needs PostgreSQL 15 with pgvector 0.8.0 installed at /usr/lib/postgresql/15 (run as root, it
starts the cluster as the ``postgres`` user).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PG15_BIN = Path("/usr/lib/postgresql/15/bin")

# Run in a child process with PYTHONPATH set to the code to measure.
MEASURE = r"""
import json, statistics, sys, time
from worker.config import Settings
from worker.models import RetrievalRequest
from worker.runtime import open_runtime

questions = json.loads(sys.argv[1]); rounds = int(sys.argv[2]); extra = json.loads(sys.argv[3])
runtime = open_runtime(Settings.from_env())
try:  # the knowledge service, as every door calls it; before it existed, the retriever the app built
    from worker.service.knowledge import KnowledgeService
except ImportError:
    from worker.serve.app import build_retriever
    knowledge = build_retriever(runtime)
    def ask(request):
        return knowledge.answer(request)
else:
    knowledge = KnowledgeService(runtime)
    try:
        from worker.service.caller import LOCAL
    except ImportError:
        def ask(request):
            return knowledge.ask(request)
    else:
        def ask(request):
            return knowledge.ask(request, caller=LOCAL)
for q in questions:
    ask(RetrievalRequest(query=q, **extra))
totals, own, calls, wall = [], [], [], []
for _ in range(rounds):
    for q in questions:
        start = time.perf_counter()
        answer = ask(RetrievalRequest(query=q, **extra))
        wall.append((time.perf_counter() - start) * 1000)
        t = answer.timings_ms
        totals.append(t["total"])
        own.append(t["total"] - t.get("embed", 0.0) - t.get("search", 0.0))
        if "database_calls" in t:
            calls.append(t["database_calls"])
knowledge.close()
runtime.close()
print(json.dumps({"wall": wall, "total": totals, "own": own, "calls": calls}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="arc-round-trip-"))
        self.port = free_port()
        self.as_postgres: list[str] = []
        sock = self.base / "sock"
        sock.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
            shutil.chown(sock, "postgres")
            self.as_postgres = ["runuser", "-u", "postgres", "--"]
        data = self.base / "data"
        subprocess.run([*self.as_postgres, str(PG15_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U",
                        "postgres", "--no-sync"], check=True, capture_output=True)
        subprocess.run([*self.as_postgres, str(PG15_BIN / "pg_ctl"), "-D", str(data), "-l", str(self.base / "log"),
                        "-w", "-o", f"-p {self.port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                       check=True, capture_output=True)

    def stop(self) -> None:
        subprocess.run([*self.as_postgres, str(PG15_BIN / "pg_ctl"), "-D", str(self.base / "data"), "-m", "fast",
                        "-w", "stop"], capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)


class DelayProxy:
    """Forwards TCP to ``target``; what the client sends reaches the server ``delay`` seconds later
    (in order), so every request-reply round trip costs the delay once."""

    def __init__(self, target: int, delay: float):
        self.target, self.delay, self.port = target, delay, free_port()
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result()

    async def _serve(self) -> None:
        await asyncio.start_server(self._client, "127.0.0.1", self.port)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def receive() -> None:
            while data := await reader.read(65536):
                queue.put_nowait((time.monotonic() + self.delay, data))
            queue.put_nowait((0.0, b""))

        async def send_delayed() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    up_writer.close()
                    return
                await asyncio.sleep(max(due - time.monotonic(), 0))
                up_writer.write(data)
                await up_writer.drain()

        async def back() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()

        await asyncio.gather(receive(), send_delayed(), back(), return_exceptions=True)


def run_cli(code: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "-m", "worker.cli", *args], cwd=code, env=env, check=True,
                   capture_output=True)


def measure(code: Path, url: str, data_dir: Path, questions: list[str], rounds: int,
            supabase: tuple[str, str] | None = None, extra: dict | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code), "DATABASE_URL": url, "ARC_DATA_DIR": str(data_dir),
           "ARC_SEARCH_CACHE_SECONDS": "0", "ARC_LOG_LEVEL": "warning"}
    env.pop("OPENAI_API_KEY", None)
    if supabase is not None:
        env["SUPABASE_URL"], env["SUPABASE_KEY"] = supabase
    done = subprocess.run([sys.executable, "-c", MEASURE, json.dumps(questions), str(rounds), json.dumps(extra or {})],
                          cwd=code, env=env,
                          check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{code}: the measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _commit(code: Path) -> str:
    """The short commit a checkout is at."""
    done = subprocess.run(["git", "-C", str(code), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or str(code)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prev", type=Path, action="append", required=True,
                        help="a checkout of a previous release (repeatable)")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "round_trip")
    parser.add_argument("--token-budget", type=int, action="append", default=[],
                        help="also ask every question with this token_budget (repeatable): a caller-sized "
                             "context, whose passages carry the sentences around them")
    args = parser.parse_args()
    questions = [json.loads(line)["question"]
                 for line in (ROOT / "worker" / "sample_corpus" / "questions.jsonl").read_text().splitlines() if line]
    cluster = Cluster()
    codes = [(_commit(prev), prev.resolve()) for prev in args.prev] + [("this", ROOT)]
    delayed = f"+{args.delay_ms:g} ms per round trip"
    requests = [("default", {})] + [(f"token_budget {n}", {"token_budget": n}) for n in args.token_budget]
    rows = []
    sys.path.insert(0, str(ROOT))
    from tests.postgrest_standin import PostgrestStandin

    try:
        proxy = DelayProxy(cluster.port, args.delay_ms / 1000)
        runs = []
        # Each code in a database of its own, made and loaded by that code (their SQL functions differ).
        for n, (label, code) in enumerate(codes):
            name = f"arc_{n}"
            with psycopg.connect(f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres", autocommit=True) as conn:
                conn.execute(f"create database {name}")
            direct = f"postgresql://postgres@127.0.0.1:{cluster.port}/{name}"
            work = Path(tempfile.mkdtemp(prefix="arc-round-trip-data-"))
            env = {**os.environ, "PYTHONPATH": str(code), "DATABASE_URL": direct, "ARC_DATA_DIR": str(work)}
            env.pop("OPENAI_API_KEY", None)
            run_cli(code, env, "ingest", "--sample")
            runs.append((label, code, name, direct, work))
        for backend in ("Postgres", "Supabase RPC"):
            for label, code, name, direct, work in runs:
                proxied = f"postgresql://postgres@127.0.0.1:{proxy.port}/{name}"
                if backend == "Postgres":
                    networks = [("loopback", direct, None), (delayed, proxied, None)]
                    standin = None
                else:
                    standin = PostgrestStandin(direct)
                    standin.__enter__()
                    rpc_proxy = DelayProxy(standin.port, args.delay_ms / 1000)
                    networks = [("loopback", direct, (standin.url, standin.api_key)),
                                (delayed, direct, (f"http://127.0.0.1:{rpc_proxy.port}", standin.api_key))]
                for network, url, supabase in networks:
                    for request, extra in requests:
                        found = measure(code, url, work, questions, args.rounds, supabase, extra)
                        rows.append((backend, label, network, request, found))
                        print(backend, label, network, request, pct(found["wall"], 0.5), file=sys.stderr)
                if standin is not None:
                    standin.__exit__(None, None, None)
    finally:
        cluster.stop()
    lines = [
        "# Round trips: latency per question with a network before the database",
        "",
        "Command: `.venv/bin/python benchmarks/round_trip.py "
        + " ".join(f"--prev {p}" for p in args.prev)
        + f" --delay-ms {args.delay_ms:g} --rounds {args.rounds}"
        + "".join(f" --token-budget {n}" for n in args.token_budget)
        + "`",
        "",
        f"PostgreSQL 15 + pgvector 0.8.0 on loopback, sample corpus, local model, search cache off (each answer "
        f"searches), embeddings cached; {len(questions)} questions x {args.rounds} rounds, sequential. The proxy "
        f"holds what the worker sends for {args.delay_ms:g} ms (through Supabase's RPC route: what it sends to the "
        f"PostgREST stand-in, which opens a connection per request as PostgREST's pool would not, the same for "
        f"every code). Previous releases: " + ", ".join(f"`{label}`" for label, _ in codes[:-1]) + ".",
        "",
        "| backend | code | network | request | p50 ms | p95 ms | worker's own p50 ms | database calls "
        "(median, most) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for backend, label, network, request, found in rows:
        calls = f"{statistics.median(found['calls']):g}, {max(found['calls']):g}" if found["calls"] else "-"
        lines.append(f"| {backend} | {label} | {network} | {request} | {pct(found['wall'], 0.5)} | "
                     f"{pct(found['wall'], 0.95)} | {pct(found['own'], 0.5)} | {calls} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
