"""Rewordings (benchmarks/confirmations/hoa-dev-rewordings.jsonl) and the parts of the
confirmation harness that need no confirmation API: loading and checking rewordings, finding
the chunk that holds an original's evidence (by hand and through the documents API of a real
worker), and the seeded half split."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from worker.evaluation.answer_harness import VectorCache, _webhook_client, each_community
from worker.evaluation.answers import Question
from worker.evaluation.confirmation_harness import Keeper, ask
from worker.evaluation.rewordings import ChunkText, evidence_chunk, half_split, load_with_rewordings

ROOT = Path(__file__).resolve().parent.parent
REWORDINGS = ROOT / "benchmarks" / "confirmations" / "hoa-dev-rewordings.jsonl"
HOA_DEV = next(
    (
        p
        for p in (
            Path(os.environ.get("ARC_HOA_DEV", "/nonexistent")),
            ROOT.parent / "shared" / "datasets" / "hoa-dev",
            ROOT.parent.parent / "shared" / "datasets" / "hoa-dev",
        )
        if (p / "questions.jsonl").is_file()
    ),
    None,
)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9']+", text.lower()))


@pytest.mark.skipif(HOA_DEV is None, reason="the hoa-dev dataset is not beside this checkout (set ARC_HOA_DEV)")
def test_each_hoa_dev_community_has_its_rewordings_in_other_words():
    assert HOA_DEV is not None
    dataset, rewordings = load_with_rewordings(HOA_DEV, REWORDINGS)
    originals = {q.id: q for q in rewordings.originals}
    counts = Counter((r.question.community, r.question.kind) for r in rewordings.rewordings)
    for community in dataset.communities:
        assert counts[(community, "answerable")] >= 20, community
        assert counts[(community, "unanswerable")] >= 5, community
    for r in rewordings.rewordings:
        original = originals[r.of]
        assert r.question.negative == original.negative and r.question.community == original.community
        if not r.question.negative:
            assert r.question.evidence == original.evidence and r.question.gold_document == original.gold_document
        # other key words, not the same words reordered: at most half the words of the two shared
        a, b = _words(r.question.question), _words(original.question)
        assert len(a & b) / len(a | b) < 0.5, (r.question.id, r.question.question, original.question)
    # none of the dataset's own questions is copied in
    assert not {r.question.question.lower() for r in rewordings.rewordings} & {
        q.question.lower() for q in originals.values()
    }
    twice = Counter(r.of for r in rewordings.rewordings if r.question.community == "timbers")
    assert max(twice.values()) == 2
    texts = [r.question.question for r in rewordings.rewordings]
    assert len(set(texts)) == len(texts)


def _dataset(tmp_path: Path, lines: list[dict]) -> Path:
    folder = tmp_path / "set"
    community = folder / "oak-hill"
    community.mkdir(parents=True)
    (community / "rules.md").write_text(
        "# Fences\n\nFences may be at most six feet tall in the back yard and four feet in front.\n\n"
        "# Pets\n\nDogs must be leashed in the common areas at all times.\n"
    )
    (community / "manifest.json").write_text(
        json.dumps(
            {"documents": [{"file": "rules.md", "document_id": "oak-rules", "document_type": "ccr", "name": "Rules"}]}
        )
    )
    (folder / "questions.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


ORIGINALS = [
    {
        "id": "q1",
        "community": "oak-hill",
        "question": "how tall can my fence be",
        "kind": "answerable",
        "gold_document": "oak-rules",
        "evidence": ["at most six feet tall in the back yard"],
    },
    {"id": "q2", "community": "oak-hill", "question": "is there a pool", "kind": "unanswerable"},
    {"id": "q3", "community": "oak-hill", "question": "capital of peru", "kind": "off_topic"},
]


def test_rewordings_in_the_dataset_itself_take_their_originals_evidence(tmp_path):
    folder = _dataset(
        tmp_path,
        [
            *ORIGINALS,
            {"id": "r1", "question": "what's the max height for a backyard fence", "kind": "answerable", "of": "q1"},
            {"id": "r2", "community": "oak-hill", "question": "can we go swimming", "kind": "off_topic", "of": "q2"},
        ],
    )
    dataset, found = load_with_rewordings(folder)
    assert [q.id for q in found.originals] == ["q1", "q2", "q3"]
    assert {q.id for q in dataset.questions} == {"q1", "q2", "q3", "r1", "r2"}
    r1 = found.rewordings[0]
    assert r1.of == "q1" and r1.question.community == "oak-hill"
    assert r1.question.evidence == ("at most six feet tall in the back yard",)
    assert r1.question.gold_document == "oak-rules"
    assert [q.id for q in found.reworded("oak-hill")] == ["q1", "q2"]

    extra = tmp_path / "more.jsonl"
    extra.write_text(json.dumps({"id": "r3", "question": "fence limit?", "kind": "answerable", "of": "q1"}) + "\n")
    _, more = load_with_rewordings(folder, extra)
    assert [r.question.id for r in more.rewordings] == ["r1", "r2", "r3"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"id": "r", "question": "x", "kind": "unanswerable", "of": "q9"}, "of: names no original"),
        ({"id": "r", "question": "x", "kind": "answerable", "of": "q2"}, "kind: answerable, its original q2"),
        ({"id": "r", "question": "x", "kind": "unanswerable", "of": "q1"}, "kind: unanswerable, its original q1"),
        ({"id": "q1", "question": "x", "kind": "unanswerable", "of": "q2"}, "id: used more than once: q1"),
    ],
)
def test_a_bad_rewording_is_named_with_its_line(tmp_path, line, message):
    folder = _dataset(tmp_path, ORIGINALS)
    extra = tmp_path / "bad.jsonl"
    extra.write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=message) as caught:
        load_with_rewordings(folder, extra)
    assert str(caught.value).startswith(("bad.jsonl:1", "id:"))


def _question(evidence: tuple[str, ...], gold: str = "gold") -> Question:
    return Question("q", "c", "?", "answerable", gold_document=gold, evidence=evidence)


CHUNKS = [
    ChunkText(1, "other", "", "Fences may be at most six feet tall."),
    ChunkText(2, "gold", "Art. I", "Definitions of words."),
    ChunkText(3, "gold", "Art. II", "Fences may be at most **six feet**\n tall in back."),
    ChunkText(4, "gold", "Art. III", "and the rest of a sentence that a chunk boundary cut."),
]


def test_the_evidence_chunk_is_the_gold_documents_first_holding_a_phrase():
    found = evidence_chunk(_question(("six feet tall",)), CHUNKS)
    assert found is not None and (found.chunk_id, found.found) == (3, "gold")
    elsewhere = evidence_chunk(_question(("six feet tall.",)), CHUNKS)
    assert elsewhere is not None and (elsewhere.chunk_id, elsewhere.found) == (1, "elsewhere")
    cut = evidence_chunk(_question(("a long opening here, and the rest of a sentence that a chunk",)), CHUNKS)
    assert cut is not None and (cut.chunk_id, cut.found) == (4, "partial")
    assert evidence_chunk(_question(("zzz",)), []) is None


def test_the_half_split_is_fixed_and_halves_each_kind():
    questions = [Question(f"a{i}", "c", "?", "answerable", evidence=("x",)) for i in range(9)] + [
        Question(f"n{i}", "c", "?", "unanswerable" if i % 2 else "off_topic") for i in range(5)
    ]
    confirmed, held = half_split(questions, 57)
    assert half_split(questions, 57) == (confirmed, held)
    # the split depends on the ids, not on the order the questions come in
    assert {q.id for q in half_split(list(reversed(questions)), 57)[0]} == {q.id for q in confirmed}
    assert {q.id for q in confirmed} | {q.id for q in held} == {q.id for q in questions}
    assert not {q.id for q in confirmed} & {q.id for q in held}
    assert sum(not q.negative for q in confirmed) == 4 and sum(q.negative for q in confirmed) == 2
    assert half_split(questions, 58) != (confirmed, held)


def test_the_keeper_finds_the_evidence_chunk_through_the_documents_api(tmp_path, embedder):
    """On a real worker: the documents API's chunks, the chunk holding the evidence, and the
    retrieval webhook's answer with the SOURCE that holds it."""
    from worker.config import Settings

    folder = _dataset(tmp_path, ORIGINALS)
    dataset, found = load_with_rewordings(folder)
    # the embedded Postgres's socket lives in its data folder: a short path, whatever pytest's is
    data = Path(tempfile.mkdtemp(prefix="arc-rw-"))
    settings = Settings.from_env(
        {}, data_dir=data, api_token="a" * 32, ingest_token="k" * 32, status_calibration=False
    )
    cache = VectorCache.of_passages(data, embedder)
    for loaded in each_community(dataset, settings=settings, embedder=embedder, cache=cache, data_dir=data):
        client, _ = _webhook_client(settings, loaded.db, embedder)
        keeper = Keeper(client, {settings.auth.auth_header: "k" * 32})
        chunks = keeper.chunks()
        assert keeper.community == "default" and chunks and {c.document_id for c in chunks} == {"oak-rules"}
        chunk = evidence_chunk(found.originals[0], chunks)
        assert chunk is not None and chunk.found == "gold"
        assert "six feet" in next(c.content for c in chunks if c.id == chunk.chunk_id)
        answer = ask(client, settings, found.originals[0])
        assert answer.evidence_source == 1 and answer.outcome.in_source1
        agents = Keeper(client, {settings.auth.auth_header: "a" * 32})
        with pytest.raises(RuntimeError, match=r"list documents: 40[13]"):
            agents.chunks()
