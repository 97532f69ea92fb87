"""Confirmed answers on one community's knowledge base, through the webhooks (benchmarks/confirmations.py).

The keeper's calls go over HTTP with the keeper's (ingest) token: the documents API for the
chunks, ``/webhook/arc-confirm`` to confirm, list and remove; the questions go through the
retrieval webhook with the agents' token, as :mod:`worker.evaluation.answer_harness` asks them.
:func:`measure_community` runs the four steps the script reports: every question before any
confirmation, the rewordings with their originals confirmed, every other question beside those
confirmations, and a held-out half with the other half confirmed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import Settings
from ..embeddings import CachedEmbedder
from .answer_harness import LoadedCommunity, _webhook_client, ask_webhook
from .answers import Outcome, Question, evidence_found, split_sources, status_right, summarise
from .rewordings import ChunkText, EvidenceChunk, RewordingSet, evidence_chunk, half_split

CONFIRM_ROUTE = "/webhook/arc-confirm"


@dataclass
class Answer:
    """One answer of the retrieval webhook, with what it says about confirmations."""

    outcome: Outcome
    decided_on: str | None
    confirmed: dict | None

    @property
    def question(self) -> Question:
        return self.outcome.question

    @property
    def evidence_source(self) -> int | None:
        """The first ``[SOURCE n]`` holding the evidence (n, from 1), None when none does."""
        for n, block in enumerate(self.outcome.sources, start=1):
            if evidence_found(self.question.evidence, block):
                return n
        return None

    @property
    def right(self) -> bool:
        return status_right(self.outcome)

    def row(self) -> dict:
        o = self.outcome
        return {
            "id": self.question.id,
            "kind": self.question.kind,
            "status": o.status,
            "status_right": self.right,
            "evidence_in_context": o.in_context if self.question.kind == "answerable" else None,
            "evidence_in_source1": o.in_source1 if self.question.kind == "answerable" else None,
            "evidence_source": self.evidence_source if self.question.kind == "answerable" else None,
            "best_score": o.best_score,
            "confidence": o.confidence,
            "decided_on": self.decided_on,
            "confirmed": self.confirmed,
            "latency_ms": round(o.latency_ms, 2),
        }


def ask(client: Any, settings: Settings, question: Question) -> Answer:
    body, latency = ask_webhook(client, settings, question)
    confidence = body.get("confidence") or {}
    score = confidence.get("score") if confidence.get("score") is not None else confidence.get("relevance")
    outcome = Outcome(
        question=question,
        context=body["context"],
        sources=split_sources(body["context"]),
        tokens=body["context_tokens"],
        latency_ms=latency,
        status=body["status"],
        best_score=body["best_score"],
        confidence=score,
    )
    return Answer(outcome, confidence.get("decided_on"), body.get("confirmed"))


# -- the keeper's side: chunks and confirmations over HTTP -------------------------------------


@dataclass
class Keeper:
    """The keeper's calls on one community's knowledge base, with the ingest token."""

    client: Any  # the Flask test client of the worker's app
    headers: dict[str, str]
    community: str = ""

    def _json(self, response: Any, what: str) -> dict:
        body = response.get_json(silent=True)
        if response.status_code >= 300:
            raise RuntimeError(f"{what}: {response.status_code} {body}")
        return body or {}

    def chunks(self) -> list[ChunkText]:
        """Every chunk of every document, as the documents API shows them."""
        from ..serve.documents_api import DOCUMENTS_ROUTE

        listing = self._json(self.client.get(DOCUMENTS_ROUTE, headers=self.headers), "list documents")
        self.community = listing["community"]
        found = []
        for document in listing["documents"]:
            doc_id = document["document_id"]
            shown = self._json(
                self.client.get(
                    f"{DOCUMENTS_ROUTE}/{doc_id}", query_string={"community": self.community}, headers=self.headers
                ),
                f"show {doc_id}",
            )
            found += [ChunkText(c["id"], doc_id, c["section_path"], c["content"]) for c in shown["chunks"]]
        return found

    def confirm(self, question: Question, chunk: EvidenceChunk | None) -> dict:
        body: dict = {"community": self.community, "query": question.question}
        if question.negative:
            body["answer"] = "none"
        else:
            assert chunk is not None
            body["chunk_id"] = chunk.chunk_id
        return self._json(self.client.post(CONFIRM_ROUTE, json=body, headers=self.headers), f"confirm {question.id}")

    def listed(self) -> list[dict]:
        body = self._json(
            self.client.get(CONFIRM_ROUTE, query_string={"community": self.community}, headers=self.headers),
            "list confirmations",
        )
        return body["confirmations"]

    def remove_all(self) -> int:
        listed = self.listed()
        for c in listed:
            self._json(self.client.delete(f"{CONFIRM_ROUTE}/{c['id']}", headers=self.headers), f"remove {c['id']}")
        return len(listed)


@dataclass
class Confirmed:
    """What one round of confirmations did: each question's confirmation (or why none)."""

    made: dict[str, dict] = field(default_factory=dict)  # question id -> the API's confirmation
    chunks: dict[str, EvidenceChunk] = field(default_factory=dict)
    unconfirmable: list[str] = field(default_factory=list)  # answerable, no chunk holds its evidence


def confirm_all(keeper: Keeper, questions: list[Question], chunks: list[ChunkText]) -> Confirmed:
    done = Confirmed()
    for q in questions:
        chunk = None if q.negative else evidence_chunk(q, chunks)
        if not q.negative and chunk is None:
            done.unconfirmable.append(q.id)
            continue
        done.made[q.id] = keeper.confirm(q, chunk)
        if chunk is not None:
            done.chunks[q.id] = chunk
    return done


# -- one community ----------------------------------------------------------------------------


def _share(values: list[bool]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _summary(answers: list[Answer]) -> dict:
    s = summarise([a.outcome for a in answers])
    return {
        "questions": s["questions"],
        "answerable": s["answerable"],
        "negatives": s["negatives"],
        "evidence_in_context": s["evidence_in_context"],
        "evidence_in_source1": s["evidence_in_source1"],
        "status_right": s.get("status_right"),
        "decided_on_confirmed": _share([a.decided_on == "confirmed" for a in answers]),
    }


def _changes(before: dict[str, Answer], after: list[Answer]) -> list[dict]:
    """The questions whose evidence in context, SOURCE 1 or status differ from ``before``."""
    changed = []
    for a in after:
        b = before[a.question.id]
        keys = ("status", "evidence_in_context", "evidence_in_source1")
        if any(a.row()[k] != b.row()[k] for k in keys):
            changed.append({"id": a.question.id, "question": a.question.question, "before": b.row(), "after": a.row()})
    return changed


def _nearness(embedder: CachedEmbedder, question: str, original: str, confirmed: list[str]) -> tuple[float, int]:
    """The cosine of ``question`` to its ``original``, and the original's rank (from 1) among
    the ``confirmed`` questions by cosine to ``question``."""
    vectors = np.stack([embedder.embed_query(t) for t in (question, original, *confirmed)])
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = vectors[2:] @ vectors[0]
    own = float(vectors[1] @ vectors[0])
    return round(own, 4), 1 + int(np.sum(cosines > own + 1e-6))


def measure_community(
    loaded: LoadedCommunity, rewording_set: RewordingSet, *, settings: Settings, embedder: CachedEmbedder, seed: int
) -> dict:
    """The four steps on ``loaded``'s knowledge base; every confirmation is removed at the end."""
    community = loaded.community
    client, retriever = _webhook_client(settings, loaded.db, embedder)
    keeper = Keeper(client, {settings.auth.auth_header: settings.auth.ingest_token or ""})
    if settings.status.status_calibration:
        retriever.calibrate_now()
    chunks = keeper.chunks()
    originals = [q for q in rewording_set.originals if q.community == community]
    rewordings = rewording_set.of_community(community)
    by_id = {q.id: q for q in originals}

    def asked(questions: list[Question]) -> list[Answer]:
        return [ask(client, settings, q) for q in questions]

    before = {a.question.id: a for a in asked(originals + [r.question for r in rewordings])}

    reworded = rewording_set.reworded(community)
    confirmed = confirm_all(keeper, reworded, chunks)
    if settings.status.status_calibration:
        retriever.calibrate_now(keeper.community)
    after_rewordings = asked([r.question for r in rewordings])
    reworded_ids = {q.id for q in reworded}
    others = [q for q in originals if q.id not in reworded_ids]
    after_others = asked(others)
    originals_confirmed = asked(reworded)

    removed = keeper.remove_all()
    half, held_out = half_split(originals, seed)
    confirmed_half = confirm_all(keeper, half, chunks)
    if settings.status.status_calibration:
        retriever.calibrate_now(keeper.community)
    after_half = asked(held_out)
    keeper.remove_all()

    of = {r.question.id: r.of for r in rewordings}
    rewording_rows = []
    confirmed_texts = [by_id[i].question for i in confirmed.made]
    for a in after_rewordings:
        original = by_id[of[a.question.id]]
        cosine, rank = _nearness(embedder, a.question.question, original.question, confirmed_texts)
        rewording_rows.append(
            {
                **a.row(),
                "of": original.id,
                "question": a.question.question,
                "original": original.question,
                "cosine_to_original": cosine,
                "original_rank": rank,
                "original_confirmation": confirmed.made.get(original.id, {}).get("id"),
                "before": before[a.question.id].row(),
            }
        )
    before_others = [before[q.id] for q in others]
    before_held = [before[q.id] for q in held_out]
    return {
        "community": community,
        "key": keeper.community,
        "chunks": len(chunks),
        "originals": len(originals),
        "rewordings": {
            "confirmed_originals": len(confirmed.made),
            "unconfirmable": confirmed.unconfirmable,
            "evidence_chunks": {k: v.__dict__ for k, v in confirmed.chunks.items()},
            "before": _summary([before[r.question.id] for r in rewordings]),
            "after": _summary(after_rewordings),
            "originals_after": _summary(originals_confirmed),
            "originals_after_questions": [a.row() for a in originals_confirmed],
            "questions": rewording_rows,
        },
        "others": {
            "before": _summary(before_others),
            "after": _summary(after_others),
            "changed": _changes(before, after_others),
        },
        "half": {
            "seed": seed,
            "confirmed": len(confirmed_half.made),
            "unconfirmable": confirmed_half.unconfirmable,
            "removed_before": removed,
            "held_out": len(held_out),
            "before": _summary(before_held),
            "after": _summary(after_half),
            "changed": _changes(before, after_half),
        },
    }
