"""Reading a BEIR-layout folder: corpus.jsonl, queries.jsonl and a qrels TSV."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .metrics import Qrels


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus_path: Path
    queries: dict[str, str]
    qrels: Qrels

    def corpus_hash(self) -> str:
        digest = hashlib.sha256()
        with self.corpus_path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()[:16]


def load_dataset(folder: Path, qrels_file: Path | None = None, limit: int | None = None) -> BeirDataset:
    folder = Path(folder)
    if qrels_file is None:
        candidates = sorted((folder / "qrels").glob("*.tsv"))
        if not candidates:
            raise FileNotFoundError(f"no qrels/*.tsv in {folder}")
        qrels_file = candidates[0]
    qrels: dict[str, dict[str, int]] = {}
    with Path(qrels_file).open(newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader)  # header: query-id corpus-id score
        for row in reader:
            if len(row) >= 3:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    queries: dict[str, str] = {}
    with (folder / "queries.jsonl").open() as fh:
        for line in fh:
            item = json.loads(line)
            if str(item["_id"]) in qrels:
                queries[str(item["_id"])] = item["text"]
    if limit is not None:
        keep = sorted(queries)[:limit]
        queries = {q: queries[q] for q in keep}
        qrels = {q: qrels[q] for q in keep}
    return BeirDataset(folder.name, folder / "corpus.jsonl", queries, {q: qrels[q] for q in queries})
