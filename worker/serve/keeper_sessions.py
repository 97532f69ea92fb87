"""The keeper's sessions on the pages: signed in, kept in the database, ended for good.

Flask's session is a signed cookie, and a signature cannot be taken back. So signing in also
starts a session in the database (``keeper_sessions``, sql/035): the cookie carries a random id,
the table its hash. Every page asks for it (and so keeps it alive); signing out deletes it, and
one unused for ``ARC_SESSION_IDLE_MINUTES`` opens nothing. Every gunicorn process, and every
machine on one database, sees the same sessions. A copied cookie is refused once its session
has ended.

Also here: where a sign-in may send the keeper next (:func:`own_path`), and the session cookie
made ``Secure`` when the request came over https (directly, or through a trusted proxy).
"""

from __future__ import annotations

import hashlib
import secrets
from urllib.parse import unquote, urlsplit, urlunsplit

from flask import Flask, has_request_context, request
from flask.sessions import SecureCookieSessionInterface

from ..store import sqlfiles
from ..store.database import Database

SESSION_ID = "sid"  # the key of the session id in Flask's session


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def start(db: Database, idle_minutes: float) -> str:
    """A new session's id, for the cookie (the database keeps only its hash)."""
    session_id = secrets.token_urlsafe(32)
    with db.connection() as conn:
        conn.execute(
            sqlfiles.query("keeper_session_start"),
            {"session_hash": _hash(session_id), "idle_seconds": idle_minutes * 60},
        )
    return session_id


def alive(db: Database, session_id: str | None, idle_minutes: float) -> bool:
    """Whether the session goes on (it exists and was used within the limit); using it now
    keeps it alive."""
    if not session_id:
        return False
    with db.connection() as conn:
        row = conn.execute(
            sqlfiles.query("keeper_session_touch"),
            {"session_hash": _hash(session_id), "idle_seconds": idle_minutes * 60},
        ).fetchone()
    return row is not None


def end(db: Database, session_id: str | None) -> None:
    if session_id:
        with db.connection() as conn:
            conn.execute(sqlfiles.query("keeper_session_end"), {"session_hash": _hash(session_id)})


# Characters that make a browser read a Location otherwise than it is written: it drops tabs
# and newlines, and reads a backslash as a slash ("/\\evil.example" is another site).
_MISREAD = frozenset(chr(c) for c in range(0x20)) | {"\x7f", "\\"}


def own_path(target: str | None) -> str | None:
    """Where a sign-in may go next: a path of this worker (with its query), or None. Only
    ``/path`` passes; never a scheme, a host, ``//host``, or anything a browser would read as
    one once it drops control characters, turns ``\\`` into ``/`` or decodes ``%2F``."""
    if not target or len(target) > 2000 or not target.startswith("/"):
        return None
    for form in (target, unquote(target), unquote(unquote(target))):
        if _MISREAD.intersection(form) or form.startswith("//"):
            return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return None
    return urlunsplit(("", "", parts.path, parts.query, ""))


class KeeperSessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie session, its cookie ``Secure`` when the request came over https."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(super().get_cookie_secure(app)) or (has_request_context() and request.is_secure)
