"""Protocol stand-ins for the rerank services, for tests and benchmarks only (no machine here
reaches Cohere, Jina or Voyage, and none runs a TEI or Infinity model server).

Each speaks its service's documented wire shape: the path, the request fields it requires and
their types (a request the service would refuse gets the service's 4xx), Bearer authentication,
and the reply's layout (Cohere v2 and Jina and Infinity ``{results: [{index, relevance_score}]}``,
Voyage ``{data: [...]}``, TEI a bare ``[{index, score}]``), results ordered best first. It can be
told to answer well, slowly, with an HTTP error (429 with Retry-After), with a body that is not
JSON, or with fewer results than passages sent; it records every request it received.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from werkzeug.wrappers import Request, Response

from tests.loopback import LoopbackServer

# (question, passages) -> one raw score per passage, in the order sent
Scorer = Callable[[str, list[str]], list[float]]


def overlap_scorer(question: str, passages: list[str]) -> list[float]:
    """A plausible cross-encoder: the share of the question's content words in the passage."""
    words = set(re.findall(r"[a-z]{4,}", question.lower()))
    return [round(len([w for w in words if w[:5] in p.lower()]) / max(len(words), 1), 4) for p in passages]


@dataclass
class Behaviour:
    # good | http401 | http429 | http500 | http503 | not_json | wrong_shape | fewer | bad_index
    mode: str = "good"
    delay: float = 0.0
    scorer: Scorer = overlap_scorer
    retry_after: str | None = "30"
    raw_is_logit: bool = False  # TEI/Infinity: the scorer's values are logits; sigmoid them unless raw_scores


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict
    start: float
    end: float = 0.0


@dataclass(frozen=True)
class Service:
    path: str
    documents: str
    limit: str | None
    model_required: bool
    reply: Callable[[list[tuple[int, float]], dict], object]
    error: Callable[[int, str], dict]
    allowed: frozenset[str] = field(default_factory=frozenset)


def _cohere_reply(ranked, body):
    return {"id": str(uuid.uuid4()), "results": [{"index": i, "relevance_score": s} for i, s in ranked],
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}}


def _jina_reply(ranked, body):
    return {"model": body["model"], "usage": {"total_tokens": 10 * len(ranked)},
            "results": [{"index": i, "relevance_score": s} for i, s in ranked]}


def _voyage_reply(ranked, body):
    return {"object": "list", "data": [{"relevance_score": s, "index": i} for i, s in ranked],
            "model": body["model"], "usage": {"total_tokens": 10 * len(ranked)}}


def _tei_reply(ranked, body):
    return [{"index": i, "score": s} for i, s in ranked]


def _infinity_reply(ranked, body):
    tokens = 10 * len(ranked)
    return {"object": "rerank", "results": [{"relevance_score": s, "index": i} for i, s in ranked],
            "model": body.get("model", "default/not-specified"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            "id": f"infinity-{uuid.uuid4()}", "created": int(time.time())}


SERVICES: dict[str, Service] = {
    "cohere": Service("/v2/rerank", "documents", "top_n", True, _cohere_reply,
                      lambda code, message: {"id": str(uuid.uuid4()), "message": message},
                      frozenset({"model", "query", "documents", "top_n", "max_tokens_per_doc"})),
    "jina": Service("/v1/rerank", "documents", "top_n", True, _jina_reply,
                    lambda code, message: {"detail": message},
                    frozenset({"model", "query", "documents", "top_n", "return_documents"})),
    "voyage": Service("/v1/rerank", "documents", "top_k", True, _voyage_reply,
                      lambda code, message: {"detail": message},
                      frozenset({"query", "documents", "model", "top_k", "return_documents", "truncation"})),
    "tei": Service("/rerank", "texts", None, False, _tei_reply,
                   lambda code, message: {"error": message,
                                          "error_type": "validation" if code < 500 else "backend"},
                   frozenset({"query", "texts", "raw_scores", "return_text", "truncate",
                              "truncation_direction"})),
    "infinity": Service("/rerank", "documents", "top_n", False, _infinity_reply,
                        lambda code, message: {"error": {"message": message, "type": "error", "code": code}},
                        frozenset({"query", "documents", "return_documents", "raw_scores", "model",
                                   "top_n"})),
}
TEI_MAX_CLIENT_BATCH_SIZE = 32


class RerankStandin(LoopbackServer):
    def __init__(self, service: str, api_key: str | None = "rr-standin-key", model: str | None = None):
        super().__init__()
        self.service = service
        self.spec = SERVICES[service]
        self.api_key = api_key
        self.model = model  # when set, another model is refused as the service refuses an unknown one
        self.behaviour = Behaviour()
        self.requests: list[Seen] = []
        self._lock = threading.Lock()

    def reset(self, **behaviour) -> None:
        self.behaviour = Behaviour(**behaviour)
        with self._lock:
            self.requests.clear()

    @property
    def calls(self) -> list[Seen]:
        with self._lock:
            return list(self.requests)

    def handle(self, request: Request) -> Response:
        spec, b = self.spec, self.behaviour
        try:
            body = json.loads(request.get_data() or b"null")
        except ValueError:
            return self._error(400, "invalid JSON body")
        seen = Seen(request.path, dict(request.headers), body if isinstance(body, dict) else {},
                    time.monotonic())
        with self._lock:
            self.requests.append(seen)
        try:
            if request.method != "POST" or request.path != spec.path:
                return self._error(404, f"no route {request.method} {request.path}")
            if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
                return self._error(401, "invalid api token")
            problem = self._invalid(body)
            if problem:
                return self._error(400 if self.service == "cohere" else 422, problem)
            if b.delay:
                time.sleep(b.delay)
            if b.mode == "http401":
                return self._error(401, "invalid api token")
            if b.mode == "http429":
                response = self._error(429, "Trial key: limited to 10 calls / minute.")
                if b.retry_after is not None:
                    response.headers["Retry-After"] = b.retry_after
                return response
            if b.mode in ("http500", "http503"):
                return self._error(int(b.mode[4:]), "internal server error")
            if b.mode == "not_json":
                return Response("<html><body>502 Bad Gateway</body></html>", status=200, mimetype="text/html")
            return self._reply(body)
        finally:
            seen.end = time.monotonic()

    def _invalid(self, body: object) -> str | None:
        spec = self.spec
        if not isinstance(body, dict):
            return "the body must be a JSON object"
        unknown = set(body) - spec.allowed
        if unknown and self.service in ("tei", "cohere"):  # strict deserialisers
            return f"unknown field {sorted(unknown)[0]!r}"
        if not isinstance(body.get("query"), str) or not body["query"]:
            return "query: a non-empty string is required"
        passages = body.get(spec.documents)
        if not isinstance(passages, list) or not passages or not all(isinstance(p, str) for p in passages):
            return f"{spec.documents}: a non-empty list of strings is required"
        if spec.model_required and (not isinstance(body.get("model"), str) or not body["model"]):
            return "model: required"
        if self.model is not None and "model" in body and body["model"] != self.model:
            return f"model {body['model']!r} not found"
        limit = body.get(spec.limit, 1) if spec.limit else 1
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return f"{spec.limit}: a positive integer"
        for flag in ("raw_scores", "truncate", "truncation", "return_documents"):
            if flag in body and not isinstance(body[flag], bool):
                return f"{flag}: a boolean"
        if self.service == "tei" and len(passages) > TEI_MAX_CLIENT_BATCH_SIZE:
            return f"batch size {len(passages)} > maximum allowed batch size {TEI_MAX_CLIENT_BATCH_SIZE}"
        return None

    def _reply(self, body: dict) -> Response:
        b, spec = self.behaviour, self.spec
        passages = body[spec.documents]
        raw = b.scorer(body["query"], passages)
        if b.raw_is_logit and not body.get("raw_scores"):
            import math

            raw = [1 / (1 + math.exp(-s)) for s in raw]
        ranked = sorted(enumerate(raw), key=lambda pair: -pair[1])
        limit = body.get(spec.limit) if spec.limit else None
        if limit:
            ranked = ranked[:limit]
        if b.mode == "fewer":
            ranked = ranked[: max(1, len(ranked) // 2)]
        payload = spec.reply(ranked, body)
        if b.mode == "bad_index":
            payload = spec.reply([(len(passages) + 5, 0.9)] + ranked[1:], body)
        if b.mode == "wrong_shape":
            payload = {"scores": [s for _, s in ranked]}
        return Response(json.dumps(payload), status=200, mimetype="application/json")

    def _error(self, code: int, message: str) -> Response:
        return Response(json.dumps(self.spec.error(code, message)), status=code, mimetype="application/json")
