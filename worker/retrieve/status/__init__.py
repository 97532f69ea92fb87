"""What decides an answer's status (``success``, ``low_confidence``, ``no_results``).

``decision`` puts the signals together in their order of precedence; ``confidence`` places the
best relevance on the knowledge base's calibrated scale, ``language_scale`` on a language's own,
``fitted_cut`` moves the ``success`` cut to where a community's confirmed questions put it,
``answer_type`` asks whether the context holds the kind of answer asked for, and ``minimum``
applies a request's hard ``min_relevance`` and ``top_k``.
"""
