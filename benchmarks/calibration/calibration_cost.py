"""What the stored status calibration costs, and where: at ingest, never at question time.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/calibration/calibration_cost.py \
        /work/shared/datasets/hoa-dev --communities 100 --out benchmarks/calibration/results.md

The status calibration (worker/retrieve/calibration.py) is measured after every write to the
knowledge base, for the communities the write changed, and stored (sql/036); every question then
reads it. Two knowledge bases, in the embedded Postgres, with the local embedding model:

* hoa-dev: each community loaded from its manifest, then measured (what `arc-retrieval ingest`
  and the ingest webhook do after the write), each community in a database of its own and all
  of them in one;
* a knowledge base of ``--communities`` communities: the first hoa-dev community loaded once,
  its chunks copied under other community names in SQL (same texts, same vectors; the triggers
  keep each community's BM25 statistics), every community measured once (what a deploy of a new
  embedding model costs, spread over the processes that claim them), then one document ingested
  into one community: only that community is measured again.

For each: the load's time, the measurement's time after it, and what a question pays to read the
stored calibration (the median of 200 reads of one community's row with its current version).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from worker.config import Settings
from worker.embeddings import CachedEmbedder, build_embedder
from worker.evaluation.answers import load_answer_dataset
from worker.ingest.ingestor import Ingestor, ingest_manifest
from worker.ingest.readers import parse_text
from worker.models import DocumentFields
from worker.retrieve.pipeline import Retriever
from worker.store.postgres_search import PostgresBackend
from worker.retrieve.search_cache import SearchCache
from worker.store.calibrations import PostgresCalibrations
from worker.store.database import Database
from worker.store.embedded import EmbeddedPostgres

COPY_COLUMNS = ("document_id, document_name, document_type, section_path, page_number, chunk_index, "
                "is_binding, superseded_by, content, token_count, metadata, embedding")


def new_database(server_url: str, name: str, dim: int) -> Database:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    base, _, query = server_url.partition("?")
    db = Database(base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else ""),
                  statement_timeout_ms=600_000)
    db.migrate(dim)
    return db


def retriever(db: Database, embedder) -> Retriever:
    return Retriever(embedder=embedder, backend=PostgresBackend(db), reranker=None,
                     search_cache=SearchCache(), calibrate=True)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def read_ms(db: Database, community: str, model: str, reads: int = 200) -> float:
    store = PostgresCalibrations(db)
    times = []
    for _ in range(reads):
        started = time.perf_counter()
        store.read(community, model)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def chunks(db: Database, community: str) -> int:
    with db.connect() as conn:
        return conn.execute("select count(*) from knowledge_chunks where community = %s",
                            (community,)).fetchone()[0]


def hoa_dev(server_url: str, dataset_dir: Path, embedder) -> list[str]:
    dataset = load_answer_dataset(dataset_dir)
    rows = ["| knowledge base | chunks | load s | calibration after it s | a question's read of it ms |",
            "|---|---|---|---|---|"]
    together = new_database(server_url, "together", embedder.dim)
    for name, folder in dataset.communities.items():
        for db, label in ((new_database(server_url, f"alone_{name.replace('-', '_')}", embedder.dim), name),
                          (together, f"{name}, beside the others")):
            ingestor = Ingestor(db, embedder)
            load = timed(lambda: ingest_manifest(ingestor, folder, community=name))
            r = retriever(db, embedder)
            measure = timed(r.knowledge_base_changed)
            rows.append(f"| {label} | {chunks(db, name)} | {load:.1f} | {measure:.1f} | "
                        f"{read_ms(db, name, embedder.model):.2f} |")
            r.close()
            if db is not together:
                db.close()
        print(rows[-1], file=sys.stderr)
    together.close()
    return rows


def many_communities(server_url: str, dataset_dir: Path, embedder, count: int, first: str) -> list[str]:
    dataset = load_answer_dataset(dataset_dir)
    db = new_database(server_url, "many", embedder.dim)
    ingest_manifest(Ingestor(db, embedder), dataset.communities[first], community="c000")
    copy = timed(lambda: _copy(db, count))
    r = retriever(db, embedder)
    # One community measured; the copies hold the same chunks (the same sample, the same BM25
    # statistics), so their calibration is the same row at their own version.
    one = timed(lambda: r.calibrate_now("c000"))
    with db.connect() as conn:
        conn.execute("insert into status_calibrations (community, embedding_model, kb_version, floor, match, "
                     "near_miss, questions, too_small, measured_ms, measured_at) "
                     "select k.community, s.embedding_model, k.version, s.floor, s.match, s.near_miss, "
                     "s.questions, s.too_small, s.measured_ms, now() "
                     "from knowledge_communities k, status_calibrations s "
                     "where s.community = 'c000' and k.community <> 'c000'")
        conn.commit()
    stale_before = len(PostgresCalibrations(db).stale(embedder.model))
    target = f"c{count // 2:03d}"
    ingestor = Ingestor(db, embedder)
    document = ingestor.prepare_text(parse_text("Hammocks must be taken down between November and March."),
                                     DocumentFields(document_id="hammocks", name="Hammock rule", document_type="other"))
    load = timed(lambda: ingestor.write([document], community=target))
    stale_after = [s.community for s in PostgresCalibrations(db).stale(embedder.model)]
    measure = timed(r.knowledge_base_changed)
    read = read_ms(db, target, embedder.model)
    each = chunks(db, "c000")
    r.close()
    db.close()
    return [
        f"{count} communities of {each} chunks each (copies of {first}'s; copied in {copy:.0f} s).", "",
        "| step | time |",
        "|---|---|",
        f"| one community measured (a new embedding model costs this per community, spread over the "
        f"processes that claim them) | {one:.1f} s |",
        f"| communities stale before the ingest | {stale_before} |",
        f"| one document ingested into {target} | {load:.2f} s |",
        f"| communities then stale | {len(stale_after)} ({', '.join(stale_after)}) |",
        f"| calibration after the ingest (only {target}) | {measure:.1f} s |",
        f"| a question's read of the stored calibration | {read:.2f} ms (median of 200) |",
    ]


def _copy(db: Database, count: int) -> None:
    with db.connect() as conn:
        for i in range(1, count):
            conn.execute(f"insert into knowledge_chunks (community, {COPY_COLUMNS}) "
                         f"select %s, {COPY_COLUMNS} from knowledge_chunks where community = 'c000'",
                         (f"c{i:03d}",))
            conn.commit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--communities", type=int, default=100)
    parser.add_argument("--copy", default="timbers", help="The hoa-dev community copied to make the many.")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    settings = Settings.from_env()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    with tempfile.TemporaryDirectory(prefix="arc-calibration-cost-") as tmp:
        server = EmbeddedPostgres(Path(tmp))
        url = server.start()
        try:
            first = hoa_dev(url, args.dataset, embedder)
            many = many_communities(url, args.dataset, embedder, args.communities, args.copy)
        finally:
            server.stop()
    command = ("PYTHONPATH=$PWD .venv/bin/python benchmarks/calibration/calibration_cost.py "
               f"{args.dataset} --communities {args.communities} --copy {args.copy} --out {args.out}")
    text = "\n".join([
        "# Status calibration: its cost at ingest, none at question time", "",
        f"Command: `{command}`", "",
        f"Embedding model {embedder.model}, embedded Postgres, {settings.status.calibration_questions} sentences "
        "asked back plus the off-domain questions per measurement.", "",
        "## hoa-dev", "", *first, "",
        f"## {args.communities} communities", "", *many, ""])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
