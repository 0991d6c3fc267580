"""The webhook sink: a streaming query's rows as JSON over HTTP, with stable idempotency keys."""

from __future__ import annotations

import base64
import binascii
import email.utils
import hashlib
import hmac
import http.cookiejar
import json
import re
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.datasource import SinkDataSource
from connectors.env import ENV_REF as _ENV_REF
from connectors.env import resolve_env as _resolve_env
from connectors.errors import (CommitError, DeliveryError, OptionError, PartitioningChangedError, SinkError,
                               TransientError, map_errors)
from connectors.options import OptionReader
from connectors.protocol import CHANGED_INPUT_CAUSE, CHANGED_INPUT_REMEDY, CommitMessage, Sink, WriteIdentity
from connectors.redact import redact_url
from connectors.retry import Backoff, Retry
from connectors.rows import json_objects

__all__ = ["WebhookSinkDataSource", "WebhookSink", "WebhookOptions", "resolve_env", "redact_url"]

METHODS = ("POST", "PUT", "PATCH")
FORMATS = ("json", "ndjson")
CONTENT_TYPES = {"json": "application/json", "ndjson": "application/x-ndjson"}
DEFAULT_RETRY_ON = "408,429,5xx"
_BODY_START = 200  # characters of a refused response's body quoted in the error
_STATUS_MASK = re.compile(r"^[1-5][0-9x][0-9x]$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _import_requests():
    try:
        import requests
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise SinkError("the webhook sink needs requests: pip install 'impulse-connectors[webhook]'") from exc
    return requests


def resolve_env(value: str, *, what: str, where: str = "this executor") -> str:
    """Replace every ``${ENV:NAME}`` in `value` by the environment variable NAME (read now, here)."""
    return _resolve_env(value, sink="webhook-sink", what=what, where=where)


def _canonical_header(name: str) -> str:
    """``x-api-key`` → ``X-Api-Key`` (Spark lowercases option names; HTTP header names are case-insensitive)."""
    return "-".join(word[:1].upper() + word[1:] for word in name.split("-"))


def _parse_retry_on(text: str) -> tuple[str, ...]:
    masks = tuple(token.strip().lower() for token in text.split(",") if token.strip())
    if not masks or not all(_STATUS_MASK.match(m) for m in masks):
        raise OptionError("retryOn", text, "comma-separated status codes or masks, e.g. '5xx,429' or '502,503,504'")
    return masks


_SECRET_PREFIX = "whsec_"
_SECRETS_EXPECTED = "one or more space-separated Standard Webhooks secrets 'whsec_<base64>' (or ${ENV:NAME} holding them)"


def signing_keys(secrets: str) -> tuple[bytes, ...]:
    """The HMAC keys of space-separated ``whsec_<base64>`` secrets; ValueError for anything else."""
    keys = []
    for secret in secrets.split():
        if not secret.startswith(_SECRET_PREFIX):
            raise ValueError(f"a secret does not start with {_SECRET_PREFIX!r}")
        try:
            key = base64.b64decode(secret[len(_SECRET_PREFIX):] + "==", validate=False)
        except binascii.Error as exc:
            raise ValueError("a secret is not base64 after its prefix") from exc
        if not key:
            raise ValueError("a secret is empty")
        keys.append(key)
    if not keys:
        raise ValueError("no secret given")
    return tuple(keys)


def signature_headers(keys: Sequence[bytes], message_id: str, body: bytes, now_s: float) -> dict[str, str]:
    """The Standard Webhooks headers of one request: ``webhook-id``, ``webhook-timestamp`` (whole seconds) and
    ``webhook-signature``, one ``v1,<base64 HMAC-SHA256 of "id.timestamp.body">`` per key, space-separated."""
    timestamp = str(int(now_s))
    signed = f"{message_id}.{timestamp}.".encode() + body
    signatures = " ".join("v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
                          for key in keys)
    return {"webhook-id": message_id, "webhook-timestamp": timestamp, "webhook-signature": signatures}


def _signing_secret(reader: OptionReader) -> str | None:
    """The ``signingSecret`` option, checked now unless it names environment variables (read where requests start)."""
    secret = reader.string("signingSecret")
    if secret is not None and not _ENV_REF.search(secret):
        try:
            signing_keys(secret)
        except ValueError as exc:
            raise OptionError("signingSecret", "<hidden>", f"{_SECRETS_EXPECTED}: {exc}") from None
    return secret


def _verify(text: str) -> bool | str:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    return text  # a CA bundle file or directory, read where the request is made


def _http_url(reader: OptionReader, option: str, *, required: bool = False) -> str | None:
    url = reader.string(option, required=required)
    if url is None:
        return None
    parts = urlsplit(url)
    try:
        parts.port
    except ValueError:
        raise OptionError(option, redact_url(url), "an http:// or https:// URL with a valid port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionError(option, redact_url(url), "an http:// or https:// URL, e.g. https://example.com/events")
    return url


def _one_credential(urls: Mapping[str, str | None], headers: Mapping[str, str]) -> None:
    """Refuse user info in a URL together with ``header.Authorization``: both are credentials for the same
    header, and sending either one silently would authenticate as someone the user may not expect."""
    if "Authorization" not in headers:
        return
    for option, url in urls.items():
        if url is not None and "@" in (urlsplit(url).netloc or ""):
            raise OptionError(option, redact_url(url), "a URL without user info when header.Authorization is set: "
                              "both are credentials for the Authorization header; keep one (user info is sent as "
                              "'Basic', the header as given)")


@dataclass(frozen=True)
class WebhookOptions:
    """The options of the webhook sink (see `WebhookSinkDataSource`). Secrets stay ``${ENV:…}`` references."""

    url: str
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()
    batch_size: int = 100
    format: str = "json"
    max_in_flight: int = 4
    timeout_s: float = 10.0
    max_retries: int = 5
    backoff: Backoff = Backoff(0.2, 10.0)
    retry_on: tuple[str, ...] = ("408", "429", "5xx")
    verify: bool | str = True
    idempotency_header: str = "Idempotency-Key"
    commit_url: str | None = None
    abort_url: str | None = None
    dead_letter_url: str | None = None
    signing_secret: str | None = None  # Standard Webhooks secrets, space-separated; may hold ${ENV:NAME}
    max_requests_per_second: float | None = None  # per task; None: unpaced

    @classmethod
    def read(cls, reader: OptionReader) -> "WebhookOptions":
        headers = []
        for name, value in sorted(reader.prefixed("header.").items()):
            if not _HEADER_NAME.match(name):
                raise OptionError(f"header.{name}", value, "a header name made of letters, digits and -_.!#$%&'*+^`|~")
            if "\r" in value or "\n" in value:
                raise OptionError(f"header.{name}", "<hidden>", "a value without line breaks")
            headers.append((_canonical_header(name), value))
        urls = {option: _http_url(reader, option, required=option == "url")
                for option in ("url", "commitUrl", "abortUrl", "deadLetterUrl")}
        _one_credential(urls, dict(headers))
        idempotency = reader.string("idempotencyHeader", "Idempotency-Key")
        if not _HEADER_NAME.match(idempotency):
            raise OptionError("idempotencyHeader", idempotency, "a header name, e.g. 'Idempotency-Key'")
        base = reader.duration_us("retryBackoff", 200_000)
        cap = reader.duration_us("retryBackoffMax", 10_000_000)
        return cls(
            url=urls["url"],
            method=reader.choice("method", METHODS, "POST"),
            headers=tuple(headers),
            batch_size=reader.integer("batchSize", 100, minimum=1, maximum=1_000_000),
            format=reader.choice("format", FORMATS, "json"),
            max_in_flight=reader.integer("maxInFlight", 4, minimum=1, maximum=256),
            timeout_s=reader.duration_us("timeout", 10_000_000) / 1e6,
            max_retries=reader.integer("maxRetries", 5, minimum=0, maximum=1000),
            backoff=Backoff(base / 1e6, max(base, cap) / 1e6),
            retry_on=_parse_retry_on(reader.string("retryOn", DEFAULT_RETRY_ON)),
            verify=_verify(reader.string("verify", "true")),
            idempotency_header=idempotency,
            commit_url=urls["commitUrl"],
            abort_url=urls["abortUrl"],
            dead_letter_url=urls["deadLetterUrl"],
            signing_secret=_signing_secret(reader),
            max_requests_per_second=reader.number("maxRequestsPerSecond", None, above=0),
        )

    def retryable(self, status: int) -> bool:
        code = str(status)
        return any(all(m in ("x", c) for m, c in zip(mask, code)) for mask in self.retry_on)

    @property
    def retry(self) -> Retry:
        return Retry(self.max_retries + 1, self.backoff, (TransientError,))

    def resolved_headers(self, where: str) -> dict[str, str]:
        """The headers with ``${ENV:NAME}`` references replaced, read from the environment of `where`."""
        out = {"Content-Type": CONTENT_TYPES[self.format]}
        for name, value in self.headers:
            out[name] = resolve_env(value, what=f"header.{name}", where=where)
        return out


class _Cancelled(SinkError):
    """A request given up because another request of the same task failed."""


class _Pacer:
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
class _TaskState:
    """What outlives one write of a partition within a Spark task attempt: the request pace, and how many
    requests each key has been sent (the protocol rewrites a partition after a `TransientError`)."""

    identity: WriteIdentity | None
    pacer: _Pacer | None
    sent: Counter = field(default_factory=Counter)


class _Client:
    """HTTP on one task: a pooled `requests.Session` and up to ``maxInFlight`` concurrent requests.

    `submit` blocks while ``maxInFlight`` requests are in flight; the first failure stops the
    others' retries and is raised by the next `submit` or by `drain`.
    """

    def __init__(self, options: WebhookOptions, where: str, task: _TaskState | None = None) -> None:
        requests = _import_requests()
        self.options = options
        self.task = task or _TaskState(None, None)
        self.headers = options.resolved_headers(where)
        self.signing_keys: tuple[bytes, ...] = ()
        if options.signing_secret is not None:
            try:
                self.signing_keys = signing_keys(resolve_env(options.signing_secret, what="signingSecret", where=where))
            except ValueError as exc:
                raise SinkError(f"webhook-sink: signingSecret, as read on {where}, is not {_SECRETS_EXPECTED}: "
                                f"{exc}") from None
        self.session = requests.Session()
        self.session.trust_env = False  # no proxies or .netrc credentials picked up behind the user's back
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
        except _Cancelled:
            raise
        except TransientError as exc:
            sent = self.task.sent[key]
            raise TransientError(f"{exc} (gave up: {sent} request{'s' * (sent > 1)} with this key from this task "
                                 f"attempt, {attempts} per write of the partition (maxRetries + 1); the protocol "
                                 "rewrites the partition up to writeRetries times)") from exc

    def _once(self, method: str, url: str, key: str, body: bytes, headers: Mapping[str, str]) -> None:
        if self.stopped.is_set():
            raise _Cancelled(f"webhook-sink: request {key} cancelled: another request of this task failed")
        where = f"{method} {redact_url(url)} ({self.options.idempotency_header}: {key})"
        if self.task.pacer is not None and not self.task.pacer.wait(self.stopped):
            raise _Cancelled(f"webhook-sink: request {key} cancelled: another request of this task failed")
        if self.signing_keys:  # signed again on every attempt: the timestamp is the attempt's
            headers = {**headers, **signature_headers(self.signing_keys, key, body, time.time())}
        self.task.sent[key] += 1
        timeout_s = self.options.timeout_s
        deadline = time.monotonic() + timeout_s
        with map_errors(lambda exc: _translate(exc, where, timeout_s)):
            response = self.session.request(method, url, data=body, headers=headers, timeout=timeout_s,
                                            verify=self.options.verify, allow_redirects=False, stream=True)
            content = _read_by(response, deadline)
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
            error.retry_after_s = _retry_after(response.headers.get("Retry-After"))
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
            if self.error is None or isinstance(self.error, _Cancelled):
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


def _read_by(response, deadline: float) -> bytes:
    """The response's body, read completely by `deadline` (``time.monotonic()``) or `requests`' ReadTimeout.

    ``timeout`` bounds the whole response, not each socket read: before every read the socket's timeout is
    set to the time left, and each read returns what has arrived, so a body that drips in byte by byte cannot
    hold the task past the deadline. A body read in full returns its connection to the pool; any failure
    closes it.
    """
    requests = _import_requests()
    import urllib3

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


def _translate(exc: Exception, where: str, timeout_s: float) -> SinkError | None:
    """A requests error as this project's: connection trouble and timeouts are transient, TLS is not."""
    requests = _import_requests()
    if isinstance(exc, requests.exceptions.SSLError):
        return SinkError(f"webhook-sink: TLS failed for {where}: {_reason(exc)}; check the 'verify' option "
                         "(true, false, or a CA bundle path)")
    if isinstance(exc, requests.exceptions.Timeout):
        return TransientError(f"webhook-sink: {where} timed out after {timeout_s:g}s (option 'timeout')")
    if isinstance(exc, requests.exceptions.ConnectionError):
        return TransientError(f"webhook-sink: cannot connect for {where}: {_reason(exc)}")
    if isinstance(exc, requests.exceptions.RequestException):
        return SinkError(f"webhook-sink: {where} failed: {_reason(exc)}")
    return None


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


def _retry_after(value: str | None) -> float | None:
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


@dataclass(frozen=True)
class _Rows:
    """Consecutive rows of a partition as one request sends them: each row's JSON followed by a one-byte separator."""

    first: int                  # the index of the first row in the partition
    text: memoryview            # the rows' rendered bytes
    ends: np.ndarray            # where each row (with its separator) ends in `text`
    shape: str                  # "array" (a JSON array), "object" (one row, batchSize 1) or "ndjson"

    @property
    def count(self) -> int:
        return len(self.ends)

    def body(self) -> bytes:
        if self.shape == "ndjson":
            return bytes(self.text)
        if self.shape == "object":
            return bytes(self.text[:-1])
        return b"".join((b"[", self.text[:-1], b"]"))

    def halves(self) -> tuple["_Rows", "_Rows"]:
        """The first and the second half of the rows (a request of one row cannot be split)."""
        middle = self.count // 2
        cut = int(self.ends[middle - 1])
        return (_Rows(self.first, self.text[:cut], self.ends[:middle], self.shape),
                _Rows(self.first + middle, self.text[cut:], self.ends[middle:] - cut, self.shape))


class _Bodies:
    """Cuts a partition's rows into requests of exactly ``batchSize`` rows, whatever Spark's record batches.

    Rows are rendered per record batch with `json_objects`, each followed by its separator, so the
    rows of a request are one contiguous slice of an Arrow buffer: no Python work per row. Rows that
    do not fill a request are carried over to the next record batch.
    """

    def __init__(self, options: WebhookOptions) -> None:
        self.size = options.batch_size
        ndjson = options.format == "ndjson"
        self.shape = "ndjson" if ndjson else "object" if options.batch_size == 1 else "array"
        self._separator = "\n" if ndjson else ","
        self._left: pa.Array | None = None
        self._row = 0  # index in the partition of the next row to cut

    def add(self, batch: pa.RecordBatch) -> Iterator[_Rows]:
        """Every full request the rows so far make; keeps the rest."""
        rendered = pc.binary_join_element_wise(json_objects(batch), self._separator, "")
        if self._left is not None:
            rendered = pa.concat_arrays([self._left, rendered])
        full = len(rendered) - len(rendered) % self.size
        self._left = rendered.slice(full) if full < len(rendered) else None
        if full:
            yield from self._requests(rendered, full)

    def rest(self) -> Iterator[_Rows]:
        """The last, shorter request of the partition (if any)."""
        left, self._left = self._left, None
        if left is not None and len(left):
            yield from self._requests(left, len(left))

    def _requests(self, rendered: pa.Array, rows: int) -> Iterator[_Rows]:
        offsets = np.frombuffer(rendered.buffers()[1], dtype=np.int32, count=len(rendered) + 1, offset=rendered.offset * 4)
        data = memoryview(rendered.buffers()[2])
        for start in range(0, rows, self.size):
            stop = min(start + self.size, rows)
            yield _Rows(self._row, data[offsets[start]:offsets[stop]], offsets[start + 1:stop + 1] - offsets[start],
                        self.shape)
            self._row += stop - start


class WebhookSink(Sink):
    """Sends each partition as requests of ``batchSize`` rows keyed ``<commit id>:<batch>:<partition>:<seq>``."""

    name = "webhook-sink"

    def __init__(self, options: WebhookOptions) -> None:
        self.options = options
        self._task = _TaskState(None, None)  # executor: this task attempt's (see `open`)

    def __getstate__(self) -> dict:
        return {"options": self.options}  # the driver's sink, as the executors get it: no task state

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["options"])

    # -- driver ---------------------------------------------------------------------------------
    def check(self) -> None:
        """Driver, every micro-batch: a TCP connect to the host:port of every configured URL (no request is sent)."""
        seen = set()
        for option, url in (("url", self.options.url), ("commitUrl", self.options.commit_url),
                            ("abortUrl", self.options.abort_url), ("deadLetterUrl", self.options.dead_letter_url)):
            if url is None:
                continue
            parts = urlsplit(url)
            address = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
            if address in seen:
                continue
            seen.add(address)
            try:
                socket.create_connection(address, timeout=min(self.options.timeout_s, 5.0)).close()
            except OSError as exc:
                # an unknown host fails at once; a refused or timed-out connect is retried by the protocol
                kind = SinkError if isinstance(exc, socket.gaierror) else TransientError
                raise kind(f"webhook-sink: cannot reach {redact_url(url)} (option '{option}'): TCP connect to "
                           f"{address[0]}:{address[1]} failed: {exc}; is the receiver running and the URL "
                           "right?") from exc

    def commit_batch(self, commit_id: str, batch_id: int, messages: Sequence[CommitMessage]) -> None:
        """Driver: tell ``commitUrl`` the batch is committed; the key makes a repeated commit harmless."""
        if self.options.commit_url is None:
            return
        body = {"commitId": commit_id, "batchId": batch_id, "rows": sum(m.rows for m in messages),
                "partitions": len(messages)}
        try:
            self._notify(self.options.commit_url, f"{commit_id}:{batch_id}:commit", body)
        except (DeliveryError, PartitioningChangedError, _Cancelled) as exc:
            raise CommitError(f"webhook-sink: commitUrl refused batch {batch_id}: {exc}") from exc

    def abort_batch(self, commit_id: str | None, batch_id: int, messages: Sequence[CommitMessage | None]) -> None:
        """Driver: tell ``abortUrl`` the batch failed (its partitions' requests may have been received)."""
        if self.options.abort_url is None:
            return
        body = {"commitId": commit_id, "batchId": batch_id,
                "rows": sum(m.rows for m in messages if m is not None), "partitions": len(messages),
                "failedPartitions": [i for i, m in enumerate(messages) if m is None]}
        key = f"{commit_id}:{batch_id}:abort" if commit_id else f"{uuid.uuid4()}:{batch_id}:abort"
        self._notify(self.options.abort_url, key, body)

    def _notify(self, url: str, key: str, body: dict) -> None:
        client = _Client(_notification_options(self.options), where="the driver")
        try:
            client.send(url, key, json.dumps(body).encode(), method="POST")
        finally:
            client.close()

    # -- executor -------------------------------------------------------------------------------
    def open(self, identity: WriteIdentity) -> _Client:
        """A client for one write of the partition; its pace and request counts carry over to the protocol's
        rewrites of the partition within the same task attempt (a rewrite does not restart the pace)."""
        if self._task.identity != identity:
            rate = self.options.max_requests_per_second
            self._task = _TaskState(identity, _Pacer(rate) if rate is not None else None)
        return _Client(self.options, where="this executor", task=self._task)

    def close(self, conn: _Client) -> None:
        conn.close()

    def is_committed(self, conn: Any, identity: WriteIdentity) -> bool:
        # A generic receiver cannot be asked; a replay resends with the same keys, which it dedupes.
        return False

    def key_prefix(self, identity: WriteIdentity) -> str:
        """The idempotency keys of a partition start with this; the same on every attempt and replay of it."""
        return f"{identity.commit_id}:{identity.batch_id}:{identity.partition_id}:"

    def write(self, conn: _Client, identity: WriteIdentity, batches: Iterator[pa.RecordBatch]) -> int:
        """Send the partition; returns how many of its rows were dead-lettered."""
        prefix = self.key_prefix(identity)
        bodies = _Bodies(self.options)
        dead: list[int] = []  # one entry per dead-lettered row (appended from sender threads)
        sequence = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            # every full request of this record batch is handed to a sender before the next one is pulled
            for rows in bodies.add(batch):
                conn.submit(partial(self._deliver, conn, identity, f"{prefix}{sequence}", rows, dead))
                sequence += 1
        for rows in bodies.rest():
            conn.submit(partial(self._deliver, conn, identity, f"{prefix}{sequence}", rows, dead))
            sequence += 1
        conn.drain()
        return len(dead)

    def _deliver(self, conn: _Client, identity: WriteIdentity, key: str, rows: _Rows, dead: list[int]) -> None:
        """Send `rows` under `key`. A request the receiver refuses for its rows fails the task naming them or,
        with ``deadLetterUrl``, is split in halves (keys ``<key>/0``, ``<key>/1``) until the refused rows are
        alone; those are dead-lettered, the others delivered."""
        try:
            conn.send(self.options.url, key, rows.body())
        except DeliveryError as exc:
            status = getattr(exc, "status", 0)
            if not _refuses_rows(status):
                raise
            where = (f"row {rows.first}" if rows.count == 1 else f"rows {rows.first}-{rows.first + rows.count - 1}") \
                + f" of {identity}"
            if self.options.dead_letter_url is None:
                raise DeliveryError(f"{exc}; the request held {where}. A replay sends it again and meets the same "
                                    "refusal: fix the rows or the receiver, or set 'deadLetterUrl' to send the "
                                    "refused rows there and deliver the others") from exc
            if rows.count > 1:
                for half, part in enumerate(rows.halves()):
                    self._deliver(conn, identity, f"{key}/{half}", part, dead)
                return
            self._dead_letter(conn, identity, key, rows, status, getattr(exc, "body_start", ""))
            dead.append(rows.first)

    def _dead_letter(self, conn: _Client, identity: WriteIdentity, key: str, row: _Rows, status: int,
                     answer: str) -> None:
        """POST one refused row to ``deadLetterUrl``, with why and where, keyed ``<partition's prefix>dead:<row>``."""
        about = json.dumps({"status": status, "response": answer, "url": redact_url(self.options.url),
                            "idempotencyKey": key, "commitId": identity.commit_id, "batchId": identity.batch_id,
                            "partition": identity.partition_id, "rowIndex": row.first})
        body = b"".join((b'{"row": ', row.text[:-1], b", ", about[1:].encode()))
        conn.send(self.options.dead_letter_url, f"{self.key_prefix(identity)}dead:{row.first}", body,
                  headers={"Content-Type": CONTENT_TYPES["json"]}, method="POST")


#: Statuses about the endpoint or the credentials, never about a request's rows: not dead-lettered.
_NOT_THE_ROWS = frozenset({401, 403, 404, 405, 407})


def _refuses_rows(status: int) -> bool:
    """Whether a status (outside ``retryOn``) refuses the request's rows: a 4xx other than `_NOT_THE_ROWS`."""
    return 400 <= status < 500 and status not in _NOT_THE_ROWS


def _notification_options(options: WebhookOptions) -> WebhookOptions:
    """Notifications are single JSON objects sent one at a time with the data requests' headers and retries."""
    return replace(options, batch_size=1, format="json", max_in_flight=1)


class WebhookSinkDataSource(SinkDataSource):
    """Streaming and batch writes to an HTTP endpoint, as JSON batches with stable idempotency keys.

    Name: ``webhook-sink``

    Parameters (option names are case-insensitive)
    ----------
    url : str, required
        ``http://`` or ``https://`` endpoint. User info in the URL becomes basic auth; user info and
        query are never shown in messages. User info in any URL option together with
        ``header.Authorization`` fails at start: two credentials for one header (keep one).
    method : ``POST`` (default) | ``PUT`` | ``PATCH``
    header.<Name> : str, optional, repeatable
        A request header, e.g. ``.option("header.Authorization", "Bearer ${ENV:HOOK_TOKEN}")``. Every
        ``${ENV:NAME}`` is replaced by the environment variable NAME where the request is made (the
        executor; the driver for commitUrl/abortUrl), so the secret is never in the query plan; a
        missing variable fails the task naming it (set it with ``spark.executorEnv.NAME``). Spark
        lowercases option names: header names are sent capitalised per word (``X-Api-Key``).
    batchSize : int ≥ 1, rows per request, default 100
        Request k of a partition holds its rows [k × batchSize, (k+1) × batchSize) in input order.
        With ``format=json`` the body is a JSON array of row objects; ``batchSize=1`` sends the
        object itself.
    format : ``json`` (default) | ``ndjson``
        ``ndjson``: one row object per line, each line ending in ``\\n``
        (``Content-Type: application/x-ndjson``; ``application/json`` otherwise).
    maxInFlight : int ≥ 1, default 4
        Concurrent requests per task (Spark partition), over one connection pool.
    timeout : duration, default ``10s``
        Bound on each request's connect and on its whole response (headers and body, from when it is
        sent): a body that drips in slowly times out too. A timeout is retried.
    maxRequestsPerSecond : number > 0, optional
        Request starts per task (retries included) at least 1/rate seconds apart, so no one-second
        window holds more than the rate and a backlog goes out evenly; a rate above 1 that is not
        whole is rounded down. Derive it from an API's global limit: limit / concurrent tasks.
        Driver notifications (commitUrl, abortUrl) are not paced.
    maxRetries : int ≥ 0, default 5
        Retries of each request after connection errors, timeouts and ``retryOn`` statuses. Once
        they are used up the partition fails with `TransientError`, which the protocol retries as a
        whole (``writeRetries``, default 5), resending every request of the partition with the same
        keys. **Bound:** a failing request is sent at most ``(maxRetries + 1) × (writeRetries + 1)``
        times per Spark task attempt: 36 with the defaults (Spark's task retries,
        ``spark.task.maxFailures``, multiply it again). Lower either option to lower it; the
        defaults ride out a receiver that is down for 20–40 s (backoff with jitter).
    retryBackoff : duration, default ``200ms``; retryBackoffMax : duration, default ``10s``
        Delay before retry n: retryBackoff × 2ⁿ⁻¹ capped at retryBackoffMax, with ±50 % jitter; a
        ``Retry-After`` header (seconds or HTTP date) replaces it, capped at 4 × retryBackoffMax.
        The same options pace the protocol's partition retries (``writeRetries``).
    retryOn : str, default ``408,429,5xx``
        Comma-separated status codes and masks (``5xx``, ``50x``) that are retried. Any other
        non-2xx status (redirects included: they are not followed) fails the task at once.
    verify : ``true`` (default) | ``false`` | path
        TLS certificate verification; a path names a CA bundle file or directory on the executors.
    idempotencyHeader : str, default ``Idempotency-Key``
        Name of the header holding each request's key. A ``422`` answer whose problem document
        (RFC 9457) names the idempotency key in its ``type`` or ``title`` (the IETF Idempotency-Key
        draft's answer to a key reused with another body) fails the task, not retried, with a
        `PartitioningChangedError`: on a replayed batch it means the partition's rows changed (the
        partitioning before the sink changed, or the input is not deterministic). Any other ``422``
        is the receiver refusing the request's rows: a `DeliveryError` with the status and the start
        of the body, like every status outside ``retryOn``.
    commitUrl : str, optional
        The driver POSTs ``{"commitId", "batchId", "rows", "partitions"}`` here when Spark commits
        a batch, keyed ``<commit id>:<batch>:commit``.
    abortUrl : str, optional
        The driver POSTs ``{"commitId", "batchId", "rows", "partitions", "failedPartitions"}`` here
        when a batch is aborted, keyed ``<commit id>:<batch>:abort``.
    signingSecret : str, optional
        Sign every request (data, dead letters, notifications) as the Standard Webhooks
        specification says: ``webhook-id`` (the request's idempotency key), ``webhook-timestamp``
        (seconds) and ``webhook-signature`` (``v1,<base64 HMAC-SHA256 of id.timestamp.body>``).
        Secrets are ``whsec_<base64>``; several, space-separated, give one signature each (key
        rotation). ``${ENV:NAME}`` is read where the request is made, like headers. A retried
        request keeps its id and is signed again with a new timestamp.
    deadLetterUrl : str, optional
        Where rows the receiver refuses for good go. A request answered with a 4xx outside
        ``retryOn`` (other than 401, 403, 404, 405, 407, which are about the endpoint or the
        credentials, and the reused-key 422) is split in halves, keyed ``<key>/0`` and ``<key>/1``,
        until the refused rows are alone; the accepted rows are delivered, and each refused row is
        POSTed here as ``{"row": …, "status", "response" (the start of the answer), "url",
        "idempotencyKey", "commitId", "batchId", "partition", "rowIndex"}`` keyed
        ``<commit id>:<batch>:<partition>:dead:<row>``: a replay sends the same keys again, so a
        deduping receiver keeps each row and each dead letter once. Without it such a request fails
        the task naming its rows, and every replay fails the same way.
    commitId, writeRetries (see maxRetries for the bound on sends), metricsPath, faultInjection
        The options of the commit protocol (`connectors.protocol.ProtocolOptions`).

    Guarantee
    ---------
    **At-least-once delivery with stable idempotency keys; effectively-once only with a receiver
    that dedupes by the key.** Request k of Spark partition P of batch B carries the key
    ``<commit id>:<B>:<P>:<k>`` (commit id: the query id, stable across restarts from one
    checkpoint, or the ``commitId`` option) and always the same rows, because a replayed batch has
    the same input and requests are cut at fixed row positions, independent of Spark's record
    batches. A retried request, a retried task and a batch replayed after a crash resend the same
    keys and bodies; a receiver that keeps the first request per key sees each row once. One that
    ignores the key may see duplicates, never a gap: a task returns only after every request got a
    2xx, and anything else fails the task (``DeliveryError`` for a refused request with its status,
    URL and the start of the response body; ``TransientError`` once retries are used up), so Spark
    retries or stops the query, and the batch is not committed. The commit notification's key makes
    Spark's repeated commit calls harmless: a deduping ``commitUrl`` sees each batch id once, in
    order. Requests of one partition may arrive out of order (``maxInFlight`` > 1); partitions
    arrive independently.

    Examples
    --------
    >>> (spark.readStream.format("impulse").option("eventsPerSecond", 1000).load()
    ...     .writeStream.format("webhook-sink").option("url", "https://hooks.example.com/events")
    ...     .option("header.Authorization", "Bearer ${ENV:HOOK_TOKEN}").option("batchSize", 500)
    ...     .option("commitUrl", "https://hooks.example.com/commits")
    ...     .option("checkpointLocation", "/tmp/ck").start())                 # doctest: +SKIP
    >>> (df.write.format("webhook-sink").mode("append").option("url", "https://hooks.example.com/events")
    ...     .option("commitId", "backfill-1").save())   # batch: connectors.batch   # doctest: +SKIP
    """

    label = "webhook sink"

    @classmethod
    def name(cls) -> str:
        return WebhookSink.name

    def build(self, reader: OptionReader, schema) -> WebhookSink:
        """The sink of the options in `reader` (any columns: rows are sent as JSON)."""
        return WebhookSink(WebhookOptions.read(reader))
