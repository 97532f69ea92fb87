"""Dify's External Knowledge API: ``POST /retrieval``, as Dify documents it.

Dify sends ``{knowledge_id, query, retrieval_setting: {top_k, score_threshold}, metadata_condition?}``
with ``Authorization: Bearer <API key>`` and takes ``{"records": [{content, score, title, metadata}]}``
back; its errors are ``{"error_code", "error_msg"}`` (1001 a malformed Authorization header, 1002
a failed authorisation, 2001 an unknown knowledge id). The API key is the webhook's token, checked
under the webhook's rate limit and brute-force slow-down (the gate, worker/serve/gate.py).

One worker serves several "knowledge" ids: ``all`` (every current document) and one per document
type (``ccr``, ``design_guidelines``, ...), so a Dify app can be given only the CC&Rs; and, in a
knowledge base of several communities, ``COMMUNITY`` (all of its documents) or ``COMMUNITY/TYPE``
(``heronwood/ccr``, ``heronwood/all``), so each association's Dify knowledge base is its own. A
key limited to communities (``ARC_COMMUNITY_TOKENS``) reaches those only, as on the webhook:
unnamed, its one community; another (or an unknown one) is refused with 1002 and nothing of it.
``score`` is the worker's final score, the one its statuses go by.

A ``metadata_condition`` entry ``{"name": "as_of", "comparison_operator": "is", "value":
"2003-08-29"}`` is the question's date, not a filter on the records: only what was in force that
day answers (docs/as-of.md), as the webhook's ``as_of``. Each record's metadata carries its
document's ``effective_date`` for the other conditions (``before``, ``after``).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any, Literal, cast

from flask import Blueprint, g, jsonify
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..document_types import DOCUMENT_TYPES, DocumentType
from ..errors import CommunityForbidden, CommunityRequired, UnknownCommunity
from ..models import COMMUNITY_PATTERN, MAX_QUERY_CHARS, ChunkResult, Count, Number, RetrievalRequest
from .gate import Access, Refused, door
from .guards import caller
from .responses import answer_for
from .services import services
from .webhooks import json_body

DIFY_ROUTE = "/retrieval"
ALL_KNOWLEDGE = "all"
KNOWLEDGE_IDS: tuple[str, ...] = (ALL_KNOWLEDGE, *DOCUMENT_TYPES)
MAX_TOP_K = 20  # the webhook's own limit

dify = Blueprint("dify", __name__)

ComparisonOperator = Literal[
    "contains",
    "not contains",
    "start with",
    "end with",
    "is",
    "is not",
    "in",
    "not in",
    "empty",
    "not empty",
    "=",
    "≠",
    "!=",
    ">",
    "<",
    "≥",
    ">=",
    "≤",
    "<=",
    "before",
    "after",
    "null",
    "not null",
]


class RetrievalSetting(BaseModel):
    model_config = ConfigDict(extra="ignore")
    top_k: Count = Field(ge=1)
    score_threshold: Number = Field(ge=0, le=1)


class Condition(BaseModel):
    model_config = ConfigDict(extra="ignore")
    # Dify's older page types it as a list of names, its newer one as a name: both are taken.
    name: str | list[str]
    comparison_operator: ComparisonOperator
    value: str | float | int | bool | list[str] | None = None


class MetadataCondition(BaseModel):
    model_config = ConfigDict(extra="ignore")
    logical_operator: Literal["and", "or"] = "and"
    conditions: list[Condition] = Field(default_factory=list, max_length=50)


class DifyRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)
    # Any text is a knowledge id to Dify; the schema names the ones this worker knows (others: 2001).
    knowledge_id: str = Field(
        min_length=1,
        max_length=200,
        json_schema_extra={"enum": list(KNOWLEDGE_IDS)},
        description="all, or one document type: " + ", ".join(DOCUMENT_TYPES) + "; with "
        "several communities, COMMUNITY or COMMUNITY/TYPE (COMMUNITY/all), which this enum of "
        "the ids every worker has leaves out",
    )
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, pattern=r"^[^\u0000]*[^\s\u0000][^\u0000]*$")
    retrieval_setting: RetrievalSetting
    metadata_condition: MetadataCondition | None = None


class DifyRecord(BaseModel):
    content: str
    score: float = Field(description="The worker's final score (0-1), the one its statuses go by.")
    title: str
    metadata: dict[str, Any]


class DifyResponse(BaseModel):
    records: list[DifyRecord]


class DifyError(BaseModel):
    error_code: int = Field(
        description="1001 malformed Authorization header, 1002 authorisation failed, "
        "2001 unknown knowledge_id; else the HTTP status"
    )
    error_msg: str


def dify_error(status: int, code: int, message: str) -> Any:
    response = jsonify({"error_code": code, "error_msg": message})
    response.status_code = status
    return response


@dify.errorhandler(Exception)
def dify_shaped(exc: Exception) -> Any:
    """The gate's refusals in Dify's words (1001 no key in Dify's ``Authorization: Bearer
    <key>``, 1002 a wrong one, 429 with Retry-After); every other failure (a body that is not
    JSON or nests too deep, 413, the worker at capacity, the database restarting, a bug) with
    the webhook's status, message and Retry-After, in Dify's shape: ``error_code`` the HTTP
    status."""
    if isinstance(exc, Refused):
        return _refusal(exc)
    answer = answer_for(exc)
    response = dify_error(answer.status_code, answer.status_code, answer.get_json()["message"])
    if "Retry-After" in answer.headers:
        response.headers["Retry-After"] = answer.headers["Retry-After"]
    return response


def _refusal(exc: Refused) -> Any:
    if exc.reason == "missing":
        return dify_error(403, 1001, "Invalid Authorization header format. Expected 'Bearer <api-key>' format.")
    if exc.reason == "wrong":
        return dify_error(403, 1002, "Authorization failed")
    if exc.status == 429:
        what = "too many failed authentication attempts" if exc.reason == "backoff" else "too many requests"
        seconds = exc.retry_after or 1
        response = dify_error(429, 429, f"{what}; retry after {seconds} s")
        response.headers["Retry-After"] = str(seconds)
        return response
    return dify_error(exc.status, exc.status, str(exc))


@dify.post(DIFY_ROUTE)
@door(Access("api", scoped=True, credential="bearer"))
def retrieval() -> Any:
    try:
        req = DifyRequest.model_validate(json_body("send a JSON object (Content-Type: application/json)"))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        return dify_error(422, 422, f"{field}: {first['msg']}")
    knowledge = _knowledge(req.knowledge_id)
    if knowledge is None:
        return dify_error(
            404,
            2001,
            f"The knowledge does not exist (known: {', '.join(KNOWLEDGE_IDS)}; "
            f"COMMUNITY or COMMUNITY/TYPE for one community)",
        )
    community, kind = knowledge
    as_of, condition = _as_of(req.metadata_condition)
    # A metadata filter may drop some of the best chunks: ask for the most, cut to top_k after it.
    filtered = bool(condition and condition.conditions)
    top_k = MAX_TOP_K if filtered else min(req.retrieval_setting.top_k, MAX_TOP_K)
    try:
        search = RetrievalRequest(
            query=req.query,
            top_k=top_k,
            community=community,
            # _knowledge checked that kind is one of KNOWLEDGE_IDS
            document_types=None if kind == ALL_KNOWLEDGE else [cast(DocumentType, kind)],
            **({"as_of": as_of} if as_of is not None else {}),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "metadata_condition.as_of" if first["loc"] and first["loc"][0] == "as_of" else "query"
        return dify_error(422, 422, f"{field}: {first['msg']}")
    try:  # a key limited to communities: the service refuses another before anything is read
        answer = services().knowledge.ask(search, caller=caller(), request_id=g.request_id)
    except CommunityForbidden:
        return dify_error(403, 1002, "Authorization failed: this API key does not reach that knowledge's community")
    except UnknownCommunity:
        return dify_error(404, 2001, f"The knowledge does not exist: no community {community!r} in this knowledge base")
    except CommunityRequired as exc:
        return _community_required(exc, kind)
    records = []
    ranked = answer.chunks[:top_k]  # the ranking; neighbours added for the context follow it
    for chunk in ranked:
        if chunk.final_score < req.retrieval_setting.score_threshold:
            continue
        record = _record(chunk)
        if filtered and not _matches(record["metadata"], condition):
            continue
        records.append(record)
    return jsonify({"records": (_notice(answer) + records)[: req.retrieval_setting.top_k]})


def _notice(answer: Any) -> list[dict[str, Any]]:
    """A question in a language the embedding model cannot read (worker/retrieve/language.py) is
    said so in a first record of its own, above any threshold: Dify hands its model the records
    only, and without it the model would tell the user the documents do not address the question."""
    confidence = answer.confidence or {}
    if confidence.get("language_readable") is not False:
        return []
    return [
        {
            "content": answer.message,
            "score": 1.0,
            "title": "arc-retrieval: the question was not read",
            "metadata": {"notice": "language_not_read", "language": confidence.get("language")},
        }
    ]


def _knowledge(knowledge_id: str) -> tuple[str | None, str] | None:
    """(the community it names or None, ``all`` or a document type) for a knowledge id this
    worker reads: ``TYPE``, ``COMMUNITY`` or ``COMMUNITY/TYPE``; None for any other."""
    community, _, kind = knowledge_id.rpartition("/")
    if not community:
        if kind in KNOWLEDGE_IDS:  # a community named like a type is reached as NAME/all
            return None, kind
        community, kind = kind, ALL_KNOWLEDGE
    if kind not in KNOWLEDGE_IDS or not re.fullmatch(COMMUNITY_PATTERN, community):
        return None
    return community, kind


AS_OF = "as_of"


def _as_of(condition: MetadataCondition | None) -> tuple[Any, MetadataCondition | None]:
    """The date an ``as_of`` condition (``is`` or ``=``) asks about, and the conditions left to
    filter the records with. Under ``or`` it would only widen a filter: it is then no date."""
    if condition is None or condition.logical_operator != "and":
        return None, condition
    dated = [c for c in condition.conditions if c.name in (AS_OF, [AS_OF]) and c.comparison_operator in ("is", "=")]
    if not dated:
        return None, condition
    rest = [c for c in condition.conditions if c not in dated]
    return dated[-1].value, condition.model_copy(update={"conditions": rest})


def _community_required(exc: CommunityRequired, kind: str) -> Any:
    """Several communities and the knowledge id names none: Dify's field is the one to fix."""
    why = str(exc).removeprefix("community: required, ")
    return dify_error(400, 400, f"knowledge_id: name a community, as COMMUNITY or COMMUNITY/{kind} ({why})")


def _record(chunk: ChunkResult) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "document_id": chunk.document_id,
        "document_type": chunk.document_type,
        "section_path": chunk.section_path,
        "is_binding": chunk.is_binding,
        "chunk_index": chunk.chunk_index,
    }
    # Dify's pipeline fails on a null metadata value: absent keys instead.
    for key in ("page_number", "superseded_by", "amended_by", "rerank_score"):
        if getattr(chunk, key) is not None:
            metadata[key] = getattr(chunk, key)
    if chunk.effective_date is not None:
        metadata["effective_date"] = chunk.effective_date.isoformat()
    if chunk.replaced is not None:
        metadata["replaced"] = chunk.replaced.model_dump(mode="json", exclude_none=True)
    title = chunk.document_name + (f" > {chunk.section_path}" if chunk.section_path else "")
    return {"content": chunk.content, "score": round(chunk.final_score, 4), "title": title, "metadata": metadata}


# -- metadata_condition -----------------------------------------------------------------------


def _as_number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _compare(op: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    def check(actual: Any, expected: Any) -> bool:
        a, b = _as_number(actual), _as_number(expected)
        return a is not None and b is not None and op(a, b)

    return check


def _text(value: Any) -> str:
    return str(value).lower()  # conditions are typed by hand: "True" matches true, "CCR" matches ccr


OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "contains": lambda a, b: a is not None and _text(b) in _text(a),
    "not contains": lambda a, b: a is None or _text(b) not in _text(a),
    "start with": lambda a, b: a is not None and _text(a).startswith(_text(b)),
    "end with": lambda a, b: a is not None and _text(a).endswith(_text(b)),
    "is": lambda a, b: a is not None and _text(a) == _text(b),
    "is not": lambda a, b: a is None or _text(a) != _text(b),
    "in": lambda a, b: a is not None and _text(a) in {_text(v) for v in (b if isinstance(b, list) else [b])},
    "not in": lambda a, b: a is None or _text(a) not in {_text(v) for v in (b if isinstance(b, list) else [b])},
    "empty": lambda a, b: a is None or a == "",
    "not empty": lambda a, b: a is not None and a != "",
    "null": lambda a, b: a is None,
    "not null": lambda a, b: a is not None,
    "=": _compare(operator.eq),
    "≠": _compare(operator.ne),
    "!=": _compare(operator.ne),
    ">": _compare(operator.gt),
    "<": _compare(operator.lt),
    "≥": _compare(operator.ge),
    ">=": _compare(operator.ge),
    "≤": _compare(operator.le),
    "<=": _compare(operator.le),
    # the worker's metadata has no dates: a date condition matches nothing
    "before": lambda a, b: False,
    "after": lambda a, b: False,
}


def _matches(metadata: dict[str, Any], condition: MetadataCondition | None) -> bool:
    if condition is None or not condition.conditions:
        return True
    results = []
    for c in condition.conditions:
        names = c.name if isinstance(c.name, list) else [c.name]
        check = OPERATORS[c.comparison_operator]
        results.append(any(check(metadata.get(name), c.value) for name in names))
    return all(results) if condition.logical_operator == "and" else any(results)
