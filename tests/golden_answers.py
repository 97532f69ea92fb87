"""The webhook's answers to the sample corpus's questions, kept as a golden file.

``tests/test_golden_answers.py`` asks the same requests through the real app and compares each
answer, key order and every float included (at 12 significant digits), with what is stored in
``tests/data/golden_webhook_answers.json``. Only what differs from run to run is left out: the
timings and the request id.

Regenerate (after a change that is meant to change answers, such as the citation headers)::

    .venv/bin/python -m tests.golden_answers

It starts its own embedded Postgres in a temporary folder, loads the sample corpus, asks every
request below through the Flask app built as the tests build it, and rewrites the file.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worker.ingest.ingestor import SAMPLE_DIR

GOLDEN = Path(__file__).parent / "data" / "golden_webhook_answers.json"
ROUTE = "/webhook/arc-retrieval"
VARYING = ("timings_ms", "request_id")

# Options that take other paths through the pipeline, asked with a few of the questions.
VARIANTS: tuple[dict[str, Any], ...] = (
    {"top_k": 3},
    {"token_budget": 1500},
    {"top_k": 12, "token_budget": 2500},
    {"min_relevance": 0.4},
    {"weights": {"vector": 0.2, "fts": 0.8}},
    {"fusion": "rrf"},
    {"document_types": ["ccr"]},
    {"binding_only": True, "include_superseded": True},
    {"candidates": 10},
    {"rerank": True},
)


def questions() -> list[str]:
    lines = (SAMPLE_DIR / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


def requests() -> Iterator[dict[str, Any]]:
    """Every question plainly, then each variant with every fifth question, then n8n's chat shape."""
    asked = questions()
    for question in asked:
        yield {"query": question}
    for variant in VARIANTS:
        for question in asked[::5]:
            yield {"query": question, **variant}
    yield {"chatInput": asked[0], "sessionId": "golden"}


def stripped(body: bytes) -> dict[str, Any]:
    """The answer as sent, without what varies from run to run."""
    answer = json.loads(body)
    for key in VARYING:
        answer.pop(key, None)
    return answer


def answers(client) -> list[dict[str, Any]]:
    found = []
    for request in requests():
        response = client.post(ROUTE, json=request)
        found.append({"request": request, "status_code": response.status_code, "answer": stripped(response.data)})
    return found


def dumps(found: list[dict[str, Any]]) -> str:
    return json.dumps(found, indent=1, ensure_ascii=False) + "\n"


SIGNIFICANT = 12  # a score's digits past these move with the database's order of summation, run to run


def settled(value: Any) -> Any:
    """``value`` with every float at :data:`SIGNIFICANT` digits: the answers' scores are sums the
    database adds in the order of its plan, and their last bits differ between two loads of the
    same corpus; what the pipeline decides from them does not."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {key: settled(item) for key, item in value.items()}
    if isinstance(value, list):
        return [settled(item) for item in value]
    return value


def main() -> None:
    from worker.config import Settings
    from worker.embeddings import CachedEmbedder, LocalEmbedder
    from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
    from worker.runtime import Runtime
    from worker.serve.app import create_app
    from worker.store.database import Database
    from worker.store.embedded import EmbeddedPostgres

    with tempfile.TemporaryDirectory(prefix="arc-golden-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pg")
        url = server.start()
        db = Database(url)
        try:
            embedder = CachedEmbedder(LocalEmbedder())
            db.migrate(embedder.dim)
            ingest_sample_corpus(Ingestor(db, embedder))
            settings = Settings.from_env({}, data_dir=Path(tmp) / "data", database_url=url, rate_limit=0)
            app = create_app(runtime=Runtime(settings, db, embedder))
            GOLDEN.write_text(dumps(answers(app.test_client())), encoding="utf-8")
        finally:
            db.close()
            server.stop()
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    main()
