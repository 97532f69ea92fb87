"""A vocabulary bridge learnt from the knowledge base, measured on hoa-dev (not shipped).

Every distinct word of a community's chunks (3+ letters, not a stopword) is embedded once with the
local model when the community is loaded; each content word of a question adds its TOPN nearest
knowledge-base words at cosine THRESHOLD or more that do not share its stem to the full-text
leg's expansion (beside the hand list of worker/retrieve/vocabulary.py, or instead of it with
HAND=0). The pipeline is patched here, so the whole answer harness runs as ``arc-retrieval eval``
does; OUT gets its report and, per community, each question's added words.

    ARC_DATA_DIR=/tmp/bridge-data python benchmarks/vocabulary_bridge.py OUT THRESHOLD HAND TOPN
    python benchmarks/vocabulary_bridge.py benchmarks/vocabulary_bridge 0.6 1 2
"""

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
from worker.retrieve import pipeline as P

out, threshold, hand, topn = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
STOP = set(STOPWORDS_EN)
STEM = Stemmer.Stemmer("english")
WORD = re.compile(r"[a-z]{3,}")
STATE = {}
settings = Settings.from_env()
embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)

orig_each = H.each_community


def each(*a, **k):
    for loaded in orig_each(*a, **k):
        text = " ".join(c.content for d in loaded.documents for c in d.chunks).lower()
        counts = {}
        for w in WORD.findall(text):
            if w not in STOP:
                counts[w] = counts.get(w, 0) + 1
        words = sorted(counts)
        t = time.time()
        m = embedder.embed(words)
        print(loaded.community, len(words), "words embedded in", round(time.time() - t, 1), "s", file=sys.stderr)
        STATE["words"], STATE["m"], STATE["stems"] = words, m, {STEM.stemWord(w) for w in words}
        STATE["log"] = open(out / f"bridge-{loaded.community}.txt", "w")  # noqa: SIM115 (open for the run)
        yield loaded


H.each_community = each


def bridge(question):
    qwords = [w for w in dict.fromkeys(WORD.findall(question.lower().replace("%", " percent "))) if w not in STOP]
    if not qwords or "words" not in STATE:
        return []
    qv = embedder.embed_queries(qwords)
    sims = qv @ STATE["m"].T
    extra = []
    qstems = {STEM.stemWord(w) for w in qwords}
    for i in range(len(qwords)):
        order = np.argsort(-sims[i])[: topn * 4]
        got = 0
        for j in order:
            if sims[i, j] < threshold or got >= topn:
                break
            cand = STATE["words"][j]
            if STEM.stemWord(cand) in qstems:
                continue
            extra.append(cand)
            got += 1
    STATE["log"].write(f"{question} -> {extra}\n")
    return list(dict.fromkeys(extra))


orig_compounds = P.Retriever._compounds


def compounds(self, question, community):
    return orig_compounds(self, question, community) + bridge(question)


P.Retriever._compounds = compounds
if not hand:
    P.expand = lambda q: []

out.mkdir(parents=True, exist_ok=True)
dataset = load_answer_dataset(Path("/work/shared/datasets/hoa-dev"))
settings.database.data_dir.mkdir(parents=True, exist_ok=True)
results = H.evaluate_answers(
    dataset, settings=settings, embedder=embedder, data_dir=settings.database.data_dir.resolve(), progress=False
)
H.write_answer_report(results, out, command=" ".join(sys.argv))
