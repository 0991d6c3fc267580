"""The Kafka sink's options: what each option means, its default and how it becomes librdkafka's configuration."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from connectors.errors import OptionError
from connectors.options import OptionReader

__all__ = ["KafkaOptions", "transactional_id", "GUARANTEES", "EXACTLY_ONCE", "AT_LEAST_ONCE",
           "DEFAULT_TRANSACTIONAL_ID_PREFIX", "PRODUCER_DEFAULTS", "CHECK_TIMEOUT_S", "log", "check_log"]

log = logging.getLogger("impulse.connectors.kafka")

EXACTLY_ONCE = "exactly_once"
AT_LEAST_ONCE = "at_least_once"
GUARANTEES = (EXACTLY_ONCE, AT_LEAST_ONCE)

DEFAULT_TRANSACTIONAL_ID_PREFIX = "impulse-kafka-sink"

# Throughput-minded producer defaults; every one can be overridden with a kafka.* option. Only
# failures are reported back (librdkafka's delivery.report.only.error, see sinks.kafka.librdkafka): a
# delivered record costs the Python thread nothing. No compression, as Spark's Kafka sink (the Java
# producer's default): on a CPU-bound executor lz4 cost more throughput than it saved.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 20,
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 262_144,
    "compression.type": "none",
    "message.timeout.ms": 60_000,
    # Keys go to the partition the Java producer (and so Spark's Kafka sink) picks: murmur2, not
    # librdkafka's default CRC32. Records without a key or partition go one Arrow record batch to a
    # partition, in turn (`_Connection.sticky_partition`): Java's sticky partitioning, without
    # running librdkafka's partitioner per record.
    "partitioner": "murmur2_random",
    # Connect to every broker at once: with sparse connections, init_transactions often finds no
    # broker connection up yet and waits for librdkafka's 500 ms coordinator retry timer.
    "enable.sparse.connections": False,
}

# Properties only a producer understands: kept out of the consumer that reads the progress records
# (and of the metadata checks), so librdkafka does not warn about them.
_PRODUCER_ONLY = (
    "acks", "request.required.acks", "linger.ms", "queue.buffering.", "batch.", "compression.",
    "compression.codec", "enable.idempotence", "enable.gapless.guarantee", "message.timeout.ms",
    "delivery.", "retries", "message.send.max.retries", "retry.backoff", "transaction", "partitioner",
    "sticky.partitioning", "max.in.flight", "request.timeout.ms",
)

# Options the sink sets itself: a kafka.* option for them is refused with the sink option to use.
_MANAGED = {
    "transactional.id": "transactionalIdPrefix",
    "transaction.timeout.ms": "transactionTimeout",
    "on_delivery": None, "error_cb": None, "delivery.report.only.error": None,
}

CHECK_TIMEOUT_S = 5.0   # one try of the driver's check (the protocol retries it): a wrong address fails fast


def transactional_id(prefix: str, commit_id: str, partition_id: int) -> str:
    """The ``transactional.id`` (and progress group id) of one (query, Spark partition)."""
    return f"{prefix}-{commit_id}-{partition_id}"


@dataclass(frozen=True)
class KafkaOptions:
    """The options of the Kafka sink (see `KafkaSinkDataSource`)."""

    bootstrap: str
    client: dict = field(hash=False)           # kafka.* without the prefix: passed to every client
    topic: str | None
    guarantee: str
    transactional_id_prefix: str
    transaction_timeout_ms: int
    progress_topic: str | None
    timeout_s: float
    dead_letter_topic: str | None = None

    @classmethod
    def read(cls, reader: OptionReader) -> "KafkaOptions":
        client = reader.prefixed("kafka.")
        bootstrap = next((v for k, v in client.items() if k.lower() == "bootstrap.servers"), None)
        if not bootstrap:
            raise OptionError("kafka.bootstrap.servers", bootstrap,
                              "host:port[,host:port…] of the Kafka cluster; set it with "
                              ".option('kafka.bootstrap.servers', 'broker:9092') on the kafka sink")
        for key in client:
            if key.lower() in _MANAGED:
                instead = _MANAGED[key.lower()]
                raise OptionError(f"kafka.{key}", client[key], "no value: the kafka sink sets it itself"
                                  + (f"; use the option '{instead}'" if instead else ""))
        guarantee = reader.choice("deliveryGuarantee", GUARANTEES, EXACTLY_ONCE)
        idempotence = next((v for k, v in client.items() if k.lower() == "enable.idempotence"), "true")
        if guarantee == EXACTLY_ONCE and idempotence.strip().lower() in ("false", "0", "no"):
            raise OptionError("kafka.enable.idempotence", idempotence, "true (or unset): transactions need it; "
                              "use deliveryGuarantee 'at_least_once' for a producer without idempotence")
        topic = reader.string("topic")
        timeout_ms = reader.duration_us("transactionTimeout", 60_000_000) // 1_000
        if timeout_ms < 1_000:
            raise OptionError("transactionTimeout", f"{timeout_ms}ms", "a duration ≥ 1s")
        prefix = reader.string("transactionalIdPrefix", DEFAULT_TRANSACTIONAL_ID_PREFIX)
        return cls(
            bootstrap=bootstrap,
            client=client,
            topic=topic,
            guarantee=guarantee,
            transactional_id_prefix=prefix,
            transaction_timeout_ms=timeout_ms,
            progress_topic=reader.string("progressTopic") or topic,
            timeout_s=reader.duration_us("timeout", 30_000_000) / 1e6,
            dead_letter_topic=reader.string("deadLetterTopic"),
        )

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == EXACTLY_ONCE

    def producer_config(self, transactional_id: str | None = None, max_batch_bytes: int | None = None) -> dict:
        """librdkafka settings of the sink's producer: defaults < kafka.* options < what the guarantee needs.

        ``max_batch_bytes`` (the smallest ``max.message.bytes`` of the topics written) caps ``batch.size``,
        so the broker never refuses a batch of records it would take one by one.
        """
        conf: dict[str, Any] = dict(PRODUCER_DEFAULTS)
        if self.exactly_once:
            conf["message.timeout.ms"] = min(conf["message.timeout.ms"], self.transaction_timeout_ms)
        conf.update(self.client)
        if max_batch_bytes is not None:
            conf["batch.size"] = min(int(conf.get("batch.size", 1_000_000)), max_batch_bytes)
        conf.setdefault("enable.idempotence", True)
        if transactional_id is not None:
            conf["transactional.id"] = transactional_id
            conf["transaction.timeout.ms"] = self.transaction_timeout_ms
        conf["delivery.report.only.error"] = True
        return conf

    @property
    def client_logger(self) -> logging.Logger:
        """Where the confluent-kafka clients' logs go: nowhere (their errors reach us as exceptions), unless
        kafka.debug is set. The executor's `ArrowProducer` is silent likewise, and logs to stderr with kafka.debug."""
        return log if any(k.lower() == "debug" for k in self.client) else check_log

    def common_config(self) -> dict:
        """The kafka.* options a consumer or admin client understands (security, addresses, …)."""
        return {k: v for k, v in self.client.items() if not k.lower().startswith(_PRODUCER_ONLY)}


#: The check clients' logger: librdkafka's complaints about an unreachable cluster are the check's to report.
check_log = logging.getLogger("impulse.connectors.kafka.check")
check_log.propagate = False
check_log.addHandler(logging.NullHandler())
