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

Three more each leave a window between two round trips, which only breaking the connection there finds
(the suite's ``test_cut_at_every_round_trip``):

- `RedisRecordAfterExec`: the rows in MULTI/EXEC, the commit record in a second round trip after it:
  cut after EXEC's reply, the retry finds no record and writes the rows again (duplicates);
- `KafkaOffsetsAfterData`: the data's transaction commits, then the progress offsets in a second
  transaction: a failure between the two rewrites the partition (duplicates). A close does not reach
  it (librdkafka resends on a new connection); a stall after the first commit's reply, held past the
  sink's timeout, does;
- `WebhookCutCounted`: a request whose reply never came (the connection cut) counts as delivered: cut
  before the receiver had the whole request, its rows are lost.

Spark's own ``format("kafka")`` (at-least-once, nobody here wrote it) is the fifth; its adapter is
`SparkKafkaAdapter`.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa

from sinks.kafka.adapter import KafkaAdapter
from sinks.redis.adapter import RedisAdapter
from sinks.webhook.adapter import WebhookAdapter
from connectors.protocol import ProtocolWriter, Sink, WriteIdentity
from sinks.kafka.sink import KafkaSink, KafkaSinkDataSource
from sinks.kafka.client import mapped as kafka_mapped
from sinks.redis.sink import RedisSink, RedisSinkDataSource, mapped
from connectors.errors import TransientError
from connectors.protocol import fingerprint_of
from sinks.webhook.client import Client
from sinks.webhook.sink import WebhookSink, WebhookSinkDataSource


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
        with mapped(self.options.url):  # the mutation: the record, on its own, before the rows
            connection.send_command("UNWATCH")
            connection.read_response()
            connection.send_command("SET", self.partition_key(identity), identity.batch_id)
            connection.read_response()
        super().write(conn, identity, batches)


class _NoFingerprintRedisSink(RedisSink):
    def is_committed(self, conn: Any, identity: WriteIdentity) -> bool:
        return bool(super().is_committed(conn, identity))  # the mutation: committed, whatever the input was


class _RecordAfterExecRedisSink(RedisSink):
    """The rows and a decoy record in MULTI/EXEC (the real sink's write), the real record after EXEC."""

    _decoy = False

    def partition_key(self, identity: WriteIdentity) -> str:
        key = super().partition_key(identity)
        return f"{key}:decoy" if self._decoy else key

    def write(self, conn: Any, identity: WriteIdentity, batches: Iterator[pa.RecordBatch]) -> None:
        self._decoy = True
        try:
            super().write(conn, identity, batches)
        finally:
            self._decoy = False
        _, connection = conn
        fingerprint = fingerprint_of(batches)
        value = str(identity.batch_id) if fingerprint is None else f"{identity.batch_id} {fingerprint}"
        with mapped(self.options.url):  # the mutation: the record in a second round trip
            connection.send_command("SET", self.partition_key(identity), value)
            connection.read_response()


RedisWithoutCommitCheck = mutant_source(RedisSinkDataSource, "mutant-redis-no-check", _as(_NoCheckRedisSink))
RedisRecordFirst = mutant_source(RedisSinkDataSource, "mutant-redis-record-first", _as(_RecordFirstRedisSink))
RedisWithoutFingerprint = mutant_source(RedisSinkDataSource, "mutant-redis-no-fingerprint",
                                        _as(_NoFingerprintRedisSink))
RedisRecordAfterExec = mutant_source(RedisSinkDataSource, "mutant-redis-record-after-exec",
                                     _as(_RecordAfterExecRedisSink))


# ------------------------------------------------------------------------------------------------ Kafka
def _without_transactions(sink: KafkaSink) -> KafkaSink:
    # the mutation: at_least_once's plain producer under an exactly_once promise
    return KafkaSink(dataclasses.replace(sink.options, guarantee="at_least_once"), sink.columns)


KafkaWithoutTransactions = mutant_source(KafkaSinkDataSource, "mutant-kafka-no-transactions", _without_transactions)


class _OffsetsAfterDataKafkaSink(KafkaSink):
    def write(self, conn: Any, identity: WriteIdentity, batches: Iterator[pa.RecordBatch]) -> None:
        producer, offsets = conn.producer, []
        send = producer.send_offsets_to_transaction
        producer.send_offsets_to_transaction = lambda *args, **kwargs: offsets.append((args, kwargs))
        try:
            super().write(conn, identity, batches)  # the data's transaction, without the offsets
        finally:
            del producer.send_offsets_to_transaction
        with kafka_mapped(self.options, f"committing the progress of {identity}"):  # the mutation: a second one
            producer.begin_transaction()
            conn.in_transaction = True
            for args, kwargs in offsets:
                send(*args, **kwargs)
            producer.commit_transaction(self.options.timeout_s)
            conn.in_transaction = False


KafkaOffsetsAfterData = mutant_source(KafkaSinkDataSource, "mutant-kafka-offsets-after-data",
                                      _as(_OffsetsAfterDataKafkaSink))


# ---------------------------------------------------------------------------------------------- webhook
class _FreshKeysWebhookSink(WebhookSink):
    def key_prefix(self, identity: WriteIdentity) -> str:
        # the mutation: a key of this attempt, not of (commit id, batch, partition, sequence)
        return f"{super().key_prefix(identity)}{uuid.uuid4().hex[:8]}:"


WebhookFreshKeys = mutant_source(WebhookSinkDataSource, "mutant-webhook-fresh-keys", _as(_FreshKeysWebhookSink))


class _CutCountedClient(Client):
    def _once(self, method: str, url: str, key: str, body: bytes, headers: Mapping[str, str]) -> None:
        try:
            super()._once(method, url, key, body, headers)
        except TransientError as exc:
            if getattr(exc, "status", None) is None:  # the mutation: no answer (connection cut) counts as delivered
                return
            raise


class _CutCountedWebhookSink(WebhookSink):
    def open(self, identity: WriteIdentity) -> Client:
        return _CutCountedClient(self.options, where="this executor")


WebhookCutCounted = mutant_source(WebhookSinkDataSource, "mutant-webhook-cut-counted", _as(_CutCountedWebhookSink))


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
    "redis-record-after-exec": (RedisAdapter, RedisRecordAfterExec),
    "kafka-offsets-after-data": (KafkaAdapter, KafkaOffsetsAfterData),
    "webhook-cut-counted": (WebhookAdapter, WebhookCutCounted),
}
