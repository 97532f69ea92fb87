"""The confirmation matcher's rule 6, chosen and checked offline (worker/retrieve/confirmed.py).

``record`` runs benchmarks/confirmations.py with every call of the matcher recorded: the question
asked (its dataset id), the confirmations' similarities to it, the nearest one's answer, and the
candidates' first-stage relevance and vector similarity. ``fit`` replays the matcher's decision
on those recordings for a grid of rule 6's numbers: fewest wrong takes first, then SOURCE 1 +
status right on the rewordings, then the strictest setting; once on all communities and once
leaving each community out (fitted on the others, checked on it).

A wrong take is counted conservatively: a passage confirmation taken by an unanswerable question
or by one whose own evidence the passage does not hold, or a "none" taken by an answerable one.
Takes that rules 1-5 make on their own are the harness's to report, not counted here.

``passage`` tries, on the same recording, the question against the confirmed passage rather than
the confirmed question (rule 7 and the designs beside it: the passage's sentence the confirmed
question matches best, and the question's similarity as a quantile of the knowledge base's
different-question similarities), each chosen on all communities and leaving each out.
``halves`` asks (d) again on seeded halves per community with the real matcher over each
held-out question's recorded candidates, and counts the takes of rules 1-6 and those the passage
ratio ("rule 7") would add, right and wrong.
``overlap`` tries a further route of rule 6 on the same recording: the question's first-stage
candidates against the ones the confirmed question retrieves (rank-biased overlap, or the share of
the first k in common). ``kinds`` asks what rule 3 would do
before rule 1 (the confirmations of a conflicting kind dropped before the nearest is chosen).
``scale`` replays the status's success cut fitted on the confirmations
(worker/retrieve/status/fitted_cut.py) against the rule it replaced and other anchors, on (c) and
(d), from each answer's recorded confidence.

    python benchmarks/confirmation_rules.py record /work/shared/datasets/hoa-dev --out /tmp/rules
    python benchmarks/confirmation_rules.py fit /tmp/rules
    python benchmarks/confirmation_rules.py passage /tmp/rules
    python benchmarks/confirmation_rules.py halves /tmp/rules --splits 100
    python benchmarks/confirmation_rules.py overlap /tmp/rules
    python benchmarks/confirmation_rules.py scale /tmp/rules
    python benchmarks/confirmation_rules.py kinds /tmp/rules
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import re
import runpy
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.evaluation import confirmation_harness  # noqa: E402
from worker.evaluation.answers import evidence_found  # noqa: E402
from worker.retrieve import confirmed  # noqa: E402
from worker.retrieve.status import fitted_cut  # noqa: E402

GRID = {
    "extra": (0.05, 0.1, 0.15),
    "margin": (0.1, 0.15, 0.2),
    "share": (0.7, 0.8, 0.9),
    "top_behind": (0, 1, 2),
    "top_margin": (0.05, 0.1),
    "top_below_like": (0.0, 0.05, 0.1),
}
HERE_REWORDINGS = ROOT / "benchmarks/confirmations/hoa-dev-rewordings.jsonl"
SHIPPED_ANCHOR = 0.4  # fitted_cut.ANCHOR_AT as shipped (``scale`` tries others)
SHIPPED = {
    "extra": confirmed.AGREE_EXTRA,
    "margin": confirmed.AGREE_MARGIN,
    "share": confirmed.AGREE_SHARE,
    "top_behind": confirmed.TOP_BEHIND,
    "top_margin": confirmed.TOP_MARGIN,
    "top_below_like": confirmed.TOP_BELOW_LIKE,
}


# -- record -------------------------------------------------------------------------------------


def record(argv: list[str], out: Path) -> None:
    """Run the confirmations harness with the matcher's inputs written to ``out/calls.jsonl``."""
    asking: dict[str, object] = {"epoch": 0}
    calls: list[dict] = []
    answers: list[dict] = []
    fits: list[dict] = []
    ask, match = confirmation_harness.ask, confirmed.Confirmations.match
    confirm_all, remove_all = confirmation_harness.confirm_all, confirmation_harness.Keeper.remove_all
    keeper_chunks = confirmation_harness.Keeper.chunks
    fit_cut = fitted_cut.fit
    texts: list[dict] = []

    def chunks(self):  # type: ignore[no-untyped-def]
        from worker.serve.documents_api import DOCUMENTS_ROUTE

        found = keeper_chunks(self)
        listing = self._json(self.client.get(DOCUMENTS_ROUTE, headers=self.headers), "list documents")
        names = {d["document_id"]: d["name"] for d in listing["documents"]}
        texts.extend(
            {
                "community": self.community,
                "id": c.id,
                "document_id": c.document_id,
                "document_name": names.get(c.document_id),
                "section": c.section_path,
                "content": c.content,
            }
            for c in found
        )
        return found

    def asked(client, settings, question):  # type: ignore[no-untyped-def]
        asking["question"] = question
        asking["candidates"] = []
        answer = ask(client, settings, question)
        answers.append(
            {
                "id": question.id,
                "community": question.community,
                "kind": question.kind,
                "epoch": asking["epoch"],
                **{k: v for k, v in answer.row().items() if k not in ("id", "kind")},
                "candidates": asking["candidates"],
            }
        )
        return answer

    def bumped(function):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            done = function(*args, **kwargs)
            asking["epoch"] = int(asking["epoch"]) + 1  # type: ignore[call-overload]
            return done

        return wrapped

    def fitted(points, configured, floor=0.0, always=()):  # type: ignore[no-untyped-def]
        q = asking.get("question")
        fits.append(
            {
                "community": getattr(q, "community", None),
                "epoch": asking["epoch"],
                "points": [[p.score, p.answerable] for p in points],
                "always": [p.score for p in always],
                "configured": configured,
                "floor": floor,
            }
        )
        return fit_cut(points, configured, floor, always)

    def matched(self, community, question, embedding, candidates, stamp=None):  # type: ignore[no-untyped-def]
        asking["candidates"] = [[c.id, c.relevance, c.vector_score] for c in candidates]
        taken = match(self, community, question, embedding, candidates, stamp)
        known = self.known(community, stamp)
        q = asking.get("question")
        if q is None or embedding is None or not known.entries:
            return taken
        sims = known.matrix @ (np.asarray(embedding, dtype=np.float32) / np.linalg.norm(embedding))
        best = int(np.argmax(sims))
        entry = known.entries[best]
        others = sims[known.answers != known.answers[best]]
        ids = [c.id for c in candidates]
        rank = ids.index(entry.chunk_id) if entry.chunk_id in ids else None
        passage = candidates[rank] if rank is not None else None
        own_vector = (passage.vector_score or 0.0) if passage is not None else 0.0
        calls.append(
            {
                "id": q.id,  # type: ignore[attr-defined]
                "community": q.community,  # type: ignore[attr-defined]
                "kind": q.kind,  # type: ignore[attr-defined]
                "confirmed": [e.query for e in known.entries],
                "nearest": entry.query,
                "answer": entry.answer,
                "similarity": float(sims[best]),
                "rival": float(others.max()) if others.size else -1.0,
                "like": known.scale.like,
                "near": known.scale.near,
                "rank": rank,
                "vector_rank": sum((c.vector_score or 0.0) > own_vector for c in candidates) if passage else None,
                "share": passage.relevance / max(c.relevance for c in candidates) if passage else None,
                "holds_evidence": bool(passage and evidence_found(list(q.evidence), passage.content)),  # type: ignore[attr-defined]
                "asks": [confirmed.asking(question), entry.asks],
                "rules_1_5": taken is not None and not _rule6_only(self, taken, question, entry, passage),
                "taken": taken.id if taken is not None else None,
                "question": question,
                "similarities": [round(float(s), 5) for s in sims],
                "entries": [[e.id, e.answer, e.chunk_id] for e in known.entries],
                "passages": [[c.id, c.document_name, c.section_path, c.content] for c in candidates[:10]],
            }
        )
        return taken

    confirmation_harness.ask = asked  # type: ignore[assignment]
    confirmation_harness.confirm_all = bumped(confirm_all)  # type: ignore[assignment]
    confirmation_harness.Keeper.remove_all = bumped(remove_all)  # type: ignore[method-assign]
    confirmation_harness.Keeper.chunks = chunks  # type: ignore[method-assign]
    fitted_cut.fit = fitted  # type: ignore[assignment]
    confirmed.Confirmations.match = matched  # type: ignore[method-assign]
    sys.argv = [str(ROOT / "benchmarks/confirmations.py"), *argv, "--out", str(out)]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        out.mkdir(parents=True, exist_ok=True)
        (out / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
        (out / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
        (out / "fits.jsonl").write_text("".join(json.dumps(f) + "\n" for f in fits))
        (out / "chunks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in texts))


def _rule6_only(matcher, taken, question, entry, passage) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``taken`` needed rule 6: rule 5's word test alone would have refused it."""
    if entry.answer == "none" or passage is None:
        return False
    return len(matcher.unmet(question, entry.query, passage.content)) > confirmed.UNCOVERED_ALLOWED


# -- fit ----------------------------------------------------------------------------------------


@dataclass
class Call:
    """One recorded question with what the replay needs."""

    community: str
    phase: str  # "b" a rewording, "orig" a confirmed question asked again, "other" the rest
    kind: str
    right_target: bool  # the nearest confirmation is its original's (or its own)
    before_source1: bool
    before_right: bool
    row: dict


def _calls(folder: Path) -> list[Call]:
    results = json.loads((folder / "results.json").read_text())
    before: dict[str, dict] = {}
    original: dict[str, str] = {}  # rewording id -> its original's text
    originals: set[str] = set()
    for c in results["communities"]:
        for r in c["rewordings"]["questions"]:
            before[r["id"]] = r["before"]
            original[r["id"]] = r["original"]
            originals.add(r["of"])
    found = []
    for line in (folder / "calls.jsonl").read_text().splitlines():
        row = json.loads(line)
        qid = row["id"]
        if qid in original:
            phase, target = "b", original[qid]
        elif qid in originals and row["similarity"] > 0.999:
            continue  # a confirmed question asked again
        else:
            phase, target = "other", None
        b = before.get(qid, {})
        found.append(
            Call(
                row["community"],
                phase,
                row["kind"],
                target is not None and row["nearest"] == target,
                bool(b.get("evidence_in_source1")),
                bool(b.get("status_right")),
                row,
            )
        )
    return found


def _takes(row: dict, p: dict) -> bool:
    """Whether the matcher with rule 6's numbers ``p`` takes the nearest confirmation."""
    if row["rules_1_5"]:
        return True
    asks = row["asks"]
    if row["answer"] == "none" or row["rank"] is None or (None not in asks and asks[0] != asks[1]):
        return False
    # rule 2: the passage among the first AGREE_RANK candidates, the question on the scale
    floor = row["near"] if row["rank"] < confirmed.NEAR_RANK else row["like"]
    if row["rank"] >= confirmed.AGREE_RANK or row["similarity"] < floor:
        return False
    margin = row["similarity"] - row["rival"]
    if row["similarity"] >= row["like"] + p["extra"] and margin >= p["margin"] and (row["share"] or 0) >= p["share"]:
        return True
    return (
        min(row["rank"], row["vector_rank"]) == 0
        and row["rank"] + row["vector_rank"] <= p["top_behind"]
        and margin >= p["top_margin"]
        and row["similarity"] >= row["like"] - p["top_below_like"]
    )


def score(calls: list[Call], p: dict, community: str) -> tuple[float, float, int]:
    """SOURCE 1 and status right on the community's rewordings, and wrong takes of rule 6."""
    return _scored(calls, community, lambda c: _takes(c.row, p))


def _scored(calls: list[Call], community: str, takes) -> tuple[float, float, int]:
    """SOURCE 1 and status right on the community's rewordings, and wrong takes beyond rules
    1-5, when ``takes`` says which questions take their nearest confirmation."""
    source1, right, wrong = [], [], 0
    for c in (c for c in calls if c.community == community):
        took = takes(c)
        harmful = took and not c.row["rules_1_5"] and _harmful(c)
        wrong += harmful
        if c.phase != "b":
            continue
        if c.kind == "answerable":
            source1.append((took and c.right_target) or (c.before_source1 and not harmful))
        right.append((took and c.right_target) or (c.before_right and not harmful))
    return (sum(source1) / max(len(source1), 1), sum(right) / max(len(right), 1), wrong)


def _strictness(p: dict) -> float:
    return p["extra"] + p["margin"] + p["share"] - p["top_behind"] + p["top_margin"] - p["top_below_like"]


def best(calls: list[Call], communities: list[str]) -> dict:
    chosen, key = {}, None
    for values in itertools.product(*GRID.values()):
        p = dict(zip(GRID, values, strict=True))
        scores = [score(calls, p, c) for c in communities]
        k = (-sum(s[2] for s in scores), round(sum(s[0] + s[1] for s in scores), 6), _strictness(p))
        if key is None or k > key:
            chosen, key = p, k
    return chosen


def fit(folder: Path) -> None:
    calls = _calls(folder)
    communities = sorted({c.community for c in calls if c.community})
    shown = lambda p: " / ".join(f"{p[k]:g}" for k in GRID)  # noqa: E731
    print("numbers:", " / ".join(GRID))
    _fitted_and_held_out(calls, communities, ("shipped", SHIPPED), best, score, shown)


def _fitted_and_held_out(calls, communities, first, best_of, score_of, shown) -> None:
    """``first`` and the numbers fitted on every community, scored on each; then each community
    scored with the numbers fitted on the others."""
    for name, p in (first, ("fitted on all", best_of(calls, communities))):
        print(f"{name}: {shown(p) if p else ''}")
        for c in communities:
            s1, right, wrong = score_of(calls, p, c)
            print(f"  {c}: SOURCE 1 {s1:.2f}, status right {right:.2f}, wrong takes {wrong}")
    for held in communities:
        p = best_of(calls, [c for c in communities if c != held])
        s1, right, wrong = score_of(calls, p, held)
        print(f"held out {held}: fitted {shown(p)} -> SOURCE 1 {s1:.2f}, status right {right:.2f}, wrong takes {wrong}")


# -- overlap: the question's candidates against the confirmed question's -----------------------


def _rbo(a: list[int], b: list[int], p: float, k: int) -> float:
    """Rank-biased overlap of the first ``k`` of two ranked lists (normalised to 0..1 at depth k)."""
    total = 0.0
    for d in range(1, k + 1):
        total += p ** (d - 1) * len(set(a[:d]) & set(b[:d])) / d
    return total * (1 - p) / (1 - p**k)


MEASURES: dict[str, Callable[[list[int], list[int]], float]] = {
    **{f"rbo p={p} @{k}": (lambda a, b, p=p, k=k: _rbo(a, b, p, k)) for p in (0.8, 0.9) for k in (10, 20)},
    **{f"shared of first {k}": (lambda a, b, k=k: len(set(a[:k]) & set(b[:k])) / k) for k in (3, 5, 10)},
}
OVERLAP_GRID = {
    "measure": tuple(MEASURES),
    "at_least": (0.2, 0.3, 0.4, 0.5, 0.6, 0.7),
    "past_like": (-0.15, -0.1, -0.05, 0.0, 0.05),
    "margin": (0.04, 0.08, 0.12),
    "rank": (3, 5, 10),
    "none_too": (False, True),
}


def _answers(folder: Path) -> list[dict]:
    """The recorded answers, each with ``phase``: 0 before any confirmation, 1 with the
    rewordings' originals confirmed, 3 with half confirmed (per community)."""
    rows = [json.loads(line) for line in (folder / "answers.jsonl").read_text().splitlines()]
    first: dict[str, int] = {}
    for a in rows:
        first.setdefault(a["community"], a["epoch"])
        a["phase"] = a["epoch"] - first[a["community"]]
    return rows


def _with_lists(folder: Path, dataset: Path) -> list[Call]:
    """The recorded calls, each with its own candidates' ids and those its nearest confirmed
    question retrieved before any confirmation (``own``, ``theirs``)."""
    from worker.evaluation.rewordings import load_with_rewordings

    answers = _answers(folder)
    rows = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    asked = [a for a in answers if a["phase"] in (1, 3)]  # one matcher call each, in order
    assert [a["id"] for a in asked] == [r["id"] for r in rows], "answers and calls out of step"
    lists = {json.dumps(r, sort_keys=True): [c[0] for c in a["candidates"]] for a, r in zip(asked, rows, strict=True)}
    before = {a["id"]: [c[0] for c in a["candidates"]] for a in answers if a["phase"] == 0}
    _, rewordings = load_with_rewordings(dataset, HERE_REWORDINGS)
    text_id = {(q.community, q.question): q.id for q in rewordings.originals}
    calls = _calls(folder)
    for c in calls:
        c.own = lists[json.dumps(c.row, sort_keys=True)]  # type: ignore[attr-defined]
        c.theirs = before[text_id[(c.community, c.row["nearest"])]]  # type: ignore[attr-defined]
        c.measures = {m: f(c.own, c.theirs) for m, f in MEASURES.items()}  # type: ignore[attr-defined]
        c.shipped = _takes(c.row, SHIPPED)  # type: ignore[attr-defined]
    return calls


def _takes_by_overlap(c: Call, p: dict | None) -> bool:
    if c.shipped:  # type: ignore[attr-defined]
        return True
    row = c.row
    if p is None or (None not in row["asks"] and row["asks"][0] != row["asks"][1]):
        return False
    if row["answer"] == "none":
        if not p["none_too"]:
            return False
    elif row["rank"] is None or row["rank"] >= p["rank"]:
        return False
    if row["similarity"] - row["rival"] < p["margin"] or row["similarity"] < row["like"] + p["past_like"]:
        return False
    return c.measures[p["measure"]] >= p["at_least"]  # type: ignore[attr-defined]


def _harmful(c: Call) -> bool:
    """Taking its nearest confirmation would hand this question a wrong answer."""
    if c.right_target:
        return False
    if c.row["answer"] == "none":
        return c.kind == "answerable"
    return c.kind != "answerable" or not c.row["holds_evidence"]


def _overlap_score(calls: list[Call], p: dict | None, community: str) -> tuple[float, float, int]:
    return _scored(calls, community, lambda c: _takes_by_overlap(c, p))


def _best_overlap(calls: list[Call], communities: list[str]) -> dict:
    chosen, key = {}, None
    for values in itertools.product(*OVERLAP_GRID.values()):
        p = dict(zip(OVERLAP_GRID, values, strict=True))
        scores = [_overlap_score(calls, p, c) for c in communities]
        strict = p["at_least"] + p["past_like"] + p["margin"] - p["rank"] / 10 - p["none_too"]
        k = (-sum(s[2] for s in scores), round(sum(s[0] + s[1] for s in scores), 6), strict)
        if key is None or k > key:
            chosen, key = p, k
    return chosen


def _auroc(positives: list[float], negatives: list[float]) -> float:
    wins = sum((x > y) + 0.5 * (x == y) for x in positives for y in negatives)
    return wins / max(len(positives) * len(negatives), 1)


def overlap(folder: Path, dataset: Path) -> None:
    calls = _with_lists(folder, dataset)
    communities = sorted({c.community for c in calls})
    # passage confirmations no shipped rule takes: rewordings of their own original, and questions
    # the confirmation would answer wrongly
    missed = [c for c in calls if c.phase == "b" and c.right_target and not c.shipped and c.row["answer"] == "passage"]  # type: ignore[attr-defined]
    wrong = [c for c in calls if _harmful(c) and not c.shipped and c.row["answer"] == "passage"]  # type: ignore[attr-defined]
    print(f"AUROC, {len(missed)} missed rewordings against {len(wrong)} questions a take would answer wrongly:")
    for m in MEASURES:
        print(f"  {m}: {_auroc([c.measures[m] for c in missed], [c.measures[m] for c in wrong]):.2f}")  # type: ignore[attr-defined]
    for name, f in (
        ("cosine to the confirmed question", lambda c: c.row["similarity"]),
        ("margin over another answer", lambda c: c.row["similarity"] - c.row["rival"]),
    ):
        print(f"  {name}: {_auroc([f(c) for c in missed], [f(c) for c in wrong]):.2f}")
    shown = lambda p: ", ".join(f"{k} {v}" for k, v in p.items())  # noqa: E731
    _fitted_and_held_out(calls, communities, ("shipped rules alone", None), _best_overlap, _overlap_score, shown)


# -- passage: the question against the confirmed passage, not only the confirmed question --------

PASSAGE_GRID = {"at_least": (), "rank": (2, 3, 5, 10), "vector_rank": (1, 2, 3, 5, 40)}
# The passage ratio's best setting on the rewordings, the same chosen on any three communities:
# "rule 7", tried beside rules 1-6 and not shipped (``halves`` shows why).
RULE7 = {"at_least": 1.1, "rank": 5, "vector_rank": 3}
# The sentence ratio's best setting, likewise (not shipped).
SENTENCE_RULE = {"at_least": 0.9, "rank": 5, "vector_rank": 3}
DESIGNS = {
    # the question's cosine to the confirmed passage over the confirmed question's (rule 7)
    "passage ratio": (0.9, 0.95, 1.0, 1.05, 1.1, 1.2),
    # the same, against the passage's sentence the confirmed question matches best
    "sentence ratio": (0.9, 0.95, 1.0, 1.05, 1.1, 1.2),
    # the question's cosine to that sentence
    "sentence similarity": (0.4, 0.45, 0.5, 0.55, 0.6, 0.65),
    # 1 when the question's nearest sentence of the passage is the confirmed question's nearest
    # of several (a rewording asks for the same sentence; a different question on the passage,
    # another)
    "same sentence": (1.0,),
    # the question's similarity as a quantile of the knowledge base's different-question similarities
    "kb percentile": (0.8, 0.85, 0.9, 0.95, 0.98, 1.0),
}
_SENTENCE = re.compile(r"(?<=[.;:!?])\s+|\n+")


def passage_text(chunk) -> str:  # type: ignore[no-untyped-def]
    """What the embedder read for ``chunk`` at ingest: its document's name, section and text."""
    from worker.ingest.chunking import Chunk

    return Chunk(0, chunk.section_path, chunk.content, None).embedding_text(chunk.document_name)


def _unit_rows(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=-1, keepdims=True), 1e-9)


def _with_passages(folder: Path, dataset: Path) -> list[Call]:
    """The recorded calls, each with the designs' measures (``c.designs``) for its nearest
    confirmation when that is a passage among its first candidates; the passage is embedded as
    the ingest embedded it (:func:`passage_text`), with the local model."""
    from worker.config import Settings
    from worker.embeddings import build_embedder
    from worker.models import ChunkResult

    embedder = build_embedder(Settings.from_env())
    calls = _with_lists(folder, dataset)
    texts: dict[str, None] = {}
    for c in calls:
        row = c.row
        c.designs = {}  # type: ignore[attr-defined]
        if row["answer"] != "passage" or row["rank"] is None or row["rank"] >= len(row.get("passages", ())):
            continue
        pid, name, section, content = row["passages"][row["rank"]]
        chunk = ChunkResult(
            id=pid, document_id="", document_name=name, document_type="", section_path=section,
            page_number=None, chunk_index=0, is_binding=True, superseded_by=None, content=content, token_count=0,
        )  # fmt: skip
        c.passage_text = passage_text(chunk)  # type: ignore[attr-defined]
        c.sentences = [s.strip() for s in _SENTENCE.split(content) if len(s.split()) >= 3] or [content]  # type: ignore[attr-defined]
        texts.update(dict.fromkeys([c.passage_text, *c.sentences]))  # type: ignore[attr-defined]
    passages = dict(zip(texts, _unit_rows(embedder.embed(list(texts))), strict=True))
    questions = sorted({t for c in calls for t in (c.row["question"], *c.row["confirmed"])})
    asked = dict(zip(questions, _unit_rows(embedder.embed_queries(questions)), strict=True))
    reference = _unit_rows(embedder.embed_queries(confirmed.homeowner_questions()))
    among = reference @ reference.T
    np.fill_diagonal(among, -1.0)
    homeowner_nearest = list(among.max(axis=1))
    for c in calls:
        row = c.row
        if not hasattr(c, "passage_text"):
            continue
        q, original = asked[row["question"]], asked[row["nearest"]]
        p = passages[c.passage_text]  # type: ignore[attr-defined]
        sentences = np.stack([passages[s] for s in c.sentences])  # type: ignore[attr-defined]
        best = int(np.argmax(sentences @ original))
        mine, theirs = float(sentences[best] @ q), float(sentences[best] @ original)
        confirmed_vectors = np.stack([asked[t] for t in row["confirmed"]])
        sims = confirmed_vectors @ confirmed_vectors.T
        answers = [(a, chunk) for _, a, chunk in row["entries"]]
        different = [
            max(sims[i, j] for j in range(len(answers)) if answers[j] != answers[i])
            for i in range(len(answers))
            if any(answers[j] != answers[i] for j in range(len(answers)))
        ] + homeowner_nearest
        c.designs = {  # type: ignore[attr-defined]
            "passage ratio": float(q @ p) / max(float(original @ p), 1e-6),
            "sentence ratio": mine / max(theirs, 1e-6),
            "sentence similarity": mine,
            "same sentence": float(len(sentences) > 1 and int(np.argmax(sentences @ q)) == best),
            "kb percentile": float(np.mean(np.asarray(different) < row["similarity"])),
        }
    return calls


def _takes_by_passage(c: Call, design: str, p: dict | None) -> bool:
    """Rules 1-6 as shipped before rule 7, or ``design``'s measure at least ``p["at_least"]`` with
    rules 1-3's tests, rule 2's scale and the passage's ranks ``p["rank"]``, ``p["vector_rank"]``."""
    row = c.row
    if _takes(row, SHIPPED):
        return True
    if p is None or design not in c.designs:  # type: ignore[attr-defined]
        return False
    if (None not in row["asks"] and row["asks"][0] != row["asks"][1]) or row["similarity"] - row[
        "rival"
    ] < confirmed.MARGIN:
        return False
    floor = row["near"] if row["rank"] < confirmed.NEAR_RANK else row["like"]
    if row["similarity"] < floor or row["rank"] >= min(p["rank"], confirmed.AGREE_RANK):
        return False
    return row["vector_rank"] < p["vector_rank"] and c.designs[design] >= p["at_least"]  # type: ignore[attr-defined]


def passage(folder: Path, dataset: Path) -> None:
    calls = _with_passages(folder, dataset)
    communities = sorted({c.community for c in calls})
    refused = [c for c in calls if c.designs and not _takes(c.row, SHIPPED)]  # type: ignore[attr-defined]
    missed = [c for c in refused if c.phase == "b" and c.right_target]
    wrong = [c for c in refused if _harmful(c)]
    print(
        f"AUROC, {len(missed)} rewordings rules 1-6 refuse against {len(wrong)} questions a take would answer wrongly:"
    )
    for name in DESIGNS:
        print(f"  {name}: {_auroc([c.designs[name] for c in missed], [c.designs[name] for c in wrong]):.2f}")  # type: ignore[attr-defined]
    print(
        f"  question cosine: {_auroc([c.row['similarity'] for c in missed], [c.row['similarity'] for c in wrong]):.2f}"
    )
    for name, levels in DESIGNS.items():
        grid = {**PASSAGE_GRID, "at_least": levels}

        def score_of(calls: list[Call], p: dict | None, community: str, name: str = name) -> tuple[float, float, int]:
            return _scored(calls, community, lambda c: _takes_by_passage(c, name, p))

        def best_of(calls: list[Call], communities: list[str], grid: dict = grid, score_of=score_of) -> dict:  # type: ignore[no-untyped-def]
            chosen, key = {}, None
            for values in itertools.product(*grid.values()):
                p = dict(zip(grid, values, strict=True))
                scores = [score_of(calls, p, c) for c in communities]
                strict = p["at_least"] - p["rank"] / 10 - p["vector_rank"] / 40
                k = (-sum(s[2] for s in scores), round(sum(s[0] + s[1] for s in scores), 6), strict)
                if key is None or k > key:
                    chosen, key = p, k
            return chosen

        print(f"\n{name}:")
        shown = lambda p: ", ".join(f"{k} {v}" for k, v in p.items())  # noqa: E731
        _fitted_and_held_out(calls, communities, ("rules 1-6 alone", None), best_of, score_of, shown)
    print("\ncalls past every other test of the passage ratio at rule 7's ranks, by the ratio:")
    shipped_ranks = {**RULE7, "at_least": 0.0}
    past = [
        c
        for c in calls
        if c.designs and not _takes(c.row, SHIPPED) and _takes_by_passage(c, "passage ratio", shipped_ranks)
    ]  # type: ignore[attr-defined]
    for c in sorted(past, key=lambda c: -c.designs["passage ratio"]):  # type: ignore[attr-defined]
        verdict = "its original's" if c.right_target else ("wrong" if _harmful(c) else "harmless")
        print(f"  {c.designs['passage ratio']:.2f} {c.community} ({verdict}): {c.row['question']}")  # type: ignore[attr-defined]


# -- halves: (d) again on seeded halves, the real matcher with rule 7 beside it -------------------


def _rule7(
    matcher, community: str, question: str, embedding: np.ndarray, candidates: list, vector, design: str
) -> bool:  # type: ignore[no-untyped-def]
    """Whether the nearest confirmation is a passage that rule 7 (:data:`RULE7`, the passage
    ratio with rules 1-3 and rule 2's scale; or the sentence ratio, :data:`SENTENCE_RULE`) would
    give ``question``; ``vector`` embeds a text."""
    known = matcher.known(community)
    if not known.entries:
        return False
    e = embedding / np.linalg.norm(embedding)
    sims = known.matrix @ e
    best = int(np.argmax(sims))
    entry, similarity = known.entries[best], float(sims[best])
    others = sims[known.answers != known.answers[best]]
    if entry.answer != "passage" or similarity - (float(others.max()) if others.size else -1.0) < confirmed.MARGIN:
        return False
    asks = confirmed.asking(question)
    if asks is not None and entry.asks is not None and asks != entry.asks:
        return False
    ids = [c.id for c in candidates][: min(RULE7["rank"], confirmed.AGREE_RANK)]
    if entry.chunk_id not in ids:
        return False
    rank = ids.index(entry.chunk_id)
    if similarity < (known.scale.near if rank < confirmed.NEAR_RANK else known.scale.like):
        return False
    chunk = candidates[rank]
    if sum((c.vector_score or 0.0) > (chunk.vector_score or 0.0) for c in candidates) >= RULE7["vector_rank"]:
        return False
    if design == "sentence ratio":
        sentences = [t.strip() for t in _SENTENCE.split(chunk.content) if len(t.split()) >= 3] or [chunk.content]
        rows = _unit_rows(np.stack([vector(t) for t in sentences]))
        p = rows[int(np.argmax(rows @ known.matrix[best]))]
        return float(e @ p) >= SENTENCE_RULE["at_least"] * float(known.matrix[best] @ p)
    p = _unit_rows(vector(passage_text(chunk)))
    return float(e @ p) >= RULE7["at_least"] * float(known.matrix[best] @ p)


def halves(folder: Path, dataset: Path, seeds: int, design: str = "passage ratio") -> None:
    """Each community's originals split into ``seeds`` seeded halves (as (d)); the held-out half
    asked of the real matcher over its recorded first-stage candidates (as asked before any
    confirmation), the other half confirmed as the harness confirms it. Counts the takes of rules
    1-6 and those rule 7 would add, and which take a passage without the question's evidence (or
    answer an unanswerable one), by question and confirmation."""
    import functools
    from datetime import UTC, datetime

    from worker.config import Settings
    from worker.embeddings import build_embedder
    from worker.evaluation.rewordings import ChunkText, evidence_chunk, half_split, load_with_rewordings
    from worker.models import ChunkResult
    from worker.retrieve.preprocess import preprocess
    from worker.store.confirmations import StoredConfirmation

    embedder = build_embedder(Settings.from_env())
    _, rewordings = load_with_rewordings(dataset, HERE_REWORDINGS)
    results = json.loads((folder / "results.json").read_text())
    lines = [json.loads(line) for line in (folder / "chunks.jsonl").read_text().splitlines()]
    answers = _answers(folder)
    reference = embedder.embed_queries(confirmed.homeowner_questions())
    query = functools.lru_cache(maxsize=None)(lambda text: embedder.embed_queries([text])[0])
    vector = functools.lru_cache(maxsize=None)(lambda text: embedder.embed([text])[0])
    start = 0
    for community in results["communities"]:
        name, held = community["community"], lines[start : start + community["chunks"]]
        start += community["chunks"]
        chunks = {c["id"]: c for c in held}
        texts = [ChunkText(c["id"], c["document_id"], c["section"], c["content"]) for c in held]
        originals = [q for q in rewordings.originals if q.community == name]
        evidence = {q.id: None if q.negative else evidence_chunk(q, texts) for q in originals}
        asked = {q.id: preprocess(q.question).normalized for q in originals}
        candidates = {
            a["id"]: [
                ChunkResult(
                    id=i,
                    document_id=chunks[i]["document_id"],
                    document_name=chunks[i]["document_name"] or "",
                    document_type="",
                    section_path=chunks[i]["section"],
                    page_number=None,
                    chunk_index=0,
                    is_binding=True,
                    superseded_by=None,
                    content=chunks[i]["content"],
                    token_count=0,
                    relevance=relevance,
                    vector_score=vector_score,
                )
                for i, relevance, vector_score in a["candidates"]
            ]
            for a in answers
            if a["community"] == name and a["phase"] == 0
        }
        takes: dict[str, dict[tuple, int]] = {"rules 1-6": {}, f"{design}, added": {}}
        before = {a["id"]: a for a in answers if a["community"] == name and a["phase"] == 0}
        changed: dict[str, collections.Counter[str]] = {rule: collections.Counter() for rule in takes}
        for seed in range(seeds):
            confirmed_half, held_out = half_split(originals, seed)
            stored = [
                StoredConfirmation(
                    id=n,
                    community=name,
                    query=q.question,
                    answer="none" if q.negative else "passage",
                    document_id=None,
                    section_path=None,
                    embedding=query(asked[q.id]),
                    embedding_model=embedder.model,
                    created_at=datetime(2026, 11, 28, tzinfo=UTC),
                    chunk_id=None if q.negative else evidence[q.id].chunk_id,  # type: ignore[union-attr]
                    state="confirmed",
                    reason=None,
                )
                for n, q in enumerate(confirmed_half, start=1)
                if q.negative or evidence[q.id] is not None
            ]
            matcher = confirmed.Confirmations(
                load=lambda _c, stored=stored: stored,
                stamp=lambda _c: "s",
                model=embedder.model,
                reference=lambda: reference,
                words=lambda words: np.stack([query(w) for w in words]),
            )
            by_id = {s.id: s for s in stored}
            for q in held_out:
                e, found = query(asked[q.id]), candidates[q.id]
                taken = matcher.match(name, asked[q.id], e, found)
                rule = "rules 1-6"
                if taken is None and _rule7(matcher, name, asked[q.id], e, found, vector, design):
                    known = matcher.known(name)
                    entry = known.entries[int(np.argmax(known.matrix @ (e / np.linalg.norm(e))))]
                    taken, rule = by_id[entry.id], f"{design}, added"
                if taken is None:
                    continue
                answer, chunk_id = taken.answer, taken.chunk_id
                wrong = (
                    (not q.negative)
                    if answer == "none"
                    else q.negative or not evidence_found(list(q.evidence), chunks[chunk_id]["content"])
                )
                key = (wrong, q.id, q.question, by_id[taken.id].query, answer)
                takes[rule][key] = takes[rule].get(key, 0) + 1
                changed[rule].update(_take_changes(before[q.id], q.negative, answer, wrong))
        for rule, found_takes in takes.items():
            total, wrong_total = sum(found_takes.values()), sum(n for k, n in found_takes.items() if k[0])
            pairs = sum(1 for k in found_takes if k[0])
            moved = changed[rule]
            print(
                f"{name}, {rule}: {total} takes over {seeds} halves, {wrong_total} wrong "
                f"({pairs} question-confirmation pairs); SOURCE 1 lost {moved['source1 lost']}, "
                f"gained {moved['source1 gained']}; status right lost {moved['status lost']}, "
                f"gained {moved['status gained']}"
            )
            for (wrong, qid, question, confirmation, answer), n in sorted(found_takes.items(), key=lambda kv: -kv[1]):
                if wrong:
                    print(f"  x{n} {qid} {question!r} took {confirmation!r} ({answer})")


def _take_changes(before: dict, negative: bool, answer: str, wrong: bool) -> list[str]:
    """What a take changes against the question's answer with no confirmation: a passage
    confirmation puts its passage in SOURCE 1 and answers ``success``, a "none" answers
    ``no_results`` with no context."""
    had_source1, was_right = bool(before["evidence_in_source1"]), bool(before["status_right"])
    if answer == "none":
        source1, right = False, negative
    else:
        source1, right = not wrong and not negative, not negative
    found = []
    if had_source1 != source1 and not negative:
        found.append("source1 gained" if source1 else "source1 lost")
    if was_right != right:
        found.append("status gained" if right else "status lost")
    return found


# -- models: which local model tells a rewording from a different question --------------------


def models(dataset: Path) -> None:
    """Each local embedding model's question-to-question cosine: a rewording against its original
    (positives) and each original against the nearest other original of its community (different
    questions), with the AUROC between the two and the time to embed one question. For the
    bundled model also two ways of reading the same vectors: each question with the documents'
    words for its own (``vocabulary.expand``), and every vector less its community's mean
    question (what all of a community's questions share, their subject matter, taken out)."""
    import time

    from worker.embeddings import E5Embedder, LocalEmbedder
    from worker.evaluation.rewordings import load_with_rewordings
    from worker.retrieve.preprocess import preprocess
    from worker.retrieve.vocabulary import expand

    _, rewordings = load_with_rewordings(dataset, HERE_REWORDINGS)
    text = {q.id: q.question for q in rewordings.originals}
    community_of = {q.id: q.community for q in rewordings.originals}
    communities: dict[str, list[str]] = {}
    for q in rewordings.originals:
        communities.setdefault(q.community, []).append(q.question)
    questions = sorted({*text.values(), *(r.question.question for r in rewordings.rewordings)})

    def report(label: str, vectors: dict[str, np.ndarray], per_question: float | None = None) -> None:
        def unit(question: str, community: str) -> np.ndarray:
            v = vectors[question] - centre.get(community, 0.0)
            return v / np.linalg.norm(v)

        centre: dict[str, np.ndarray] = centres if "centred" in label else {}
        same = [
            float(unit(r.question.question, community_of[r.of]) @ unit(text[r.of], community_of[r.of]))
            for r in rewordings.rewordings
        ]
        different: list[float] = []
        for community, asked in communities.items():
            matrix = np.stack([unit(q, community) for q in asked])
            sims = matrix @ matrix.T
            np.fill_diagonal(sims, -1.0)
            different.extend(float(x) for x in sims.max(axis=1))
        timing = f", {per_question:.1f} ms a question (batched)" if per_question is not None else ""
        # where a matcher works: the rewordings past what only 2 % / 5 % of different questions reach
        past = [float(np.mean([x > np.quantile(different, 1 - share) for x in same])) for share in (0.02, 0.05)]
        print(
            f"{label}: rewording to original median {statistics.median(same):.3f}, nearest different question "
            f"median {statistics.median(different):.3f}, AUROC {_auroc(same, different):.3f}, rewordings past "
            f"the 98th / 95th percentile of different questions {past[0]:.2f} / {past[1]:.2f}{timing}"
        )

    for name, embedder in (("all-MiniLM-L6-v2", LocalEmbedder()), ("multilingual-e5-small", E5Embedder())):
        started = time.perf_counter()
        matrix = _unit_rows(embedder.embed_queries([preprocess(q).normalized for q in questions]))
        per_question = (time.perf_counter() - started) / len(questions) * 1000
        vectors = dict(zip(questions, matrix, strict=True))
        centres = {c: np.mean([vectors[q] for q in asked], axis=0) for c, asked in communities.items()}
        report(name, vectors, per_question)
        if isinstance(embedder, E5Embedder):
            continue
        report(f"{name}, centred", vectors)
        expanded = _unit_rows(
            embedder.embed_queries([f"{preprocess(q).normalized} {' '.join(expand(q))}".strip() for q in questions])
        )
        vectors = dict(zip(questions, expanded, strict=True))
        report(f"{name}, documents' words added", vectors)
        centres = {c: np.mean([vectors[q] for q in asked], axis=0) for c, asked in communities.items()}
        report(f"{name}, documents' words added, centred", vectors)


# -- scale: the success cut fitted on the confirmations ------------------------------------------


def _status_at(answer: dict, cut: float, configured: float, no_results: float) -> str:
    """The status ``answer`` would get with ``cut`` in force (its confidence and how it was decided
    are recorded; a ``low_confidence`` at or above the configured cut was its answer kind's doing)."""
    score, status = answer["confidence"], answer["status"]
    if answer["decided_on"] != "relevance" or score is None or score < no_results:
        return status
    if status == "low_confidence" and score >= configured:
        return status
    return "success" if score >= cut else "low_confidence"


def _right_at(answer: dict, cut: float, configured: float, no_results: float) -> bool:
    status = _status_at(answer, cut, configured, no_results)
    if answer["kind"] != "answerable":
        return status != "success"
    return status == "success" and bool(answer["evidence_in_context"])


def _accuracy_cut(points: list, configured: float, floor: float, always: list) -> float:
    """The rule the anchor replaced: the cut right on the most points (the off-domain ones among
    them), the nearest ``configured`` among equals, calling no more "none" success than it."""
    scores = sorted({p.score for p in [*points, *always]})
    candidates = {configured, *((a + b) / 2 for a, b in itertools.pairwise(scores))}
    everything = [*points, *always]
    none = [p.score for p in everything if not p.answerable]
    allowed = sum(s >= configured for s in none)
    kept = [c for c in candidates if c >= floor and sum(s >= c for s in none) <= allowed] or [configured]
    return max(kept, key=lambda c: (sum((p.score >= c) == p.answerable for p in everything), -abs(c - configured)))


def scale(folder: Path, splits: int = 100) -> None:
    from worker.retrieve.status import fitted_cut
    from worker.retrieve.status.confidence import NO_RESULTS_BELOW, SUCCESS_AT

    results = json.loads((folder / "results.json").read_text())
    answers = _answers(folder)
    fits = [json.loads(line) for line in (folder / "fits.jsonl").read_text().splitlines()]
    anchors = (0.3, 0.4, 0.5, 0.6)
    gains: dict[tuple, int] = {}
    rows = []
    for c in results["communities"]:
        name = c["community"]
        mine = [a for a in answers if a["community"] == name]
        reworded = {q["of"] for q in c["rewordings"]["questions"]}
        rewording_ids = {q["id"] for q in c["rewordings"]["questions"]}
        before = {a["id"]: a for a in mine if a["phase"] == 0 and a["id"] not in rewording_ids}
        held = [a for a in mine if a["phase"] == 3]
        held_ids = {a["id"] for a in held}
        others = list(
            {a["id"]: a for a in mine if a["phase"] == 1 and a["id"] not in rewording_ids | reworded}.values()
        )
        rewordings = [a for a in mine if a["phase"] == 1 and a["id"] in rewording_ids]
        always = [fitted_cut.Point(s, False) for s in next(f["always"] for f in fits if f["community"] == name)]
        parts = {
            "(b)": ([i for i in before if i in reworded], rewordings),
            "(c)": ([i for i in before if i in reworded], others),
            "(d)": ([i for i in before if i not in held_ids], held),
        }
        for part, (confirmed_ids, asked) in parts.items():
            points = [
                fitted_cut.Point(before[i]["confidence"], before[i]["kind"] == "answerable") for i in confirmed_ids
            ]
            count = (sum(p.answerable for p in points), sum(not p.answerable for p in points))
            rules: dict[str, float] = {"configured": SUCCESS_AT}
            if fitted_cut.enough(*count):
                rules["most right, in force"] = _accuracy_cut(points, SUCCESS_AT, NO_RESULTS_BELOW, always)
                low = statistics.median(p.score for p in points if not p.answerable)
                high = statistics.median(p.score for p in points if p.answerable)
                rules["anchor 0.4 unguarded"] = min(max(low + 0.4 * (high - low), NO_RESULTS_BELOW), SUCCESS_AT)
                for w in anchors:
                    fitted_cut.ANCHOR_AT = w
                    found = fitted_cut.fit(points, SUCCESS_AT, NO_RESULTS_BELOW, always)
                    rules[f"anchor {w}"] = found.success_at if found is not None and found.in_force else SUCCESS_AT
            right0 = sum(_right_at(a, SUCCESS_AT, SUCCESS_AT, NO_RESULTS_BELOW) for a in asked)
            shown = []
            for rule, cut in rules.items():
                right = sum(_right_at(a, cut, SUCCESS_AT, NO_RESULTS_BELOW) for a in asked)
                gains[(rule, name, part)] = right - right0
                shown.append(f"{rule} {cut:.3f}: {right / len(asked):.2f}")
            rows.append(
                f"{name} {part} confirmed {count[0]} + {count[1]} none, asked {len(asked)}: " + "; ".join(shown)
            )
    fitted_cut.ANCHOR_AT = SHIPPED_ANCHOR
    print("status right on the questions asked, by the cut in force:")
    print("\n".join(rows))
    names = sorted({k[1] for k in gains})
    for held in names:

        def key(w: float, held: str = held) -> tuple:
            d = [gains.get((f"anchor {w}", n, p), 0) for n in names if n != held for p in ("(b)", "(c)", "(d)")]
            return (-sum(x < 0 for x in d), sum(d), w)

        w = max(anchors, key=key)
        changes = ", ".join(f"{p} {gains.get((f'anchor {w}', held, p), 0):+d}" for p in ("(b)", "(c)", "(d)"))
        print(f"held out {held}: anchor chosen on the others {w}, questions gained on it {changes}")
    _splits(answers, fits, splits)


def _replaced_rule(points: list, configured: float, floor: float, always: list) -> float:
    """The rule the anchor replaced, in force: the most-right cut when, left out, its gain passes a
    one-sided sign test at 95 % (at least 2 and 1.64 standard deviations); else ``configured``."""
    cut = _accuracy_cut(points, configured, floor, always)
    gained = lost = 0
    for i, p in enumerate(points):
        other = _accuracy_cut([*points[:i], *points[i + 1 :]], configured, floor, always)
        now, today = (p.score >= other) == p.answerable, (p.score >= configured) == p.answerable
        gained, lost = gained + (now and not today), lost + (today and not now)
    return cut if gained - lost >= max(2.0, 1.64 * (gained + lost) ** 0.5) else configured


def _splits(answers: list[dict], fits: list[dict], count: int) -> None:
    """(d) again on ``count`` seeded halves per community: the held-out half's status right with
    each rule's cut against the configured cut's, from the answers before any confirmation."""
    from worker.evaluation.rewordings import half_split, load_with_rewordings
    from worker.retrieve.status import fitted_cut
    from worker.retrieve.status.confidence import NO_RESULTS_BELOW, SUCCESS_AT

    _, rewordings = load_with_rewordings(Path("/work/shared/datasets/hoa-dev"), HERE_REWORDINGS)
    print(f"(d) on {count} seeded halves per community: held-out status right, the rule's cut against the configured")
    for name in sorted({q.community for q in rewordings.originals}):
        before = {a["id"]: a for a in answers if a["community"] == name and a["phase"] == 0}
        originals = [q for q in rewordings.originals if q.community == name]
        always = [fitted_cut.Point(s, False) for s in next(f["always"] for f in fits if f["community"] == name)]
        changes: dict[str, list[float]] = {}
        for seed in range(count):
            confirmed, held = half_split(originals, seed)
            points = [fitted_cut.Point(before[q.id]["confidence"], not q.negative) for q in confirmed]
            answerable = sum(p.answerable for p in points)
            if not fitted_cut.enough(answerable, len(points) - answerable):
                continue
            low = statistics.median(p.score for p in points if not p.answerable)
            high = statistics.median(p.score for p in points if p.answerable)
            found = fitted_cut.fit(points, SUCCESS_AT, NO_RESULTS_BELOW, always)
            cuts = {
                "most right, in force": _accuracy_cut(points, SUCCESS_AT, NO_RESULTS_BELOW, always),
                "the rule replaced": _replaced_rule(points, SUCCESS_AT, NO_RESULTS_BELOW, always),
                "anchored, no guards": min(max(low + SHIPPED_ANCHOR * (high - low), NO_RESULTS_BELOW), SUCCESS_AT),
                "shipped": found.success_at if found is not None and found.in_force else SUCCESS_AT,
            }
            asked = [before[q.id] for q in held]
            today = sum(_right_at(a, SUCCESS_AT, SUCCESS_AT, NO_RESULTS_BELOW) for a in asked)
            for rule, cut in cuts.items():
                right = sum(_right_at(a, cut, SUCCESS_AT, NO_RESULTS_BELOW) for a in asked)
                changes.setdefault(rule, []).append((right - today) / len(asked))
        if not changes:
            print(f"  {name}: no half has enough confirmations")
            continue
        for rule, d in changes.items():
            higher, lower = sum(x > 0 for x in d) / len(d), sum(x < 0 for x in d) / len(d)
            print(
                f"  {name}, {rule} ({len(d)} halves): mean {statistics.mean(d):+.3f}, higher on {higher:.2f}, "
                f"lower on {lower:.2f}, worst {min(d):+.3f}"
            )


def kinds(folder: Path) -> None:
    """Rule 3 first: drop the confirmations whose asked kind conflicts with the question's before
    rule 1 chooses the nearest one and its rival (the matcher checks the kind after, so a nearer
    confirmation of another kind refuses the question outright). Lists every question whose
    nearest confirmation would change, and whether the new one could be taken at all: its
    original's for a rewording, past ``near`` and ahead of its rival by MARGIN."""
    original: dict[str, str] = {}
    for c in json.loads((folder / "results.json").read_text())["communities"]:
        for r in c["rewordings"]["questions"]:
            original[r["id"]] = r["original"]
    changed = collections.Counter()
    reachable = collections.Counter()
    print("| community | id | kind | rewording | new nearest is its original | similarity | rival | near | question |")
    print("|---|---|---|---|---|---|---|---|---|")
    for line in (folder / "calls.jsonl").read_text().splitlines():
        row = json.loads(line)
        asks = confirmed.asking(row["question"])
        if asks is None:
            continue
        keep = [i for i, q in enumerate(row["confirmed"]) if confirmed.asking(q) in (None, asks)]
        if not keep:
            continue
        sims, answers = row["similarities"], [e[2] or 0 for e in row["entries"]]
        best = max(keep, key=lambda i: sims[i])
        if row["confirmed"][best] == row["nearest"]:
            continue
        rival = max((sims[i] for i in keep if answers[i] != answers[best]), default=-1.0)
        own = original.get(row["id"]) == row["confirmed"][best]
        changed[row["community"]] += 1
        could = sims[best] >= row["near"] and sims[best] - rival >= confirmed.MARGIN
        reachable[row["community"]] += could and own
        print(
            f"| {row['community']} | {row['id']} | {row['kind']} | {'yes' if row['id'] in original else 'no'} "
            f"| {'yes' if own else 'no'} | {sims[best]:.3f} | {rival:.3f} | {row['near']:.3f} | {row['question']} |"
        )
    print()
    for community in sorted(changed):
        print(
            f"{community}: nearest changed for {changed[community]} questions; "
            f"rewordings that could then take their original's confirmation: {reachable[community]}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run benchmarks/confirmations.py with the matcher's inputs recorded")
    rec.add_argument("dataset")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--community", action="append", default=[], help="only these communities (repeatable)")
    fitting = sub.add_parser("fit", help="replay the recordings over the grid, all and leaving each community out")
    fitting.add_argument("folder", type=Path)
    lists = sub.add_parser("overlap", help="try the candidates' overlap as a further route of rule 6")
    lists.add_argument("folder", type=Path)
    lists.add_argument("--dataset", type=Path, default=Path("/work/shared/datasets/hoa-dev"))
    near = sub.add_parser("passage", help="try the question against the confirmed passage and its sentences")
    near.add_argument("folder", type=Path)
    near.add_argument("--dataset", type=Path, default=Path("/work/shared/datasets/hoa-dev"))
    split = sub.add_parser("halves", help="(d) on seeded halves: rules 1-6 and rule 7's takes, right and wrong")
    split.add_argument("folder", type=Path)
    split.add_argument("--dataset", type=Path, default=Path("/work/shared/datasets/hoa-dev"))
    split.add_argument("--splits", type=int, default=100, help="seeded halves per community")
    split.add_argument("--design", choices=("passage ratio", "sentence ratio"), default="passage ratio")
    sub.add_parser("models", help="which local model tells a rewording from a different question").add_argument(
        "--dataset", type=Path, default=Path("/work/shared/datasets/hoa-dev")
    )
    sub.add_parser("kinds", help="rule 3 before rule 1: conflicting kinds dropped first").add_argument(
        "folder", type=Path
    )
    scaled = sub.add_parser("scale", help="replay the success cut fitted on the confirmations, and others")
    scaled.add_argument("folder", type=Path)
    scaled.add_argument("--splits", type=int, default=100, help="seeded halves per community for (d) again")
    args = parser.parse_args()
    if args.command == "record":
        record([args.dataset, *(a for c in args.community for a in ("--community", c))], args.out)
    elif args.command == "halves":
        halves(args.folder, args.dataset, args.splits, args.design)
    elif args.command == "passage":
        passage(args.folder, args.dataset)
    elif args.command == "overlap":
        overlap(args.folder, args.dataset)
    elif args.command == "models":
        models(args.dataset)
    elif args.command == "scale":
        scale(args.folder, args.splits)
    elif args.command == "kinds":
        kinds(args.folder)
    else:
        fit(args.folder)


if __name__ == "__main__":
    main()
