"""arc-retrieval: hybrid retrieval over governing documents for n8n agents.

The subpackages follow the data's path. A document goes through :mod:`worker.ingest` (read,
chunk, embed) into :mod:`worker.store` (Postgres, BM25 upkeep). A question goes through
:mod:`worker.retrieve` (preprocess -> embed -> hybrid search -> rerank -> context -> answer),
served over HTTP by :mod:`worker.serve`. At the top: settings (``config``), the shared models,
errors, token counting, the embedders both paths use, the runtime that opens the database and
the embedder, and the CLI.
"""

__version__ = "0.1.0"
