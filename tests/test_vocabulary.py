"""The full-text leg's homeowner-to-document vocabulary (worker/retrieve/vocabulary.py)."""

from __future__ import annotations

from worker.retrieve.vocabulary import expand


def test_an_unanswered_request_asks_for_the_deemed_approved_clause():
    for question in ("I sent in my architectural request over a month ago and nobody has gotten back to me",
                     "The committee never responded to my application", "no response from the ACC yet"):
        assert {"failure", "disapprove", "deemed"} <= set(expand(question)), question


def test_words_already_asked_are_not_added_and_plain_questions_add_nothing():
    assert "approved" not in expand("was it approved? I never heard back")
    assert expand("Where is the pool?") == []


# -- compounds, spelled as the knowledge base spells them --------------------------------------------

SCAN = """# Declaration

## ARTICLE VII Use Restrictions

### Section 9. Outbuildings.

No tool shed, garden house or other outbuilding shall be erected in any back yard without the written
approval of the Architectural Control Committee.

### Section 10. Sun rooms.

A sun room or screened porch is an addition under Article V and needs approval before work begins.

### Section 11. Vehicles.

No boat, trailer or camper shall be parked on any Lot for more than forty-eight hours.
"""


def test_a_compound_is_looked_up_both_ways_and_stopwords_never_join():
    from worker.retrieve.vocabulary import compound_candidates, compound_expansions

    candidates = compound_candidates("can I build a shed in my backyard for the tools")
    assert ("back", "yard") in candidates.splits["backyard"]
    assert ("for", "the") in candidates.joins and "forthe" in candidates.lookups()
    # the documents write "back yard" and hold no "backyard"; OCR ran "for the" into "forthe" once
    frequency = {"backyard": 0, "back": 3, "yard": 5, "backy": 0, "ard": 0, "forthe": 1, "for": -1, "the": -1}
    assert compound_expansions(candidates, frequency) == ["back", "yard"]
    # and the reverse: the question's two words, the documents' one
    joined = compound_candidates("where do I park my lawn mower")
    assert compound_expansions(joined, {"lawn": 2, "mower": 1, "lawnmower": 4}) == ["lawnmower"]


def test_a_question_s_compound_finds_the_passage_written_in_two_words(make_database, embedder, tmp_path):
    from tests.helpers import make_settings
    from worker.ingest.ingestor import Ingestor
    from worker.ingest.readers import parse_markdown
    from worker.models import DocumentFields, RetrievalRequest
    from worker.runtime import Runtime
    from worker.service.build import build_retriever
    from worker.store.database import Database

    url = make_database("compound")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingestor.write([ingestor.prepare_text(parse_markdown(SCAN),
                                          DocumentFields(document_id="ccrs", name="Declaration", document_type="ccr"))])
    retriever = build_retriever(Runtime(make_settings(tmp_path, url), db, embedder))
    try:
        answer = retriever.answer(RetrievalRequest(query="is a sunroom allowed?"))
        hits = {c.section_path.rsplit(" > ", 1)[-1]: c for c in answer.chunks}
        assert hits["Section 10. Sun rooms."].fts_score, "the full-text leg found the passage"
        assert answer.chunks[0].section_path.endswith("Sun rooms."), [c.section_path for c in answer.chunks]
    finally:
        db.close()
