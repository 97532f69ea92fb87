"""The names the worker answers to, the pages a browser's request may come from, and the proxies
whose forwarded headers are believed.

DNS rebinding: a web page the keeper visits re-points its own name at 127.0.0.1 and then reads
and writes the worker as if it were that site. Its requests carry the attacker's name in
``Host``, so every door but the health checks answers only the names of :class:`HostPolicy`
(421 otherwise): loopback names always, those of ``ARC_ALLOWED_HOSTS``, and, for the APIs with
that unset, any name when ``ARC_API_TOKEN`` is set (every API then asks for a token, which a
rebinding page does not have). The keeper's pages and the sign-in page answer loopback and the
listed names only, whatever tokens are set; MCP those and ``ARC_MCP_ALLOWED_HOSTS``. A
browser's request that changes something must also come from a page of this worker (its
``Origin``, by scheme, name and port; 403 otherwise).

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
from .routes import HEALTH_ROUTE, READY_ROUTE
from .security import is_loopback

# Paths every name may ask: an orchestrator's probe reaches a container by its address.
HEALTH_PATHS = (HEALTH_ROUTE, READY_ROUTE)

_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::(\d{1,5}))?")


def split_host(host: str) -> tuple[str, str | None] | None:
    """``name[:port]`` as a Host header or an Origin's netloc has it, lower case, a final dot
    dropped; None when it is no host name."""
    match = _HOST.fullmatch(host.strip().lower())
    if match is None:
        return None
    return match.group(1).rstrip("."), match.group(2)


DEFAULT_PORTS = {"http": "80", "https": "443"}


@dataclass(frozen=True)
class HostPolicy:
    """``listed``: the names of ARC_ALLOWED_HOSTS (``name`` any port, ``name:port``);
    ``any_name``: every name passes (``*``, or a token on every door); ``origins``: browser
    origins taken as the worker's own beyond its names (ARC_MCP_ALLOWED_ORIGINS, for MCP)."""

    listed: tuple[tuple[str, str | None], ...] = ()
    any_name: bool = False
    origins: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> HostPolicy:
        """The APIs' rule: the names listed, or, with none listed, any name once ARC_API_TOKEN
        is set (every API then asks for a token, which a rebinding page does not have)."""
        if settings.serving.allowed_hosts:
            return cls(_listed(settings.serving.allowed_hosts), "*" in settings.serving.allowed_hosts)
        return cls((), any_name=bool(settings.auth.api_token))

    @classmethod
    def for_pages(cls, settings: Settings) -> HostPolicy:
        """The keeper's pages and sign-in: loopback and the names listed only, whatever tokens
        are set (a rebinding page would otherwise serve the real sign-in form under its name)."""
        return cls(_listed(settings.serving.allowed_hosts), "*" in settings.serving.allowed_hosts)

    @classmethod
    def for_mcp(cls, settings: Settings) -> HostPolicy:
        """The MCP endpoint: the pages' names, those of ARC_MCP_ALLOWED_HOSTS, and the origins of
        ARC_MCP_ALLOWED_ORIGINS."""
        extra = tuple(part.strip().lower() for part in settings.serving.mcp_allowed_hosts.split(",") if part.strip())
        names = (*settings.serving.allowed_hosts, *extra)
        origins = tuple(o.strip() for o in settings.serving.mcp_allowed_origins.split(",") if o.strip())
        return cls(_listed(names), "*" in names, origins)

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

    def same_site(self, origin: str, host: str, scheme: str) -> bool:
        """Whether a browser's ``Origin`` is a page of this worker: the scheme, name and port the
        request came in on (``scheme``: the request's, http or https, a trusted proxy's
        X-Forwarded-Proto believed), as a browser writes an origin (lower case, the default port
        left out); or a name ARC_ALLOWED_HOSTS lists (a proxy may have rewritten Host)."""
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        sent_scheme = origin.partition("://")[0]
        if (
            sent_scheme not in DEFAULT_PORTS
            or not parts.netloc
            or origin.rstrip("/") != f"{sent_scheme}://{parts.netloc}"
        ):
            return False
        asked, sent = split_host(host), split_host(parts.netloc)
        if sent is None or asked is None or parts.netloc != parts.netloc.lower():
            return False
        port = sent[1] or DEFAULT_PORTS[sent_scheme]
        if sent_scheme == scheme and (sent[0], port) == (asked[0], asked[1] or DEFAULT_PORTS.get(scheme)):
            return True
        if is_loopback(sent[0]):  # a loopback page is this worker's by its scheme and port only
            return False
        return self._listed((sent[0], port)) or self._listed((sent[0], sent[1]))


def _listed(entries: Iterable[str]) -> tuple[tuple[str, str | None], ...]:
    return tuple(
        parts for entry in entries if entry != "*" and (parts := split_host(entry.removesuffix(":*"))) is not None
    )


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
