"""The Kafka sink's conformance adapter (see `connectors.conformance.adapter.SinkAdapter`)."""

from __future__ import annotations

import argparse
import io
import json
import logging
from contextlib import contextmanager
from typing import Iterator, Mapping

from connectors.conformance.adapter import Poison, SinkAdapter, events_from_json, unused_port
from connectors.errors import OptionError
from connectors.kafka_topics import READER_GROUPS, create_topic, group_refused, read_topic
from connectors.readback import CannotReadBack, TargetReader
from sinks.kafka.client import import_kafka_admin
from sinks.kafka.formats import split_header
from sinks.kafka.security import authenticated, principal

__all__ = ["KafkaAdapter", "KafkaReader"]


class KafkaAdapter(SinkAdapter):
    """The Kafka sink (exactly_once unless told otherwise), one topic of 2 partitions per namespace, read back
    with a ``read_committed`` consumer (what an aborted transaction left in the log is not visible).

    With `registry_url`, the records are written with ``value.format=avro`` through that Schema Registry and
    decoded on reading back (`split_header`, the writer's schema from the registry by id, fastavro)."""

    format = "kafka-sink"
    #: below the 1 MB record limit of librdkafka (``message.max.bytes``) and the broker, JSON overhead included
    large_value_bytes = 900_000
    #: the cut sweep: librdkafka resends a request on a new connection after a close, so what the sweep must
    #: reach after a reply is a connection that stalls until the sink gives up (its 3 s `timeout`), not one
    #: that closes. librdkafka's own request and socket timeouts (6 s) are longer than the sink's: with them
    #: equal, a request resent on a new connection could answer before the sink gave up, and a cut between two
    #: round trips would go untested on a machine that happened to run that way round
    cut_kinds = ("inside_request", "after_request", "stall_after_reply")
    network_options = {"timeout": "3s", "kafka.request.timeout.ms": "6000", "kafka.socket.timeout.ms": "6000"}
    network_stall_s = 6.0

    def __init__(self, bootstrap: str, guarantee: str = "exactly_once", partitions: int = 2,
                 timeout_s: float = 60.0, broker=None, proxy_route: tuple[str, str] | None = None,
                 registry_url: str | None = None) -> None:
        self.registry_url = registry_url
        self._schemas: dict[int, object] = {}  # schema id → fastavro's parsed writer schema
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
        quiet = logging.getLogger("impulse.conformance.kafka")
        quiet.propagate = False
        return {"bootstrap.servers": self.bootstrap, "logger": quiet, **extra}

    def options(self, namespace: str) -> Mapping[str, str]:
        avro = {"value.format": "avro", "schema.registry.url": self.registry_url} if self.registry_url else {}
        return {"kafka.bootstrap.servers": self.bootstrap, "topic": self.topic(namespace),
                "deliveryGuarantee": self.guarantee, **avro}

    def prepare(self, namespace: str) -> None:
        self._create(self.topic(namespace))

    def _create(self, topic: str, config: Mapping[str, str] | None = None) -> None:
        """Create `topic` (`partitions`, with `config`) and wait until every partition has a leader."""
        admin = import_kafka_admin().AdminClient(self._client_config())
        create_topic(admin, topic, self.partitions, 1, config, self.timeout_s)

    @classmethod
    def reader(cls, options: Mapping[str, str], receiver=None) -> "KafkaReader":
        config = {k[len("kafka."):]: v for k, v in options.items() if k.lower().startswith("kafka.")}
        topic = next((str(v) for k, v in options.items() if k.lower() == "topic"), None)
        if not topic:
            raise OptionError("topic", topic, "the topic the sink writes to (it is read back)")
        value_format = next((str(v) for k, v in options.items() if k.lower() == "value.format"), "raw")
        if authenticated(config):  # a broker's ACLs name such principals: may it use the reader's groups?
            refused = group_refused(config)
            if refused is not None:
                raise CannotReadBack(
                    f"{principal(config)} may not use the consumer groups '{READER_GROUPS}*' at "
                    f"{config.get('bootstrap.servers')} ({refused}): the reader of topic '{topic}' reads by "
                    f"assignment and commits nothing, but its consumer takes a group '{READER_GROUPS}read-<random>' "
                    f"and looks it up; grant the principal of the 'kafka.*' options Describe on these groups "
                    f"(kafka-acls --add --allow-principal … --operation Describe --group {READER_GROUPS} "
                    "--resource-pattern-type prefixed)")
        return KafkaReader(config, topic, value_column=value_format == "raw")

    def read_back(self, namespace: str) -> list[tuple[int, int]]:
        return self._read(self.topic(namespace))

    def poison(self, namespace: str) -> Poison:
        """Rows over a topic's ``max.message.bytes`` (1,000): every tenth (``counter % 10 == 3``) carries 2,000
        bytes; ``deadLetterTopic`` is a topic of the namespace with the broker's default limit."""
        small, dead = f"{self.topic(namespace)}-small", f"{self.topic(namespace)}-dead"
        self._create(small, {"max.message.bytes": "1000"})
        self._create(dead)
        pad = "CASE WHEN counter % 10 = 3 THEN repeat('x', 2000) END AS pad"
        columns = ["subtask_index", "counter", pad] if self.registry_url else \
            [f"to_json(struct(subtask_index, counter, {pad})) AS value"]
        return Poison(columns=columns, options={**self.options(namespace), "topic": small},
                      dead_letter={"deadLetterTopic": dead}, refused=lambda event: event[1] % 10 == 3,
                      read_back=lambda: self._read(small), read_dead_letters=lambda: self._read(dead),
                      words=("refuses row", "max.message.bytes"))

    def _read(self, topic: str) -> list[tuple[int, int]]:
        """Every record of `topic` a ``read_committed`` consumer sees (values: JSON rows), once the transactions
        just committed are visible (`connectors.kafka_topics.read_topic`)."""
        values = KafkaReader(self._client_config(), topic, self.timeout_s).values()
        if not self.registry_url:
            return events_from_json(values)
        decoded = [self._decode_avro(v) for v in values]
        return [(row["subtask_index"], row["counter"]) for row in decoded]

    def _decode_avro(self, record: bytes) -> dict:
        """A framed Avro record decoded with its writer's schema (asked from the registry once per id)."""
        import fastavro  # noqa: PLC0415 - the avro extra
        from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415 - the avro extra

        schema_id, payload = split_header(record)
        if schema_id not in self._schemas:
            text = SchemaRegistryClient({"url": self.registry_url}).get_schema(schema_id).schema_str
            self._schemas[schema_id] = fastavro.parse_schema(json.loads(text))
        return fastavro.schemaless_reader(io.BytesIO(payload), self._schemas[schema_id], None)

    def cleanup(self, namespace: str) -> None:
        admin = import_kafka_admin().AdminClient(self._client_config())  # kept alive until the deletions are done
        topic = self.topic(namespace)
        topics = [topic, f"{topic}-small", f"{topic}-dead"]  # the last two: the poison-record case's
        existing = set(admin.list_topics(timeout=self.timeout_s).topics)
        for done in admin.delete_topics([t for t in topics if t in existing], operation_timeout=30).values():
            done.result(self.timeout_s)

    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        # One retry is enough to show the error; the default five each wait out a metadata timeout.
        return {**self.options(namespace), "kafka.bootstrap.servers": f"127.0.0.1:{unused_port()}",
                "writeRetries": "1", "retryBackoff": "10ms"}

    def bad_options(self) -> list[tuple[Mapping[str, str], str]]:
        return [({"deliveryGuarantee": "twice"}, "deliveryGuarantee"), ({"kafka.bootstrap.servers": ""}, "bootstrap"),
                ({"transactionTimeout": "10"}, "transactionTimeout"), ({"topic": "no-such-topic-x9"}, "no-such-topic-x9"),
                ({"kafka.transactional.id": "mine"}, "transactionalIdPrefix"),
                ({"kafka.no.such.property": "1"}, "no.such.property")]


class KafkaReader(TargetReader):
    """kafka-sink's topic: the value of every record a ``read_committed`` consumer sees, from the topic's beginning
    (`connectors.kafka_topics.read_topic`), with the client `config` (the sink's ``kafka.*`` options)."""

    def __init__(self, config: Mapping[str, object], topic: str, timeout_s: float = 60.0, *,
                 value_column: bool = False) -> None:
        # value_column: with value.format raw (the default) a 'value' column is the record's value itself
        self.config, self.topic, self.timeout_s, self.value_column = dict(config), topic, timeout_s, value_column

    def describe(self) -> str:
        return f"the records of topic {self.topic!r}"

    def prepare(self) -> None:
        held = len(self.values())
        if held:
            raise CannotReadBack(f"topic {self.topic!r} already holds {held:,} records; every record of the topic is "
                                 "read back: use a new topic")

    def values(self) -> list[bytes]:
        return [m.value() for m in read_topic(self.config, self.topic, timeout_s=self.timeout_s)]
