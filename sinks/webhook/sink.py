"""The webhook sink: a streaming query's rows as JSON over HTTP, with stable idempotency keys."""

from __future__ import annotations

import json
import socket
import uuid
from dataclasses import replace
from functools import partial
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit

import pyarrow as pa

from connectors.datasource import SinkDataSource
from connectors.errors import (
    CommitError,
    ConnectorError,
    DeliveryError,
    PartitioningChangedError,
    SinkError,
    TransientError,
)
from connectors.options import OptionReader
from connectors.protocol import CommitMessage, Sink, WriteIdentity
from connectors.redact import redact_url
from sinks.webhook.bodies import Bodies, Rows
from sinks.webhook.client import Cancelled, Client, Pacer, TaskState, tls_handshake
from sinks.webhook.options import CONTENT_TYPES, WebhookOptions, resolve_env

__all__ = ["WebhookSinkDataSource", "WebhookSink", "WebhookOptions", "resolve_env", "redact_url"]


class WebhookSink(Sink):
    """Sends each partition as requests of ``batchSize`` rows keyed ``<commit id>:<batch>:<partition>:<seq>``."""

    name = "webhook-sink"

    def __init__(self, options: WebhookOptions) -> None:
        self.options = options
        self._task = TaskState(None, None)  # executor: this task attempt's (see `open`)

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
                if parts.scheme == "https":  # an untrusted certificate fails here, not in every task
                    tls_handshake(address[0], address[1], self.options.verify, self.options.client_cert,
                                  self.options.client_key, min(self.options.timeout_s, 5.0))
            except ConnectorError:
                raise
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
        except (DeliveryError, PartitioningChangedError, Cancelled) as exc:
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
        client = Client(_notification_options(self.options), where="the driver")
        try:
            client.send(url, key, json.dumps(body).encode(), method="POST")
        finally:
            client.close()

    # -- executor -------------------------------------------------------------------------------
    def open(self, identity: WriteIdentity) -> Client:
        """A client for one write of the partition; its pace and request counts carry over to the protocol's
        rewrites of the partition within the same task attempt (a rewrite does not restart the pace)."""
        if self._task.identity != identity:
            rate = self.options.max_requests_per_second
            self._task = TaskState(identity, Pacer(rate) if rate is not None else None)
        return Client(self.options, where="this executor", task=self._task)

    def close(self, conn: Client) -> None:
        conn.close()

    def is_committed(self, conn: Any, identity: WriteIdentity) -> bool:
        # A generic receiver cannot be asked; a replay resends with the same keys, which it dedupes.
        return False

    def key_prefix(self, identity: WriteIdentity) -> str:
        """The idempotency keys of a partition start with this; the same on every attempt and replay of it."""
        return f"{identity.commit_id}:{identity.batch_id}:{identity.partition_id}:"

    def write(self, conn: Client, identity: WriteIdentity, batches: Iterator[pa.RecordBatch]) -> int:
        """Send the partition; returns how many of its rows were dead-lettered."""
        prefix = self.key_prefix(identity)
        bodies = Bodies(self.options)
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

    def _deliver(self, conn: Client, identity: WriteIdentity, key: str, rows: Rows, dead: list[int]) -> None:
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

    def _dead_letter(self, conn: Client, identity: WriteIdentity, key: str, row: Rows, status: int,
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
        TLS certificate verification; a path names a CA bundle file or directory on the executors (the
        CA that signed the receiver's certificate). The driver's check makes a TLS handshake with each
        ``https://`` URL at start: a certificate it does not trust fails there, naming this option.
    clientCert : path, optional; clientKey : path, optional
        Mutual TLS: the client certificate (PEM, on the executors) presented to the receiver, and its
        key (a file of its own, or in ``clientCert``'s). A receiver refusing it fails the first request,
        naming ``clientCert``.
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
    sink_class = WebhookSink

    def build(self, reader: OptionReader, schema) -> WebhookSink:
        """The sink of the options in `reader` (any columns: rows are sent as JSON)."""
        return WebhookSink(WebhookOptions.read(reader))
