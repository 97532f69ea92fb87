"""The full-text leg's homeowner-to-document vocabulary (worker/retrieve/vocabulary.py)."""

from __future__ import annotations

from worker.retrieve.vocabulary import compound_words, expand


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

No boat, trailer or camper shall be parked on any Lot for more than forty-eight hours, nor in a
driveway forthe winter.
"""


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
        # the knowledge base's spelling, read off it (arc_compound_spellings): a word it lacks split
        # where both halves are its words; two words joined where it writes them as one; stopwords
        # never join ("for the", which an OCR once ran into "forthe")
        spell = retriever.backend.compound_spellings
        assert spell(compound_words("can I build a shed in my backyard for the tools")) == ["back", "yard"]
        assert spell(compound_words("may I park a house boat in the drive way")) == ["driveway"]
        assert spell(compound_words("where may a camper be parked")) == []
        answer = retriever.answer(RetrievalRequest(query="is a sunroom allowed?"))
        hits = {c.section_path.rsplit(" > ", 1)[-1]: c for c in answer.chunks}
        assert hits["Section 10. Sun rooms."].fts_score, "the full-text leg found the passage"
        assert answer.chunks[0].section_path.endswith("Sun rooms."), [c.section_path for c in answer.chunks]
    finally:
        db.close()
