"""A question's way through, stage by stage: ``preprocess`` (1) -> embeddings (2, in
:mod:`worker.embeddings`) -> ``search`` (3, hybrid SQL) -> ``rerank`` (4) -> ``context`` (5) ->
``pipeline`` (6: the one score, the answer and its status)."""
