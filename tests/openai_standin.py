"""A protocol stand-in for the OpenAI API, for tests only (no machine here reaches OpenAI).

It speaks the wire protocol of ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` closely
enough for the real ``openai`` client, validates what it receives (auth, model, messages,
response_format), and can be told how to behave: answer well, answer with broken or truncated
JSON, answer slowly, fail with an HTTP error, or reject structured outputs like an older server.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from werkzeug.wrappers import Request, Response

from tests.loopback import LoopbackServer

CANDIDATE = re.compile(r'<candidate id="(?P<id>[^"]+)">\nDocument: (?P<doc>.*?)\nSection: (?P<section>.*?)\n'
                       r'(?P<content>.*?)\n</candidate>', re.S)
QUESTION = re.compile(r"^Question: (.*)$", re.M)

Scorer = Callable[[str, list[dict]], dict[str, float]]


def overlap_scorer(question: str, candidates: list[dict]) -> dict[str, float]:
    """A plausible judge: share of the question's content words found in the passage."""
    words = {w for w in re.findall(r"[a-z]{4,}", question.lower())}
    scores = {}
    for c in candidates:
        text = (c["section"] + " " + c["content"]).lower()
        scores[c["id"]] = round(len([w for w in words if w[:5] in text]) / max(len(words), 1), 3)
    return scores


@dataclass
class Behaviour:
    mode: str = "good"  # good | fenced | prose | broken | truncated | http500 | http429 | slow | empty
    delay: float = 0.0
    scorer: Scorer = overlap_scorer
    reject_json_schema: bool = False
    extra_items: list[dict] = field(default_factory=list)  # appended to the scores (unknown ids...)
    score_format: Callable[[float], object] = float
    embeddings_fail: bool = False


@dataclass
class Seen:
    path: str
    body: dict
    start: float
    end: float = 0.0


class OpenAIStandin(LoopbackServer):
    def __init__(self, api_key: str = "sk-standin"):
        super().__init__()
        self.api_key = api_key
        self.behaviour = Behaviour()
        self.requests: list[Seen] = []
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def reset(self, **behaviour) -> None:
        self.behaviour = Behaviour(**behaviour)
        with self._lock:
            self.requests.clear()

    def handle(self, request: Request) -> Response:
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "invalid_api_key", "Incorrect API key provided.")
        try:
            body = json.loads(request.get_data() or b"{}")
        except ValueError:
            return _error(400, "invalid_json", "We could not parse the JSON body of your request.")
        seen = Seen(request.path, body, time.monotonic())
        with self._lock:
            self.requests.append(seen)
        try:
            if request.path == "/v1/chat/completions":
                return self._chat(body)
            if request.path == "/v1/embeddings":
                return self._embeddings(body)
            return _error(404, "not_found", f"Unknown path {request.path}")
        finally:
            seen.end = time.monotonic()

    def _chat(self, body: dict) -> Response:
        b = self.behaviour
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error(400, "invalid_request_error", "you must provide a model parameter", "model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and m.get("role") in ("system", "user", "assistant") and
                isinstance(m.get("content"), str) for m in messages):
            return _error(400, "invalid_request_error", "messages must be a list of {role, content}", "messages")
        fmt = body.get("response_format")
        if fmt is not None:
            kind = fmt.get("type")
            if kind not in ("text", "json_object", "json_schema"):
                return _error(400, "invalid_request_error", "Invalid value for response_format.type", "response_format")
            if kind == "json_schema":
                if b.reject_json_schema:
                    return _error(400, "invalid_request_error",
                                  "response_format json_schema is not supported by this model", "response_format")
                schema = fmt.get("json_schema") or {}
                if not schema.get("name") or not isinstance(schema.get("schema"), dict):
                    return _error(400, "invalid_request_error", "json_schema needs name and schema", "response_format")
            if kind == "json_object" and "json" not in " ".join(m["content"] for m in messages).lower():
                return _error(400, "invalid_request_error", "'messages' must contain the word 'json'", "messages")
        if b.delay:
            time.sleep(b.delay)
        if b.mode == "http500":
            return _error(500, "server_error", "The server had an error while processing your request.")
        if b.mode == "http429":
            return _error(429, "rate_limit_exceeded", "Rate limit reached.")
        prompt = messages[-1]["content"]
        question = (QUESTION.search(prompt) or [None, ""])[1]
        candidates = [m.groupdict() for m in CANDIDATE.finditer(prompt)]
        scores = b.scorer(question, candidates)
        items = [{"chunk_id": cid, "relevance_score": b.score_format(s), "reasoning": f"scored {s}"}
                 for cid, s in scores.items()] + b.extra_items
        payload = json.dumps({"scores": items})
        content = {
            "good": payload,
            "fenced": "Here are the scores:\n```json\n" + payload + "\n```\nLet me know if you need more.",
            "prose": "Sure! " + json.dumps(items) + " Those are my judgements.",
            "broken": "{'scores': [chunk_id: 1, relevance 0.9",
            "truncated": payload[: int(len(payload) * 0.6)],
            "empty": "",
        }[b.mode]
        words = len(prompt.split())
        return _json({
            "id": "chatcmpl-standin", "object": "chat.completion", "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "length" if b.mode == "truncated" else "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": words, "completion_tokens": len(content.split()),
                      "total_tokens": words + len(content.split())},
        })

    def _embeddings(self, body: dict) -> Response:
        if self.behaviour.embeddings_fail:
            return _error(503, "server_error", "The engine is currently overloaded.")
        if self.behaviour.delay:
            time.sleep(self.behaviour.delay)
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs or not isinstance(body.get("model"), str):
            return _error(400, "invalid_request_error", "input and model are required", "input")
        dim = int(body.get("dimensions") or 1536)
        data = []
        for i, text in enumerate(inputs):
            seed = int.from_bytes(hashlib.sha256(str(text).encode()).digest()[:8], "little")
            vector = np.random.default_rng(seed).normal(size=dim)
            data.append({"object": "embedding", "index": i, "embedding": (vector / np.linalg.norm(vector)).tolist()})
        return _json({"object": "list", "data": data, "model": body["model"],
                      "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}})


def _json(payload: dict, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json")


def _error(status: int, code: str, message: str, param: str | None = None) -> Response:
    return _json({"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                            "param": param, "code": code}}, status)
