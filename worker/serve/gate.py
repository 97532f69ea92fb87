"""The one gate every door passes: a request becomes a :class:`~worker.service.caller.Caller`
(who, which communities, read or write), or a :class:`Refused` the door words its own way.

The sequence, the same for the webhooks, the documents API, Dify's ``/retrieval``, the MCP
endpoint and the keeper's pages: the token the route asks for (an admin token nobody set closes
the route), authenticated (the right token first; community tokens where the route takes them;
a stream of wrong ones slowed down), a read-only token kept off the routes that write, then the
caller's rate limit. The knowledge-base service then checks every community the caller touches.

Each Flask route declares what it needs with :func:`door` (or its blueprint with
:func:`declare`): which token, whether community tokens may use it, whether it writes, and where
the token is read. A route that declares nothing is taken as the strictest door, the admin
token's, writing: a new route is never open by mistake.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from ..config import Settings
from ..errors import ArcError
from ..service.caller import READ_ONLY, Caller
from .security import (
    CLOSED,
    FailedAuthGuard,
    RateLimiter,
    authenticate,
    bearer,
    bearer_or_header,
    client_key,
    token_matches,
)

Token = Literal["api", "admin", "ops", "keeper", "open"]
Credential = Literal["header", "bearer", "either"]

F = TypeVar("F", bound=Callable[..., Any])

ACCESS = "arc_access"  # the attribute a view function's declaration is kept in
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass(frozen=True)
class Access:
    """What a route asks of a request. ``token``: ``api`` (ARC_API_TOKEN), ``admin`` (the ingest
    token), ``ops`` (ARC_OPS_TOKEN: open while unset), ``keeper`` (a signed-in keeper's session,
    the pages), ``open`` (nothing). ``scoped``: community tokens (ARC_COMMUNITY_TOKENS) may use
    it; ``write``: it ingests or deletes (a read-only community token is refused);
    ``credential``: where the token is read (the configured header, ``Authorization: Bearer``,
    or either)."""

    token: Token
    scoped: bool = False
    write: bool = False
    credential: Credential = "header"
    agents_forbidden: bool = False  # the agents' token gets 403 saying so (a keeper's door it must not use)


AGENTS_FORBIDDEN = "the agents' token may not use this door: use the keeper's (ingest) token"

OPEN = Access("open")
KEEPER = Access("keeper")
OPS = Access("ops")
STRICTEST = Access("admin", scoped=False, write=True)


def door(access: Access) -> Callable[[F], F]:
    """Declares a view function's access (a decorator under the route's)."""

    def declared(view: F) -> F:
        setattr(view, ACCESS, access)
        return view

    return declared


class Refused(ArcError):
    """The gate's refusal: ``status`` 401, 403 or 429 (with ``retry_after``); ``reason`` says
    which check failed, so a door that words refusals its own way (Dify, the pages) can."""

    def __init__(self, status: int, code: str, message: str, reason: str, wait: float = 0.0):
        super().__init__(message)
        self.status = status
        self.code = code
        self.reason = reason  # missing, wrong, closed, read_only, backoff, rate, sign_in, agents
        self.retry_after = max(1, math.ceil(wait)) if wait else None


@dataclass(frozen=True)
class Knock:
    """What the gate reads of a request, whatever the framework: the route (for logs and
    metrics), its headers and the client's address."""

    route: str
    headers: Mapping[str, str] | Any
    address: str


class Gate:
    """The sequence itself, built once per door from the settings: the tokens of each kind, the
    failed-authentication brake and the rate limiter (shared by every route of the door)."""

    def __init__(
        self,
        settings: Settings,
        *,
        tokens: Mapping[str, str | None],
        limiter: RateLimiter,
        auth_guard: FailedAuthGuard,
        failures: Any = None,
    ):
        self.settings = settings
        self.tokens = dict(tokens)
        self.limiter = limiter
        self.auth_guard = auth_guard
        self.failures = failures

    def caller(self, access: Access, knock: Knock, *, count: bool = True) -> Caller:
        """The caller ``knock`` is, through every check ``access`` asks for; raises
        :class:`Refused`. ``count``: take one from the caller's rate limit now (MCP counts each
        tool call instead, :meth:`admit`)."""
        if access.token in ("open", "keeper") or (access.token == "ops" and "ops" not in self.tokens):
            return Caller("addr:" + knock.address)  # ops routes are open while ARC_OPS_TOKEN is unset
        expected = self.tokens.get(access.token, CLOSED)  # a kind this door has no token for opens nothing
        if expected == CLOSED:
            raise Refused(
                403,
                "forbidden",
                "this worker has no ARC_INGEST_TOKEN: set it to ingest and delete "
                "(or ARC_INGEST_WITH_API_TOKEN=true to let the retrieval token do so)",
                "closed",
            )
        auth = self.settings.auth
        presented = self.presented(access, knock.headers)
        verdict = authenticate(
            expected,
            presented,
            address=knock.address,
            guard=self.auth_guard,
            route=knock.route,
            community_tokens=auth.community_tokens if access.scoped else None,
            failures=self.failures,
        )
        if verdict.retry_after:
            raise Refused(
                429,
                "rate_limited",
                "too many failed authentication attempts; retry after the Retry-After delay",
                "backoff",
                verdict.retry_after,
            )
        if not verdict.ok and access.agents_forbidden and token_matches(self.tokens.get("api"), presented):
            raise Refused(403, "forbidden", AGENTS_FORBIDDEN, "agents")
        if not verdict.ok:
            raise Refused(401, "unauthorized", "unauthorized", verdict.reason or "missing")
        if not verdict.write and access.write:
            raise Refused(403, "forbidden", READ_ONLY, "read_only")
        caller = Caller(
            client_key(presented if expected else None, knock.address),
            communities=verdict.communities,
            write=verdict.write,
        )
        if count:
            self.admit(caller)
        return caller

    def admit(self, caller: Caller) -> None:
        """One request (or tool call) against the caller's rate limit; 429 past it."""
        if wait := self.limiter.acquire(caller.who):
            raise Refused(429, "rate_limited", "too many requests; retry after the Retry-After delay", "rate", wait)

    def presented(self, access: Access, headers: Mapping[str, str] | Any) -> str | None:
        """The token as ``access`` reads it: the configured header, Dify's ``Authorization:
        Bearer <key>`` (that spelling only), or either (MCP clients send the latter)."""
        header = self.settings.auth.auth_header
        if access.credential == "header":
            return headers.get(header)
        if access.credential == "bearer":
            value = headers.get("Authorization", "") or ""
            return bearer(value) if value.startswith("Bearer ") else None
        return bearer_or_header(headers, header)


def keeper(caller: Caller, *, signed_in: bool, needs_sign_in: bool) -> Caller:
    """A keeper on the pages: every community, reading and writing, once signed in (or when no
    admin token is set and the pages are open on loopback)."""
    if needs_sign_in and not signed_in:
        raise Refused(401, "sign_in", "sign in to use the keeper's pages", "sign_in")
    return replace(caller, who="keeper")
