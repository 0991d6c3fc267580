"""A Schema Registry behind HTTPS with basic auth (`BasicAuthProxy`): a TLS-terminating HTTP proxy that refuses a
request without the right ``Authorization: Basic`` credentials (401) and forwards every other one to the registry.

Apicurio Registry enforces basic auth only with an identity server (Keycloak) beside it; this proxy stands where a
production registry's gateway would, so the registry clients' ``basic.auth.user.info`` and ``ssl.ca.location``
settings meet a server that checks them. Standard library only, one thread per connection.
"""

from __future__ import annotations

import base64
import hmac
import http.server
import ssl
import threading
import urllib.error
import urllib.request
from typing import Mapping

from connectors.servers.base import LOOPBACK
from connectors.servers.tls import ServerTls

__all__ = ["BasicAuthProxy"]

_FORWARDED = ("Content-Type", "Accept")   # the request headers a registry client's calls depend on


class BasicAuthProxy:
    """``with BasicAuthProxy(registry.url, tls, {"user": "password"}) as proxy: … proxy.url …``: ``https://`` on a
    free loopback port, the path of `upstream` (e.g. Apicurio's ``/apis/ccompat/v7``) kept: ``proxy.url`` is
    `upstream` with the proxy's scheme and address. `refused` counts the requests answered 401."""

    name = "registry-proxy"
    client_library = None   # the standard library's HTTP server

    def __init__(self, upstream: str, tls: ServerTls, users: Mapping[str, str]) -> None:
        self.upstream = upstream.rstrip("/")
        self.tls = tls
        self.users = dict(users)
        self.refused = 0
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """`upstream`, reached through this proxy (``https://127.0.0.1:PORT/<upstream's path>``)."""
        path = self.upstream.split("://", 1)[1].partition("/")[2]
        return f"https://{LOOPBACK}:{self._server.server_address[1]}" + (f"/{path}" if path else "")

    @property
    def running(self) -> bool:
        return self._server is not None

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header value names a user of `users` with its password."""
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        expected = self.users.get(user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())

    def start(self) -> "BasicAuthProxy":
        server = http.server.ThreadingHTTPServer((LOOPBACK, 0), _handler(self))
        server.daemon_threads = True
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.tls.server.cert), str(self.tls.server.key))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"impulse-registry-proxy-{server.server_address[1]}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    close = stop

    def __enter__(self) -> "BasicAuthProxy":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _handler(proxy: BasicAuthProxy) -> type[http.server.BaseHTTPRequestHandler]:
    upstream_root = proxy.upstream.split("://", 1)[0] + "://" + proxy.upstream.split("://", 1)[1].partition("/")[0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet: a test's output is its own
            pass

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not proxy.authorized(self.headers.get("Authorization")):
                with proxy._lock:
                    proxy.refused += 1
                self._answer(401, b'{"error_code":401,"message":"Unauthorized"}', "application/json",
                             {"WWW-Authenticate": 'Basic realm="registry"'})
                return
            request = urllib.request.Request(upstream_root + self.path, data=body or None, method=self.command,
                                             headers={h: self.headers[h] for h in _FORWARDED if self.headers.get(h)})
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    self._answer(answer.status, answer.read(), answer.headers.get("Content-Type"))
            except urllib.error.HTTPError as exc:
                self._answer(exc.code, exc.read(), exc.headers.get("Content-Type"))
            except OSError as exc:
                self._answer(502, f'{{"error_code":502,"message":"{type(exc).__name__}"}}'.encode(), "application/json")

        def _answer(self, status: int, body: bytes, content_type: str | None, more: Mapping[str, str] = {}) -> None:
            self.send_response(status)
            if content_type:
                self.send_header("Content-Type", content_type)
            for name, value in more.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _forward

    return Handler
