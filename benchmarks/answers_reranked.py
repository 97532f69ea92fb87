"""The answer evaluation (``arc-retrieval eval`` on an answer dataset) with the LLM reranker on,
the LLM stood in for by ``tests/openai_standin.py`` (no machine here reaches OpenAI): a judge that
scores each candidate by the share of the question's content words it holds. It shows that the
status carries whether or not an LLM reorders the list; it says nothing about a real model's
judgement.

    python benchmarks/answers_reranked.py --dataset ../shared/datasets/hoa-dev --out benchmarks/answers/hoa-dev-reranked
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.openai_standin import OpenAIStandin  # noqa: E402
from worker.config import Settings  # noqa: E402
from worker.embeddings import CachedEmbedder, build_embedder  # noqa: E402
from worker.evaluation.answer_harness import evaluate_answers, write_answer_report  # noqa: E402
from worker.evaluation.answers import load_answer_dataset  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "hoa-dev")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    dataset = load_answer_dataset(args.dataset)
    with OpenAIStandin() as llm:
        settings = Settings.from_env(reranker="llm", llm_api_key=llm.api_key, llm_base_url=llm.base_url,
                                     llm_model="gpt-4o-standin")
        embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
        settings.database.data_dir.mkdir(parents=True, exist_ok=True)
        results = evaluate_answers(dataset, settings=settings, embedder=embedder,
                                   data_dir=settings.database.data_dir.resolve(), progress=False)
    command = "python benchmarks/answers_reranked.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_answer_report(results, args.out, command=command)
    print((args.out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
