"""Deliberately broken sinks the conformance suite must fail: each breaks the offset-commit protocol one way.

Never used outside ``tests/conformance``. Each mutant is the project's sink with one hook changed,
registered under its own format name (``mutant-…``):

- `RedisWithoutCommitCheck`: writes without looking at its commit record: a replayed or retried
  partition is written again (duplicates);
- `RedisRecordFirst`: writes the commit record first, outside MULTI/EXEC, then the rows: a crash in
  between leaves the record without the rows, and the retry skips them (loss);
- `RedisWithoutFingerprint`: skips a partition whose record exists without comparing the input's
  fingerprint (the protocol before it had one): a replay with another partitioning loses the rows
  the skipped partitions now hold and duplicates what the others rewrite;
- `KafkaWithoutTransactions`: claims exactly_once but produces without a transaction or progress
  record (duplicates after a crash or a replay);
- `WebhookFreshKeys`: a new idempotency key on every attempt: the receiver cannot dedupe a resend.

Spark's own ``format("kafka")`` (at-least-once, nobody here wrote it) is the fifth; its adapter is
`SparkKafkaAdapter`.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa

from connectors.conformance.adapters import KafkaAdapter, RedisAdapter, WebhookAdapter
from connectors.protocol import ProtocolWriter, Sink, WriteIdentity
from sinks.kafka import KafkaSink, KafkaSinkDataSource
from sinks.redis import RedisSink, RedisSinkDataSource, _mapped
from sinks.webhook import WebhookSink, WebhookSinkDataSource


def mutant_source(base: type, name: str, mutate: Callable[[Sink], Sink]) -> type:
    """A data source like `base` (a project sink's), named `name`, whose writer's sink is ``mutate(sink)``."""
    def streamWriter(self, schema, overwrite: bool) -> ProtocolWriter:  # noqa: N802 - PySpark's name
        writer = base.streamWriter(self, schema, overwrite)
        writer.sink = mutate(writer.sink)
        return writer

    return type(name.title().replace("-", ""), (base,), {"name": classmethod(lambda cls: name),
                                                    "streamWriter": streamWriter, "__module__": __name__})


def _as(cls: type) -> Callable[[Sink], Sink]:
    """Turn a sink into `cls`, a subclass of its class with one hook changed, keeping its state."""
    def mutate(sink: Sink) -> Sink:
        mutant = cls.__new__(cls)
        mutant.__dict__.update(sink.__dict__)
        return mutant
    return mutate


# ------------------------------------------------------------------------------------------------ Redis
class _NoCheckRedisSink(RedisSink):
    def is_committed(self, conn: Any, identity: WriteIdentity) -> bool:
        return False  # the mutation: never looks


class _RecordFirstRedisSink(RedisSink):
    def write(self, conn: Any, identity: WriteIdentity, batches: Iterator[pa.RecordBatch]) -> None:
        _, connection = conn
        with _mapped(self.options.url):  # the mutation: the record, on its own, before the rows
            connection.send_command("UNWATCH")
            connection.read_response()
            connection.send_command("SET", self.partition_key(identity), identity.batch_id)
            connection.read_response()
        super().write(conn, identity, batches)


class _NoFingerprintRedisSink(RedisSink):
    def is_committed(self, conn: Any, identity: WriteIdentity) -> bool:
        return bool(super().is_committed(conn, identity))  # the mutation: committed, whatever the input was


RedisWithoutCommitCheck = mutant_source(RedisSinkDataSource, "mutant-redis-no-check", _as(_NoCheckRedisSink))
RedisRecordFirst = mutant_source(RedisSinkDataSource, "mutant-redis-record-first", _as(_RecordFirstRedisSink))
RedisWithoutFingerprint = mutant_source(RedisSinkDataSource, "mutant-redis-no-fingerprint",
                                        _as(_NoFingerprintRedisSink))


# ------------------------------------------------------------------------------------------------ Kafka
def _without_transactions(sink: KafkaSink) -> KafkaSink:
    # the mutation: at_least_once's plain producer under an exactly_once promise
    return KafkaSink(dataclasses.replace(sink.options, guarantee="at_least_once"), sink.columns)


KafkaWithoutTransactions = mutant_source(KafkaSinkDataSource, "mutant-kafka-no-transactions", _without_transactions)


# ---------------------------------------------------------------------------------------------- webhook
class _FreshKeysWebhookSink(WebhookSink):
    def key_prefix(self, identity: WriteIdentity) -> str:
        # the mutation: a key of this attempt, not of (commit id, batch, partition, sequence)
        return f"{super().key_prefix(identity)}{uuid.uuid4().hex[:8]}:"


WebhookFreshKeys = mutant_source(WebhookSinkDataSource, "mutant-webhook-fresh-keys", _as(_FreshKeysWebhookSink))


# ------------------------------------------------------------------------------------------- adapters
def mutant_adapter(base: type, data_source: type) -> type:
    """`base` (a project adapter) bound to the mutant `data_source` instead of the real sink."""
    return type(f"{data_source.__name__}Adapter", (base,), {"format": data_source.name(), "data_source": data_source})


class SparkKafkaAdapter(KafkaAdapter):
    """Spark's own Kafka sink (``spark.jars.packages``): at-least-once, no faultInjection, no metricsPath."""

    format = "kafka"
    supports_fault_injection = False
    reports_metrics = False

    def options(self, namespace: str) -> Mapping[str, str]:
        return {"kafka.bootstrap.servers": self.bootstrap, "topic": self.topic(namespace)}

    def frame(self, frame):
        return frame.selectExpr("to_json(struct(*)) AS value")


MUTANTS = {
    "redis-no-check": (RedisAdapter, RedisWithoutCommitCheck),
    "redis-record-first": (RedisAdapter, RedisRecordFirst),
    "redis-no-fingerprint": (RedisAdapter, RedisWithoutFingerprint),
    "kafka-no-transactions": (KafkaAdapter, KafkaWithoutTransactions),
    "webhook-fresh-keys": (WebhookAdapter, WebhookFreshKeys),
}
