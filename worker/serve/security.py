"""Shared-secret auth, per-client rate limiting and brute-force protection for the webhooks.

:func:`authenticate` is the one check every door makes (the webhook's guard, Dify's
``/retrieval``, the MCP server over HTTP, the keeper's sign-in): it knows no web framework, so
Flask and ASGI callers alike pass what they read from the request and answer with its verdict.

All state is per gunicorn process (no shared store): the README sizes the limits per process.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from ..community_grants import CommunityGrant

log = logging.getLogger("arc.auth")


def token_matches(expected: str | None, presented: str | None) -> bool:
    """Constant-time comparison; no token configured means the route is open, and a route closed
    by :data:`CLOSED` (no admin token set) matches nothing, whatever is presented."""
    if not expected:
        return True
    if expected == CLOSED:
        return False
    return presented is not None and hmac.compare_digest(expected.encode(), presented.encode())


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(bind_hosts: list[str], *, api_token: str | None, auth_disabled: bool) -> None:
    """Refuse to listen beyond loopback without a token unless explicitly allowed."""
    exposed = [h for h in bind_hosts if not is_loopback(h)]
    if exposed and not api_token and not auth_disabled:
        raise SystemExit(
            f"refusing to listen on {', '.join(exposed)} without ARC_API_TOKEN "
            f"(set it, or ARC_AUTH_DISABLED=true if a proxy authenticates)"
        )


class RateLimiter:
    """A token bucket per client: ``rate`` requests a second, bursts of ``2 * rate``."""

    def __init__(self, rate: float, burst: float | None = None, max_clients: int = 100_000):
        self.rate = rate
        self.burst = burst or max(2 * rate, 1)
        self._buckets: TTLCache = TTLCache(maxsize=max_clients, ttl=max(self.burst / max(rate, 1e-9), 60))
        self._lock = threading.Lock()

    def peek(self, client: str) -> float:
        """Like :meth:`acquire` without taking a token: the wait before one would be available."""
        return self._take(client, take=False)

    def acquire(self, client: str) -> float:
        """0 if the request may go ahead, else the seconds to wait before retrying."""
        return self._take(client, take=True)

    def _take(self, client: str, *, take: bool) -> float:
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1:
                if take:
                    self._buckets[client] = (tokens - 1, now)
                return 0.0
            if take:
                self._buckets[client] = (tokens, now)
            return (1 - tokens) / self.rate


def client_key(presented_token: str | None, address: str | None) -> str:
    """Who a request counts against: its credential when it has one (every request from one n8n
    instance shares an address, and one credential may come from several), else its address."""
    if presented_token:
        return "token:" + hashlib.sha256(presented_token.encode()).hexdigest()[:16]
    return "addr:" + (address or "unknown")


# A route that needs a token nobody configured: the admin routes when only the chatbot's
# ARC_API_TOKEN is set (it may not ingest or delete unless ARC_INGEST_WITH_API_TOKEN=true).
CLOSED = "\x00closed"


def admin_token(api_token: str | None, ingest_token: str | None, ingest_with_api_token: bool) -> str | None:
    """The token ingestion and deletion ask for: ARC_INGEST_TOKEN; else the retrieval token only
    when the admin said so in one setting; else, with a retrieval token set, none will do."""
    if ingest_token:
        return ingest_token
    if ingest_with_api_token or not api_token:
        return api_token
    return CLOSED


class FailedAuthGuard:
    """Keeps a stream of wrong tokens cheap: each address may fail authentication
    ``per_minute`` times a minute (bursts of as many); past that its wrong tokens get 429
    instead of 401. The right token is compared first and always passes, so a stranger behind
    the same address (a NAT, a proxy, n8n's own host) cannot lock the rightful caller out;
    guessing stays hopeless because tokens are at least MIN_TOKEN_LENGTH characters."""

    def __init__(self, per_minute: float):
        self.enabled = per_minute > 0
        self._bucket = RateLimiter(per_minute / 60, burst=max(per_minute, 1)) if self.enabled else None

    def blocked(self, address: str) -> float:
        """Seconds until ``address`` may try again (0: it may)."""
        if self._bucket is None:
            return 0.0
        return self._bucket.peek(address)

    def failed(self, address: str) -> None:
        if self._bucket is not None:
            self._bucket.acquire(address)


def bearer_or_header(headers: Mapping[str, str] | Any, auth_header: str) -> str | None:
    """The token as the webhook takes it (its header) or as MCP clients send it
    (``Authorization: Bearer``); ``headers`` is any case-insensitive mapping (Flask's, Starlette's)."""
    if value := headers.get(auth_header):
        return value
    return bearer(headers.get("authorization"))


def bearer(authorization: str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header; None for any other header."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def scoped_token(presented: str | None, community_tokens: Mapping[str, CommunityGrant]) -> CommunityGrant | None:
    """What a presented community token (``ARC_COMMUNITY_TOKENS``) grants, or None when it is
    not one."""
    if not presented:
        return None
    found = None
    for token, grant in community_tokens.items():  # every one compared: no timing by position
        if token_matches(token, presented):
            found = grant
    return found


@dataclass(frozen=True)
class Verdict:
    """What :func:`authenticate` decided. ``ok``: go ahead, limited to ``communities`` when a
    community token was presented (None: every community), and to reading unless ``write``.
    Not ok: answer 401 (or the door's own refusal), or 429 with ``Retry-After`` when
    ``retry_after`` is set (the failed-auth brake)."""

    ok: bool
    communities: tuple[str, ...] | None = None
    write: bool = True  # a community token without write@ reads only
    retry_after: float = 0.0
    reason: str | None = None  # not ok: "missing" or "wrong"


def authenticate(
    expected: str | None,
    presented: str | None,
    *,
    address: str,
    guard: FailedAuthGuard,
    route: str,
    community_tokens: Mapping[str, CommunityGrant] | None = None,
    failures: Any = None,
) -> Verdict:
    """The one authentication every door makes. The right token is compared first and always
    passes, whatever others sent from the same address; only a failure meets the brake
    (``guard``: ``ARC_AUTH_FAILURES_PER_MINUTE`` per address), so a stranger behind the same NAT,
    proxy or n8n host cannot lock the rightful caller out. Every failure is logged (the route,
    missing or wrong, the address; never what was presented) and counted in ``failures`` (the
    ``arc_auth_failures`` counter, labelled by route and reason) when the door has metrics.

    ``expected`` None: the door is open; :data:`CLOSED`: nothing opens it (the caller answers
    403 before asking, or lets it fail here). ``community_tokens``: tokens limited to
    communities that this door also takes (its routes then check each community they touch)."""
    if token_matches(expected, presented):
        return Verdict(True)
    if community_tokens and (grant := scoped_token(presented, community_tokens)) is not None:
        return Verdict(True, communities=grant.communities, write=grant.write)
    reason = "missing" if not presented else "wrong"
    if failures is not None:
        failures.labels(route, reason).inc()
    log.warning("authentication failed", extra={"route": route, "reason": reason, "client": address})
    if wait := guard.blocked(address):
        return Verdict(False, retry_after=wait, reason=reason)
    guard.failed(address)
    return Verdict(False, reason=reason)
