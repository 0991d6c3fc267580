"""The project's reference webhook receiver: the embedded target of ``impulse-load``'s default run, and
the target of ``python -m connectors.conformance webhook-sink`` and of the webhook's conformance tests.

Standard library only, served from a daemon thread of the process that starts it. HTTP/1.1 with
keep-alive (one thread per connection), every request answered ``200 {"ok": true}``. Like a
receiver that makes the webhook sink effectively-once, it **dedupes by the Idempotency-Key
header**: the first request with a key is accepted, a repeat is answered 200 and not counted.
It counts accepted requests, rows and bytes: an ``application/x-ndjson`` body holds one row per line,
a JSON body an array of rows (or one row object). With ``record=True`` it also keeps every request
(`ReceivedRequest`: method, path, headers, body, accepted or duplicate), for a test to read back;
load runs leave it off (memory).
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["Receiver", "ReceiverCounts", "ReceivedRequest", "needs_receiver", "embedded_options", "count_rows"]

# What the webhook sink is told when it writes to the embedded receiver (a given option wins).
EMBEDDED_DEFAULTS = {"format": "ndjson", "batchSize": "500"}


def needs_receiver(sink: str, options: Mapping[str, str]) -> bool:
    """The embedded default: webhook-sink with no ``url`` option."""
    return sink == "webhook-sink" and not any(k.lower() == "url" for k in options)


def embedded_options(receiver: "Receiver", options: Mapping[str, str]) -> dict[str, str]:
    """`options` plus the receiver's url and `EMBEDDED_DEFAULTS` (NDJSON: rows are counted by line)."""
    given = {k.lower() for k in options}
    out = {"url": receiver.url, **{k: v for k, v in EMBEDDED_DEFAULTS.items() if k.lower() not in given}}
    out.update(options)
    return out


@dataclass
class ReceivedRequest:
    """One request the receiver recorded. ``headers`` is case-insensitive (``headers["idempotency-key"]``)."""

    method: str
    path: str
    headers: Any  # http.client.HTTPMessage
    body: bytes
    time: float
    accepted: bool = False
    duplicate: bool = False

    @property
    def idempotency_key(self) -> str | None:
        return self.headers.get("Idempotency-Key")


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


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, receiver: "Receiver") -> None:
        self.receiver = receiver
        super().__init__(address, _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive: the sink's connection pool reuses its connections
    timeout = 120
    server: _Server

    def log_message(self, format, *args):  # noqa: A002 - stdlib signature; silent
        pass

    def _answer(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if len(body) < length:  # the sender went away mid-body (a killed task): never accept, or the key
            self.close_connection = True  # would shadow the retry's complete request
            return
        try:
            duplicate = self.server.receiver._accept(self.command, self.path, self.headers, body)
        except ValueError as exc:  # not JSON: refuse for good (the sink does not retry a 400)
            self._answer(400, json.dumps({"ok": False, "error": str(exc)[:200]}).encode())
            return
        self._answer(200, b'{"ok": true, "duplicate": true}' if duplicate else b'{"ok": true}')

    do_PUT = do_PATCH = do_POST

    def do_GET(self) -> None:  # noqa: N802 - a health check and the counts
        self._answer(200, json.dumps(self.server.receiver.counts().as_dict()).encode())


class Receiver:
    """``with Receiver() as r: … r.url … r.counts().rows``; binds 127.0.0.1 on a free port by default."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, record: bool = False) -> None:
        self.host = host
        self.port = port
        self.record = record
        self._lock = threading.Lock()
        self._keys: set[str] = set()
        self._counts = ReceiverCounts()
        self._requests: list[ReceivedRequest] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/events"

    def start(self) -> "Receiver":
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"impulse-load-receiver-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def restart(self) -> "Receiver":
        """Stop, then listen again on the same port, keeping what was received (a receiver's restart)."""
        self.stop()
        return self.start()

    def reset(self) -> None:
        """Forget every key, count and recorded request."""
        with self._lock:
            self._keys.clear()
            self._counts = ReceiverCounts()
            self._requests.clear()

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Every request recorded (``record=True``), in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def accepted_requests(self) -> list[ReceivedRequest]:
        """The recorded requests that were accepted: one per Idempotency-Key."""
        return [r for r in self.requests if r.accepted]

    def __enter__(self) -> "Receiver":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def counts(self) -> ReceiverCounts:
        with self._lock:
            c = self._counts
            return ReceiverCounts(c.requests, c.rows, c.bytes, c.duplicates)

    def _accept(self, method: str, path: str, headers, body: bytes) -> bool:
        """Record one request; returns whether it was a duplicate (its key seen before)."""
        key = headers.get("Idempotency-Key")
        request = ReceivedRequest(method, path, headers, body, time.time()) if self.record else None
        with self._lock:
            duplicate = key is not None and key in self._keys
            if duplicate:
                self._counts.duplicates += 1
                self._remember(request, duplicate=True)
                return True
        rows = count_rows(body, headers.get("Content-Type") or "")  # outside the lock: may parse JSON
        with self._lock:
            if key is not None:
                if key in self._keys:
                    self._counts.duplicates += 1
                    self._remember(request, duplicate=True)
                    return True
                self._keys.add(key)
            self._counts.requests += 1
            self._counts.rows += rows
            self._counts.bytes += len(body)
            self._remember(request, duplicate=False)
        return False

    def _remember(self, request: ReceivedRequest | None, duplicate: bool) -> None:
        if request is not None:
            request.duplicate, request.accepted = duplicate, not duplicate
            self._requests.append(request)
