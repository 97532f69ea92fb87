"""The confirmation matcher on its own (worker/retrieve/confirmed.py): a question near a confirmed
one by every other signal still does not take its confirmation when it asks something the
confirmed question and passage leave out. Embeddings are set by hand so that only the words
decide; the real model and database are exercised in tests/test_confirmations.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from worker.models import ChunkResult
from worker.retrieve.confirmed import AGREE_SHARE, Confirmations, asking, uncovered
from worker.store.confirmations import StoredConfirmation

GUIDELINES_Q = "does franklin square actually have written design guidelines"
GUIDELINES = "The Design Guidelines of Franklin Square set out the architectural standards for every home."
VOTE_Q = "did the fireworks ban vote ever pass? i heard it was close"
VOTE = "At the special meeting the members voted on the amendment banning fireworks; it failed to pass."


def test_words_the_confirmation_leaves_out_are_named():
    assert uncovered("was there ever a special assessment in franklin square? how much", GUIDELINES_Q, GUIDELINES) == [
        "assessment",
        "special",
    ]
    assert "sparklers" in uncovered("could my kids still do sparklers and fountains on the 4th?", VOTE_Q, VOTE)
    # Another form of a word the passage holds is the same word.
    assert uncovered("are the design guideline standards written down?", GUIDELINES_Q, GUIDELINES) == []
    # A "none" answer has no passage: only the confirmed question's words count.
    assert uncovered("what day of the week is trash pickup", "when is trash pickup", None) == ["day", "week"]


def _unit(i: int, near: int | None = None) -> np.ndarray:
    v = np.zeros(8, dtype=np.float32)
    v[i] = 1.0
    if near is not None:
        v[near] = 0.3
    return v / np.linalg.norm(v)


def _stored(id: int, query: str, chunk_id: int, axis: int) -> StoredConfirmation:
    return StoredConfirmation(
        id=id,
        community="c",
        query=query,
        answer="passage",
        document_id="doc",
        section_path="s",
        embedding=_unit(axis),
        embedding_model="m",
        created_at=datetime(2026, 11, 28, tzinfo=UTC),
        chunk_id=chunk_id,
        state="confirmed",
        reason=None,
    )


def _chunk(id: int, content: str, relevance: float = 0.0, vector_score: float | None = None) -> ChunkResult:
    return ChunkResult(
        relevance=relevance,
        vector_score=vector_score,
        id=id,
        document_id="doc",
        document_name="Doc",
        document_type="ccr",
        section_path="s",
        page_number=1,
        chunk_index=id,
        is_binding=True,
        superseded_by=None,
        content=content,
        token_count=len(content.split()),
    )


def test_a_near_question_asking_something_else_does_not_take_the_confirmation():
    matcher = Confirmations(
        load=lambda community: [_stored(1, GUIDELINES_Q, 10, 0), _stored(2, VOTE_Q, 20, 1)],
        stamp=lambda community: "s",
        model="m",
    )
    # Retrieval does not agree strongly (rule 6): another passage is nearer by vector similarity.
    candidates = [
        _chunk(10, GUIDELINES, relevance=0.6, vector_score=0.5),
        _chunk(30, "Special assessments may be levied by a vote of the members.", relevance=0.55, vector_score=0.6),
        _chunk(40, "Annual assessments are due on January 1.", relevance=0.5, vector_score=0.55),
        _chunk(20, VOTE, relevance=0.3, vector_score=0.3),
    ]
    # cosine 0.6 with the guidelines question, 0.5 with the vote's: a margin under rule 6's
    near_guidelines = np.array([0.6, 0.5, 0.62, 0, 0, 0, 0, 0], dtype=np.float32)
    taken = matcher.match("c", "are franklin square's design guidelines written down", near_guidelines, candidates)
    assert taken is not None and taken.id == 1
    other = "was there ever a special assessment in franklin square"
    assert matcher.match("c", other, near_guidelines, candidates) is None


def test_a_word_the_model_puts_near_a_word_of_the_passage_is_covered(embedder):
    matcher = Confirmations(load=None, stamp=str, model=embedder.model, words=embedder.embed_queries)
    fence_q = "what is the maximum fence height"
    fence = "Rear yard fences may not exceed 6 feet in height."
    assert uncovered("how tall can my back fence be", fence_q, fence) == ["back", "tall"]
    assert matcher.unmet("how tall can my back fence be", fence_q, fence) == []
    other = "was there ever a special assessment in franklin square? how much"
    assert matcher.unmet(other, GUIDELINES_Q, GUIDELINES) == ["assessment", "special"]


ROOF_Q = "are metal roofs allowed at the timbers?"
ROOF = "Roofs shall be finished in cedar shakes or architectural asphalt shingles; other finishes need ACC review."
SIDING_Q = "can i redo my siding in vinyl? it's sooo much cheaper"
SIDING = "Exterior walls shall be clad in wood, brick or stone."


def _roof_and_siding() -> Confirmations:
    return Confirmations(
        load=lambda community: [_stored(1, ROOF_Q, 10, 0), _stored(2, SIDING_Q, 20, 1)],
        stamp=lambda community: "s",
        model="m",
    )


def test_a_rewording_with_none_of_the_key_words_takes_when_retrieval_agrees():
    rewording = "can i put steel on top of my house?"
    # Rule 5 alone misses it: "steel", "top" and "house" are neither in the confirmed question nor its passage.
    assert len(uncovered(rewording, ROOF_Q, ROOF)) > 1
    near_roof = _unit(0, near=2)  # cosine 0.96 with the roof question, 0 with the siding one
    agreeing = [
        _chunk(20, SIDING, relevance=0.70, vector_score=0.6),
        _chunk(10, ROOF, relevance=0.62, vector_score=0.5),
    ]
    taken = _roof_and_siding().match("c", rewording, near_roof, agreeing)
    assert taken is not None and taken.id == 1 and taken.answer == "passage"


def test_a_different_question_on_the_same_subject_does_not_take():
    matcher = _roof_and_siding()
    near_roof = _unit(0, near=2)
    # Retrieval puts other passages ahead of the confirmed one, by relevance and by vector
    # similarity alike: the question asks something else.
    disagreeing = [
        _chunk(30, "Solar panels on roofs need ACC approval.", relevance=0.9, vector_score=0.8),
        _chunk(31, "Solar collectors shall be placed on the rear roof.", relevance=0.85, vector_score=0.75),
        _chunk(32, "Skylights need ACC approval.", relevance=0.6, vector_score=0.6),
        _chunk(10, ROOF, relevance=0.5, vector_score=0.5),
    ]
    assert AGREE_SHARE * 0.9 > 0.5
    assert matcher.match("c", "can i put solar panels on top of my house?", near_roof, disagreeing) is None
    # Retrieval agrees, but the question asks for another kind of answer (a size, not whether).
    agreeing = [_chunk(10, ROOF, relevance=0.7, vector_score=0.7)]
    fence = Confirmations(
        load=lambda community: [_stored(1, "what fence materials are allowed", 10, 0), _stored(2, SIDING_Q, 20, 1)],
        stamp=lambda community: "s",
        model="m",
    )
    assert fence.match("c", "how tall can my fence be", near_roof, agreeing) is None


def test_where_and_when_are_different_asks():
    assert asking("what day of the week is trash pickup?") == "time"
    assert asking("where are we supposed to keep the trash bins when it isn't pickup day?") == "place"
    assert asking("where in the bylaws are directors' terms?") is None
    assert asking("where are the fence rules in the guidelines?") is None


def test_a_rewording_takes_when_retrieval_puts_the_confirmed_passage_at_its_top():
    rewording = "can i put steel on top of my house?"
    # cosine 0.6 with the roof question, 0.5 with the siding one: too close for the first test of rule 6
    nearish = np.array([0.6, 0.5, 0.62, 0, 0, 0, 0, 0], dtype=np.float32)
    top = [_chunk(10, ROOF, relevance=0.7, vector_score=0.6), _chunk(20, SIDING, relevance=0.4, vector_score=0.4)]
    taken = _roof_and_siding().match("c", rewording, nearish, top)
    assert taken is not None and taken.id == 1
    # The same question with the confirmed passage third by vector similarity does not take.
    third = [
        _chunk(10, ROOF, relevance=0.7, vector_score=0.5),
        _chunk(20, SIDING, relevance=0.4, vector_score=0.6),
        _chunk(30, "Gutters shall be aluminium.", relevance=0.3, vector_score=0.55),
    ]
    assert _roof_and_siding().match("c", rewording, nearish, third) is None


def test_second_by_both_orders_is_not_the_top():
    """A different question on the confirmed one's subject often puts the confirmed passage second
    by the fused ranking and second by vector similarity: not retrieval's top, no take."""
    question = "can i put steel on top of my house?"
    nearish = np.array([0.6, 0.5, 0.62, 0, 0, 0, 0, 0], dtype=np.float32)
    second_by_both = [
        _chunk(30, "Solar collectors shall be placed on the rear roof.", relevance=0.75, vector_score=0.65),
        _chunk(10, ROOF, relevance=0.7, vector_score=0.6),
        _chunk(20, SIDING, relevance=0.4, vector_score=0.4),
    ]
    assert _roof_and_siding().match("c", question, nearish, second_by_both) is None
    # Second by one order and first by the other is still the top.
    first_by_vector = [
        _chunk(30, "Solar collectors shall be placed on the rear roof.", relevance=0.75, vector_score=0.55),
        _chunk(10, ROOF, relevance=0.7, vector_score=0.6),
        _chunk(20, SIDING, relevance=0.4, vector_score=0.4),
    ]
    taken = _roof_and_siding().match("c", question, nearish, first_by_vector)
    assert taken is not None and taken.id == 1


def test_a_rewording_far_past_the_scale_takes_a_none_with_other_words():
    """A "none" has no passage for rule 6's retrieval test: a rewording takes it when it sits far
    past the scale and every other answer, though its words are not the confirmed question's."""
    pets_q = "how many pets can i keep in my house"
    none = replace(_stored(1, pets_q, 0, 0), answer="none", chunk_id=None, document_id=None, section_path=None)
    matcher = Confirmations(
        load=lambda community: [none, _stored(2, SIDING_Q, 20, 1)], stamp=lambda community: "s", model="m"
    )
    rewording = "what's the maximum number of animals allowed per home?"
    assert len(uncovered(rewording, pets_q, None)) > 1
    candidates = [_chunk(20, SIDING, relevance=0.5, vector_score=0.5)]
    taken = matcher.match("c", rewording, _unit(0, near=2), candidates)
    assert taken is not None and taken.id == 1 and taken.answer == "none"
    # Past the scale but near the other answer too: the confirmed question's words decide, and
    # these are not its words.
    between = np.array([0.5, 0.42, 0.7576, 0, 0, 0, 0, 0], dtype=np.float32)
    assert matcher.match("c", rewording, between, candidates) is None
