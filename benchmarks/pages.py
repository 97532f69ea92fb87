"""How fast the keeper's documents page renders with a large knowledge base.

    .venv/bin/python benchmarks/pages.py --documents 1000 --out benchmarks/pages

Loads N small documents (three chunks each, random unit vectors: only the listing is measured)
into a fresh embedded Postgres, signs in, then times GET /documents (first page and a middle
page) and GET / through Flask in-process, 50 times each.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from worker.config import Settings
from worker.embeddings import CachedEmbedder, LocalEmbedder
from worker.ingest.ingestor import Ingestor
from worker.ingest.readers import parse_text
from worker.models import DocumentFields
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.store.database import Database
from worker.store.embedded import EmbeddedPostgres

TOKEN = "benchmark-admin-token-0123456789"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/pages"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arc-pages-bench-") as tmp:
        embedded = EmbeddedPostgres(Path(tmp) / "pg")
        url = embedded.start()
        try:
            rows = run(url, Path(tmp), args)
        finally:
            embedded.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = ["# The keeper's pages with a large knowledge base", "",
             f"{args.documents:,} documents, {args.runs} renders each, Flask in-process (no network), this 2-core machine.",
             "", f"Command: `.venv/bin/python benchmarks/pages.py --documents {args.documents} --out {args.out}`", "",
             "| page | p50 ms | p95 ms | bytes |", "|---|---|---|---|"]
    lines += [f"| `{r['page']}` | {r['p50_ms']} | {r['p95_ms']} | {r['bytes']:,} |" for r in rows]
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def run(url: str, tmp: Path, args: argparse.Namespace) -> list[dict]:
    embedder = CachedEmbedder(LocalEmbedder())
    db = Database(url, statement_timeout_ms=600_000)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    documents = [ingestor.prepare_text(parse_text(f"Rule {i}.\n\nFences may be {i % 7 + 3} feet tall.\n\n"
                                                  f"Sheds need approval number {i}."),
                                       DocumentFields(document_id=f"doc-{i:04d}", name=f"Document {i}",
                                                      document_type="other"))
                 for i in range(args.documents)]
    count = sum(len(d.chunks) for d in documents)
    vectors = np.random.default_rng(7).standard_normal((count, embedder.dim)).astype(np.float32)
    ingestor.write(documents, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    settings = Settings.from_env({}, data_dir=tmp / "data", database_url=url, api_token=TOKEN, ingest_token=TOKEN, rate_limit=0)
    client = create_app(runtime=Runtime(settings, db, embedder)).test_client()
    page = client.get("/login").get_data(as_text=True)
    assert "csrf_token" in page, page[:500]
    client.post("/login", data={"token": TOKEN, "csrf_token": re.search(r'name="csrf_token" value="([^"]+)"',
                                                                         page).group(1)})
    rows = []
    for path in ("/documents", f"/documents?page={max(1, args.documents // 100)}", "/"):
        times, size = [], 0
        for _ in range(args.runs):
            started = time.perf_counter()
            response = client.get(path)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.status_code
            size = len(response.data)
        times.sort()
        rows.append({"page": path, "p50_ms": round(statistics.median(times), 1),
                     "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1), "bytes": size})
    db.close()
    return rows


if __name__ == "__main__":
    main()
