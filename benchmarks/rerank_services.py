"""What a rerank service costs the worker itself, per question, beside the LLM reranker's: the
sample corpus's questions through the real pipeline (embedded Postgres, local embeddings), with
each reranker talking to a local stand-in that answers at once (tests/rerank_standins.py for the
five services, tests/openai_standin.py for the LLM).

    .venv/bin/python benchmarks/rerank_services.py --out benchmarks/rerank_services

Per question: ``stage`` is the pipeline's own ``timings_ms.rerank`` (building the request, the
loopback HTTP round trip, reading the reply, ordering), ``own`` that minus the time the stand-in
spent inside its handler (from the first request's arrival to the last reply's end), so what is
left is the worker's part. The score cache is off (every question is scored afresh); the rerankers
are interleaved question by question so load drift hits them alike.

With ``--calibration`` it measures instead what a rerank service adds to the status calibration
of one knowledge-base version (worker/retrieve/calibration.py): the requests it sends the service
and the time the measurement takes with the service's scale and without it, the stand-in answering
at once and after a fixed delay standing for a service's inference and network time:

    .venv/bin/python benchmarks/rerank_services.py --calibration --out benchmarks/rerank_services
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from tests.openai_standin import OpenAIStandin  # noqa: E402
from tests.rerank_standins import RerankStandin  # noqa: E402
from worker.embeddings import CachedEmbedder, LocalEmbedder  # noqa: E402
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus  # noqa: E402
from worker.models import RetrievalRequest  # noqa: E402
from worker.retrieve.calibration import LocalCalibrations  # noqa: E402
from worker.retrieve.service_scale import SERVICE_REQUESTS_AT_ONCE  # noqa: E402
from worker.retrieve.pipeline import Retriever  # noqa: E402
from worker.retrieve.rerank import LLMReranker  # noqa: E402
from worker.retrieve.rerank_services import ServiceReranker  # noqa: E402
from worker.store.postgres_search import PostgresBackend  # noqa: E402
from worker.retrieve.search_cache import SearchCache  # noqa: E402
from worker.store.database import Database  # noqa: E402
from worker.store.embedded import EmbeddedPostgres  # noqa: E402

SERVICES = ["cohere", "jina", "voyage", "tei", "infinity"]
KEY = "bench-key-0123456789"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(percentile(values, 50), 2),
            "p95_ms": round(percentile(values, 95), 2), "mean_ms": round(sum(values) / len(values), 2)}


def questions() -> list[str]:
    path = ROOT / "worker" / "sample_corpus" / "questions.jsonl"
    return [json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/rerank_services"))
    parser.add_argument("--calibration", action="store_true", help="the status calibration's cost instead")
    parser.add_argument("--delays", default="0,0.05,0.2",
                        help="the stand-in's seconds per request (--calibration)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arc-rerank-bench-") as tmp:
        embedded = EmbeddedPostgres(Path(tmp) / "pg")
        url = embedded.start()
        try:
            if args.calibration:
                delays = [float(d) for d in args.delays.split(",")]
                write_calibration(calibration_cost(url, args.rounds, delays), args)
                return
            results = run(url, args.rounds)
        finally:
            embedded.stop()
    write(results, args)


def calibration_cost(url: str, rounds: int, delays: list[float]) -> dict[str, dict]:
    """Per service and stand-in delay: the status calibration of the sample corpus measured afresh
    ``rounds`` times (a store local to the run, so nothing is read back), with the service's scale
    and, for comparison, without a service."""
    embedder = CachedEmbedder(LocalEmbedder())
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    backend = PostgresBackend(db)

    def measure(reranker) -> float:
        retriever = Retriever(embedder=embedder, backend=backend, reranker=reranker, calibrate=True)
        retriever.calibrator.store = LocalCalibrations(backend)
        started = time.perf_counter()
        retriever.calibrate_now("default")
        elapsed = (time.perf_counter() - started) * 1000
        retriever.calibrator.stop()
        return elapsed

    measure(None)  # the embedding model loaded, the searches' plans cached
    alone = [measure(None) for _ in range(rounds)]
    results: dict[str, dict] = {"none": {"ms": summary(alone), "requests": 0}}
    for name in SERVICES:
        with RerankStandin(name, api_key=KEY) as standin:
            reranker = ServiceReranker(name, standin.url, api_key=KEY, model="bench-model", timeout=10)
            for delay in delays:
                times, requests = [], []
                for _ in range(rounds):
                    standin.reset(delay=delay)
                    times.append(measure(reranker))
                    requests.append(len(standin.calls))
                results[f"{name} {delay:g}"] = {"ms": summary(times), "requests": max(requests),
                                                "delay_s": delay}
            reranker.close()
    db.close()
    return results


def write_calibration(results: dict[str, dict], args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "calibration.json").write_text(json.dumps(results, indent=2) + "\n")
    load = os.getloadavg()[0]
    base = results["none"]["ms"]["p50_ms"]
    lines = [f"# A rerank service's part of the status calibration ({os.cpu_count()} cores, load average "
             f"{load:.1f} at the end, {args.rounds} measurements each)", "",
             f"    .venv/bin/python benchmarks/rerank_services.py --calibration --out {args.out} "
             f"--rounds {args.rounds} --delays {args.delays}", "",
             "One measurement of the sample corpus (6 documents, 39 chunks: 40 off-domain questions and",
             "one sentence from each chunk that has one asked back) through the real pipeline, embedded",
             "Postgres and local embeddings, the service a local stand-in answering after `delay` seconds",
             "(0: at once, so what is left is the worker's own cost; 0.05 and 0.2 stand for a service's",
             "inference and network time). The service gets one request per text, "
             f"{SERVICE_REQUESTS_AT_ONCE} in flight at once.", "",
             "| reranker | delay s | requests | p50 ms | p95 ms | added p50 ms |",
             "|---|---|---|---|---|---|",
             f"| none (first-stage scale only) | - | 0 | {base} | {results['none']['ms']['p95_ms']} | - |"]
    for name, row in results.items():
        if name == "none":
            continue
        ms = row["ms"]
        lines.append(f"| {name.split()[0]} | {row['delay_s']:g} | {row['requests']} | {ms['p50_ms']} | "
                     f"{ms['p95_ms']} | {round(ms['p50_ms'] - base, 1)} |")
    lines += ["", "A knowledge base of 120 chunks or more is asked 120 sentences: some 160 requests a",
              "measurement, once per version of a community's documents (at ingest, or at a first question",
              "finding none stored), and again only after a service failed while it was measured."]
    (args.out / "calibration.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def run(url: str, rounds: int) -> dict[str, dict]:
    embedder = CachedEmbedder(LocalEmbedder())
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    backend = PostgresBackend(db)
    standins = {name: RerankStandin(name, api_key=KEY).__enter__() for name in SERVICES}
    llm_standin = OpenAIStandin().__enter__()
    rerankers = {name: ServiceReranker(name, s.url, api_key=KEY, model="bench-model", timeout=10,
                                       cache_ttl=1e-6) for name, s in standins.items()}
    client = openai.OpenAI(api_key=llm_standin.api_key, base_url=llm_standin.base_url, max_retries=0)
    rerankers["llm"] = LLMReranker(client, "gpt-4o", timeout=10, cache_ttl=1e-6)
    servers = {**standins, "llm": llm_standin}
    retrievers = {name: Retriever(embedder=embedder, backend=backend, reranker=r, search_cache=SearchCache())
                  for name, r in rerankers.items()}
    asked = questions()
    stage: dict[str, list[float]] = {name: [] for name in retrievers}
    own: dict[str, list[float]] = {name: [] for name in retrievers}
    statuses: dict[str, dict[str, int]] = {name: {} for name in retrievers}
    for warm in asked:  # embeddings and searches cached, connections open: the timed runs measure the rerank
        for name, retriever in retrievers.items():
            retriever.answer(RetrievalRequest(query=warm, rerank=True))
    for _ in range(rounds):
        for question in asked:
            for name, retriever in retrievers.items():
                server = servers[name]
                server.reset()
                answer = retriever.answer(RetrievalRequest(query=question, rerank=True))
                assert answer.reranked, (name, answer.warnings)
                seen = server.requests if name == "llm" else server.calls
                inside = (max(s.end for s in seen) - min(s.start for s in seen)) * 1000 if seen else 0.0
                stage[name].append(answer.timings_ms["rerank"])
                own[name].append(answer.timings_ms["rerank"] - inside)
                statuses[name][answer.status] = statuses[name].get(answer.status, 0) + 1
    for retriever in retrievers.values():
        retriever.close()
    for server in servers.values():
        server.__exit__(None, None, None)
    db.close()
    return {name: {"stage": summary(stage[name]), "own": summary(own[name]), "statuses": statuses[name]}
            for name in retrievers}


def write(results: dict[str, dict], args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    load = os.getloadavg()[0]
    n = next(iter(results.values()))["stage"]["n"]
    lines = [f"# The rerank stage's cost to the worker, per question ({os.cpu_count()} cores, load average "
             f"{load:.1f} at the end, {n} questions each)", "",
             f"    .venv/bin/python benchmarks/rerank_services.py --out {args.out} --rounds {args.rounds}",
             "",
             "Stand-ins answer at once on loopback, so these are the worker's costs, not a service's: a",
             "real service adds its own inference time and the network. `stage` is `timings_ms.rerank`;",
             "`own` is that minus the time the stand-in spent in its handler. The LLM reranker sends the",
             "candidates (up to 40) as concurrent batches of at most 20 to the OpenAI stand-in; a service",
             "gets them in one request (TEI: 32).", "",
             "| reranker | stage p50 ms | stage p95 ms | own p50 ms | own p95 ms |", "|---|---|---|---|---|"]
    for name, row in results.items():
        lines.append(f"| {name} | {row['stage']['p50_ms']} | {row['stage']['p95_ms']} | "
                     f"{row['own']['p50_ms']} | {row['own']['p95_ms']} |")
    statuses = json.dumps({name: row["statuses"] for name, row in results.items()})
    lines += ["", f"Statuses (from the stand-ins' word-overlap scores: no measure of quality): {statuses}"]
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
