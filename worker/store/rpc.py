"""Supabase's RPC route (PostgREST's ``POST /rest/v1/rpc/<function>``, through a ``supabase``
client), with its failures as the worker's own: an API error or an unreachable service is
:class:`~worker.errors.DatabaseUnavailable`, as a lost database connection is."""

from __future__ import annotations

from typing import Any

from ..errors import DatabaseUnavailable
from . import calls


def call(client: Any, function: str, args: dict[str, Any]) -> Any:
    """``function(args)``'s reply, as PostgREST gives it (rows, or a scalar)."""
    from postgrest.exceptions import APIError

    calls.one()
    try:
        return client.rpc(function, args).execute().data
    except APIError as exc:
        raise DatabaseUnavailable(f"supabase rpc {function} failed: {exc.message or exc.code}") from exc
    except Exception as exc:  # httpx transport errors: the service is unreachable
        if type(exc).__module__.startswith("httpx"):
            raise DatabaseUnavailable(f"supabase unreachable: {type(exc).__name__}") from exc
        raise
