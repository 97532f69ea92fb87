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
from worker.retrieve.context import leg_tops_first
from worker.retrieve.preprocess import preprocess
from worker.retrieve.scoring import first_stage_order
from worker.retrieve.search import SearchParams
from worker.runtime import Runtime
from worker.service.build import build_retriever
from worker.store.database import Database
from tests.conftest import make_settings
from tests.test_answers import chunk

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


def test_a_budget_keeps_the_default_context_and_its_neighbours():
    from worker.retrieve.context import assemble
    from worker.tokens import default_counter

    cut = chunk(0, 0.9).model_copy(update={"content": "Rule word word and the rest of it", "document_id": "d"})
    rest = cut.model_copy(update={"id": 100, "chunk_index": 1, "content": "goes on here.", "final_score": 0.0})
    ranked = [cut] + [chunk(i, 0.9 - i / 100) for i in range(1, 12)]
    default = assemble(ranked, counter=default_counter(), token_budget=4000, min_relevance=0.5, min_chunks=6,
                       max_chunks=8, floor=0.0, neighbours=lambda c: [rest] if c.id == 0 else [])
    sized = assemble(ranked, counter=default_counter(), token_budget=default.tokens + 120, min_relevance=0.5,
                     min_chunks=6, max_chunks=8, floor=0.0, neighbours=lambda c: [rest] if c.id == 0 else [],
                     fill=len(ranked))
    # the sentence cut across two chunks stays whole, and the budget's room goes to the ranking's next
    assert 100 in {c.id for c in default.chunks} and {c.id for c in default.chunks} < {c.id for c in sized.chunks}
    assert sized.tokens <= default.tokens + 120
