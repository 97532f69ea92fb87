"""A WSGI app served on a free loopback port in a background thread, for the protocol stand-ins."""

from __future__ import annotations

import threading

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response


class LoopbackServer:
    def __init__(self) -> None:
        self._server = make_server("127.0.0.1", 0, self._wsgi, threaded=True)
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()

    def _wsgi(self, environ, start_response):
        return self.handle(Request(environ))(environ, start_response)

    def handle(self, request: Request) -> Response:
        raise NotImplementedError
