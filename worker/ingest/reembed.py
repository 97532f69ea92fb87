"""``arc-retrieval reembed``: every chunk embedded again with the configured model.

Switching models (all-MiniLM-L6-v2 to multilingual-e5-small, or to OpenAI's) leaves the stored
vectors unreadable to the new one, and the worker refuses to mix them (worker/store/model_record.py).
This reads every chunk back, embeds the same text ingestion embedded (the document's name and
section path above the content) with the new model, and writes the vectors and the model's name
in one transaction under the knowledge base's write lock: searches see the old vectors until it
commits, then the new ones. The chunks themselves are kept, cut for the old model; re-ingest the
documents for chunks cut to the new model's input length.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from ..config import PROGRESS_LOG_SECONDS
from ..embeddings import Embedder
from ..logs import progress as progress_of
from ..store import model_record, sqlfiles
from ..store.database import Database
from .chunking import Chunk

log = logging.getLogger("arc.reembed")

WRITE_BATCH = 500  # vectors per UPDATE statement, each well within the statement timeout


@dataclass(frozen=True)
class ReembedReport:
    chunks: int
    model: str
    previous: str | None
    seconds: float


def reembed(db: Database, embedder: Embedder, *, progress: bool = False, batch: int = 64) -> ReembedReport:
    started = time.perf_counter()
    db.check_dimension(embedder.model, embedder.dim)
    with db.connect() as conn:
        found = model_record.recorded(conn)
        rows = conn.execute(sqlfiles.query("chunks_to_embed")).fetchall()
    ids = [row[0] for row in rows]
    vectors = _embed(embedder, [_text(*row[1:]) for row in rows], progress, batch)
    with db.connect() as conn, conn.transaction():
        db.lock_writes(conn)
        # Chunks ingested while the others were being embedded (by a worker still on the old
        # model) are embedded here, under the lock.
        late = sorted({row[0] for row in conn.execute(sqlfiles.query("chunk_ids"))} - set(ids))
        if late:
            extra = [r for r in conn.execute(sqlfiles.query("chunks_to_embed")) if r[0] in set(late)]
            ids += [r[0] for r in extra]
            vectors = np.vstack([vectors, _embed(embedder, [_text(*r[1:]) for r in extra], False, batch)])
        for start in range(0, len(ids), WRITE_BATCH):
            conn.execute(
                sqlfiles.query("set_embeddings"),
                {
                    "ids": ids[start : start + WRITE_BATCH],
                    "embeddings": [_literal(v) for v in vectors[start : start + WRITE_BATCH]],
                },
            )
        model_record.record(conn, embedder.model, embedder.dim)
    report = ReembedReport(
        len(ids), embedder.model, found.model if found else None, round(time.perf_counter() - started, 1)
    )
    log.info(
        "re-embedded the knowledge base",
        extra={
            "chunks": report.chunks,
            "model": report.model,
            "previous": report.previous,
            "seconds": report.seconds,
        },
    )
    return report


def _text(document_name: str, section_path: str, content: str) -> str:
    return Chunk(0, section_path, content, None).embedding_text(document_name)


def _embed(embedder: Embedder, texts: list[str], progress: bool, batch: int) -> np.ndarray:
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    with progress_of(
        len(texts), "embedding", "chunk", terminal=progress, logger=log, every=PROGRESS_LOG_SECONDS
    ) as bar:
        for start in range(0, len(texts), batch):
            out[start : start + batch] = embedder.embed(texts[start : start + batch])
            bar.update(min(batch, len(texts) - start))
    return out


def _literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
