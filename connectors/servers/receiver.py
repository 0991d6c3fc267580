"""The project's reference webhook receiver, the one HTTP receiver of the project (`Receiver`): the HTTP
server of the tests and of the webhook's conformance runs (``python -m connectors.conformance
webhook-sink``), and the embedded target of ``impulse-load``'s default run.

Standard library only, served from a daemon thread of the process that starts it. HTTP/1.1 with
keep-alive (one thread per connection), every request answered ``200 {"ok": true}``. Like a
receiver that makes the webhook sink effectively-once, it **dedupes by the Idempotency-Key
header**: the first request with a key is accepted, a repeat with the same body is answered 200 and
not counted, a repeat with another body is refused with ``422`` (as the IETF Idempotency-Key draft
says: the key was reused for different content — for the webhook sink, a replayed batch whose
partitioning changed). A request whose body arrives cut short (the client's connection broke) is not
received at all.
It counts accepted requests, rows and bytes: an ``application/x-ndjson`` body holds one row per line,
a JSON body an array of rows (or one row object). With ``record=True`` it also keeps every request
(`ReceivedRequest`: method, path, headers, body, status, accepted or duplicate), for a test to read
back; load runs leave it off (memory). ``GET`` answers the counts.

For tests, answers can be changed: ``fail_next(n, status)`` (the next n requests get that answer and
are not accepted), ``respond_with(status)`` (every request, until ``reset_behaviour``), ``delay_next(n,
seconds)`` (recorded and accepted on arrival, answered late: a slow server), ``refuse_rows(predicate,
path)`` (a request under that path holding a row the predicate picks is answered 422, as an API refuses
a row it cannot accept), ``verify_requests(check, path)`` (a request under that path for which
``check(headers, body)`` raises is answered 401: a signature check), ``limit_rate(per_second, group)`` (a
request is answered 429 when its group, e.g. the sending task, already started `per_second` requests in
the last second: an API's rate limit), ``drip_next(n, body, interval)`` (the answer's body is sent one byte
per interval: a stuck receiver). ``restart()`` listens again
on the same port keeping everything received; ``stop()`` also cuts kept-alive connections.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from connectors.servers.tls import ServerTls

__all__ = ["Receiver", "ReceiverCounts", "ReceivedRequest", "count_rows"]

@dataclass
class ReceivedRequest:
    """One request the receiver recorded. ``headers`` is case-insensitive (``headers["idempotency-key"]``)."""

    method: str
    path: str
    headers: Any  # http.client.HTTPMessage
    body: bytes
    time: float
    status: int = 0
    accepted: bool = False
    duplicate: bool = False

    @property
    def idempotency_key(self) -> str | None:
        return self.headers.get("Idempotency-Key")

    def json(self) -> Any:
        return json.loads(self.body)


class ReceiverCounts:
    """What the receiver accepted so far (read under its lock with `Receiver.counts`)."""

    def __init__(self, requests: int = 0, rows: int = 0, bytes: int = 0, duplicates: int = 0) -> None:
        self.requests = requests
        self.rows = rows
        self.bytes = bytes
        self.duplicates = duplicates

    def as_dict(self) -> dict:
        return {"requests": self.requests, "rows": self.rows, "bytes": self.bytes, "duplicates": self.duplicates}

    def __repr__(self) -> str:
        return f"ReceiverCounts({self.as_dict()})"


def count_rows(body: bytes, content_type: str) -> int:
    """Rows in one request body: lines of NDJSON, elements of a JSON array, or 1 for a JSON object."""
    if "ndjson" in content_type or "jsonl" in content_type:
        return body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)
    stripped = body.lstrip()
    if not stripped:
        return 0
    if stripped[:1] != b"[":
        return 1
    parsed = json.loads(body)
    return len(parsed) if isinstance(parsed, list) else 1


def _rows_of(body: bytes, content_type: str) -> list[Any]:
    """The rows of a request body as `count_rows` counts them (a body that is not JSON has none)."""
    try:
        if "ndjson" in content_type or "jsonl" in content_type:
            return [json.loads(line) for line in body.splitlines() if line.strip()]
        parsed = json.loads(body)
    except ValueError:
        return []
    return parsed if isinstance(parsed, list) else [parsed]


class KeyReused(Exception):
    """A request reuses an Idempotency-Key the receiver accepted with another body."""


def _digest(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=16).digest()


@dataclass
class _Behaviour:
    """How the next requests are answered (tests); the default answers 200 and dedupes."""

    fail_left: int = 0
    fail_response: tuple[int, dict[str, str], bytes] = (503, {}, b"")
    delay_left: int = 0
    delay_seconds: float = 0.0
    always: tuple[int, dict[str, str], bytes] | None = None
    refuse: tuple[str, Callable[[Any], bool]] | None = None  # (path prefix, row predicate)
    verify: tuple[str, Callable[[Any, bytes], None]] | None = None  # (path prefix, check(headers, body))
    rate: tuple[float, float, Callable[[Any], str]] | None = None  # (per second, window s, group of headers)
    arrivals: dict[str, list[float]] = field(default_factory=dict)  # group -> recent arrival times (monotonic)
    drip_left: int = 0
    drip: tuple[bytes, float] = (b"", 0.0)  # (body, seconds between its bytes)


def _over_rate(b: _Behaviour, headers, now: float) -> bool:
    """Whether a request arriving `now` exceeds ``b.rate`` for its group (under the receiver's lock)."""
    per_second, window_s, group = b.rate
    times = b.arrivals.setdefault(group(headers), [])
    while times and times[0] <= now - window_s:
        times.pop(0)
    if len(times) >= per_second:
        return True
    times.append(now)
    return False


@dataclass
class _Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    payload: bytes = b""
    delay_s: float = 0.0
    drip_s: float = 0.0  # > 0: the payload is written one byte at a time, this many seconds apart


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, receiver: "Receiver") -> None:
        self.receiver = receiver
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)
        if receiver.tls is not None:  # each connection's handshake runs as it is accepted
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(receiver.tls.ca))
            context.load_cert_chain(str(receiver.tls.server.cert), str(receiver.tls.server.key))
            context.verify_mode = ssl.CERT_REQUIRED if receiver.require_client_cert else ssl.CERT_NONE
            self.socket = context.wrap_socket(self.socket, server_side=True)

    def process_request(self, request, client_address):
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Cut kept-alive connections so a stopped receiver really stops answering."""
        with self.connections_lock:
            connections, self.connections = list(self.connections), set()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive: the sink's connection pool reuses its connections
    timeout = 120
    # TCP_NODELAY: the stdlib writes an answer's headers and body in two sends; with Nagle's algorithm the
    # body then waits for the client's delayed ACK (40 ms on Linux) on every kept-alive request.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format, *args):  # noqa: A002 - stdlib signature; silent
        pass

    def _answer(self, status: int, payload: bytes, headers: Mapping[str, str] | None = None,
                drip_s: float = 0.0) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if not any(k.lower() == "content-type" for k in (headers or {})):
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if not drip_s:
            self.wfile.write(payload)
            return
        for i in range(len(payload)):
            self.wfile.write(payload[i:i + 1])
            self.wfile.flush()
            if self.server.receiver._stopping.wait(drip_s):
                return

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        body = self._read_body()
        if len(body) < int(self.headers.get("Content-Length") or 0):  # cut short (client gone, or stop()): not received
            self.close_connection = True
            return
        answer = self.server.receiver._on_request(self.command, self.path, self.headers, body)
        if answer.delay_s:
            self.server.receiver._stopping.wait(answer.delay_s)
        try:
            self._answer(answer.status, answer.payload, answer.headers, answer.drip_s)
        except OSError:  # the client gave up on a dripping answer
            self.close_connection = True

    do_PUT = do_PATCH = do_DELETE = do_POST

    def do_GET(self) -> None:  # noqa: N802 - a health check and the counts
        self._answer(200, json.dumps(self.server.receiver.counts().as_dict()).encode())

    do_HEAD = do_GET


class Receiver:
    """``with Receiver() as r: … r.url … r.counts().rows``; binds 127.0.0.1 on a free port by default.

    ``url`` is ``http://host:port`` (any path is accepted; the harness posts to ``/events``). With `tls`
    (`connectors.servers.tls.ServerTls`) it is ``https://``, and with `require_client_cert` a client must present a
    certificate signed by ``tls.ca`` (mutual TLS); a failed handshake is no request.
    """

    name = "http"
    client_library = None   # the standard library's HTTP server: nothing to install

    def __init__(self, host: str = "127.0.0.1", port: int = 0, record: bool = False, tls: ServerTls | None = None,
                 require_client_cert: bool = False) -> None:
        self.tls = tls
        self.require_client_cert = require_client_cert
        self.host = host
        self.port = port
        self.record = record
        self._lock = threading.Lock()
        self._keys: dict[str, bytes] = {}  # Idempotency-Key → digest of the body accepted with it
        self._counts = ReceiverCounts()
        self._behaviour = _Behaviour()
        self._requests: list[ReceivedRequest] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    # -- life cycle ----------------------------------------------------------------------------------
    def start(self) -> "Receiver":
        self._stopping.clear()
        deadline = time.monotonic() + 10
        while True:  # a restart on the same port may find it in TIME_WAIT for a moment
            try:
                self._server = _Server((self.host, self.port), self)
                break
            except OSError:
                if not self.port or time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"impulse-receiver-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        server.drop_connections()
        if self._thread is not None:
            self._thread.join(5)

    def restart(self) -> "Receiver":
        """Stop, then listen again on the same port, keeping what was received (a receiver's restart)."""
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> "Receiver":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- behaviour (tests) -----------------------------------------------------------------------------
    def fail_next(self, n: int, status: int = 503, headers: dict[str, str] | None = None,
                  body: bytes = b'{"error": "injected failure"}') -> None:
        with self._lock:
            self._behaviour.fail_left = n
            self._behaviour.fail_response = (status, dict(headers or {}), body)

    def respond_with(self, status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        with self._lock:
            self._behaviour.always = (status, dict(headers or {}), body)

    def refuse_rows(self, predicate: Callable[[Any], bool], path: str = "/") -> None:
        """Answer 422 (not the reused-key problem document) to every request under `path` with a row that
        `predicate` (called with the parsed row) picks; such a request is recorded, not accepted."""
        with self._lock:
            self._behaviour.refuse = (path, predicate)

    def verify_requests(self, check: Callable[[Any, bytes], None], path: str = "/") -> None:
        """Answer 401 (not accepted) to every request under `path` for which ``check(headers, body)`` raises."""
        with self._lock:
            self._behaviour.verify = (path, check)

    def limit_rate(self, per_second: float, group: Callable[[Any], str] = lambda headers: "",
                   window_s: float = 1.0) -> None:
        """Answer 429 (not accepted) to a request when its group (``group(headers)``, e.g. the sending task
        from its idempotency key) already had `per_second` requests let through in the last `window_s`."""
        with self._lock:
            self._behaviour.rate = (per_second, window_s, group)
            self._behaviour.arrivals = {}

    def drip_next(self, n: int, body: bytes, interval_s: float) -> None:
        """The next n requests are accepted on arrival, answered 200 with `body` sent one byte per `interval_s`."""
        with self._lock:
            self._behaviour.drip_left = n
            self._behaviour.drip = (body, interval_s)

    def delay_next(self, n: int, seconds: float) -> None:
        with self._lock:
            self._behaviour.delay_left = n
            self._behaviour.delay_seconds = seconds

    def reset_behaviour(self) -> None:
        with self._lock:
            self._behaviour = _Behaviour()

    def reset(self) -> None:
        """Forget every key, count, recorded request and behaviour."""
        with self._lock:
            self._keys.clear()
            self._counts = ReceiverCounts()
            self._requests.clear()
            self._behaviour = _Behaviour()

    # -- what was received -----------------------------------------------------------------------------
    def counts(self) -> ReceiverCounts:
        with self._lock:
            c = self._counts
            return ReceiverCounts(c.requests, c.rows, c.bytes, c.duplicates)

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Every request recorded (``record=True``), in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def accepted_requests(self) -> list[ReceivedRequest]:
        """The recorded requests that were accepted: one per Idempotency-Key."""
        return [r for r in self.requests if r.accepted]

    @property
    def accepted(self) -> list[bytes]:
        """Bodies of the accepted requests, in arrival order, one per Idempotency-Key."""
        return [r.body for r in self.accepted_requests]

    def accepted_json(self) -> list[Any]:
        return [json.loads(body) for body in self.accepted]

    # -- request handling (handler threads) ------------------------------------------------------------
    def _on_request(self, method: str, path: str, headers, body: bytes) -> _Answer:
        """Record one request and decide its answer: a test's behaviour, else accept once per key (same
        body: a duplicate, 200; another body: 422) and count its rows (400 if the body is not JSON)."""
        request = ReceivedRequest(method, path, headers, body, time.time()) if self.record else None
        answer = _Answer()
        with self._lock:
            b = self._behaviour
            if b.delay_left > 0:
                b.delay_left -= 1
                answer.delay_s = b.delay_seconds
            forced = None
            if b.drip_left > 0:
                b.drip_left -= 1
                answer.payload, answer.drip_s = b.drip
            if b.rate is not None and _over_rate(b, headers, time.monotonic()):
                forced = (429, {}, b'{"ok": false, "error": "rate limit"}')
            elif b.fail_left > 0:
                b.fail_left -= 1
                forced = b.fail_response
            elif b.always is not None:
                forced = b.always
        if forced is None and b.verify is not None and path.startswith(b.verify[0]):
            try:
                b.verify[1](headers, body)
            except Exception as exc:  # noqa: BLE001 - any refusal of the check
                forced = (401, {}, json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}).encode())
        if forced is None and b.refuse is not None and path.startswith(b.refuse[0]):
            refused = [i for i, row in enumerate(_rows_of(body, headers.get("Content-Type") or "")) if b.refuse[1](row)]
            if refused:
                forced = (422, {}, json.dumps({"ok": False, "error": "rows refused", "rows": refused}).encode())
        if forced is not None and not 200 <= forced[0] < 300:
            answer.status, answer.headers, answer.payload = forced[0], dict(forced[1]), forced[2]
            self._remember(request, answer.status, duplicate=False, accepted=False)
            return answer
        try:
            duplicate = self._accept(headers, body, request)
        except KeyReused as exc:
            # the draft's answer: a problem document (RFC 9457) that names the key, which the sink tells apart
            # from a 422 refusing a request's rows
            answer.status, answer.headers = 422, {"Content-Type": "application/problem+json"}
            answer.payload = json.dumps({"type": "https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header/",
                                         "title": "Idempotency-Key is already used", "detail": str(exc),
                                         "ok": False, "error": str(exc)}).encode()
            self._remember(request, 422, duplicate=False, accepted=False)
            return answer
        except ValueError as exc:  # not JSON: refuse for good (the sink does not retry a 400)
            answer.status, answer.payload = 400, json.dumps({"ok": False, "error": str(exc)[:200]}).encode()
            self._remember(request, 400, duplicate=False, accepted=False)
            return answer
        if forced is not None:
            answer.status, answer.headers, answer.payload = forced[0], dict(forced[1]), forced[2]
        answer.payload = answer.payload or (b'{"ok": true, "duplicate": true}' if duplicate else b'{"ok": true}')
        if request is not None:
            request.status = answer.status
        return answer

    def _accept(self, headers, body: bytes, request: ReceivedRequest | None) -> bool:
        """Accept a request once per Idempotency-Key; returns whether it was a duplicate (key seen, same body).

        Raises `KeyReused` for a key seen before with another body, ``ValueError`` for a body that is not JSON.
        """
        key = headers.get("Idempotency-Key")
        digest = _digest(body) if key is not None else b""
        with self._lock:
            if key is not None and key in self._keys:
                return self._repeat(key, digest, request)
        rows = count_rows(body, headers.get("Content-Type") or "")  # outside the lock: may parse JSON
        with self._lock:
            if key is not None:
                if key in self._keys:
                    return self._repeat(key, digest, request)
                self._keys[key] = digest
            self._counts.requests += 1
            self._counts.rows += rows
            self._counts.bytes += len(body)
            self._remember_locked(request, 200, duplicate=False, accepted=True)
        return False

    def _repeat(self, key: str, digest: bytes, request: ReceivedRequest | None) -> bool:
        """A request whose key was accepted before (under the lock): a duplicate, or `KeyReused`."""
        if self._keys[key] != digest:
            raise KeyReused(f"Idempotency-Key {key!r} was used before with another body")
        self._counts.duplicates += 1
        self._remember_locked(request, 200, duplicate=True, accepted=False)
        return True

    def _remember(self, request: ReceivedRequest | None, status: int, *, duplicate: bool, accepted: bool) -> None:
        with self._lock:
            self._remember_locked(request, status, duplicate=duplicate, accepted=accepted)

    def _remember_locked(self, request: ReceivedRequest | None, status: int, *, duplicate: bool, accepted: bool) -> None:
        if request is not None:
            request.status, request.duplicate, request.accepted = status, duplicate, accepted
            self._requests.append(request)
