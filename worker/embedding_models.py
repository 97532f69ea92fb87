"""The embedding models the worker knows by name, and the size of the vectors each makes.

The settings (``EMBEDDING_MODEL``, ``EMBEDDING_DIM``) default to these; the runtime reads which
local model a knowledge base was built with from the same names.
"""

from __future__ import annotations

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIM = 384
# The second local model: reads about 100 languages, about ten times slower to ingest (README "Models")
MULTILINGUAL_MODEL = "multilingual-e5-small"
LOCAL_MODELS: dict[str, int] = {LOCAL_MODEL: LOCAL_DIM, MULTILINGUAL_MODEL: 384}  # name -> dimensions
OPENAI_MODEL = "text-embedding-3-large"
OPENAI_DIM = 1536
