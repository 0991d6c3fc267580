"""The webhook sink's HTTP layer: a task's pooled session with its pacer and in-flight limit, a response
read within its deadline, and the translation of HTTP failures into the project's errors."""

from __future__ import annotations

import email.utils
import http.cookiejar
import json
import re
import socket
import ssl
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable, Mapping

from connectors.errors import (
    DeliveryError,
    OptionError,
    PartitioningChangedError,
    SinkError,
    TransientError,
    map_errors,
)
from connectors.protocol import CHANGED_INPUT_CAUSE, CHANGED_INPUT_REMEDY, WriteIdentity
from connectors.redact import redact_url
from connectors.registry import import_extra
from sinks.webhook.options import WebhookOptions, resolve_env
from sinks.webhook.signing import SECRETS_EXPECTED, signature_headers, signing_keys

__all__ = ["Client", "TaskState", "Pacer", "Cancelled", "read_by", "retry_after", "translate", "import_requests"]

_BODY_START = 200  # characters of a refused response's body quoted in the error


def import_requests() -> ModuleType:
    """``requests``, through the gate that names the ``webhook`` extra."""
    return import_extra("requests", "webhook", "the webhook sink", "requests")


class Cancelled(SinkError):
    """A request given up because another request of the same task failed."""


class Pacer:
    """Spaces the request starts of one task at least ``1 / rate`` seconds apart: a token bucket holding one
    token, refilled at `rate` per second. Any one-second window [t, t + 1 s) then holds at most `rate` starts
    (k + 1 starts span at least k / rate seconds), and a load above the rate is sent evenly, never as a burst
    and a pause. A rate above 1 that is not a whole number is rounded down: a window cannot hold 2.5 starts."""

    def __init__(self, per_second: float) -> None:
        self.interval_s = 1.0 / (int(per_second) if per_second >= 1 else per_second)
        self._next = 0.0  # time.monotonic() of the earliest next start
        self._lock = threading.Lock()

    def wait(self, stopped: threading.Event) -> bool:
        """Block until the caller's request may start (the slot is its, whatever happens); False if `stopped`
        was set while waiting."""
        with self._lock:
            start = max(time.monotonic(), self._next)
            self._next = start + self.interval_s
        while (left := start - time.monotonic()) > 0:
            if stopped.wait(left):
                return False
        return True


@dataclass
class TaskState:
    """What outlives one write of a partition within a Spark task attempt: the request pace, and how many
    requests each key has been sent (the protocol rewrites a partition after a `TransientError`)."""

    identity: WriteIdentity | None
    pacer: Pacer | None
    sent: Counter = field(default_factory=Counter)


class Client:
    """HTTP on one task: a pooled `requests.Session` and up to ``maxInFlight`` concurrent requests.

    `submit` blocks while ``maxInFlight`` requests are in flight; the first failure stops the
    others' retries and is raised by the next `submit` or by `drain`.
    """

    def __init__(self, options: WebhookOptions, where: str, task: TaskState | None = None) -> None:
        requests = import_requests()
        self.options = options
        self.task = task or TaskState(None, None)
        self.headers = options.resolved_headers(where)
        self.signing_keys: tuple[bytes, ...] = ()
        if options.signing_secret is not None:
            try:
                self.signing_keys = signing_keys(resolve_env(options.signing_secret, what="signingSecret", where=where))
            except ValueError as exc:
                raise SinkError(f"webhook-sink: signingSecret, as read on {where}, is not {SECRETS_EXPECTED}: "
                                f"{exc}") from None
        self.session = requests.Session()
        self.session.trust_env = False  # no proxies or .netrc credentials picked up behind the user's back
        if options.client_cert:  # mutual TLS
            self.session.cert = (options.client_cert, options.client_key) if options.client_key else options.client_cert
        self.session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))  # stateless: no cookies
        adapter = requests.adapters.HTTPAdapter(pool_connections=2, pool_maxsize=max(4, options.max_in_flight),
                                                max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        self._slots = threading.BoundedSemaphore(options.max_in_flight)
        self._pool = ThreadPoolExecutor(options.max_in_flight, thread_name_prefix="webhook-sink") \
            if options.max_in_flight > 1 else None

    # -- one request, retried ----------------------------------------------------------------------
    def send(self, url: str, key: str, body: bytes, *, headers: Mapping[str, str] | None = None,
             method: str | None = None) -> None:
        """Send `body` until a 2xx, retrying what `retryOn` and the transport allow; raise otherwise."""
        opts = self.options
        attempts = opts.max_retries + 1
        all_headers = {**self.headers, **(headers or {}), opts.idempotency_header: key}
        method = method or opts.method
        try:
            opts.retry.call(lambda: self._once(method, url, key, body, all_headers),
                            what=f"webhook-sink request {key}", sleep=self.stopped.wait)
        except Cancelled:
            raise
        except TransientError as exc:
            sent = self.task.sent[key]
            raise TransientError(f"{exc} (gave up: {sent} request{'s' * (sent > 1)} with this key from this task "
                                 f"attempt, {attempts} per write of the partition (maxRetries + 1); the protocol "
                                 "rewrites the partition up to writeRetries times)") from exc

    def _once(self, method: str, url: str, key: str, body: bytes, headers: Mapping[str, str]) -> None:
        if self.stopped.is_set():
            raise Cancelled(f"webhook-sink: request {key} cancelled: another request of this task failed")
        where = f"{method} {redact_url(url)} ({self.options.idempotency_header}: {key})"
        if self.task.pacer is not None and not self.task.pacer.wait(self.stopped):
            raise Cancelled(f"webhook-sink: request {key} cancelled: another request of this task failed")
        if self.signing_keys:  # signed again on every attempt: the timestamp is the attempt's
            headers = {**headers, **signature_headers(self.signing_keys, key, body, time.time())}
        self.task.sent[key] += 1
        timeout_s = self.options.timeout_s
        deadline = time.monotonic() + timeout_s
        with map_errors(lambda exc: translate(exc, where, timeout_s)):
            response = self.session.request(method, url, data=body, headers=headers, timeout=timeout_s,
                                            verify=self.options.verify, allow_redirects=False, stream=True)
            content = read_by(response, deadline)
        status = response.status_code
        if 200 <= status < 300:
            return
        text = content.decode(response.encoding or "utf-8", "replace")[:_BODY_START]
        message = f"webhook-sink: {where} answered {status} {response.reason or ''}".rstrip() + f": {text!r}"
        if status == 422 and _reused_key(content):  # not retried
            raise PartitioningChangedError(
                f"{message}: the receiver refuses the key because an earlier request with it had another body. "
                f"On a replayed batch that means the rows of this partition changed since the earlier run: "
                f"{CHANGED_INPUT_CAUSE}. Sending them under new keys would duplicate rows. {CHANGED_INPUT_REMEDY}")
        if self.options.retryable(status):
            error = TransientError(message)
            error.retry_after_s = retry_after(response.headers.get("Retry-After"))
            error.status = status
            raise error
        error = DeliveryError(message + f" (not retried: {status} is not in retryOn "
                                        f"'{','.join(self.options.retry_on)}')")
        error.status, error.body_start = status, text
        raise error

    # -- concurrency -------------------------------------------------------------------------------
    def submit(self, task: Callable[[], None]) -> None:
        """Run `task` (its requests) now (maxInFlight 1) or in a sender thread once fewer than maxInFlight run."""
        if self.error is not None:
            self.drain()
        if self._pool is None:
            task()
            return
        self._slots.acquire()
        if self.error is not None:
            self._slots.release()
            self.drain()
        self._pool.submit(self._run, task)

    def _run(self, task: Callable[[], None]) -> None:
        try:
            task()
        except BaseException as exc:  # handed to the task's thread by submit/drain
            if self.error is None or isinstance(self.error, Cancelled):
                self.error = exc
            self.stopped.set()
        finally:
            self._slots.release()

    def drain(self) -> None:
        """Wait until no request is in flight; raise the first failure."""
        for _ in range(self.options.max_in_flight):
            self._slots.acquire()
        for _ in range(self.options.max_in_flight):
            self._slots.release()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.stopped.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.session.close()


def read_by(response, deadline: float) -> bytes:
    """The response's body, read completely by `deadline` (``time.monotonic()``) or `requests`' ReadTimeout.

    ``timeout`` bounds the whole response, not each socket read: before every read the socket's timeout is
    set to the time left, and each read returns what has arrived, so a body that drips in byte by byte cannot
    hold the task past the deadline. A body read in full returns its connection to the pool; any failure
    closes it.
    """
    requests = import_requests()
    urllib3 = import_extra("urllib3", "webhook", "the webhook sink", "requests")
    raw = response.raw
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    read = getattr(raw, "read1", None) or raw.read  # urllib3 < 2.3: read() waits for a full chunk
    chunks = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise requests.exceptions.ReadTimeout("the response did not end in time")
            if sock is not None:
                sock.settimeout(left)
            chunk = read(65536, decode_content=True)
            if not chunk:
                break
            chunks.append(chunk)
    except urllib3.exceptions.ReadTimeoutError as exc:
        response.close()
        raise requests.exceptions.ReadTimeout(str(exc)) from exc
    except requests.exceptions.ReadTimeout:  # the deadline passed between two reads; an OSError too: keep it
        response.close()
        raise
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        response.close()
        raise requests.exceptions.ConnectionError(exc) from exc
    except BaseException:
        response.close()
        raise
    raw.release_conn()
    return b"".join(chunks)


def _reused_key(body: bytes) -> bool:
    """Whether a 422 is the IETF Idempotency-Key draft's answer to a key reused with another body.

    The draft answers with a problem document (RFC 9457) whose ``type`` or ``title`` names the
    idempotency key (its example: ``"title": "Idempotency-Key is already used"``). Any other 422 is a
    receiver refusing the content of the request, as many APIs answer a row they cannot accept.
    """
    try:
        problem = json.loads(body)
    except ValueError:
        return False
    if not isinstance(problem, dict):
        return False
    named = f"{problem.get('type', '')} {problem.get('title', '')}".lower().replace("-", "").replace("_", "")
    return "idempotencykey" in named.replace(" ", "")


def translate(exc: Exception, where: str, timeout_s: float) -> SinkError | None:
    """A requests error as this project's: connection trouble and timeouts are transient, TLS is not."""
    requests = import_requests()
    refused = tls_error(_reason(exc), where) if isinstance(exc, requests.exceptions.RequestException) else None
    if refused is not None:  # not retried: the same handshake fails the same way
        return SinkError(f"webhook-sink: TLS failed for {where}: option '{refused[0]}' must give {refused[1]}")
    if isinstance(exc, requests.exceptions.SSLError):
        return SinkError(f"webhook-sink: TLS failed for {where}: {_reason(exc)}; check the 'verify' option "
                         "(a CA bundle path) and 'clientCert'/'clientKey'")
    if isinstance(exc, requests.exceptions.Timeout):
        return TransientError(f"webhook-sink: {where} timed out after {timeout_s:g}s (option 'timeout')")
    if isinstance(exc, requests.exceptions.ConnectionError):
        return TransientError(f"webhook-sink: cannot connect for {where}: {_reason(exc)}")
    if isinstance(exc, requests.exceptions.RequestException):
        return SinkError(f"webhook-sink: {where} failed: {_reason(exc)}")
    return None


#: OpenSSL's words for a handshake the server refused because of the client's certificate (a TLS alert)
_CLIENT_CERT_REFUSED = ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "UNKNOWN_CA", "CERTIFICATE_EXPIRED",
                        "certificate required", "bad certificate", "unknown ca")


def tls_error(reason: str, where: str) -> tuple[str, str] | None:
    """What a TLS handshake that failed as `reason` says calls for: ``(option, what it must give)``, the option to
    fix; an untrusted server certificate 'verify' (the CA bundle), a refused client certificate 'clientCert'; None
    for any other failure."""
    if "CERTIFICATE_VERIFY_FAILED" in reason or "certificate verify failed" in reason:
        if "mismatch" in reason:
            return "url", f"a URL whose host the receiver's TLS certificate names ({reason})"
        return "verify", (f"the CA bundle (a PEM file or directory on the executors) that signed the TLS certificate "
                          f"of the receiver, {where}: the client does not trust it ({reason})")
    if any(word in reason for word in _CLIENT_CERT_REFUSED):
        return "clientCert", (f"a client certificate the receiver accepts, with its key ('clientKey'): {where} "
                              f"refused the TLS handshake ({reason})")
    return None


def tls_handshake(host: str, port: int, verify: bool | str, client_cert: str | None, client_key: str | None,
                  timeout_s: float) -> None:
    """A TLS handshake with `host`:`port` as the requests will make it (`verify`, the client certificate), nothing
    sent; `OptionError` naming the option (`tls_error`) when the client refuses the server's certificate. A refused
    client certificate shows only once a request is sent (TLS 1.3 tells it after the handshake). Skipped when a file
    the options name is not on this machine (they name files on the executors)."""
    files = [f for f in (verify if isinstance(verify, str) else None, client_cert, client_key) if f]
    if not all(Path(f).exists() for f in files):
        return
    context = ssl.create_default_context()
    if verify is False:
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    elif isinstance(verify, str):
        location = Path(verify)
        context.load_verify_locations(cafile=None if location.is_dir() else verify,
                                      capath=verify if location.is_dir() else None)
    if client_cert:
        context.load_cert_chain(client_cert, client_key)
    where = f"https://{host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock, \
                context.wrap_socket(sock, server_hostname=host):
            pass
    except ssl.SSLError as exc:
        refused = tls_error(str(exc), where)
        if refused is None:
            raise SinkError(f"webhook-sink: TLS handshake with {where} failed: {exc}") from exc
        option, expected = refused
        given = {"verify": verify if isinstance(verify, str) else "true", "url": where, "clientCert": client_cert}
        raise OptionError(option, given[option], expected) from exc


def _reason(exc: BaseException) -> str:
    """The innermost cause of a requests/urllib3 error, without URLs (they may hold secrets)."""
    for _ in range(8):
        reason = getattr(exc, "reason", None)
        inner = reason if isinstance(reason, BaseException) else \
            exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None
        if inner is None:
            break
        exc = inner
    text = re.sub(r"(url|URL): \S+", r"\1: <redacted>", str(exc))
    text = re.sub(r"\w+://\S+", "<url>", text)
    return f"{type(exc).__name__}: {text}"


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
