"""Vocabulary bridges learnt from the knowledge base, measured on hoa-dev (not shipped).

A bridge adds, for a question's content words, words the knowledge base itself uses to the
full-text leg's expansion (beside the hand list of worker/retrieve/vocabulary.py, or instead of
it with ``--hand 0``). Everything it reads is learnt when a community is loaded, from that
community's chunks alone:

* ``--source words``: every distinct word of the chunks (3+ letters, not a stopword), embedded
  once with the local model; a question word's neighbours are the nearest of them.
* ``--source headings``: only the words of the chunks' section headings (what a section is
  about: "Leasing", "Assessments", "Architectural Control").
* ``--rare N``: only question words held by at most N chunks (by stem) get neighbours; a word
  the documents use often is matched by the full-text leg already.
* ``--cooccur 1``: a neighbour is kept only when some chunk holds it together with another of
  the question's content words (by stem), so that it is a word of the question's subject here.
* ``--context C``: a neighbour is kept only at cosine C or more to the whole question (its
  vector, which the vector leg computes anyway), so that it is near what the question asks.
* ``--status-out 1``: the bridge reorders the candidates, and the status reads the relevance of
  the same question searched without the bridge (two searches per question).

The pipeline is patched here, so the whole answer harness runs as ``arc-retrieval eval`` does
(the status calibration's own searches run without the bridge); OUT gets its report and, per
community, each question's added words.

    ARC_STATEMENT_TIMEOUT_MS=120000 ARC_DATA_DIR=DATA python benchmarks/vocabulary_bridge.py OUT \
        [--threshold 0.6] [--topn 2] [--hand 1] [--bridge 1] [--source words] [--rare -1] \
        [--cooccur 0] [--context -1] [--status-out 0]
"""

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from worker.config import Settings
from worker.embeddings import CachedEmbedder, build_embedder
from worker.evaluation import answer_harness as H
from worker.evaluation.answers import load_answer_dataset
from worker.retrieve import first_stage as F
from worker.retrieve import pipeline as P
from worker.retrieve.preprocess import STOPWORDS as QUESTION_STOPWORDS
from worker.retrieve.vocabulary import expand as hand_expand

parser = argparse.ArgumentParser()
parser.add_argument("out", type=Path)
parser.add_argument("--threshold", type=float, default=0.6)
parser.add_argument("--topn", type=int, default=2)
parser.add_argument("--hand", type=int, default=1)
parser.add_argument("--bridge", type=int, default=1)
parser.add_argument("--source", choices=["words", "headings"], default="words")
parser.add_argument("--rare", type=int, default=-1, help="neighbours only for words in at most N chunks (-1: all)")
parser.add_argument("--cooccur", type=int, default=0)
parser.add_argument("--status-out", type=int, default=0)
parser.add_argument("--context", type=float, default=-1.0, help="least cosine to the question")
parser.add_argument("--dataset", type=Path, default=Path("/work/shared/datasets/hoa-dev"))
args = parser.parse_args()

STOP = set(STOPWORDS_EN) | set(QUESTION_STOPWORDS)
STEM = Stemmer.Stemmer("english")
WORD = re.compile(r"[a-z]{3,}")
STATE: dict = {"active": False}
settings = Settings.from_env()
embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)


def stem(word: str) -> str:
    return STEM.stemWord(word)


orig_each = H.each_community


def each(*a, **k):
    for loaded in orig_each(*a, **k):
        chunks = [c for d in loaded.documents for c in d.chunks]
        chunk_stems = [{stem(w) for w in WORD.findall(c.content.lower()) if w not in STOP} for c in chunks]
        chunk_frequency: dict[str, int] = {}
        for stems in chunk_stems:
            for s in stems:
                chunk_frequency[s] = chunk_frequency.get(s, 0) + 1
        if args.source == "headings":
            text = " ".join(c.section_path for c in chunks).lower()
        else:
            text = " ".join(c.content for c in chunks).lower()
        words = sorted({w for w in WORD.findall(text) if w not in STOP})
        t = time.time()
        matrix = embedder.embed(words) if words else np.zeros((0, embedder.dim))
        print(loaded.community, len(words), "words embedded in", round(time.time() - t, 1), "s", file=sys.stderr)
        STATE.update(words=words, m=matrix, chunk_stems=chunk_stems, frequency=chunk_frequency)
        STATE["log"] = open(args.out / f"bridge-{loaded.community}.txt", "w")  # noqa: SIM115 (open for the run)
        yield loaded


def bridge(question: str) -> list[str]:
    qwords = [w for w in dict.fromkeys(WORD.findall(question.lower().replace("%", " percent "))) if w not in STOP]
    if not qwords or not STATE.get("words"):
        return []
    asking = [w for w in qwords if args.rare < 0 or STATE["frequency"].get(stem(w), 0) <= args.rare]
    if not asking:
        return []
    sims = embedder.embed_queries(asking) @ STATE["m"].T
    to_question = STATE["m"] @ embedder.embed_queries([question])[0] if args.context > -1 else None
    qstems = {stem(w) for w in qwords}
    extra: list[str] = []
    for i, word in enumerate(asking):
        others = qstems - {stem(word)}
        got = 0
        for j in np.argsort(-sims[i])[: args.topn * 20]:
            if sims[i, j] < args.threshold or got >= args.topn:
                break
            cand = STATE["words"][j]
            if stem(cand) in qstems:
                continue
            if to_question is not None and to_question[j] < args.context:
                continue
            if args.cooccur and not any(stem(cand) in s and s & others for s in STATE["chunk_stems"]):
                continue
            extra.append(cand)
            got += 1
    return list(dict.fromkeys(extra))


def expand(question: str) -> list[str]:
    """What the first stage adds to the full-text leg: the hand list and, in a resident's
    question's search, the bridge."""
    hand = hand_expand(question) if args.hand else []
    if not (args.bridge and STATE["active"]):
        return hand
    added = [w for w in bridge(question) if w not in hand]
    STATE["last"] = added
    return hand + added


orig_run = F.FirstStage.run


def run(self, *a, **k):
    STATE["last"] = []
    if args.status_out:
        STATE["active"] = False
        STATE["status_candidates"] = orig_run(self, *a, **k).candidates
    STATE["active"] = True
    try:
        searched = orig_run(self, *a, **k)
    finally:
        STATE["active"] = False
    STATE["log"].write(f"{searched.processed.original} -> {STATE['last']}\n")
    return searched


orig_status = P.Retriever._status


def status(self, searched, candidates, reranked):
    if args.status_out:
        return orig_status(self, searched, STATE["status_candidates"], reranked)
    return orig_status(self, searched, candidates, reranked)


H.each_community = each
F.expand = expand
F.FirstStage.run = run
P.Retriever._status = status

args.out.mkdir(parents=True, exist_ok=True)
dataset = load_answer_dataset(args.dataset)
settings.database.data_dir.mkdir(parents=True, exist_ok=True)
results = H.evaluate_answers(
    dataset, settings=settings, embedder=embedder, data_dir=settings.database.data_dir.resolve(), progress=False
)
H.write_answer_report(results, args.out, command="python " + " ".join(sys.argv))
