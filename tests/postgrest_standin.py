"""A stand-in for the one PostgREST route the worker uses, for tests only.

``POST /rest/v1/rpc/<function>`` with a JSON object of named arguments runs
``select * from <function>(name => value, ...)`` in a real Postgres, the way PostgREST does,
checks the ``apikey``/``Authorization`` headers the ``supabase`` client sends, caps rows at
``db-max-rows`` and answers errors with PostgREST's body shape (code, details, hint, message).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

import psycopg
from psycopg import sql
from werkzeug.wrappers import Request, Response

from tests.loopback import LoopbackServer

IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgrestStandin(LoopbackServer):
    def __init__(self, database_url: str, api_key: str = "standin-anon-key", max_rows: int = 1000):
        super().__init__()
        self.database_url = database_url
        self.api_key = api_key
        self.max_rows = max_rows
        self.calls: list[tuple[str, dict]] = []

    def handle(self, request: Request) -> Response:
        if request.headers.get("apikey") != self.api_key or \
                request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "PGRST301", "JWT invalid", None)
        match = re.fullmatch(r"/rest/v1/rpc/([^/]+)", request.path)
        if request.method != "POST" or not match:
            return _error(404, "PGRST125", "Invalid path specified in request URL", None)
        function = match.group(1)
        try:
            args = json.loads(request.get_data() or b"{}")
        except ValueError:
            return _error(400, "PGRST102", "Empty or invalid json", None)
        if not IDENTIFIER.match(function) or not isinstance(args, dict) or \
                not all(IDENTIFIER.match(k) for k in args):
            return _error(404, "PGRST202", f"Could not find the function public.{function} in the schema cache", None)
        self.calls.append((function, args))
        query = sql.SQL("select * from {}({}) limit {}").format(
            sql.Identifier(function),
            sql.SQL(", ").join(sql.SQL("{} => {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in args),
            sql.Literal(self.max_rows))
        try:
            with psycopg.connect(self.database_url, autocommit=True) as conn:
                if _returns_scalar(conn, function):
                    # PostgREST answers a scalar function with the bare JSON value, not rows.
                    scalar = sql.SQL("select {}({})").format(
                        sql.Identifier(function),
                        sql.SQL(", ").join(sql.SQL("{} => {}").format(sql.Identifier(k), sql.Placeholder(k))
                                           for k in args))
                    value = conn.execute(scalar, args).fetchone()[0]
                    return Response(json.dumps(value, default=_default), mimetype="application/json")
                cur = conn.cursor(row_factory=psycopg.rows.dict_row)
                rows = cur.execute(query, args).fetchall()
        except psycopg.errors.UndefinedFunction as exc:
            return _error(404, "PGRST202", f"Could not find the function public.{function}", str(exc).splitlines()[0])
        except psycopg.Error as exc:
            return _error(400, exc.sqlstate or "XX000", (exc.diag.message_primary or str(exc)), exc.diag.message_detail)
        return Response(json.dumps(rows, default=_default), mimetype="application/json")


def _returns_scalar(conn: psycopg.Connection, function: str) -> bool:
    row = conn.execute("select not p.proretset and t.typtype <> 'c' and p.prorettype <> 'record'::regtype "
                       "from pg_proc p join pg_type t on t.oid = p.prorettype where p.proname = %s limit 1",
                       (function,)).fetchone()
    return bool(row and row[0])


def _default(value: object) -> object:
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


def _error(status: int, code: str, message: str, details: str | None) -> Response:
    return Response(json.dumps({"code": code, "details": details, "hint": None, "message": message}),
                    status=status, mimetype="application/json")
