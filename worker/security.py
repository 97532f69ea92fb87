"""Shared-secret auth and per-client rate limiting for the webhooks."""

from __future__ import annotations

import hmac
import ipaddress
import threading
import time

from cachetools import TTLCache


def token_matches(expected: str | None, presented: str | None) -> bool:
    """Constant-time comparison; no token configured means the route is open."""
    if not expected:
        return True
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

    def acquire(self, client: str) -> float:
        """0 if the request may go ahead, else the seconds to wait before retrying."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1:
                self._buckets[client] = (tokens - 1, now)
                return 0.0
            self._buckets[client] = (tokens, now)
            return (1 - tokens) / self.rate
