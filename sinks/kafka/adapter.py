"""Conformance adapters for this project's sinks (see `connectors.conformance.adapter.SinkAdapter`)."""

from __future__ import annotations

import argparse
import functools
import io
import socket
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Mapping
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.json as pajson

from connectors.conformance.adapter import SinkAdapter

if TYPE_CHECKING:
    from connectors.conformance.poison import Poison

__all__ = ["RedisAdapter", "KafkaAdapter", "WebhookAdapter", "events_from_json", "unused_port"]


def unused_port() -> int:
    """A loopback port where nothing listens (bound and released at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def events_from_json(values: list[bytes]) -> list[tuple[int, int]]:
    """``(subtask_index, counter)`` of rows written as JSON objects, parsed in one vectorised pass."""
    if not values:
        return []
    table = pajson.read_json(io.BytesIO(b"\n".join(values)),
                             parse_options=pajson.ParseOptions(explicit_schema=pa.schema(
                                 [("subtask_index", pa.int64()), ("counter", pa.int64())]),
                                 unexpected_field_behavior="ignore"))
    return list(zip(table.column("subtask_index").to_pylist(), table.column("counter").to_pylist()))


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


def _with_address(url: str, address: str) -> str:
    """`url` with its host and port replaced by `address` (``host:port``), credentials kept."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    return parts._replace(netloc=f"{credentials}@{address}" if credentials else address).geturl()


class RedisAdapter(SinkAdapter):
    """The Redis sink writing to `target` (default ``list``: appends, where a duplicate would show).

    `server`, optional, is the redis-server behind `url` when the caller runs it (anything with a
    ``restart()`` that keeps the data, as `connectors.servers.RedisServer`): it makes `restart_target` work.
    """

    format = "redis-sink"

    def __init__(self, url: str, target: str = "list", server=None) -> None:
        import redis

        self.url, self.target, self.target_server = url, target, server
        self.client = redis.Redis.from_url(url)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--url", required=True, help="redis:// URL of the target")
        parser.add_argument("--target", default="list", choices=("list", "string", "hash", "stream"),
                            help="the Redis data type to write (default: list)")

    @classmethod
    @contextmanager
    def from_arguments(cls, args: argparse.Namespace) -> Iterator["RedisAdapter"]:
        yield cls(args.url, target=args.target)

    def options(self, namespace: str) -> Mapping[str, str]:
        return {"url": self.url, "target": self.target, "keyPrefix": f"{namespace}:",
                "commitKeyPrefix": f"commit:{namespace}:"}

    def network_route(self) -> tuple[str, str | None]:
        return _host_port(self.url), None

    def options_via(self, namespace: str, address: str) -> Mapping[str, str]:
        return {**self.options(namespace), "url": _with_address(self.url, address)}

    @functools.cached_property
    def network_handshake(self) -> int:
        """redis-py's round trips when it connects, before the sink's first command (``HELLO``, ``CLIENT …``, as
        this redis-py and server have it): counted once, on a connection of its own through a tap, around a PING."""
        import redis

        from connectors.servers.tap import UP, Tap

        with Tap(_host_port(self.url)) as tap:
            client = redis.Redis.from_url(_with_address(self.url, tap.address))
            try:
                client.ping()
            finally:
                client.close()
            [conversation] = tap.snapshot()
        return sum(direction == UP for direction, _ in conversation.turns) - 1

    def read_back(self, namespace: str) -> list[tuple[int, int]]:
        key = f"{namespace}:"
        if self.target == "list":
            values = self.client.lrange(key, 0, -1)
        elif self.target == "hash":
            values = list(self.client.hgetall(key).values())
        elif self.target == "stream":
            values = [fields[b"value"] for _, fields in self.client.xrange(key)]
        else:
            keys = list(self.client.scan_iter(match=f"{key}*", count=10_000))
            values = [v for i in range(0, len(keys), 10_000) for v in self.client.mget(keys[i:i + 10_000])]
        return events_from_json(values)

    def poison(self, namespace: str) -> "Poison":
        """Lists per lane (``counter % 10``) whose lane 3 key holds a string: Redis refuses those rows (WRONGTYPE);
        ``deadLetterKey`` is the namespace's stream ``<namespace>:dead``."""
        from connectors.conformance.poison import Poison  # needs pytest: not imported by the CLI's --help

        lanes, refused_lane = f"{namespace}:lane:", 3
        self.client.set(f"{lanes}{refused_lane}", "a plain string")
        dead = f"{namespace}:dead"

        def landed() -> list[tuple[int, int]]:
            keys = [k for k in self.client.scan_iter(match=f"{lanes}*", count=10_000) if self.client.type(k) == b"list"]
            return events_from_json([v for key in keys for v in self.client.lrange(key, 0, -1)])

        return Poison(columns=["counter", "subtask_index", "timestamp", "CAST(counter % 10 AS STRING) AS lane"],
                      options={"url": self.url, "target": "list", "keyPrefix": lanes, "keyColumn": "lane",
                               "commitKeyPrefix": f"commit:{namespace}:"},
                      dead_letter={"deadLetterKey": dead}, refused=lambda event: event[1] % 10 == refused_lane,
                      read_back=landed,
                      read_dead_letters=lambda: events_from_json([f[b"value"] for _, f in self.client.xrange(dead)]),
                      words=("Redis refuses row", f"'{lanes}{refused_lane}' holds a string"))

    def cleanup(self, namespace: str) -> None:
        for pattern in (f"{namespace}:*", f"commit:{namespace}:*"):
            keys = list(self.client.scan_iter(match=pattern, count=10_000))
            for i in range(0, len(keys), 10_000):
                self.client.delete(*keys[i:i + 10_000])

    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        return {**self.options(namespace), "url": f"redis://127.0.0.1:{unused_port()}/0"}

    def bad_options(self) -> list[tuple[Mapping[str, str], str]]:
        return [({"target": "bitmap"}, "target"), ({"url": "http://127.0.0.1:1"}, "url"), ({"ttl": "0"}, "ttl"),
                ({"valueColumn": "no_such_column"}, "valueColumn"), ({"listOperation": "insert"}, "listOperation")]


class WebhookAdapter(SinkAdapter):
    """The webhook sink posting to an HTTP receiver that dedupes by ``Idempotency-Key``.

    `receiver` is the project's reference receiver, `connectors.servers.receiver.Receiver` started with
    ``record=True`` (or anything with its ``url``, ``accepted_requests`` — the first 2xx request per
    key, each with ``path``, ``headers`` and ``body`` — and ``reset()``). Each namespace is a URL path
    (``/<namespace>``; commit notices go to ``/<namespace>/commit``). What "landed" is what such a
    receiver keeps: the sink is at-least-once with stable keys, effectively-once only with a deduping
    receiver. The adapter owns the receiver: `cleanup` forgets everything it recorded.
    """

    format = "webhook-sink"
    unreachable_message = "cannot reach"
    skips_replays = False
    #: four requests per partition of the network cases, one at a time on one connection
    network_options = {"batchSize": "25", "maxInFlight": "1"}

    def __init__(self, receiver, **options: str) -> None:
        self.receiver = self.target_server = receiver  # restarts on the same port, keeping every key it accepted
        self.extra = {k: str(v) for k, v in options.items()}

    @classmethod
    @contextmanager
    def from_arguments(cls, args: argparse.Namespace) -> Iterator["WebhookAdapter"]:
        """The command line's webhook target: the reference receiver, started on a free loopback port."""
        from connectors.servers.receiver import Receiver

        with Receiver(record=True) as receiver:
            yield cls(receiver)

    def options(self, namespace: str) -> Mapping[str, str]:
        parts = urlsplit(self.receiver.url)
        base = f"{parts.scheme}://{parts.netloc}"
        return {"url": f"{base}/{namespace}", "commitUrl": f"{base}/{namespace}/commit", "batchSize": "100",
                "maxInFlight": "4", "retryBackoff": "50ms", **self.extra}

    def network_route(self) -> tuple[str, str | None]:
        return _host_port(self.receiver.url), None

    def options_via(self, namespace: str, address: str) -> Mapping[str, str]:
        return {key: _with_address(value, address) if key in ("url", "commitUrl") else value
                for key, value in self.options(namespace).items()}

    def read_back(self, namespace: str) -> list[tuple[int, int]]:
        import json

        events = []
        for request in self.receiver.accepted_requests:
            if request.path.split("?")[0] != f"/{namespace}":
                continue
            text = request.body.decode()
            if request.headers.get("Content-Type", "").startswith("application/x-ndjson"):
                rows = [json.loads(line) for line in text.splitlines() if line]
            else:
                rows = json.loads(text)
                rows = rows if isinstance(rows, list) else [rows]
            events += [(row["subtask_index"], row["counter"]) for row in rows]
        return events

    def poison(self, namespace: str) -> "Poison":
        """The receiver answers 422 to a request under ``/<namespace>`` holding a row with ``counter % 10 == 3``
        (as an API refuses a row it cannot accept); ``deadLetterUrl`` is ``/<namespace>-dead``. A webhook has no
        transaction: the requests delivered before the refused one stay delivered (`Poison.partial`)."""
        import json

        from connectors.conformance.poison import Poison  # needs pytest: not imported by the CLI's --help

        refused_lane = 3
        self.receiver.refuse_rows(lambda row: isinstance(row, dict) and row.get("counter", -1) % 10 == refused_lane,
                                  f"/{namespace}")
        parts = urlsplit(self.receiver.url)
        dead = f"/{namespace}-dead"

        def dead_letters() -> list[tuple[int, int]]:
            rows = [json.loads(r.body)["row"] for r in self.receiver.accepted_requests if r.path.split("?")[0] == dead]
            return [(row["subtask_index"], row["counter"]) for row in rows]

        return Poison(columns=["counter", "subtask_index", "timestamp"], options=self.options(namespace),
                      dead_letter={"deadLetterUrl": f"{parts.scheme}://{parts.netloc}{dead}"},
                      refused=lambda event: event[1] % 10 == refused_lane, read_back=lambda: self.read_back(namespace),
                      read_dead_letters=dead_letters, words=("the request held row", "deadLetterUrl"), partial=True)

    def cleanup(self, namespace: str) -> None:
        self.receiver.reset()

    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        return {**self.options(namespace), "url": f"http://127.0.0.1:{unused_port()}/{namespace}",
                "writeRetries": "1", "retryBackoff": "10ms"}

    def bad_options(self) -> list[tuple[Mapping[str, str], str]]:
        return [({"url": "ftp://127.0.0.1/x"}, "url"), ({"method": "GET"}, "method"), ({"retryOn": "5xx,oops"}, "retryOn"),
                ({"batchSize": "0"}, "batchSize"), ({"format": "xml"}, "format"), ({"timeout": "5"}, "timeout"),
                ({"commitUrl": "not a url"}, "commitUrl")]


class KafkaAdapter(SinkAdapter):
    """The Kafka sink (exactly_once unless told otherwise), one topic of 2 partitions per namespace, read back
    with a ``read_committed`` consumer (what an aborted transaction left in the log is not visible)."""

    format = "kafka-sink"
    #: below the 1 MB record limit of librdkafka (``message.max.bytes``) and the broker, JSON overhead included
    large_value_bytes = 900_000
    #: the cut sweep: librdkafka resends a request on a new connection after a close, so what the sweep must
    #: reach after a reply is a connection that stalls until the sink gives up (its 3 s `timeout`, librdkafka's
    #: 3 s request and socket timeouts), not one that closes
    cut_kinds = ("inside_request", "after_request", "stall_after_reply")
    network_options = {"timeout": "3s", "kafka.request.timeout.ms": "3000", "kafka.socket.timeout.ms": "3000"}
    network_stall_s = 6.0

    def __init__(self, bootstrap: str, guarantee: str = "exactly_once", partitions: int = 2,
                 timeout_s: float = 60.0, broker=None, proxy_route: tuple[str, str] | None = None) -> None:
        self.bootstrap, self.guarantee, self.partitions, self.timeout_s = bootstrap, guarantee, partitions, timeout_s
        self.skips_replays = guarantee == "exactly_once"  # at_least_once keeps no progress record: it rewrites
        self.target_server = broker  # optional: the broker behind `bootstrap` (``restart()`` keeping its log)
        self.proxy_route = proxy_route or getattr(broker, "proxy_route", None)

    def network_route(self) -> tuple[str, str | None] | None:
        """`proxy_route`, a broker listener whose advertised address is where the proxy must listen (as
        `connectors.servers.KafkaBroker` with ``proxy_listener`` has), so metadata sends the producer back
        through the proxy; by default the `broker`'s. None: the network cases are skipped."""
        return self.proxy_route

    def options_via(self, namespace: str, address: str) -> Mapping[str, str]:
        return {**self.options(namespace), "kafka.bootstrap.servers": address}

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--bootstrap", required=True, help="bootstrap servers, host:port[,host:port]")
        parser.add_argument("--proxy-route", metavar="LISTENER,ADVERTISED",
                            help="for the network cases: a broker listener (host:port) whose advertised address "
                                 "(host:port) is where the proxy is to listen; without it they are skipped")

    @classmethod
    @contextmanager
    def from_arguments(cls, args: argparse.Namespace) -> Iterator["KafkaAdapter"]:
        route = getattr(args, "proxy_route", None)
        yield cls(args.bootstrap, proxy_route=tuple(route.split(",", 1)) if route else None)

    @staticmethod
    def topic(namespace: str) -> str:
        return f"conformance-{namespace}"

    def _client_config(self, **extra) -> dict:
        import logging

        quiet = logging.getLogger("impulse.conformance.kafka")
        quiet.propagate = False
        return {"bootstrap.servers": self.bootstrap, "logger": quiet, **extra}

    def options(self, namespace: str) -> Mapping[str, str]:
        return {"kafka.bootstrap.servers": self.bootstrap, "topic": self.topic(namespace),
                "deliveryGuarantee": self.guarantee}

    def prepare(self, namespace: str) -> None:
        self._create(self.topic(namespace))

    def _create(self, topic: str, config: Mapping[str, str] | None = None) -> None:
        """Create `topic` (`partitions`, with `config`) and wait until every partition has a leader."""
        from confluent_kafka.admin import AdminClient

        from connectors.kafka_topics import create_topic

        create_topic(AdminClient(self._client_config()), topic, self.partitions, 1, config, self.timeout_s)

    def read_back(self, namespace: str) -> list[tuple[int, int]]:
        return self._read(self.topic(namespace))

    def poison(self, namespace: str) -> "Poison":
        """Rows over a topic's ``max.message.bytes`` (1,000): every tenth (``counter % 10 == 3``) carries 2,000
        bytes; ``deadLetterTopic`` is a topic of the namespace with the broker's default limit."""
        from connectors.conformance.poison import Poison  # needs pytest: not imported by the CLI's --help

        small, dead = f"{self.topic(namespace)}-small", f"{self.topic(namespace)}-dead"
        self._create(small, {"max.message.bytes": "1000"})
        self._create(dead)
        value = "to_json(struct(subtask_index, counter, CASE WHEN counter % 10 = 3 THEN repeat('x', 2000) END AS pad))"
        return Poison(columns=[f"{value} AS value"], options={**self.options(namespace), "topic": small},
                      dead_letter={"deadLetterTopic": dead}, refused=lambda event: event[1] % 10 == 3,
                      read_back=lambda: self._read(small), read_dead_letters=lambda: self._read(dead),
                      words=("refuses row", "max.message.bytes"))

    def _read(self, topic: str) -> list[tuple[int, int]]:
        """Every record of `topic` a ``read_committed`` consumer sees (values: JSON rows), once the transactions
        just committed are visible (`connectors.kafka_topics.read_topic`)."""
        from connectors.kafka_topics import read_topic

        return events_from_json([m.value() for m in read_topic(self._client_config(), topic, timeout_s=self.timeout_s)])

    def cleanup(self, namespace: str) -> None:
        from confluent_kafka.admin import AdminClient

        admin, topic = AdminClient(self._client_config()), self.topic(namespace)  # keep admin alive until done
        topics = [topic, f"{topic}-small", f"{topic}-dead"]  # the last two: the poison-record case's
        existing = set(admin.list_topics(timeout=self.timeout_s).topics)
        for done in admin.delete_topics([t for t in topics if t in existing], operation_timeout=30).values():
            done.result(self.timeout_s)

    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        # One retry is enough to show the error; the default five take ~35 s of 5 s metadata timeouts.
        return {**self.options(namespace), "kafka.bootstrap.servers": f"127.0.0.1:{unused_port()}",
                "writeRetries": "1", "retryBackoff": "10ms"}

    def bad_options(self) -> list[tuple[Mapping[str, str], str]]:
        return [({"deliveryGuarantee": "twice"}, "deliveryGuarantee"), ({"kafka.bootstrap.servers": ""}, "bootstrap"),
                ({"transactionTimeout": "10"}, "transactionTimeout"), ({"topic": "no-such-topic-x9"}, "no-such-topic-x9"),
                ({"kafka.transactional.id": "mine"}, "transactionalIdPrefix"),
                ({"kafka.no.such.property": "1"}, "no.such.property")]
