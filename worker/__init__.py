"""arc-retrieval: hybrid retrieval over governing documents for n8n agents.

The pipeline's stages are modules: ``preprocess`` -> ``embeddings`` -> ``search`` ->
``rerank`` -> ``context`` -> ``pipeline`` (which answers). ``ingest`` and ``chunking``
fill the knowledge base; ``database`` owns Postgres; ``app`` serves it over HTTP.
"""

__version__ = "0.1.0"
