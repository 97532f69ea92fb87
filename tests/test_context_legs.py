"""The context a caller sizes is filled, and no search leg's best hit is lost to the fusion.

A passage that one leg ranks near the top and the other leg does not return at all counts 0 for
that leg in the weighted fusion and can sink below chunks both legs found moderately. Each leg's
best three go into the context all the same.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from worker.ingest.ingestor import Ingestor
from worker.ingest.readers import parse_markdown
from worker.models import DocumentFields, RetrievalRequest, Weights
from worker.retrieve.context import assemble, leg_tops_first
from worker.retrieve.preprocess import preprocess
from worker.retrieve.scoring import first_stage_order
from worker.store.search import SearchParams
from worker.runtime import Runtime
from worker.service.build import build_retriever
from worker.store.database import Database
from worker.tokens import default_counter
from tests.helpers import make_settings
from tests.helpers import scored_chunk as chunk

PLACES = ["the front yard", "the rear yard", "a corner lot", "the golf course", "a pool", "the common area",
          "a side yard", "a drainage easement", "the lake", "the entrance", "a cul-de-sac", "the tennis courts"]
RULES = ["no taller than four feet", "no taller than six feet", "set ten feet from the curb", "of black aluminium",
         "built to the county's code", "of wood, cedar or vinyl", "painted in an approved colour",
         "built with a gap at the ground"]
# Enough fence rules that the vector leg's 40 candidates hold only them.
FENCES = "\n\n".join(
    f"## Fence rule {i}\n\nFences and walls along {place} must be {rule}; the architectural committee reviews "
    f"every new fence, wall or gate before it is built."
    for i, (place, rule) in enumerate(((p, r) for p in PLACES for r in RULES[:4 + len(p) % 5]), start=1))
GARDEN = "\n\n".join(
    f"## Garden club {i}\n\nThe garden club {what}; members bring a high-visibility vest and go back to the "
    f"clubhouse afterwards."
    for i, what in enumerate(["meets in spring", "plants bulbs in autumn", "sells seedlings in May",
                              "judges the porch contest", "hosts a seed swap", "walks the nature trail",
                              "trims the roses", "clears the pond"], start=1))
OFFICE = ("## Office\n\nForm ZR-118 is kept by the clerk in the second drawer of the cabinet at the "
          "clubhouse office.\n\n" + GARDEN)


@pytest.fixture(scope="module")
def retriever(make_database, embedder, tmp_path_factory) -> Iterator:
    url = make_database("legs")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingestor.write([ingestor.prepare_text(parse_markdown(f"# Fence rules\n\n{FENCES}"),
                                          DocumentFields(document_id="fences", name="Fence Rules",
                                                         document_type="design_guidelines")),
                    ingestor.prepare_text(parse_markdown(f"# Clubhouse\n\n{OFFICE}"),
                                          DocumentFields(document_id="office", name="Clubhouse Notes",
                                                         document_type="other"))])
    found = build_retriever(Runtime(make_settings(tmp_path_factory.mktemp("legs"), url), db, embedder))
    yield found
    found.close()
    db.close()


def ranking(retriever, question: str, weights: Weights | None = None):
    processed = preprocess(question)
    w = weights or Weights(vector=processed.weights[0], fts=processed.weights[1])
    params = SearchParams(query_text=processed.normalized, embedding=retriever.embedder.embed_query(processed.normalized),
                          vector_weight=w.vector, fts_weight=w.fts, fusion="weighted")
    return first_stage_order(retriever.backend.search(params), have_embedding=True, steer=[], steer_boost=1.0,
                             weights=weights)


def test_full_text_top_hit_reaches_the_context(retriever):
    question = "fence height limits and where form ZR-118 is kept"
    weights = Weights(vector=0.9, fts=0.1)  # a caller leaning on the vector leg
    ranked = ranking(retriever, question, weights)
    office = next(i for i, c in enumerate(ranked) if "ZR-118" in c.content)
    # the premise: full text ranks it first, the vector leg not at all, the fused order past the first six
    assert ranked[office].fts_rank == 1 and ranked[office].vector_rank is None and office >= 6, \
        [(c.fts_rank, c.vector_rank) for c in ranked]
    answer = retriever.answer(RetrievalRequest(query=question, weights=weights))
    assert "ZR-118" in answer.context


def test_vector_top_hit_reaches_the_context(retriever):
    question = "how high may the barrier around my back garden go"
    weights = Weights(vector=0.1, fts=0.9)  # a caller leaning on full text
    ranked = ranking(retriever, question, weights)
    tops = [i for i, c in enumerate(ranked) if c.vector_rank is not None and c.vector_rank <= 3 and c.fts_rank is None]
    assert tops and max(tops) >= 6, [(c.fts_rank, c.vector_rank) for c in ranked]  # the premise
    answer = retriever.answer(RetrievalRequest(query=question, weights=weights))
    for i in tops:
        assert ranked[i].content in answer.context


def test_a_caller_given_budget_is_filled(retriever):
    question = "what are the fence rules"
    default = retriever.answer(RetrievalRequest(query=question))
    sized = retriever.answer(RetrievalRequest(query=question, token_budget=4000, top_k=20))
    small = retriever.answer(RetrievalRequest(query=question, token_budget=300))
    assert len(default.context.split("[SOURCE ")) - 1 <= 8
    assert sized.context_tokens > default.context_tokens and sized.context_tokens <= 4000
    assert sum(c.source is not None for c in sized.chunks) > 8
    assert 0 < small.context_tokens <= 300


def test_a_budget_alone_is_filled_as_far_as_it_goes(retriever):
    # No top_k: the budget, not a count of chunks, bounds the context (the fence rules are short).
    answer = retriever.answer(RetrievalRequest(query="what are the fence rules", token_budget=4000))
    assert answer.context.count("reviews every new fence") > 20
    assert answer.context_tokens <= 4000


def test_leg_tops_follow_the_rankings_best():
    ranked = [chunk(i, 1 - i / 100) for i in range(10)]
    ranked[8].fts_rank = 2
    ranked[9].vector_rank = 1
    ranked[1].fts_rank = 1
    order, first = leg_tops_first(ranked, 3, 4)
    assert [c.id for c in order] == [0, 1, 2, 3, 8, 9, 4, 5, 6, 7] and first == 6
    assert leg_tops_first(ranked[:8], 3, 4) == (ranked[:8], 4)


def cut_with_rest(i: int, score: float) -> tuple:
    """A chunk that ends mid-sentence and the next chunk of its document, which completes it."""
    cut = chunk(i, score).model_copy(update={"content": "Rule word word and the rest of it", "document_id": f"d{i}"})
    return cut, cut.model_copy(update={"id": 100 + i, "chunk_index": 1, "content": "goes on here.", "final_score": 0.0})


def neighbours_of(*pairs):
    rest = {cut.id: nxt for cut, nxt in pairs}
    return lambda c: [rest[c.id]] if c.id in rest else []


def test_a_budget_keeps_the_default_context_and_its_neighbours():
    cut, rest = cut_with_rest(0, 0.9)
    ranked = [cut] + [chunk(i, 0.9 - i / 100) for i in range(1, 12)]
    rules = dict(counter=default_counter(), min_relevance=0.5, min_chunks=6, max_chunks=8, floor=0.0,
                 neighbours=neighbours_of((cut, rest)))
    default = assemble(ranked, token_budget=4000, **rules)
    sized = assemble(ranked, token_budget=default.tokens + 120, fill=len(ranked), **rules)
    # the sentence cut across two chunks stays whole, and the budget's room goes to the ranking's next
    assert 100 in {c.id for c in default.chunks} and {c.id for c in default.chunks} < {c.id for c in sized.chunks}
    assert sized.tokens <= default.tokens + 120


def test_top_k_counts_the_rankings_chunks_not_their_neighbours():
    # the best six at the floor, the rest below min_relevance; two of the six cut mid-sentence
    pairs = [cut_with_rest(0, 0.9), cut_with_rest(1, 0.85)]
    ranked = [pairs[0][0], pairs[1][0]] + [chunk(i, 0.8 - i / 100) for i in range(2, 6)]
    ranked += [chunk(i, 0.3 - i / 100) for i in range(6, 12)]
    built = assemble(ranked, counter=default_counter(), token_budget=4000, min_relevance=0.5, min_chunks=6,
                     max_chunks=8, floor=0.0, neighbours=neighbours_of(*pairs), fill=8)
    assert sorted(c.id for c in built.chunks if c.id < 100) == list(range(8))
    assert {100, 101} <= {c.id for c in built.chunks}


def test_the_fill_needs_only_the_floor_unless_told_otherwise():
    ranked = [chunk(i, 0.7 - i / 20) for i in range(10)]  # 0.70 down to 0.25
    rules = dict(counter=default_counter(), token_budget=4000, min_relevance=0.5, min_chunks=0, floor=0.0, fill=10)
    assert len(assemble(ranked, **rules).chunks) == 10  # no best few kept (ARC_MIN_CONTEXT_CHUNKS=0)
    hard = assemble(ranked, fill_needs=0.5, **rules)  # a caller's hard minimum
    assert [c.id for c in hard.chunks] == [c.id for c in ranked if c.final_score >= 0.5] == [0, 1, 2, 3]


def _section(texts: list[str], section: str = "Article IV > Section 2") -> list:
    """One document's consecutive chunks of one section."""
    return [chunk(i, 0.0).model_copy(update={"document_id": "ccrs", "document_name": "Declaration",
                                             "section_path": section, "chunk_index": i, "content": text})
            for i, text in enumerate(texts)]


def test_a_budgeted_passage_carries_the_sentence_before_and_after_it_from_its_section():
    before, hit, after = _section([
        "Owners may lease a lot for a term of at least twelve months. Short stays are not leases.",
        "No lot shall be leased for hotel or transient purposes.",
        "This does not apply to a lot the Association owns. Leases must be in writing.",
    ])
    ranked = [hit.model_copy(update={"final_score": 0.8})]
    around = {c.id: [n for n in (before, hit, after) if abs(n.chunk_index - c.chunk_index) == 1] for c in (hit,)}
    rules = dict(counter=default_counter(), min_relevance=0.5, min_chunks=1, floor=0.0,
                 neighbours=lambda c: around[c.id], carry=True)
    assert "Short stays" not in assemble(ranked, token_budget=1000, **{**rules, "carry": False}).text
    context = assemble(ranked, token_budget=1000, **rules)
    assert "Short stays are not leases. No lot shall be leased" in context.text
    assert "transient purposes. This does not apply to a lot the Association owns." in context.text
    assert "Leases must be in writing" not in context.text and "twelve months" not in context.text
    # no room: the passage alone, whole
    tight = assemble(ranked, token_budget=context.tokens - 12, **rules)
    assert "No lot shall be leased for hotel or transient purposes." in tight.text and tight.tokens < context.tokens
    # another section's sentence is not this passage's
    other = [c.model_copy(update={"section_path": "Article V"}) for c in (before, after)]
    around = {hit.id: other}
    alone = assemble(ranked, token_budget=1000, **rules)
    assert "Short stays" not in alone.text and "This does not apply" not in alone.text


LEASING = "# Declaration\n\n## Leasing\n\n" + " ".join(
    f"Rule {n} of the leasing article covers the {topic} of a leased lot."
    for n, topic in enumerate(["registration", "insurance", "parking", "pets", "noise", "trash", "guests",
                               "signs", "pools", "fences", "repairs", "keys", "fees", "notices", "meters",
                               "mailboxes", "gates", "lawns", "roofs", "decks", "sheds", "boats", "lights",
                               "drains", "paint", "windows", "doors", "steps", "walls", "grills"] * 2, start=1)
) + "\n"


@pytest.fixture(scope="module")
def leasing(make_database, embedder, tmp_path_factory) -> Iterator:
    """One section of short sentences, longer than a chunk: chunks that end and begin whole."""
    url = make_database("carry")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingestor.write([ingestor.prepare_text(parse_markdown(LEASING), DocumentFields(document_id="ccrs",
                                                                                   document_type="ccr"))])
    found = build_retriever(Runtime(make_settings(tmp_path_factory.mktemp("carry"), url), db, embedder))
    yield found
    found.close()
    db.close()


def test_only_a_caller_sized_context_carries_the_sentences_around_its_passages(leasing):
    chunks = leasing.backend.search(SearchParams(query_text="leasing rule", embedding=None, fts_weight=1.0,
                                                 vector_weight=0.0))
    assert len({c.chunk_index for c in chunks}) >= 2, "the section takes more than one chunk"
    question = "What does the leasing article say about the insurance of a leased lot?"
    default = leasing.answer(RetrievalRequest(query=question, top_k=1))
    sized = leasing.answer(RetrievalRequest(query=question, top_k=1, token_budget=2000))
    shown = [c for c in default.chunks if c.source is not None]
    assert [c.id for c in shown] == [c.id for c in sized.chunks if c.source is not None] and len(shown) == 1
    assert shown[0].content in default.context and shown[0].content in sized.context
    assert len(sized.context) > len(default.context) and sized.context_tokens <= 2000
    carried = sized.context.replace(shown[0].content, "|").split("|")
    assert "Rule" in carried[0] + carried[1], "a sentence of the chunks around it comes with it"
