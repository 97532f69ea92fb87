"""Shared-secret auth, per-client rate limiting and brute-force protection for the webhooks.

All state is per gunicorn process (no shared store): the README sizes the limits per process.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import threading
import time

from cachetools import TTLCache


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
        raise SystemExit(f"refusing to listen on {', '.join(exposed)} without ARC_API_TOKEN "
                         f"(set it, or ARC_AUTH_DISABLED=true if a proxy authenticates)")


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
