"""The sentence stage: a chunk is scored by its best sentence, and the top of the list re-ordered."""

from __future__ import annotations

from worker.models import ChunkResult
from worker.retrieve import sentences


def chunk(id: int, content: str, score: float) -> ChunkResult:
    return ChunkResult(id=id, document_id="d", document_name="D", document_type="bylaws", section_path="s",
                       page_number=None, chunk_index=id, is_binding=True, superseded_by=None, content=content,
                       token_count=len(content.split()), final_score=score, relevance=score)


def test_split_keeps_sentences_and_drops_fragments():
    text = ("## Article 4\n\nThe annual meeting is held in March. Notice goes out 30 days before it.\n"
            "| a | b |\n|---|---|\n- Owners may vote by proxy; proxies are filed with the secretary.")
    found = sentences.split(text)
    assert "The annual meeting is held in March." in found
    assert "Notice goes out 30 days before it." in found
    assert not any(s.startswith("Article") for s in found)  # two words: a heading, not a sentence
    assert all(len(s.split()) >= sentences.MIN_WORDS for s in found)


def test_a_chunk_of_fragments_is_one_sentence():
    assert sentences.split("Article 4") == ["Article 4"]
    assert sentences.split("  ") == []


def test_long_tables_are_capped():
    rows = "\n".join(f"| Lot {i} | owner number {i} pays dues |" for i in range(200))
    assert len(sentences.split(rows)) == sentences.MAX_SENTENCES


def test_the_answering_sentence_lifts_its_chunk(embedder):
    filler = " ".join(f"Section {i} of the declaration concerns the common area landscaping budget."
                      for i in range(8))
    answer = " The annual meeting of the homeowners is held every March at the clubhouse."
    diluted = chunk(1, filler + answer, 0.50)
    topical = chunk(2, "Meetings of the board of directors are open to members and are held as the board "
                       "decides.", 0.52)
    ranked = [topical, diluted]
    vectors = sentences.SentenceVectors(embedder.embed)
    question = embedder.embed_query("when is the annual homeowners meeting held")
    best = sentences.best_sentences(question, ranked, vectors)
    assert best[1] > best[2]
    order = sentences.reorder(ranked, best, top=2, share=0.5)
    assert [c.id for c in order] == [1, 2]
    # the scores stay the set they were: the best place keeps the best score
    assert [c.final_score for c in order] == [0.52, 0.50]
    embedded = vectors.embedded
    sentences.best_sentences(question, ranked, vectors)
    assert vectors.embedded == embedded  # the second time every sentence is cached


def test_reorder_leaves_the_rest_and_a_zero_share_alone():
    ranked = [chunk(i, f"text {i}", 1 - i / 10) for i in range(5)]
    best = {0: 0.1, 1: 0.9, 2: 0.2, 3: 0.99, 4: 0.99}
    assert [c.id for c in sentences.reorder(list(ranked), best, top=3, share=0.0)] == [0, 1, 2, 3, 4]
    order = sentences.reorder(list(ranked), best, top=3, share=1.0)
    assert [c.id for c in order] == [1, 2, 0, 3, 4]
    assert [c.final_score for c in order] == [1.0, 0.9, 0.8, 0.7, 0.6]


def test_the_default_path_runs_no_sentence_stage_and_a_policy_turns_it_on(sample_runtime):
    from dataclasses import replace

    from worker.models import RetrievalRequest
    from worker.service.build import build_retriever

    retriever = build_retriever(sample_runtime)
    try:
        request = RetrievalRequest(query="how tall can a fence be in the back yard")
        default = retriever.answer(request)
        assert "sentences" not in default.timings_ms
        assert retriever.sentence_vectors.embedded == 0
        retriever.policy = replace(retriever.policy, sentence_top=10, sentence_share=0.3)
        on = retriever.answer(request)
        assert "sentences" in on.timings_ms and retriever.sentence_vectors.embedded > 0
        # the status reads the first-stage relevance, which the stage does not touch
        assert on.confidence["relevance"] == default.confidence["relevance"]
        assert on.status == default.status
    finally:
        retriever.close()
