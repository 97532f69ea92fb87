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
