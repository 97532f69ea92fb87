"""Several communities in ONE database against one database each (sql/030, sql/functions/hybrid_search.sql).

Every community of an answer dataset is loaded twice on one embedded Postgres: alone in its own
database, and beside the others in a shared one under its own key. Every question of the
dataset, and ``generated`` more made from the documents themselves (a phrase of a random chunk,
asked of the chunk's community), goes through the webhook of both; the shared one is asked with
``community``. The two must agree within ``tolerance`` on evidence in context, evidence in
SOURCE 1 and status, and no answer from the shared database may carry a chunk of another
community. ``python -m worker.evaluation.community_harness DATASET`` prints the comparison as
JSON (benchmarks/communities/ holds a run).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings
from ..embeddings import CachedEmbedder
from ..ingest.ingestor import Ingestor, embedding_texts, manifest_documents
from ..ingest.manifest import load_manifest
from ..store.database import Database
from ..store.embedded import EmbeddedPostgres
from .answer_harness import VectorCache, _new_database, _webhook_client, ask_webhook
from .answers import AnswerDataset, Outcome, Question, load_answer_dataset, split_sources, summarise

TOLERANCE = 0.02
QUALITY_TIMEOUT_MS = 120_000
COMPARED = ("evidence_in_context", "evidence_in_source1")


@dataclass
class CommunityComparison:
    questions: int
    separate: dict
    shared: dict
    status_agreement: float
    foreign_chunks: int  # chunks of another community in any shared-database answer
    differences: dict[str, float] = field(default_factory=dict)

    @property
    def within_tolerance(self) -> bool:
        return (
            self.foreign_chunks == 0
            and all(abs(d) <= TOLERANCE for d in self.differences.values())
            and self.status_agreement >= 1 - TOLERANCE
        )

    def to_json(self) -> dict:
        return {
            "questions": self.questions,
            "separate": self.separate,
            "shared": self.shared,
            "differences": self.differences,
            "status_agreement": self.status_agreement,
            "foreign_chunks": self.foreign_chunks,
            "within_tolerance": self.within_tolerance,
            "tolerance": TOLERANCE,
        }


def generated_questions(dataset: AnswerDataset, count: int, seed: int = 34) -> list[Question]:
    """Questions made from the documents: 3 to 8 consecutive words of a random paragraph, asked
    of that paragraph's community, with those words as the evidence to find."""
    pick = random.Random(seed)
    paragraphs: list[tuple[str, str]] = []
    for community, folder in sorted(dataset.communities.items()):
        manifest = load_manifest(folder)
        for entry in manifest.documents:
            path = manifest.path_of(entry)
            if path.suffix.lower() not in (".md", ".txt"):
                continue
            for para in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
                words = re.findall(r"[A-Za-z][A-Za-z'-]+", para)
                if len(words) >= 12:
                    paragraphs.append((community, " ".join(words)))
    questions = []
    for n in range(count):
        community, text = pick.choice(paragraphs)
        words = text.split()
        size = pick.randint(3, 8)
        start = pick.randrange(0, len(words) - size)
        phrase = " ".join(words[start : start + size])
        questions.append(
            Question(id=f"gen-{n:04d}", community=community, question=phrase, kind="answerable", evidence=(phrase,))
        )
    return questions


def compare_communities(
    dataset: AnswerDataset, *, settings: Settings, embedder: CachedEmbedder, data_dir: Path, generated: int = 1000
) -> CommunityComparison:
    cache = VectorCache.of_passages(data_dir, embedder)
    questions = list(dataset.questions) + generated_questions(dataset, generated)
    workdir = Path(tempfile.mkdtemp(prefix="communities-", dir=data_dir))
    server = EmbeddedPostgres(workdir, runtime_dir=data_dir)
    opened: list[Database] = []
    try:
        server_url = server.start()
        # a comparison of answers, not of latency: no statement may time out on a busy machine
        shared = Database(_new_database(server_url, "shared"), statement_timeout_ms=QUALITY_TIMEOUT_MS)
        opened.append(shared)
        shared.migrate(embedder.dim)
        separate: dict[str, object] = {}
        owned: dict[str, set[str]] = {}  # community -> its document ids
        for community, folder in dataset.communities.items():
            manifest = load_manifest(folder)
            own = Database(_new_database(server_url, community), statement_timeout_ms=QUALITY_TIMEOUT_MS)
            opened.append(own)
            own.migrate(embedder.dim)
            for db in (own, shared):
                ingestor = Ingestor(db, embedder)
                documents = manifest_documents(ingestor, manifest)
                ingestor.write(documents, cache.embed(embedding_texts(documents)), community=community)
            cache.save()
            owned[community] = {e.document_id for e in manifest.documents}
            separate[community], _ = _webhook_client(settings, own, embedder)
            print(f"loaded {community} twice", file=sys.stderr, flush=True)
        shared_client, _ = _webhook_client(settings, shared, embedder)
        alone: list[Outcome] = []
        together: list[Outcome] = []
        foreign = 0
        for n, question in enumerate(questions):
            if n % 100 == 0:
                print(f"{n}/{len(questions)} questions", file=sys.stderr, flush=True)
            alone.append(_ask(separate[question.community], settings, question, None)[0])
            outcome, sources = _ask(shared_client, settings, question, question.community)
            together.append(outcome)
            foreign += sum(1 for d in sources if d not in owned[question.community])
        s_alone, s_together = summarise(alone), summarise(together)
        agreement = sum(a.status == b.status for a, b in zip(alone, together, strict=True)) / len(questions)
        return CommunityComparison(
            questions=len(questions),
            separate=s_alone,
            shared=s_together,
            status_agreement=round(agreement, 4),
            foreign_chunks=foreign,
            differences={k: round((s_together[k] or 0) - (s_alone[k] or 0), 4) for k in COMPARED},
        )
    finally:
        for db in opened:
            db.close()
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _ask(client, settings: Settings, question: Question, community: str | None) -> tuple[Outcome, list[str]]:
    answer, latency = ask_webhook(client, settings, question, **({"community": community} if community else {}))
    outcome = Outcome(
        question=question,
        context=answer["context"],
        sources=split_sources(answer["context"]),
        tokens=answer["context_tokens"],
        latency_ms=latency,
        status=answer["status"],
        best_score=answer["best_score"],
    )
    return outcome, [c["document_id"] for c in answer["chunks"]]


def main(argv: list[str]) -> int:
    from ..embeddings import build_embedder

    folder = Path(argv[0])
    generated = int(argv[1]) if len(argv) > 1 else 1000
    settings = Settings.from_env()
    data_dir = Path(tempfile.mkdtemp(prefix="arc-communities-"))
    try:
        result = compare_communities(
            load_answer_dataset(folder),
            settings=settings,
            embedder=CachedEmbedder(build_embedder(settings)),
            data_dir=data_dir,
            generated=generated,
        )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    print(json.dumps(result.to_json(), indent=2))
    return 0 if result.within_tolerance else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
