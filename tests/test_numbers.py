"""A boolean where a number is expected is refused, on every numeric field of every JSON door:
422 naming the field (Python's bool is an int, so without a check ``"top_k": true`` was taken as 1).

The numeric fields are found in the OpenAPI document's request schemas, so a number added to a
request model is checked here without anyone listing it (the base bodies below must then give it
a valid value, or the test says which is missing).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

from worker.serve.mcp_server import SEARCH_TOOL, McpFace, build_server
from worker.serve.openapi import OPERATIONS, openapi_document

# A valid body per JSON door, every numeric field given.
BASES: dict[str, dict[str, Any]] = {
    "RetrievalRequest": {"query": "fence", "top_k": 3, "candidates": 40, "token_budget": 4000,
                         "min_relevance": 0.1, "weights": {"vector": 0.5, "fts": 0.5}},
    "DifyRequest": {"knowledge_id": "all", "query": "fence",
                    "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}},
}


def _numeric_paths(schema: dict[str, Any], components: dict[str, Any], prefix: tuple[str, ...] = ()
                   ) -> Iterator[tuple[str, ...]]:
    if "$ref" in schema:
        yield from _numeric_paths(components[schema["$ref"].rsplit("/", 1)[1]], components, prefix)
        return
    branches = schema.get("anyOf", [])
    if any(b.get("type") in ("integer", "number") for b in [schema, *branches]):
        yield prefix
    for branch in branches:
        if "$ref" in branch:
            yield from _numeric_paths(branch, components, prefix)
    for name, sub in schema.get("properties", {}).items():
        yield from _numeric_paths(sub, components, (*prefix, name))


def _json_doors() -> list[tuple[str, str, tuple[str, ...]]]:
    """(route, request model, numeric field path) for every JSON request body the API takes."""
    components = openapi_document()["components"]["schemas"]
    found = []
    for operation in OPERATIONS:
        if operation.request is None:
            continue
        name = operation.request.__name__
        for path in _numeric_paths(components[name], components):
            found.append((operation.route, name, path))
    return found


def _with(body: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    here = changed
    for key in path[:-1]:
        here = here[key]
    assert path[-1] in here, f"BASES[...] gives no value for {'.'.join(path)}: add one"
    here[path[-1]] = value
    return changed


def test_every_numeric_field_is_found():
    found = {(name, ".".join(path)) for _, name, path in _json_doors()}
    assert {("RetrievalRequest", "top_k"), ("RetrievalRequest", "weights.vector"),
            ("RetrievalRequest", "min_relevance"), ("DifyRequest", "retrieval_setting.score_threshold")} <= found


def _bases(client) -> dict[str, dict[str, Any]]:
    """BASES, with the doors that name an answer given one: a chunk to confirm, a request to vote on."""
    asked = client.post("/webhook/arc-retrieval", json={"query": "fence"})
    chunk_id = asked.get_json()["chunks"][0]["id"]
    request_id = asked.headers["X-Request-ID"]
    return {
        **BASES,
        "ConfirmRequest": {"query": "how tall may a fence be", "chunk_id": chunk_id},
        "FeedbackRequest": {"request_id": request_id, "helpful": True, "source": 1},
    }


@pytest.mark.parametrize("boolean", [True, False])
def test_a_boolean_for_any_number_is_a_422_naming_the_field(client, boolean):
    doors = _json_doors()
    assert doors
    bases = _bases(client)
    for route, name, path in doors:
        assert name in bases, f"{route} takes {name}: give a valid body in BASES"
        base = bases[name]
        assert client.post(route, json=base).status_code in (200, 201), (route, name)
        response = client.post(route, json=_with(base, path, boolean))
        field = ".".join(path)
        assert response.status_code == 422, (route, field, boolean, response.get_json())
        body = response.get_json()
        named = body.get("field") or body.get("error_msg", "").split(":")[0]
        assert named == field, (route, body)
        assert "not true or false" in (body.get("message") or body.get("error_msg")), body


def test_mcp_refuses_a_boolean_for_a_number(sample_runtime):
    face = McpFace.build(sample_runtime)

    async def call(arguments):
        async with Client(build_server(face)) as mcp:
            return await mcp.call_tool(SEARCH_TOOL, arguments)

    for field in ("top_k", "token_budget"):
        result = anyio.run(call, {"query": "fence", field: True})
        assert result.is_error and field in result.content[0].text, (field, result.content[0].text)
    assert not anyio.run(call, {"query": "fence", "top_k": 3}).is_error
