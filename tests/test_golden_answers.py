"""The webhook's answers on the sample corpus stay what they were, byte for byte (timings and the
request id aside, scores at 12 significant digits): a refactoring of the pipeline changes no answer.

The stored answers are ``tests/data/golden_webhook_answers.json``; regenerate them with
``.venv/bin/python -m tests.golden_answers`` when a change is meant to change answers (the
helper module says how they are made), and review the diff.
"""

from __future__ import annotations

import json

from tests import golden_answers


def test_webhook_answers_match_the_golden_file(client):
    stored = json.loads(golden_answers.GOLDEN.read_text(encoding="utf-8"))
    found = golden_answers.answers(client)
    assert [s["request"] for s in stored] == [f["request"] for f in found], "the requests changed: regenerate"
    for before, now in zip(stored, found, strict=True):
        assert golden_answers.dumps(golden_answers.settled([now])) == golden_answers.dumps(
            golden_answers.settled([before])
        ), before["request"]
