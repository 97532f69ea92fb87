"""``arc-retrieval eval`` on an answer dataset (see :mod:`worker.evaluation.answers`).

Each community gets its own database on one embedded Postgres, filled through the normal
ingestion path from its manifest; every question goes through the webhook (the Flask app, as n8n
calls it) with nothing but ``{"query": ...}``, so the default configuration is what is measured.
The anchors (:mod:`worker.evaluation.anchors`) run on the same files and embedding model.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import psycopg
from tqdm import tqdm

from ..config import Settings
from ..embeddings import CachedEmbedder
from ..ingest.ingestor import DocumentInput, Ingestor, embedding_texts, manifest_documents
from ..ingest.manifest import Manifest, load_manifest
from ..retrieve.status import answer_type
from ..runtime import Runtime
from ..store.database import Database
from ..store.embedded import EmbeddedPostgres
from ..tokens import default_counter
from . import anchors, budget
from .answers import (
    AnswerDataset,
    Outcome,
    Question,
    breakdown,
    evidence_found,
    split_sources,
    summarise,
)

ARC = "arc-retrieval"
N8N = "n8n default"
HYBRID = "hybrid top-5"
SYSTEMS = (ARC, N8N, HYBRID)


class VectorCache:
    """Passage vectors on disk, keyed by model and text, so repeated runs embed only what changed."""

    def __init__(self, path: Path, embedder: CachedEmbedder):
        self.path = path
        self.embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}
        if path.exists():
            with np.load(path) as data:
                self._vectors = {k: data[k] for k in data.files}
        self._dirty = False

    @classmethod
    def of_passages(cls, data_dir: Path, embedder: CachedEmbedder) -> VectorCache:
        """The passage vectors kept under ``data_dir`` for ``embedder``'s model and dimension."""
        return cls(data_dir / "cache" / f"passages-{embedder.model}-{embedder.dim}.npz", embedder)

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode()).hexdigest()[:24] for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self._vectors}.items())
        if missing:
            vectors = self.embedder.embed([t for _, t in missing])
            self._vectors.update({k: v for (k, _), v in zip(missing, vectors, strict=True)})
            self._dirty = True
        return np.stack([self._vectors[k] for k in keys]) if keys else np.zeros((0, self.embedder.dim), np.float32)

    def save(self) -> None:
        if self._dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # numpy's stub reads the keywords as its own allow_pickle: bool; these are arrays by key
            np.savez(self.path, **self._vectors)  # type: ignore[arg-type]
            self._dirty = False


@dataclass
class AnswerResults:
    dataset: str
    model: str
    outcomes: dict[str, list[Outcome]]
    budgets: budget.BudgetRuns = field(default_factory=budget.BudgetRuns)
    calibrations: dict[str, dict | None] = field(default_factory=dict)
    reranker: str = "off"

    def communities(self) -> list[str]:
        return list(dict.fromkeys(o.question.community for o in self.outcomes[ARC]))

    def community(self, name: str) -> AnswerResults:
        def mine(outcomes: list[Outcome]) -> list[Outcome]:
            return [o for o in outcomes if o.question.community == name]

        budgets = budget.BudgetRuns(
            equal_tokens={s: mine(out) for s, out in self.budgets.equal_tokens.items()},
            at_budget={s: {b: mine(out) for b, out in runs.items()} for s, runs in self.budgets.at_budget.items()},
        )
        return AnswerResults(
            f"{self.dataset} / {name}",
            self.model,
            {s: mine(out) for s, out in self.outcomes.items()},
            budgets=budgets,
            calibrations={name: self.calibrations.get(name)},
            reranker=self.reranker,
        )

    def to_json(self) -> dict:
        return {
            **self.budgets.to_json(self.outcomes[ARC]),
            "dataset": self.dataset,
            "embedding_model": self.model,
            "reranker": self.reranker,
            "calibrations": self.calibrations,
            "systems": {name: summarise(o) for name, o in self.outcomes.items()},
            "communities": {
                c: summarise([o for o in self.outcomes[ARC] if o.question.community == c]) for c in self.communities()
            },
            "breakdown": {name: breakdown(o) for name, o in self.outcomes.items()},
            "questions": {name: [x.row() for x in o] for name, o in self.outcomes.items()},
            "threshold_sweep": threshold_sweep(self.outcomes[ARC]),
            "leave_one_community_out": leave_one_community_out(self.outcomes[ARC]),
        }


def evaluate_answers(
    dataset: AnswerDataset, *, settings: Settings, embedder: CachedEmbedder, data_dir: Path, progress: bool = True
) -> AnswerResults:
    counter = default_counter()
    cache = VectorCache.of_passages(data_dir, embedder)
    outcomes: dict[str, list[Outcome]] = {name: [] for name in SYSTEMS}
    budgets = budget.BudgetRuns()
    calibrations: dict[str, dict | None] = {}
    for loaded in each_community(dataset, settings=settings, embedder=embedder, cache=cache, data_dir=data_dir):
        community, questions, manifest = loaded.community, loaded.questions, loaded.manifest
        index = anchors.build_index([manifest.path_of(e) for e in manifest.documents], cache.embed)
        cache.save()
        client, retriever = _webhook_client(settings, loaded.db, embedder)
        # What a deployed worker does in the background after an ingest, done before
        # the first question so that every question is answered calibrated.
        calibration = retriever.calibrate_now() if settings.status.status_calibration else None
        calibrations[community] = (
            None
            if calibration is None
            else {**calibration.anchors(), "questions": calibration.questions, "kb_version": calibration.version}
        )
        corpus = "\n".join(" ".join(c.content for c in d.chunks) for d in loaded.documents)
        for question in tqdm(questions, desc=community, unit="q", disable=not progress):
            outcome = _ask_worker(client, settings, question)
            outcome.evidence_in_kb = question.kind == "answerable" and evidence_found(question.evidence, corpus)
            outcomes[ARC].append(outcome)
            budget.measure(
                budgets,
                question,
                outcomes[ARC][-1],
                index=index,
                embedder=embedder,
                counter=counter,
                ask=partial(_ask_budget, client, settings, question),
            )
            outcomes[N8N].append(_anchor(question, index, embedder, counter, hybrid=False))
            outcomes[HYBRID].append(_anchor(question, index, embedder, counter, hybrid=True))
    return AnswerResults(
        dataset.name,
        embedder.model,
        outcomes,
        budgets=budgets,
        calibrations=calibrations,
        reranker="on" if settings.reranking.reranker == "llm" else "off",
    )


@dataclass
class LoadedCommunity:
    """One community of an answer dataset, ingested into a database of its own."""

    community: str
    questions: list[Question]
    manifest: Manifest
    documents: list[DocumentInput]
    db: Database


def each_community(
    dataset: AnswerDataset,
    *,
    settings: Settings,
    embedder: CachedEmbedder,
    cache: VectorCache,
    data_dir: Path,
    only: Collection[str] = (),
) -> Iterator[LoadedCommunity]:
    """Each community with questions (of ``only``, when given), ingested through the normal path
    into its own database on one embedded server; the database closes when the next one comes."""
    workdir = Path(tempfile.mkdtemp(prefix="answers-", dir=data_dir))
    server = EmbeddedPostgres(workdir, runtime_dir=data_dir)
    try:
        server_url = server.start()
        for community, folder in dataset.communities.items():
            questions = [q for q in dataset.questions if q.community == community]
            if not questions or (only and community not in only):
                continue
            manifest = load_manifest(folder)
            db = Database(
                _new_database(server_url, community), statement_timeout_ms=settings.database.statement_timeout_ms
            )
            try:
                db.migrate(embedder.dim)
                ingestor = Ingestor(db, embedder)
                documents = manifest_documents(ingestor, manifest)
                ingestor.write(documents, cache.embed(embedding_texts(documents)))
                yield LoadedCommunity(community, questions, manifest, documents, db)
            finally:
                db.close()
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _new_database(server_url: str, community: str) -> str:
    name = "answers_" + "".join(c if c.isalnum() else "_" for c in community.lower())[:30] + "_" + uuid.uuid4().hex[:6]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    return server_url.replace("/postgres?", f"/{name}?", 1)


def _webhook_client(settings: Settings, db: Database, embedder: CachedEmbedder):
    from ..serve.app import create_app
    from ..service.build import build_retriever

    # The webhook exactly as configured, on this community's database; the rate limit is for
    # callers, not for an evaluation that asks 134 questions in a row.
    runtime = Runtime(settings.replace(rate_limit=0), db, embedder)
    retriever = build_retriever(runtime)
    return create_app(runtime=runtime, retriever=retriever).test_client(), retriever


def _ask_budget(client, settings: Settings, question: Question, tokens: int) -> Outcome:
    """The worker's answer within a token budget of ``tokens``."""
    return _ask_worker(client, settings, question, token_budget=tokens)


def ask_webhook(client, settings: Settings, question: Question, **request) -> tuple[dict, float]:
    """The retrieval webhook's answer to ``question`` (``request``: more fields of the request)
    and its latency in ms; an answer other than 200 is an error of the run."""
    from ..serve.app import RETRIEVAL_ROUTE

    auth = settings.auth
    headers = {auth.auth_header: auth.api_token} if auth.api_token else {}
    start = time.perf_counter()
    response = client.post(RETRIEVAL_ROUTE, json={"query": question.question, **request}, headers=headers)
    latency = (time.perf_counter() - start) * 1000
    body = response.get_json()
    if response.status_code != 200:
        raise RuntimeError(f"{question.id}: the webhook answered {response.status_code}: {body}")
    return body, latency


def _ask_worker(client, settings: Settings, question: Question, **request) -> Outcome:
    body, latency = ask_webhook(client, settings, question, **request)
    # whether the answer-type check would keep this context from `success` at any cut: the
    # fitted cuts below must see the status the worker would give, not the score alone
    lacking = settings.status.status_answer_types and answer_type.missing(body["query"]["normalized"], body["context"])
    return Outcome(
        question=question,
        context=body["context"],
        sources=split_sources(body["context"]),
        tokens=body["context_tokens"],
        latency_ms=latency,
        status=body["status"],
        best_score=body["best_score"],
        confidence=_confidence(body),
        notes={
            "filter": body["query"]["filter_source"],
            "warnings": body["warnings"],
            "lacks_answer_type": bool(lacking),
        },
    )


def _confidence(body: dict) -> float | None:
    """The number the status was decided on: the calibrated score, else the best relevance."""
    confidence = body.get("confidence") or {}
    return confidence.get("score") if confidence.get("score") is not None else confidence.get("relevance")


def _anchor(
    question: Question, index: anchors.AnchorIndex, embedder: CachedEmbedder, counter, *, hybrid: bool
) -> Outcome:
    start = time.perf_counter()
    vector = embedder.embed_query(question.question)
    chunks = anchors.hybrid_top5(index, question.question, vector) if hybrid else anchors.n8n_default(index, vector)
    latency = (time.perf_counter() - start) * 1000
    context = anchors.JOIN.join(chunks)
    return Outcome(
        question=question, context=context, sources=chunks, tokens=counter.count(context), latency_ms=latency
    )


# -- report ---------------------------------------------------------------------------------------

_MAIN_COLUMNS = [
    ("evidence_in_context", "evidence in context"),
    ("evidence_in_source1", "evidence in SOURCE 1"),
    ("status_right", "status right"),
    ("hedged", "hedged"),
    ("answerable_no_results_with_evidence", "`no_results` with evidence in KB"),
    ("confidence_auroc", "confidence AUROC"),
    ("answerable_empty_context", "answerable, empty context"),
    ("answerable_no_results", "answerable `no_results`"),
    ("negatives_success", "negatives `success`"),
    ("negatives_no_results", "negatives `no_results`"),
    ("mean_context_tokens", "mean context tokens"),
    ("mean_sources", "sources (answerable)"),
    ("p50_ms", "p50 ms"),
    ("p95_ms", "p95 ms"),
]


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value.is_integer() is False and abs(value) < 10:
        return f"{value:.2f}"
    return f"{value:.0f}" if isinstance(value, float) else str(value)


def _calibration_cell(calibration: dict) -> str:
    cell = f"floor {calibration['floor']:.3f}, match {calibration['match']:.3f}"
    near_miss = calibration.get("near_miss")
    return cell if near_miss is None else f"{cell}, near miss {near_miss:.3f}"


def write_answer_report(results: AnswerResults, out: Path, *, command: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    data = results.to_json()
    communities = results.communities()
    if len(communities) > 1:
        # Each community is its own knowledge base: its own file, the same settings.
        for community in communities:
            write_answer_report(results.community(community), out / community, command=command)
    (out / "results.json").write_text(json.dumps(data, indent=1) + "\n")
    systems = data["systems"]
    n = systems[ARC]
    lines = [
        f"# Answer quality: {results.dataset}",
        "",
        f"{n['questions']} questions ({n['answerable']} answerable, {n['negatives']} unanswerable or off "
        f"topic), embedding model {results.model}, reranker {results.reranker}.",
        "",
        f"Command: `{command}`",
        "",
        "Status calibration per knowledge base (`floor`: median best relevance of off-domain questions; "
        "`match`: of the knowledge base's own sentences asked back; `near miss`: of those sentences among "
        "the passages that do not hold them): "
        + (
            "; ".join(f"{c}: " + (_calibration_cell(v) if v else "none") for c, v in results.calibrations.items())
            or "off"
        )
        + ".",
        "",
        "| system | " + " | ".join(label for _, label in _MAIN_COLUMNS) + " |",
        "|---|" + "---|" * len(_MAIN_COLUMNS),
    ]
    for name, row in systems.items():
        lines.append(f"| {name} | " + " | ".join(_cell(row.get(key)) for key, _ in _MAIN_COLUMNS) + " |")
    if len(communities) > 1:
        columns = [
            ("questions", "questions"),
            ("evidence_in_context", "evidence in context"),
            ("evidence_in_source1", "SOURCE 1"),
            ("status_right", "status right"),
            ("hedged", "hedged"),
            ("negatives_success", "negatives `success`"),
            ("answerable_no_results_with_evidence", "`no_results` with evidence"),
            ("confidence_auroc", "confidence AUROC"),
            ("mean_context_tokens", "mean tokens"),
        ]
        lines += [
            "",
            "## arc-retrieval per community (each its own knowledge base, the same settings)",
            "",
            "| community | " + " | ".join(label for _, label in columns) + " |",
            "|---|" + "---|" * len(columns),
        ]
        for community, row in data["communities"].items():
            lines.append(f"| {community} | " + " | ".join(_cell(row.get(k)) for k, _ in columns) + " |")
    loo = data["leave_one_community_out"]
    if loo:
        lines += [
            "",
            "## The success cut, leave one community out",
            "",
            "The cut on the status signal (`confidence.score`; the best relevance when uncalibrated) "
            "that gives the most right statuses on the other communities "
            "(each point of negatives `success` above 0.05 costing two), applied to this one, "
            "against the configured cut (the same for all). A cut that only "
            "works where it was fitted shows here.",
            "",
            "| held-out community | cut fitted on the others | status right | hedged | negatives `success` | "
            "status right at the configured cut |",
            "|---|---|---|---|---|---|",
        ]
        for row in loo:
            lines.append(
                f"| {row['community']} | {row['cut']:.2f} | {row['status_right']:.2f} | {row['hedged']:.2f} | "
                f"{row['negatives_success']:.2f} | {row['status_right_configured']:.2f} |"
            )
    lines += [
        "",
        "## arc-retrieval by question kind",
        "",
        "| kind | n | evidence in context | SOURCE 1 | `success` | `low_confidence` | `no_results` | mean tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    arc = results.outcomes[ARC]
    for kind, row in data["breakdown"][ARC]["kind"].items():
        group = [o for o in arc if o.question.kind == kind]
        shares = [sum(o.status == s for o in group) / len(group) for s in ("success", "low_confidence", "no_results")]
        lines.append(
            f"| {kind} | {row['questions']} | {_cell(row['evidence_in_context'])} | "
            f"{_cell(row['evidence_in_source1'])} | "
            + " | ".join(f"{s:.2f}" for s in shares)
            + f" | {_cell(row['mean_context_tokens'])} |"
        )
    lines += [
        "",
        "## Evidence in context by tag",
        "",
        "| tag | n | " + " | ".join(SYSTEMS) + " |",
        "|---|---|" + "---|" * len(SYSTEMS),
    ]
    for tag, row in data["breakdown"][ARC]["tag"].items():
        cells = [_cell(data["breakdown"][s]["tag"][tag]["evidence_in_context"]) for s in SYSTEMS]
        lines.append(f"| {tag} | {row['questions']} | " + " | ".join(cells) + " |")
    misses = [
        o
        for o in arc
        if (o.question.kind == "answerable" and not o.in_context) or (o.question.negative and o.status == "success")
    ]
    lines += [
        "",
        "## arc-retrieval's misses",
        "",
        "Answerable questions whose evidence is not in the context, and negatives answered `success`.",
        "",
        "| id | kind | status | best score | question |",
        "|---|---|---|---|---|",
    ]
    for o in misses:
        lines.append(
            f"| {o.question.id} | {o.question.kind} | {o.status} | {_cell(o.best_score)} | "
            f"{o.question.question.replace('|', '/')} |"
        )
    lines += [
        "",
        "## Status thresholds (arc-retrieval)",
        "",
        "Each question's `best_score` (the first chunk's `final_score`) against a threshold: the share "
        "of negatives at or above it (they would be answered `success` if it were "
        "`ARC_LOW_CONFIDENCE_BELOW`) and of answerable questions below it (they would be `no_results` "
        "if it were `ARC_NO_RESULTS_BELOW`).",
        "",
        "| threshold | negatives at or above | answerable below |",
        "|---|---|---|",
    ]
    for row in threshold_sweep(arc):
        lines.append(f"| {row['threshold']:.3f} | {row['negatives_at_or_above']:.2f} | {row['answerable_below']:.2f} |")
    lines += [
        "",
        "Evidence counts when one of a question's phrases occurs in the context after both are "
        "lower-cased, the characters `` *_`#>|\\ `` are made spaces, curly quotes straight and whitespace "
        "runs single. The anchors' contexts are their chunks joined by blank lines (tokens: cl100k); "
        "their latency is the query embedding plus scoring in memory, not comparable with the "
        "webhook's.",
        "",
    ]
    lines[-1:-1] = budget.report_lines(data)
    (out / "results.md").write_text("\n".join(lines))
    _chart(systems, out / "chart.png", results.dataset)
    budget.chart(data, out / "budget.png", results.dataset)
    return data


def _statuses_at(outcomes: list[Outcome], cut: float) -> dict[str, float]:
    """Status right, hedged and negatives success had ``success`` started at ``cut``."""

    def success(o: Outcome) -> bool:
        return (
            o.confidence is not None
            and o.confidence >= cut
            and o.status != "no_results"
            and not o.notes.get("lacks_answer_type")
        )

    answered = [o for o in outcomes if o.question.kind == "answerable" and o.in_context]
    negatives = [o for o in outcomes if o.question.negative]
    right = [success(o) and o.in_context if o.question.kind == "answerable" else not success(o) for o in outcomes]
    return {
        "status_right": sum(right) / max(len(outcomes), 1),
        "hedged": sum(not success(o) for o in answered) / max(len(answered), 1),
        "negatives_success": sum(success(o) for o in negatives) / max(len(negatives), 1),
    }


# What a fitted cut aims at: the most right statuses, with negatives answered
# `success` held to 5%: each point above that costs two points of status right.
NEGATIVES_SUCCESS_TARGET = 0.05


def _fit(shown: dict[str, float]) -> float:
    return shown["status_right"] - 2 * max(0.0, shown["negatives_success"] - NEGATIVES_SUCCESS_TARGET)


def leave_one_community_out(outcomes: list[Outcome]) -> list[dict]:
    """Fit the success cut on all communities but one, show it on that one."""
    communities = list(dict.fromkeys(o.question.community for o in outcomes))
    if len(communities) < 3 or all(o.confidence is None for o in outcomes):
        return []
    scale = sorted({round(o.confidence, 2) for o in outcomes if o.confidence is not None})
    rows = []
    for held in communities:
        others = [o for o in outcomes if o.question.community != held]
        mine = [o for o in outcomes if o.question.community == held]
        cut = max(scale, key=lambda c: (_fit(_statuses_at(others, c)), -abs(c - 0.5)))
        shown = _statuses_at(mine, cut)
        actual = sum(
            (o.status == "success" and o.in_context) if o.question.kind == "answerable" else o.status != "success"
            for o in mine
        ) / len(mine)
        rows.append({"community": held, "cut": cut, **shown, "status_right_configured": actual})
    return rows


def threshold_sweep(
    outcomes: list[Outcome], start: float = 0.2, stop: float = 0.65, step: float = 0.025
) -> list[dict[str, float]]:
    """How a status threshold would split these questions (the calibration method in the README)."""
    answerable = [o.best_score or 0.0 for o in outcomes if o.question.kind == "answerable"]
    negatives = [o.best_score or 0.0 for o in outcomes if o.question.negative]
    rows = []
    for i in range(round((stop - start) / step) + 1):
        t = round(start + i * step, 3)
        rows.append(
            {
                "threshold": t,
                "negatives_at_or_above": sum(s >= t for s in negatives) / max(len(negatives), 1),
                "answerable_below": sum(s < t for s in answerable) / max(len(answerable), 1),
            }
        )
    return rows


def _chart(systems: dict[str, dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [
        ("evidence_in_context", "evidence in context"),
        ("evidence_in_source1", "in SOURCE 1"),
        ("answerable_empty_context", "answerable, empty"),
        ("negatives_success", "negatives success"),
    ]
    fig, (ax, ax_tokens) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / len(systems)
    for i, (name, row) in enumerate(systems.items()):
        xs = [m + i * width for m in range(len(metrics))]
        ax.bar(xs, [row.get(k) or 0 for k, _ in metrics], width, label=name)
        ax_tokens.bar(i, row.get("mean_context_tokens") or 0, 0.6, label=name)
    ax.set_xticks([m + width * (len(systems) - 1) / 2 for m in range(len(metrics))], [label for _, label in metrics])
    ax.set_ylim(0, 1)
    ax.set_title(f"{title}: what the agent receives")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax_tokens.set_xticks(range(len(systems)), list(systems), rotation=20, fontsize=8)
    ax_tokens.set_title("mean context tokens")
    ax_tokens.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
