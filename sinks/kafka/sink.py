"""The Kafka sink: exactly-once (transactional) or at-least-once writes of a streaming query to Kafka."""

from __future__ import annotations

import concurrent.futures
import random
import time
from dataclasses import dataclass
from functools import partial
from typing import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from connectors import kafka_topics
from connectors.datasource import SinkDataSource
from connectors.errors import DeliveryError, OptionError, SinkError, TransientError
from connectors.options import OptionReader
from connectors.protocol import CommitMessage, Fingerprint, Sink, WriteIdentity, fingerprint_of
from connectors.redact import redact_options
from connectors.rows import as_binary, json_objects
from sinks.kafka.client import (
    COORDINATOR_MOVING,
    REFUSED_AT_ONCE,
    handshake_errors,
    idle_admins,
    idle_checkers,
    idle_producers,
    import_kafka,
    import_kafka_admin,
    kafka_error_name,
    mapped,
    note_handshake_error,
    quietly,
    translate,
)
from sinks.kafka.encoding import Encodings, encode_side, read_formats, resolve
from sinks.kafka.formats.debezium import DEBEZIUM_FORMATS, check_envelope, encode_json, tombstone_index
from sinks.kafka.librdkafka import ArrowProducer, UnsupportedLibrdkafka, library
from sinks.kafka.options import (
    CHECK_TIMEOUT_S,
    DEFAULT_TRANSACTIONAL_ID_PREFIX,
    GUARANTEES,
    KafkaOptions,
    check_log,
    log,
    transactional_id,
)
from sinks.kafka.security import (
    HandshakeWatch,
    authenticated,
    handshake_error,
    principal,
    transactions_denied,
    write_denied,
)

__all__ = ["KafkaSinkDataSource", "KafkaSink", "KafkaOptions", "transactional_id", "GUARANTEES", "create_topic",
           "DEFAULT_TRANSACTIONAL_ID_PREFIX", "TopicLimits"]


# The most a record adds to its key, value and headers in a record batch of its own (format v2: the batch's
# 61-byte header, the record's length, attributes, timestamp and offset deltas and the key, value and header
# lengths as varints). A record whose bytes and this exceed the topic's max.message.bytes is refused.
_RECORD_OVERHEAD = 86
_LIMITS_MAX_AGE_S = 60.0  # how long an executor process keeps a topic's limits before asking again


@dataclass(frozen=True)
class Columns:
    """Which of the Kafka columns the input has (checked on the driver from Spark's schema)."""

    value: bool
    key: bool
    topic: bool
    partition: bool
    headers: bool
    timestamp: bool

    @classmethod
    def of(cls, schema, formats: Mapping[str, str] | None = None) -> "Columns":
        """The Kafka columns of `schema`; with a side's format (``value.format``/``key.format``) other than
        ``raw``, that side's column may be a STRUCT (`sinks.kafka.encoding` checks what it can encode)."""
        fields = {f.name: f.dataType for f in schema.fields}
        formats = formats or {}

        def expect(name: str, ok: bool, expected: str) -> bool:
            if name in fields and not ok:
                raise OptionError(f"column '{name}'", fields[name].simpleString(), expected)
            return name in fields

        text = (T.StringType, T.BinaryType)

        def encodable(side: str) -> tuple:
            return text + (T.StructType,) if formats.get(side, "raw") != "raw" else text
        headers = fields.get("headers")
        headers_ok = (isinstance(headers, T.ArrayType) and isinstance(headers.elementType, T.StructType)
                      and [f.name for f in headers.elementType.fields] == ["key", "value"]
                      and isinstance(headers.elementType["key"].dataType, T.StringType)
                      and isinstance(headers.elementType["value"].dataType, text))
        return cls(
            value=expect("value", isinstance(fields.get("value"), encodable("value")), "string or binary (or no "
                         "'value' column: then each row is sent as a JSON object), or a STRUCT with a value.format"),
            key=expect("key", isinstance(fields.get("key"), encodable("key")),
                       "string or binary, or a STRUCT with a key.format"),
            topic=expect("topic", isinstance(fields.get("topic"), T.StringType), "string"),
            partition=expect("partition", isinstance(fields.get("partition"), (T.IntegerType, T.ShortType, T.ByteType,
                                                                                 T.LongType)), "an integer"),
            headers=expect("headers", headers_ok, "array<struct<key: string, value: binary>>"),
            timestamp=expect("timestamp", isinstance(fields.get("timestamp"), (T.TimestampType, T.TimestampNTZType)),
                             "timestamp") and "value" in fields,
        )


@dataclass
class _Records:
    """The records of one topic in a record batch, as Arrow/numpy columns for `ArrowProducer`."""

    topic: str
    values: pa.Array                            # binary; null: a tombstone
    rows: np.ndarray                            # uint64: each record's row in the partition
    keys: pa.Array | None = None                # binary; null: no key
    partitions: np.ndarray | None = None        # int32; -1: the partitioner picks
    timestamps: np.ndarray | None = None        # int64 ms since the epoch; 0: now
    headers: list | None = None                 # per record: [(key, value), …] or None
    unfit: list | None = None                   # per record: why its row does not fit the schema, or None

    def take(self, topic: str, index: np.ndarray) -> "_Records":
        """The records at ``index`` (positions), for ``topic``."""
        taken = pa.array(index, pa.int64())
        return _Records(
            topic, self.values.take(taken), self.rows[index], None if self.keys is None else self.keys.take(taken),
            None if self.partitions is None else self.partitions[index],
            None if self.timestamps is None else self.timestamps[index],
            None if self.headers is None else [self.headers[i] for i in index],
            None if self.unfit is None else [self.unfit[i] for i in index],
        )

    def sizes(self) -> np.ndarray:
        """Each record's key, value and header bytes."""
        size = pc.fill_null(pc.binary_length(self.values), 0).to_numpy().astype(np.int64)
        if self.keys is not None:
            size += pc.fill_null(pc.binary_length(self.keys), 0).to_numpy()
        if self.headers is not None:
            size += np.array([sum(len(k.encode()) + len(v or b"") for k, v in row or ()) for row in self.headers],
                             np.int64)
        return size


@dataclass(frozen=True)
class TopicLimits:
    """What a topic refuses of a record, whatever the attempt: as its configuration says."""

    max_bytes: int | None       # max.message.bytes (None: unknown, not checked)
    compacted: bool = False     # cleanup.policy has compact: a record without a key is refused (INVALID_RECORD)

    def refusals(self, records: "_Records") -> tuple[np.ndarray, list[str]]:
        """The positions of the records this topic would refuse, and why (in librdkafka's error names)."""
        bad, reasons = [], []
        if self.max_bytes is not None:
            sizes = records.sizes()
            for i in np.flatnonzero(sizes + _RECORD_OVERHEAD > self.max_bytes):
                bad.append(int(i))
                reasons.append(f"MSG_SIZE_TOO_LARGE: the record's key, value and headers take {int(sizes[i])} "
                               f"bytes, over the topic's max.message.bytes {self.max_bytes} less "
                               f"{_RECORD_OVERHEAD} bytes of framing")
        if self.compacted:
            keyless = np.arange(len(records.values)) if records.keys is None \
                else np.flatnonzero(records.keys.is_null().to_numpy(zero_copy_only=False))
            for i in keyless:
                if int(i) not in bad:
                    bad.append(int(i))
                    reasons.append("INVALID_RECORD: a compacted topic (cleanup.policy=compact) refuses a record "
                                   "without a key")
        order = np.argsort(bad, kind="stable")
        return np.array(bad, np.int64)[order], [reasons[i] for i in order]


class _Connection:
    """An executor's clients for one attempt of one partition."""

    def __init__(self, producer: ArrowProducer | None, consumer, transactional_id: str | None) -> None:
        self.producer = producer
        self.consumer = consumer
        self.transactional_id = transactional_id
        self.in_transaction = False
        self.known_topics: set[str] = set()
        self.written = False          # write() returned: every record acknowledged, none failed
        self.limits: dict[str, TopicLimits] = {}  # topic → what it refuses, for the topics written so far
        self.batch_bytes: int | None = None       # the producer's batch.size cap (see `KafkaOptions.producer_config`)
        self.next_partition: dict[str, int] = {}  # topic → where its next record batch without keys goes

    def sticky_partition(self, topic: str) -> int:
        """The partition for a record batch without keys or partitions: the topic's partitions in turn.

        As the Java producer's sticky partitioner (and so Spark's Kafka sink), which sends records
        without a key to one partition until a batch is full, then moves on: here a batch is one
        Arrow record batch (at most ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows). The
        first partition is random, so the tasks of a micro-batch start on different partitions.
        ``-1`` (librdkafka's partitioner) when the partition count is unknown.
        """
        count = self.producer.partition_count(topic)
        if not count:
            return -1
        turn = self.next_partition.get(topic)
        partition = (random.randrange(count) if turn is None else turn) % count
        self.next_partition[topic] = partition + 1
        return partition

    @property
    def failed(self) -> bool:
        return self.producer is not None and bool(self.producer.failures or self.producer.fatal_error())


_topic_limits: dict[tuple, tuple["TopicLimits", float]] = {}  # (settings, topic) → (limits, when read)
_transactions_allowed: set[tuple] = set()  # (settings, prefix, progress topic) whose probe passed in this process


class KafkaSink(Sink):
    """Writes a partition's records and its progress record in one Kafka transaction (or, at least once, idempotently)."""

    name = "kafka-sink"

    def __init__(self, options: KafkaOptions, columns: Columns, encodings: Encodings = Encodings()) -> None:  # noqa: B008 - Encodings is frozen: one shared default is safe
        self.options = options
        self.columns = columns
        self.encodings = encodings  # resolved on the driver (registry ids included): executors only encode
        # Which idle clients (at_least_once producers, metadata clients) it may reuse: same settings.
        self._idle_key = tuple(sorted((k, str(v)) for k, v in options.producer_config().items()))

    # -- driver ---------------------------------------------------------------------------------
    def check(self) -> None:
        """Driver, every micro-batch: the settings are valid, the cluster answers, the topics exist.

        Every check sends a metadata request; a client that answered is kept for the next check in
        this Python process (`idle_checkers`), one that failed is closed. An unreachable cluster is a
        `TransientError` (the protocol retries the check with backoff, so a broker restarting under a
        running query does not fail it); an unknown topic an `OptionError`. With exactly_once, an authenticated
        client's transactional ids and groups are tried once per prefix in a process (`transactions_denied`): a
        principal the broker's ACLs refuse them is an `OptionError` naming ``transactionalIdPrefix``.
        """
        kafka = import_kafka()
        try:
            library()  # the executors' write path: a librdkafka it cannot bind fails here, before any task
        except UnsupportedLibrdkafka as exc:
            raise SinkError(str(exc)) from exc
        opts = self.options
        producer = idle_checkers.take(self._idle_key)
        fresh = producer is None
        if producer is None:
            try:
                producer = kafka.Producer({**opts.producer_config(), "reconnect.backoff.max.ms": 1_000,
                                           "logger": check_log, "error_cb": partial(note_handshake_error, self._idle_key)})
            except kafka.KafkaException as exc:
                raise OptionError("kafka.*", redact_options(opts.client),
                                  f"settings librdkafka accepts ({exc.args[0].str()})") from exc
        handshake_errors.pop(self._idle_key, None)
        try:
            metadata = producer.list_topics(timeout=CHECK_TIMEOUT_S)
            named = {opts.dead_letter_topic: "deadLetterTopic", opts.progress_topic if opts.exactly_once else None:
                     "progressTopic", opts.topic: "topic"}
            for topic in sorted(t for t in named if t):
                found = metadata.topics.get(topic)
                if found is None or found.error is not None:  # ask for it by name: auto-creation, if enabled
                    found = producer.list_topics(topic, timeout=CHECK_TIMEOUT_S).topics.get(topic)
                if found is not None and found.error is None:
                    continue
                if found is not None and found.error.name() == "TOPIC_AUTHORIZATION_FAILED":
                    raise OptionError(named[topic], topic, f"a topic {principal(opts.client)} may write to: the ACLs "
                                      f"of the broker at {opts.bootstrap} do not let it even describe topic '{topic}' "
                                      f"({found.error.str()}); grant it Describe and Write on the topic, or write to "
                                      "another")
                if found is not None and found.error.name() not in ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"):
                    raise TransientError(f"kafka-sink: topic '{topic}' at {opts.bootstrap}: {found.error.str()}")
                option = named[topic]
                reason = found.error.str() if found is not None else "not found"
                raise OptionError(option, topic, f"an existing topic of the Kafka cluster at {opts.bootstrap} "
                                  f"(the broker says: {reason}); create it first")
            if fresh:  # the first check of these settings in this process: may the principal write to them?
                admin = import_kafka_admin().AdminClient({**opts.common_config(), "logger": check_log})
                denied = write_denied(admin, {t: o for t, o in named.items() if t},
                                      opts.client, opts.bootstrap, CHECK_TIMEOUT_S)
                if denied is not None:
                    raise denied
            if opts.exactly_once:  # the transactional ids and groups it needs, once per prefix in this process
                probed = (self._idle_key, opts.transactional_id_prefix, opts.progress_topic)
                if probed not in _transactions_allowed:
                    denied = self._transactions_denied()
                    if denied is not None:
                        raise denied
                    _transactions_allowed.add(probed)
        except kafka.KafkaException as exc:
            producer.poll(0)  # serve the error callbacks librdkafka queued meanwhile
            handshake = handshake_errors.pop(self._idle_key, None)
            if handshake is not None:
                raise handshake_error(handshake.str(), opts.client, opts.bootstrap) from exc
            raise TransientError(f"kafka-sink: cannot reach Kafka at {opts.bootstrap} within {CHECK_TIMEOUT_S:g}s "
                                 f"({exc.args[0].str()}); is the broker running and 'kafka.bootstrap.servers' "
                                 "right?") from exc
        else:
            idle_checkers.keep(self._idle_key, producer)  # it answered: the next check asks it again

    def _transactions_denied(self) -> OptionError | None:
        """`transactions_denied` with a probe producer of this sink's settings (closed afterwards), for a client that
        authenticates (`authenticated`); None for an anonymous one, whose broker is not asked."""
        opts = self.options
        if not authenticated(opts.client):
            return None
        probe = ArrowProducer(opts.producer_config(f"{opts.transactional_id_prefix}-check"))
        try:
            return transactions_denied(probe, opts.transactional_id_prefix, opts.progress_topic, opts.client,
                                       opts.bootstrap, CHECK_TIMEOUT_S)
        finally:
            probe.close()

    def committed_beyond(self, commit_id: str, batch_id: int, partitions: int) -> list[int]:
        """The progress records (consumer groups ``<prefix>-<commit id>-<partition>``) of partitions ≥ `partitions`
        at `batch_id` or later, asked one group at a time from `partitions` up to the first group without a
        record (one request per micro-batch when the partitioning did not change). A partition id of the
        earlier run that never committed anything hides the ids above it (not caught)."""
        if not self.options.exactly_once:
            return []
        kafka = import_kafka()
        admin_api = import_kafka_admin()

        opts = self.options
        admin = idle_admins.take(self._idle_key) or admin_api.AdminClient({**opts.common_config(), "logger": check_log})
        beyond, partition = [], partitions
        with mapped(opts, f"reading the progress records of batch {batch_id}"):
            while True:
                group = transactional_id(opts.transactional_id_prefix, commit_id, partition)
                request = kafka.ConsumerGroupTopicPartitions(group, [kafka.TopicPartition(opts.progress_topic, 0)])
                result = admin.list_consumer_group_offsets([request], request_timeout=CHECK_TIMEOUT_S)
                try:
                    [position] = result[group].result(CHECK_TIMEOUT_S).topic_partitions
                except concurrent.futures.TimeoutError as exc:  # a broker restarting: retried with a new client
                    raise TransientError(f"kafka-sink: no answer from {opts.bootstrap} within {CHECK_TIMEOUT_S:g}s "
                                         f"reading the progress record of group {group}") from exc
                if position.error is not None:
                    raise kafka.KafkaException(position.error)
                if position.offset < 0:  # no record: the earlier run had no such partition (ids are dense)
                    break
                if position.offset > batch_id:  # the offset stored is batch id + 1
                    beyond.append(partition)
                partition += 1
        idle_admins.keep(self._idle_key, admin)
        return beyond

    def abort_batch(self, commit_id: str | None, batch_id: int, messages: Sequence[CommitMessage | None]) -> None:
        """Fence the failed partitions' writers: their open transactions are aborted now, not at timeout."""
        if not self.options.exactly_once:
            return
        if commit_id is None:
            log.warning("kafka-sink: batch %d aborted before any task reported; its open transactions end when a "
                        "writer of the query restarts or after transactionTimeout", batch_id)
            return
        kafka = import_kafka()
        for partition, message in enumerate(messages):
            if message is not None:
                continue
            txid = transactional_id(self.options.transactional_id_prefix, commit_id, partition)
            try:
                producer = kafka.Producer({**self.options.producer_config(txid), "logger": check_log})
                producer.init_transactions(min(self.options.timeout_s, CHECK_TIMEOUT_S))
                log.info("kafka-sink: fenced %s after batch %d aborted", txid, batch_id)
            except kafka.KafkaException as exc:  # best effort: the next writer of the partition fences it too
                log.warning("kafka-sink: could not fence %s after batch %d aborted: %s", txid, batch_id, exc)

    # -- executor -------------------------------------------------------------------------------
    def open(self, identity: WriteIdentity) -> _Connection:
        kafka = import_kafka()
        opts = self.options
        limits = {t: self.topic_limits(t) for t in (opts.topic, opts.dead_letter_topic) if t}
        batch_bytes = min((lim.max_bytes for lim in limits.values() if lim.max_bytes), default=None)
        if not opts.exactly_once:
            conn = idle_producers.take((self._idle_key, batch_bytes))
            if conn is not None:
                return conn
        txid = transactional_id(opts.transactional_id_prefix, identity.commit_id, identity.partition_id) \
            if opts.exactly_once else None
        conn = _Connection(None, None, txid)
        conn.limits, conn.batch_bytes = limits, batch_bytes
        with mapped(opts, "connecting"):
            conn.producer = ArrowProducer(opts.producer_config(txid, batch_bytes))
            # Metadata first: a missing topic fails here, before a transaction is started.
            self._check_topics(conn, [t for t in {opts.topic, opts.progress_topic if txid else None} if t])
            if txid is not None:
                # Fencing first: a zombie attempt of this partition can no longer commit, and a
                # transaction a crashed writer left open is aborted (read_committed readers move on).
                conn.producer.init_transactions(opts.timeout_s)
                conn.consumer = kafka.Consumer({
                    **opts.common_config(), "group.id": txid, "isolation.level": "read_committed",
                    "enable.auto.commit": False, "logger": opts.client_logger,
                })
        return conn

    def topic_limits(self, topic: str) -> TopicLimits:
        """The topic's max.message.bytes and cleanup.policy, asked once a minute per process; unknown (nothing
        checked before producing) when the cluster does not say, e.g. without DescribeConfigs permission."""
        key = (self._idle_key, topic)
        known = _topic_limits.get(key)
        if known is not None and time.monotonic() - known[1] < _LIMITS_MAX_AGE_S:
            return known[0]
        admin_api = import_kafka_admin()

        opts = self.options
        admin = idle_admins.take(self._idle_key) or admin_api.AdminClient({**opts.common_config(), "logger": check_log})
        try:
            [future] = admin.describe_configs([admin_api.ConfigResource("topic", topic)],
                                              request_timeout=CHECK_TIMEOUT_S).values()
            config = future.result(CHECK_TIMEOUT_S)
            limits = TopicLimits(int(config["max.message.bytes"].value),
                                 "compact" in (config["cleanup.policy"].value or ""))
            idle_admins.keep(self._idle_key, admin)
        except Exception as exc:  # noqa: BLE001 - the broker's own checks still apply, record by record
            log.debug("kafka-sink: cannot read the configuration of topic '%s': %s", topic, exc)
            limits = TopicLimits(None)
        _topic_limits[key] = (limits, time.monotonic())
        return limits

    def _limits_of(self, conn: _Connection, topic: str) -> TopicLimits:
        """The limits of a topic this connection writes, read once for it (`topic_limits`)."""
        if topic not in conn.limits:
            conn.limits[topic] = self.topic_limits(topic)
        return conn.limits[topic]

    def is_committed(self, conn: _Connection, identity: WriteIdentity) -> bool:
        if conn.consumer is None:
            return False  # at least once: no progress record, every attempt writes
        kafka = import_kafka()
        partition = kafka.TopicPartition(self.options.progress_topic, 0)
        deadline = time.monotonic() + self.options.timeout_s
        pause = 0.05
        with mapped(self.options, "reading the progress record"):
            while True:
                try:
                    [position] = conn.consumer.committed([partition], timeout=self.options.timeout_s)
                    if position.error is not None:
                        raise kafka.KafkaException(position.error)
                    if position.offset != identity.batch_id + 1:  # the offset stored is batch id + 1
                        return position.offset > identity.batch_id
                    return Fingerprint.parse(position.metadata) or True
                except kafka.KafkaException as exc:
                    # The group coordinator moving or loading its partition (a fresh or restarted broker).
                    if exc.args[0].name() not in COORDINATOR_MOVING or time.monotonic() + pause > deadline:
                        raise
                time.sleep(pause)
                pause = min(pause * 2, 1.0)

    def write(self, conn: _Connection, identity: WriteIdentity, batches: Iterator[pa.RecordBatch]) -> int:
        """Write the partition; returns how many of its records went to ``deadLetterTopic``."""
        opts = self.options
        producer = conn.producer
        dead, first_row = 0, 0
        with mapped(opts, f"writing {identity}"):
            if conn.transactional_id is not None:
                producer.begin_transaction()
                conn.in_transaction = True
            for batch in batches:
                for records in self._records(batch, first_row):
                    self._check_topics(conn, [records.topic])
                    dead += self._produce_admissible(conn, identity, records)
                first_row += batch.num_rows
                producer.poll(0)
                self._raise_failures(conn)
            self._flush(conn)
            self._raise_failures(conn)
            if conn.transactional_id is not None:
                fingerprint = fingerprint_of(batches)
                producer.send_offsets_to_transaction(opts.progress_topic, 0, identity.batch_id + 1,
                                                     conn.transactional_id, opts.timeout_s,
                                                     metadata=b"" if fingerprint is None else str(fingerprint).encode())
                producer.commit_transaction(opts.timeout_s)
                conn.in_transaction = False
        conn.written = True
        return dead

    def _produce_admissible(self, conn: _Connection, identity: WriteIdentity, records: _Records) -> int:
        """Produce the records the topic takes; dead-letter (or refuse) the others. Returns how many were dead-lettered."""
        bad, reasons = self._limits_of(conn, records.topic).refusals(records)
        if records.unfit is not None:  # rows that do not fit the schema: dead letters before any size check
            refused_at = {int(i): r for i, r in zip(bad, reasons)}
            refused_at.update({i: r for i, r in enumerate(records.unfit) if r is not None})
            bad = np.array(sorted(refused_at), np.int64)
            reasons = [refused_at[int(i)] for i in bad]
        if len(bad):
            refused = records.take(records.topic, bad)
            records = records.take(records.topic, np.setdiff1d(np.arange(len(records.values)), bad))
        else:
            refused = None
        dead = self._dead_letter(conn, identity, refused, reasons) if refused is not None else 0
        at_once = self._produce(conn, records) if len(records.values) else []
        if at_once:  # what librdkafka refused itself (over the producer's message.max.bytes)
            refused = records.take(records.topic, np.array([i for i, _ in at_once], np.int64))
            dead += self._dead_letter(conn, identity, refused, [
                f"{kafka_error_name(code)}: over the producer's message.max.bytes" for _, code in at_once])
        return dead

    def _dead_letter(self, conn: _Connection, identity: WriteIdentity, refused: _Records, reasons: list[str]) -> int:
        """Send refused records to ``deadLetterTopic`` with why and where in headers, in the partition's
        transaction; without that option, fail the partition naming the first of them."""
        opts = self.options
        if opts.dead_letter_topic is None:
            key = None if refused.keys is None else refused.keys[0].as_py()
            undone = "nothing of this partition is committed (its transaction is aborted)" if opts.exactly_once \
                else "records of this partition sent before it may have landed (at_least_once)"
            raise DeliveryError(
                f"kafka-sink: topic '{refused.topic}' refuses row {int(refused.rows[0])} of {identity} (key "
                f"{key!r}): {reasons[0]}; {len(reasons)} record(s) of the partition are refused. {undone}, and "
                f"every replay meets the same refusal: fix the record or the topic, or set 'deadLetterTopic' to "
                "send such records there and the others to the topic")
        self._check_topics(conn, [opts.dead_letter_topic])
        headers = []
        for i, reason in enumerate(reasons):
            code, _, text = reason.partition(": ")
            about = [("impulse.error.code", code.encode()), ("impulse.error.reason", text.encode()),
                     ("impulse.topic", refused.topic.encode()), ("impulse.commit.id", identity.commit_id.encode()),
                     ("impulse.batch", str(identity.batch_id).encode()),
                     ("impulse.partition", str(identity.partition_id).encode()),
                     ("impulse.row", str(int(refused.rows[i])).encode())]
            headers.append(list((refused.headers[i] if refused.headers is not None else None) or ()) + about)
        letters = _Records(opts.dead_letter_topic, refused.values, refused.rows, refused.keys, None,
                           refused.timestamps, headers)
        bad, why = self._limits_of(conn, letters.topic).refusals(letters)
        at_once = [] if len(bad) else self._produce(conn, letters)
        if len(bad) or at_once:
            row = int(letters.rows[bad[0]]) if len(bad) else int(letters.rows[at_once[0][0]])
            raise DeliveryError(f"kafka-sink: the dead-letter topic '{letters.topic}' refuses row {row} of {identity} "
                                f"too: {why[0] if why else kafka_error_name(at_once[0][1])}; give it a larger "
                                "max.message.bytes (it takes the refused records whole)")
        return len(reasons)

    def close(self, conn: _Connection) -> None:
        """Executor: abort what is still open, drop what is still queued, release the clients; never raises.

        An at_least_once producer whose write succeeded is kept for the next task of this Python worker.
        """
        producer = conn.producer
        if conn.written and conn.transactional_id is None and not conn.failed:
            conn.written = False
            idle_producers.keep((self._idle_key, conn.batch_bytes), conn)
            return
        if producer is not None:
            if conn.in_transaction:  # failed mid-way: abort now rather than at transactionTimeout
                quietly(lambda: producer.abort_transaction(min(self.options.timeout_s, 5.0)))
            quietly(producer.purge)
            quietly(producer.close)
        if conn.consumer is not None:
            quietly(conn.consumer.close)

    # -- records --------------------------------------------------------------------------------
    def _records(self, batch: pa.RecordBatch, first_row: int = 0) -> list[_Records]:
        """A record batch (rows `first_row`… of the partition) as the records of each topic, computed with Arrow
        (no Python work per row)."""
        if not batch.num_rows:
            return []
        cols = self.columns
        names = batch.schema.names

        def column(name: str) -> pa.Array:
            return batch.column(names.index(name))

        unfit = None
        if self.encodings.debezium is not None:
            keys, values = encode_json(batch, self.encodings.debezium)
        elif self.encodings.value is not None:
            values, unfit = encode_side(batch, self.encodings.value)
        else:
            values = as_binary(column("value")) if cols.value else json_objects(batch).cast(pa.binary())
        records = _Records(self.options.topic, values, np.arange(first_row, first_row + batch.num_rows, dtype=np.uint64))
        if self.encodings.debezium is not None:
            records.keys = keys
        elif self.encodings.key is not None:
            records.keys, key_unfit = encode_side(batch, self.encodings.key)
            if key_unfit is not None:
                unfit = key_unfit if unfit is None else [v or k for v, k in zip(unfit, key_unfit)]
        elif cols.key:
            records.keys = as_binary(column("key"))
        records.unfit = unfit
        if self.encodings.tombstones:  # Debezium's tombstone after each delete (sinks.kafka.formats.debezium)
            index, tombstone = tombstone_index(column("op"))
            records = records.take(records.topic, index)
            records.values = pc.if_else(pa.array(tombstone), pa.scalar(None, pa.binary()), records.values)
            batch = batch.take(pa.array(index))
        if cols.partition:
            records.partitions = pc.fill_null(column("partition").cast(pa.int32()), -1).to_numpy()
        if cols.headers:
            records.headers = [None if row is None else [(h["key"], h["value"]) for h in row]
                               for row in column("headers").to_pylist()]
        if cols.timestamp:
            stamps = column("timestamp")
            millis = stamps.cast(pa.timestamp("ms", stamps.type.tz), safe=False).cast(pa.int64())
            records.timestamps = pc.fill_null(pc.max_element_wise(millis, 0), 0).to_numpy()  # 0: now
        if not cols.topic:
            return [records]
        topics = column("topic").cast(pa.string())
        if self.options.topic is not None:
            topics = pc.fill_null(topics, self.options.topic)
        elif topics.null_count:
            raise DeliveryError("kafka-sink: a row has no topic (null 'topic' column) and there is no "
                                "'topic' option to fall back on")
        distinct = pc.unique(topics).to_pylist()
        if len(distinct) == 1:
            records.topic = distinct[0]
            return [records]
        return [records.take(topic, pc.indices_nonzero(pc.equal(topics, topic)).to_numpy()) for topic in distinct]

    def _check_topics(self, conn: _Connection, topics: list) -> None:
        """Refuse a topic the cluster does not have now, not after librdkafka's 30 s metadata wait."""
        for topic in topics:
            if topic in conn.known_topics:
                continue
            reason = conn.producer.topic_error(topic, self.options.timeout_s)
            if reason is not None:
                raise DeliveryError(f"kafka-sink: cannot write to topic '{topic}' at {self.options.bootstrap}: "
                                    f"{reason}")
            conn.known_topics.add(topic)

    def _produce(self, conn: _Connection, records: _Records) -> list[tuple[int, int]]:
        """Hand the records to librdkafka, whole (or one call per record with timestamps or headers); returns
        ``(position, error code)`` of those it refused at once (too large for the producer)."""
        producer = conn.producer
        kafka = import_kafka()
        try:
            if records.timestamps is None and records.headers is None:
                whole = records.keys is None and records.partitions is None
                refused = producer.produce(records.topic, records.values, records.keys, records.partitions,
                                           conn.sticky_partition(records.topic) if whole else -1, records.rows)
            else:
                refused = producer.produce_each(records.topic, records.values, records.keys, records.partitions,
                                                records.timestamps, records.headers, records.rows)
            for position, code in refused:
                if code not in REFUSED_AT_ONCE:
                    raise kafka.KafkaException(kafka.KafkaError(code, f"{kafka_error_name(code)} (topic "
                                                                      f"'{records.topic}', row {int(records.rows[position])})"))
            return refused
        except kafka.KafkaException:
            producer.poll(0)  # a delivery that failed first (and broke the transaction) is the reason to report
            self._raise_failures(conn)
            raise

    def _flush(self, conn: _Connection) -> None:
        """Wait until every record is acknowledged or failed (librdkafka gives up after message.timeout.ms)."""
        producer = conn.producer
        message_timeout_s = float(self.options.producer_config().get("message.timeout.ms", 300_000)) / 1e3
        deadline = time.monotonic() + message_timeout_s + self.options.timeout_s
        while producer.flush(1.0) > 0:
            if producer.fatal_error() is not None:
                return
            if time.monotonic() > deadline:
                raise TransientError(f"kafka-sink: {len(producer)} records still unacknowledged by "
                                     f"{self.options.bootstrap} after {message_timeout_s:g}s")

    def _raise_failures(self, conn: _Connection) -> None:
        fatal = conn.producer.fatal_error()
        if fatal is not None:
            raise translate(fatal, self.options, "writing")
        failures = conn.producer.failures
        if failures:
            err, topic, partition, row = failures[0]
            more = f" ({len(failures)} records failed)" if len(failures) > 1 else ""
            where = f"topic '{topic}' partition {partition}" if partition is not None and partition >= 0 \
                else f"topic '{topic}'"
            where += f" (row {row} of the Spark partition)"
            raise translate(err, self.options, f"delivering to {where}", more=more)


def create_topic(options: Mapping[str, str], partitions: int, timeout_s: float = 30.0) -> bool:
    """Create the sink's ``topic`` (of its options, ``kafka.*`` included) with `partitions` partitions and the
    broker's default replication factor, and wait until every partition has a leader; False when it existed
    already (left as it is). For the load harness's opt-in ``create-topic``; the sink itself never creates one."""
    kafka = import_kafka()
    admin_api = import_kafka_admin()

    opts = KafkaOptions.read(OptionReader(options, name="kafka sink"))
    if opts.topic is None:
        raise OptionError("topic", None, "a topic to create")
    watch = HandshakeWatch()
    admin = admin_api.AdminClient({**opts.common_config(), "logger": check_log, "error_cb": watch})
    try:
        admin.list_topics(timeout=CHECK_TIMEOUT_S)  # reach the cluster first: a refused handshake fails fast
    except kafka.KafkaException as exc:
        admin.poll(0)  # serve the error callbacks librdkafka queued meanwhile
        refused = watch.error(opts.client, opts.bootstrap)
        if refused is not None:
            raise refused from exc
        raise SinkError(f"kafka-sink: cannot reach Kafka at {opts.bootstrap} within {CHECK_TIMEOUT_S:g}s "
                        f"({exc.args[0].str()}); is the broker running and 'kafka.bootstrap.servers' right?") from exc
    try:
        return kafka_topics.create_topic(admin, opts.topic, partitions, timeout_s=timeout_s, exist_ok=True)
    except kafka.KafkaException as exc:
        raise SinkError(f"kafka-sink: cannot create topic '{opts.topic}' at {opts.bootstrap}: "
                        f"{exc.args[0].str()}") from exc
    except TimeoutError as exc:
        raise SinkError(f"kafka-sink: {exc} (at {opts.bootstrap})") from exc


class KafkaSinkDataSource(SinkDataSource):
    """Exactly-once (default) or at-least-once streaming and batch writes to Apache Kafka.

    Name: ``kafka-sink``

    Input columns (the schema of Spark's own Kafka sink)
    ----------------------------------------------------
    value : string or binary, optional
        The record's value (null: a tombstone). Without a ``value`` column each row is sent as one
        JSON object holding every column (`connectors.rows.json_objects`: timestamps ISO-8601 UTC,
        binary base64). A STRUCT with a ``value.format`` other than ``raw`` (see below).
    key : string or binary, optional
        The record's key. Records without a ``key`` or ``partition`` column are spread as the Java
        producer's sticky partitioner does (Spark's Kafka sink): each Arrow record batch (at most
        ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) goes whole to one partition, the next
        batch to the next partition, from a random first one. A null key is partitioned per record.
    topic : string, optional
        The record's topic; null or absent: the ``topic`` option.
    partition : int, optional
        The record's partition; null or absent: the partitioner picks one (by key).
    headers : array<struct<key: string, value: binary>>, optional
        The record's headers, in order, duplicates kept.
    timestamp : timestamp, optional
        The record's timestamp (CreateTime, milliseconds). Used only together with a ``value``
        column: a row sent as JSON keeps its ``timestamp`` in the JSON and the record gets the time
        it was produced (old event times would otherwise make the broker's time-based retention
        delete the records at once).

    Parameters (option names are case-insensitive)
    ----------
    kafka.bootstrap.servers : str, required
        ``host:port[,host:port…]``. Every ``kafka.<name>`` option is passed to librdkafka as
        ``<name>`` (security: ``kafka.security.protocol``, ``kafka.sasl.mechanism``,
        ``kafka.sasl.username``, ``kafka.ssl.ca.location``…; tuning: ``kafka.linger.ms``…).
        Producer defaults: ``acks=all``, ``partitioner=murmur2_random`` (a key lands in the partition
        the Java producer, and so Spark's Kafka sink, picks), ``linger.ms=20``, ``batch.num.messages=10000``,
        ``batch.size=1000000``, ``queue.buffering.max.messages=1000000``,
        ``queue.buffering.max.kbytes=262144``, ``compression.type=none`` (as Spark's Kafka sink; set
        ``kafka.compression.type=lz4`` or ``zstd`` when the network or the brokers' disks are the limit),
        ``message.timeout.ms=60000`` (at most ``transactionTimeout`` for exactly_once),
        ``enable.idempotence=true``, ``enable.sparse.connections=false`` (a new transactional
        producer otherwise often waits 0.5 s for its coordinator). ``kafka.transactional.id`` and
        ``kafka.transaction.timeout.ms`` are refused: use the options below; so is
        ``kafka.enable.idempotence=false`` with exactly_once.
    topic : str, optional
        Topic of the rows without a ``topic`` column value. Required unless the input has a
        ``topic`` column; it must exist when the query starts.
    deliveryGuarantee : ``exactly_once`` (default) | ``at_least_once``
        See *Guarantee*.
    transactionalIdPrefix : str, default ``impulse-kafka-sink``
        exactly_once: the transactional id of Spark partition P is ``<prefix>-<commit id>-<P>``,
        where the commit id is the streaming query's id (kept across restarts from one
        checkpoint) or the ``commitId`` option. Two queries never share ids unless they share
        both the prefix and the commit id, on purpose.
    transactionTimeout : duration, default ``60s``
        ``transaction.timeout.ms`` of the producers (≤ the broker's
        ``transaction.max.timeout.ms``, 15 min by default). A partition's write must finish
        within it; a transaction whose writer vanished blocks ``read_committed`` readers of its
        partitions at most this long (less: the next writer of the partition aborts it at once).
    progressTopic : str, default: ``topic``
        exactly_once: the topic whose partition 0 holds the progress records (consumer-group
        offsets, see *Guarantee*); it must exist. Nothing is ever written into it. Required when
        ``topic`` is not set.
    timeout : duration, default ``30s``
        Bound of every blocking client call on the executors (init, offsets, commit).
    deadLetterTopic : str, optional
        Where records a topic refuses for good go, in the partition's transaction: a record whose
        key, value and headers exceed the topic's ``max.message.bytes`` (less 86 bytes of framing,
        uncompressed) or the producer's ``message.max.bytes``, and a record without a key for a
        compacted topic. The topic's limits are read (DescribeConfigs) once a minute per executor
        process; ``batch.size`` is capped at the smallest of them, so a batch is never refused for
        the records it gathered. A dead letter keeps the record's key, value and headers, and adds
        the headers ``impulse.error.code``, ``impulse.error.reason``, ``impulse.topic``,
        ``impulse.commit.id``, ``impulse.batch``, ``impulse.partition`` and ``impulse.row``; the
        dead-letter topic must take it (a larger ``max.message.bytes``), or the task fails. Without
        this option such a record fails the task naming its row and key, with nothing of the
        partition committed (exactly_once), and every replay fails the same way.
    value.format : ``raw`` (default) | ``json`` | ``avro`` | ``protobuf`` | ``json-schema`` | ``debezium-json`` | ``debezium-avro``
        ``raw``: the ``value`` column as is, or the row as JSON without one (as above). Otherwise
        the record is a ``value`` STRUCT column, or, without a ``value`` column, every column but
        ``key``, ``topic``, ``partition`` and ``headers`` (``timestamp`` included: it is a Kafka
        column only next to a ``value`` column), encoded as JSON or, for the last three, in
        Confluent's wire format (magic byte 0, the 4-byte schema id, Protobuf's message indexes)
        with the schema registered in the Schema Registry. Types map as the table in
        `sinks.kafka.formats.schemas` (and the README) says.

        ``debezium-json`` and ``debezium-avro`` write Debezium change events: a stream of Debezium's
        envelope (the impulse source's ``changelog.envelope=debezium``: columns ``key``, ``before``,
        ``after``, ``op``, ``ts_ms``, ``source``; any other stream fails at start naming
        ``changelog.envelope``). The ``key`` STRUCT is the record key, ``before``, ``after``,
        ``source``, ``op``, ``ts_ms`` the value, as Debezium's ``JsonConverter`` writes them
        (TIMESTAMP as ``io.debezium.time.MicroTimestamp`` µs, DATE as days, BINARY base64; DECIMAL
        is refused: cast it) or, ``debezium-avro``, in Avro through the Schema Registry (subjects
        ``<topic>-key`` and ``<topic>-value``, records ``Key`` and ``Envelope`` in a namespace
        named after the topic). ``key.format`` stays ``raw``: the format writes the key.
        See `sinks.kafka.formats.debezium`.
    schemas.enable : bool, default true
        ``debezium-json``: wrap key and value as ``{"schema": …, "payload": …}`` with Kafka Connect's
        schema (Debezium's default); false: the payload alone.
    tombstones.on.delete : bool, default true
        ``debezium-*``: after each delete (``op`` = ``d``) a record with the same key and a null
        value, as Debezium writes it, so a compacted topic drops the key.
    key.format : the same, default ``raw``
        For a ``key`` STRUCT column (``raw``: a string or binary ``key`` column as is).
    schema.registry.url : str, required by avro, protobuf and json-schema
        Confluent's REST API of the registry (Apicurio: ``http://host:port/apis/ccompat/v7``).
        Every ``schema.registry.<name>`` option goes to confluent-kafka's ``SchemaRegistryClient``
        (``basic.auth.user.info``, ``ssl.ca.location``…); ``${ENV:NAME}`` is read from the
        driver's environment.
    value.subject.name.strategy, key.subject.name.strategy : ``topic`` (default) | ``record`` | ``topic_record``
        The subject: ``<topic>-value``, the record's full name, or ``<topic>-<full name>``.
    auto.register.schemas : bool, default true
        Register the schema (the subject's compatibility rule applies); false: it must be registered.
    use.latest.version : bool, default false
        Encode with the subject's latest schema instead of the one derived from the Spark schema.
    value.schema, key.schema : str, optional
        A schema text (Avro JSON, base64 of a serialized ``FileDescriptorProto``, JSON Schema) used
        instead of the derived one. A row that does not fit it is dead-lettered with
        ``deadLetterTopic`` (its JSON as the value, ``impulse.error.code`` ``SCHEMA_MISMATCH``), or
        else fails the partition naming the row and the field.

        The registry is asked on the driver, once per query start (the writer build): a bad option,
        an unreachable registry or a schema the subject refuses fails the query before anything is
        written. Executors only encode and frame with the schema id they were given, so a replayed
        batch writes byte-identical records, through the same transactions.
    commitId, writeRetries, retryBackoff, retryBackoffMax, metricsPath, faultInjection
        The options of the commit protocol (`connectors.protocol.ProtocolOptions`).

    Guarantee
    ---------
    ``exactly_once``: each event is visible exactly once to ``read_committed`` consumers, across
    task retries, batch aborts, driver crashes (SIGKILL included) and broker restarts, as long as
    the replayed batches of the input are identical (true for impulse and replayable sources).

    Each task (query Q, batch B, Spark partition P) runs one transaction with the transactional
    producer ``<prefix>-<Q>-<P>`` (stable per query and partition):

    1. ``init_transactions``: fences every older producer with that id (a zombie attempt can no
       longer commit) and aborts a transaction a crashed writer left open, at once;
    2. the progress record of (Q, P) is read: the committed offset of the consumer group named like
       the transactional id, on partition 0 of ``progressTopic`` (``read_committed``). Offset
       ≥ B + 1 means batch B of this partition is already in Kafka: the task writes nothing;
    3. otherwise the rows are produced, flushed, and ``send_offsets_to_transaction`` puts offset
       B + 1 for that group into the same transaction, which is then committed: data and progress
       become visible in one atomic step.

    A retriable error (broker restarting, coordinator moving) aborts the transaction and the
    protocol retries the partition from step 1 (``writeRetries``); a fenced producer raises
    `FencedError`; a refused record (unknown topic, too large, not authorised) raises
    `DeliveryError` with the broker's reason. When a batch fails, the driver fences the failed
    partitions' ids so their open transactions are aborted without waiting for
    ``transactionTimeout``. Readers must use ``isolation.level=read_committed``.
    The progress records are consumer-group offsets: they expire after the broker's
    ``offsets.retention.minutes`` (7 days by default) without a commit, so a query stopped longer
    than that may duplicate the one batch it replays on restart; raise that setting if needed.
    ACLs: Write on the topics, Write on transactional ids and Read on groups ``<prefix>-*``,
    Describe on ``progressTopic``.

    ``at_least_once``: an idempotent producer (no duplicates from librdkafka's own retries),
    flushed before the task returns; a retried task or replayed batch writes its rows again, so a
    failure may duplicate, never lose, records. Cheaper: no transaction, no progress lookup, and,
    as in Spark's Kafka sink, producers are reused: a task keeps the producer the previous task of
    its Python worker left after a successful write (same settings, idle < 10 min), which saves
    each task a new client's connections and producer id; a producer that saw any failure is closed instead.

    Each record batch goes to librdkafka whole, per topic: `sinks.kafka.librdkafka.ArrowProducer` hands
    it the addresses of the values and keys in the Arrow buffers (``rd_kafka_produce_batch``, one
    call per record batch and topic; librdkafka copies them), so no Python object is made per record.
    Rows with ``headers`` or ``timestamp`` take one librdkafka call per record (``produceva``). A
    full local queue waits for room (back-pressure), nothing is dropped or reordered. Only failed
    deliveries are reported back (librdkafka's own ``delivery.report.only.error``). An unknown topic
    in a ``topic`` column is refused with the broker's reason when first seen (not after
    librdkafka's 30 s wait).

    Notes
    -----
    On the driver, every micro-batch checks that the cluster answers (5 s) and that ``topic`` and
    ``progressTopic`` exist: an unreachable cluster is retried with the protocol's backoff
    (``writeRetries``) before the query fails with "cannot reach Kafka at <servers>"; a missing
    topic fails at once. Throughput: exactly_once costs one ``init_transactions``, one offset fetch
    and one commit per partition and micro-batch (tens of ms; measurable only for small
    micro-batches). Larger Arrow batches to the writer help
    (``spark.sql.execution.arrow.maxRecordsPerBatch``, default 10000). See ``bench/kafka_sink.py``.

    Examples
    --------
    >>> (spark.readStream.format("impulse").option("eventsPerSecond", 1000).load()
    ...     .writeStream.format("kafka-sink")
    ...     .option("kafka.bootstrap.servers", "localhost:9092").option("topic", "events")
    ...     .option("checkpointLocation", "/tmp/ck").start())                 # doctest: +SKIP
    >>> (df.selectExpr("CAST(subtask_index AS STRING) AS key", "to_json(struct(*)) AS value")
    ...     .writeStream.format("kafka-sink").option("kafka.bootstrap.servers", "localhost:9092")
    ...     .option("topic", "events").option("deliveryGuarantee", "at_least_once")
    ...     .option("checkpointLocation", "/tmp/ck2").start())                # doctest: +SKIP
    >>> (df.write.format("kafka-sink").mode("append").option("kafka.bootstrap.servers", "localhost:9092")
    ...     .option("topic", "events")
    ...     .option("commitId", "backfill-1").save())   # batch: connectors.batch   # doctest: +SKIP
    """

    label = "kafka sink"
    sink_class = KafkaSink

    def build(self, reader: OptionReader, schema) -> KafkaSink:
        """The sink of the options in `reader`, for rows of `schema`."""
        opts = KafkaOptions.read(reader)
        formats = read_formats(reader)
        kinds = formats
        if formats["value"] in DEBEZIUM_FORMATS:  # the envelope first: its STRUCT key is the format's to encode
            check_envelope(schema, formats["value"])
            kinds = {**formats, "key": formats["value"]}
        columns = Columns.of(schema, kinds)
        if opts.topic is None and not columns.topic:
            raise OptionError("topic", None, "a topic: set .option('topic', ...) on the kafka sink, or give "
                                             "the rows a 'topic' column")
        if opts.exactly_once and opts.progress_topic is None:
            raise OptionError("progressTopic", None, "an existing topic whose partition 0 keeps the progress "
                              "records of exactly_once (nothing is written into it); set 'progressTopic' or "
                              "'topic'")
        # Last, once the options are known good: the registry calls (nothing is written before they succeed).
        return KafkaSink(opts, columns, resolve(reader, formats, schema, opts.topic))
