"""The names the worker answers to, the pages a browser's request may come from, and the proxies
whose forwarded headers are believed.

DNS rebinding: a web page the keeper visits re-points its own name at 127.0.0.1 and then reads
and writes the worker as if it were that site. Its requests carry the attacker's name in
``Host``, so every door but the health checks answers only the names of :class:`HostPolicy`
(421 otherwise): loopback names always, those of ``ARC_ALLOWED_HOSTS``, and, with that unset,
any name when ``ARC_API_TOKEN`` is set (every door then asks for a token, which a rebinding page
does not have, and the pages' cookie is never sent to another name). A browser's request that
changes something must also come from a page of this worker (its ``Origin``; 403 otherwise).

Behind a proxy, ``ARC_TRUSTED_PROXIES`` names the proxies whose ``X-Forwarded-For/-Proto/-Host/
-Port`` are believed (werkzeug's ProxyFix, applied to their requests only, as gunicorn's
``forwarded_allow_ips``): the client's address, https (the session cookie is then ``Secure``)
and the name the client asked for.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from werkzeug.middleware.proxy_fix import ProxyFix

from ..config import Settings
from .security import is_loopback

# Paths every name may ask: an orchestrator's probe reaches a container by its address.
HEALTH_PATHS = ("/healthz", "/readyz")

_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(\d{1,5}))?")


def split_host(host: str) -> tuple[str, str | None] | None:
    """``name[:port]`` as a Host header or an Origin's netloc has it, lower case, a final dot
    dropped; None when it is no host name."""
    match = _HOST.fullmatch(host.strip().lower())
    if match is None:
        return None
    return match.group(1).rstrip("."), match.group(2)


@dataclass(frozen=True)
class HostPolicy:
    """``listed``: the entries of ARC_ALLOWED_HOSTS (``name`` any port, ``name:port``);
    ``any_name``: every name passes (``*``, or a token on every door)."""

    listed: tuple[tuple[str, str | None], ...] = ()
    any_name: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> HostPolicy:
        if settings.serving.allowed_hosts:
            listed = tuple(
                parts
                for entry in settings.serving.allowed_hosts
                if entry != "*" and (parts := split_host(entry.removesuffix(":*"))) is not None
            )
            return cls(listed, "*" in settings.serving.allowed_hosts)
        return cls((), any_name=bool(settings.auth.api_token))

    def allows(self, host: str) -> bool:
        """Whether a request asking for ``host`` (its Host header) is answered."""
        parts = split_host(host)
        if parts is None:
            return False
        if self.any_name or is_loopback(parts[0]):
            return True
        return self._listed(parts)

    def _listed(self, parts: tuple[str, str | None]) -> bool:
        name, port = parts
        return any(name == entry and (entry_port is None or entry_port == port) for entry, entry_port in self.listed)

    def same_site(self, origin: str, host: str) -> bool:
        """Whether a browser's ``Origin`` is a page of this worker: the name and port the
        request asked for, or a name ARC_ALLOWED_HOSTS lists (a proxy may have rewritten Host)."""
        parts = urlsplit(origin.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            return False
        asked, sent = split_host(host), split_host(parts.netloc)
        if sent is None:
            return False
        if sent == asked:
            return True
        port = sent[1] or ("443" if parts.scheme == "https" else "80")
        return self._listed((sent[0], port)) or self._listed((sent[0], sent[1]))


class TrustedProxies:
    """WSGI middleware: werkzeug's ProxyFix (one proxy hop: X-Forwarded-For, -Proto, -Host,
    -Port) for requests from the trusted proxies only; everyone else's forwarded headers are
    ignored."""

    def __init__(self, app: Any, trusted: Iterable[str]):
        trusted = tuple(trusted)
        self.app = app
        self.fixed = ProxyFix(app, x_for=1, x_proto=1, x_host=1, x_port=1)
        self.any_address = "*" in trusted
        self.networks = tuple(ipaddress.ip_network(t, strict=False) for t in trusted if t != "*")

    def trusts(self, address: str | None) -> bool:
        if self.any_address:
            return True
        try:
            ip = ipaddress.ip_address((address or "").strip("[]"))
        except ValueError:
            return False
        return any(ip in network for network in self.networks)

    def __call__(self, environ: dict, start_response: Any) -> Any:
        if self.trusts(environ.get("REMOTE_ADDR")):
            return self.fixed(environ, start_response)
        return self.app(environ, start_response)


# What every page and answer of the worker says about itself to a browser. The pages load
# their scripts and styles from /assets only (scripts in files, never inline); style
# attributes set the score bars' widths. Nothing may frame a page or learn its address.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
BROWSER_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # not no-referrer: under it a browser sends "Origin: null" with the pages' own forms
    "Referrer-Policy": "same-origin",
}
