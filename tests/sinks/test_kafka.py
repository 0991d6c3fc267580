"""The Kafka sink (`sinks.kafka`) against a real broker: what lands, exactly once, and how it fails.

Input: impulse with ``startTime=0`` (every event due at once) and ``maxEventsPerTrigger`` (several
micro-batches). Output is read back with a ``read_committed`` consumer and compared as the exact
list of ``(subtask_index, counter)``: no loss, no duplicate.
"""

from __future__ import annotations

import base64
import json
import logging
import pickle
import time
import uuid

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StructField, StructType

from connectors import protocol
from connectors.conformance.harness import expected_events
from connectors.errors import DeliveryError, FencedError, OptionError
from connectors.options import OptionReader
from connectors.protocol import Fingerprint, WriteIdentity
from connectors.servers import free_port, wait_until
from sinks.kafka.client import IdleClients, idle_checkers
from sinks.kafka.options import DEFAULT_TRANSACTIONAL_ID_PREFIX, KafkaOptions, transactional_id
from sinks.kafka.sink import Columns, KafkaSink, KafkaSinkDataSource
from tests.readme import DOCS, python_block

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


# --------------------------------------------------------------------------------------------- helpers


def _name(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:8]}"


def impulse(spark, limit: int, per_trigger: int | None = None, **options):
    reader = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("startTime", "0")
              .option("limit", limit).option("numPartitions", 2))
    if per_trigger:
        reader = reader.option("maxEventsPerTrigger", per_trigger)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def start(df, broker, checkpoint, trigger=None, **options):
    writer = (df.writeStream.format("kafka-sink").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("checkpointLocation", str(checkpoint)))
    for key, value in options.items():
        writer = writer.option(key, str(value))
    return writer.trigger(**(trigger or {"availableNow": True})).start()


def run(df, broker, checkpoint, **options) -> None:
    query = start(df, broker, checkpoint, **options)
    query.awaitTermination()
    assert query.exception() is None, query.exception()


def failure(df, broker, checkpoint, **options) -> str:
    """Run until the query fails; the text of its error (Python traceback included)."""
    try:
        query = start(df, broker, checkpoint, **options)
        query.awaitTermination()
    except Exception as exc:  # noqa: BLE001 - StreamingQueryException, or the error of start() itself
        return str(exc)
    raise AssertionError("the query did not fail")


def expected(limit: int, partitions: int = 2) -> list[tuple[int, int]]:
    """impulse's events (`impulse.options.split_limit` shares the limit among partitions)."""
    return expected_events(limit, partitions)


def events(broker, topic: str, isolation: str = "read_committed") -> list[tuple[int, int]]:
    """``(subtask_index, counter)`` of every record (values are the rows as JSON), duplicates kept."""
    out = []
    for message in broker.consume_all(topic, isolation=isolation):
        row = json.loads(message.value())
        out.append((row["subtask_index"], row["counter"]))
    return sorted(out)


def stable(broker, topic: str) -> bool:
    """No open transaction holds read_committed readers back: last stable offset == high watermark."""
    return broker.end_offsets(topic, "read_committed") == broker.end_offsets(topic, "read_uncommitted")


def progress(broker, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def sink_for(broker, topic: str, **options) -> KafkaSink:
    """A sink built as on the driver (for tests that drive its hooks directly)."""
    reader = OptionReader({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic, **options}, name="kafka sink")
    schema = StructType([StructField("counter", LongType()), StructField("subtask_index", LongType())])
    return KafkaSink(KafkaOptions.read(reader), Columns.of(schema))


def rows(subtask: int, first: int, end: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"counter": pa.array(range(first, end), pa.int64()),
                            "subtask_index": pa.array([subtask] * (end - first), pa.int64())})


# ----------------------------------------------------------------------------------------------- writes


@pytest.mark.floor
@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_writes_every_event_once(spark, kafka_broker, tmp_path, guarantee):
    topic = kafka_broker.create_topic(_name("basic"), partitions=2)
    commit_id = _name("q")
    run(impulse(spark, 20_000, 6_000), kafka_broker, tmp_path / "ck", topic=topic, deliveryGuarantee=guarantee,
        commitId=commit_id)
    assert events(kafka_broker, topic) == expected(20_000)
    assert events(kafka_broker, topic, "read_uncommitted") == expected(20_000)  # nothing written twice, even aborted
    assert stable(kafka_broker, topic)
    last = progress(kafka_broker, transactional_id(DEFAULT_TRANSACTIONAL_ID_PREFIX, commit_id, 0), topic)
    assert last == (4 if guarantee == "exactly_once" else -1001)  # batches 0-3 → batch id + 1; none without transactions


def test_records_without_key_go_one_record_batch_to_a_partition_in_turn(kafka_broker):
    """As the Java producer's sticky partitioner: a whole batch to one partition, the next batch to the next."""
    topic = kafka_broker.create_topic(_name("sticky"), partitions=3)
    sink = sink_for(kafka_broker, topic, deliveryGuarantee="at_least_once")
    identity = WriteIdentity(_name("q"), 0, 0, 0)
    conn = sink.open(identity)
    try:
        sink.write(conn, identity, iter([rows(0, 100 * b, 100 * (b + 1)) for b in range(7)]))
    finally:
        sink.close(conn)
    where: dict[int, set[int]] = {}
    for message in kafka_broker.consume_all(topic):
        where.setdefault(json.loads(message.value())["counter"] // 100, set()).add(message.partition())
    assert sorted(where) == list(range(7)) and all(len(p) == 1 for p in where.values())  # each batch whole
    order = [where[b].pop() for b in range(7)]
    assert order == [(order[0] + b) % 3 for b in range(7)]  # every partition in turn


def test_second_run_with_the_same_commit_id_writes_nothing(spark, kafka_broker, tmp_path):
    """A query re-created with a new checkpoint but the same commitId finds every partition committed."""
    topic = kafka_broker.create_topic(_name("rerun"), partitions=2)
    commit_id = _name("q")
    run(impulse(spark, 6_000, 2_000), kafka_broker, tmp_path / "ck1", topic=topic, commitId=commit_id)
    run(impulse(spark, 6_000, 2_000), kafka_broker, tmp_path / "ck2", topic=topic, commitId=commit_id)
    assert events(kafka_broker, topic, "read_uncommitted") == expected(6_000)


def test_progress_records_hold_the_fingerprint_and_the_driver_finds_partitions_beyond_a_count(spark, kafka_broker,
                                                                                             tmp_path):
    """Five Spark partitions commit batch 0 (the offset's metadata holds each one's input); a replay with two
    partitions would find partitions 2-4 beyond its count."""
    topic = kafka_broker.create_topic(_name("wide"), partitions=2)
    commit_id = _name("q")
    run(impulse(spark, 1_000).repartition(5), kafka_broker, tmp_path / "ck", topic=topic, commitId=commit_id)
    sink = sink_for(kafka_broker, topic)
    assert sink.committed_beyond(commit_id, 0, 2) == [2, 3, 4]
    assert sink.committed_beyond(commit_id, 0, 5) == [] and sink.committed_beyond(commit_id, 1, 2) == []
    conn = sink.open(WriteIdentity(commit_id, 0, 3, 9))
    try:
        recorded = sink.is_committed(conn, WriteIdentity(commit_id, 0, 3, 9))
    finally:
        sink.close(conn)
    assert isinstance(recorded, Fingerprint) and recorded.rows == 200


def test_key_value_topic_partition_headers_and_timestamp_columns(spark, kafka_broker, tmp_path):
    # Timestamps from 2023: without retention.ms=-1 the broker's retention check (30 s after it starts,
    # then every 5 min) may delete them before they are read back.
    keep = {"retention.ms": "-1"}
    even = kafka_broker.create_topic(_name("even"), partitions=3, config=keep)
    odd = kafka_broker.create_topic(_name("odd"), partitions=3, config=keep)
    df = impulse(spark, 4_000, 2_000).selectExpr(
        "CAST(counter AS STRING) AS key",
        "CONCAT(subtask_index, ':', counter) AS value",
        f"IF(counter % 2 = 0, '{even}', '{odd}') AS topic",
        "CAST(counter % 3 AS INT) AS partition",
        "array(named_struct('key', 'sub', 'value', CAST(CAST(subtask_index AS STRING) AS BINARY)),"
        "      named_struct('key', 'none', 'value', CAST(NULL AS BINARY))) AS headers",
        "timestamp_millis(1700000000000 + counter) AS timestamp",
    )
    run(df, kafka_broker, tmp_path / "ck", progressTopic=even)
    seen = []
    for topic, parity in ((even, 0), (odd, 1)):
        for message in kafka_broker.consume_all(topic):
            subtask, counter = map(int, message.value().decode().split(":"))
            seen.append((subtask, counter))
            assert counter % 2 == parity
            assert message.key() == str(counter).encode()
            assert message.partition() == counter % 3
            assert message.headers() == [("sub", str(subtask).encode()), ("none", None)]
            assert message.timestamp()[1] == 1_700_000_000_000 + counter
    assert sorted(seen) == expected(4_000)


def test_rows_without_value_column_are_json(spark, kafka_broker, tmp_path):
    topic = kafka_broker.create_topic(_name("json"), partitions=1)
    before_ms = int(time.time() * 1000)
    run(impulse(spark, 1_000, payloadBytes=20, interval="1ms"), kafka_broker, tmp_path / "ck", topic=topic)
    messages = kafka_broker.consume_all(topic)
    assert len(messages) == 1_000
    for message in messages:
        row = json.loads(message.value())
        assert list(row) == ["counter", "subtask_index", "timestamp", "payload"]
        counter, subtask = row["counter"], row["subtask_index"]
        assert row["timestamp"] == f"1970-01-01T00:00:{counter // 1000:02d}.{counter % 1000:03d}000Z"
        payload = base64.b64decode(row["payload"])
        assert payload[:16] == counter.to_bytes(8, "big") + subtask.to_bytes(8, "big") and len(payload) == 20
        assert message.key() is None
        assert message.timestamp()[1] >= before_ms  # produce time: the event time stays in the JSON


# ----------------------------------------------------------------------------------- failures, exactly once


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_task_retry_after_write(spark, kafka_broker, tmp_path, guarantee):
    """The task fails after its partition is in Kafka: exactly_once skips it on retry, at_least_once repeats it."""
    topic = kafka_broker.create_topic(_name("retry"), partitions=2)
    run(impulse(spark, 9_000, 3_000), kafka_broker, tmp_path / "ck", topic=topic, deliveryGuarantee=guarantee,
        faultInjection="point=after_write,action=fail,batch=1,partition=0,attempt=0")
    got = events(kafka_broker, topic)
    if guarantee == "exactly_once":
        assert got == expected(9_000)
    else:  # at least once: nothing lost; partition 0 of batch 1 (counters 1500-2999) twice
        assert sorted(set(got)) == expected(9_000) and len(got) == 9_000 + 1_500
    assert stable(kafka_broker, topic)


def test_crash_mid_write_then_restart(spark, kafka_broker, tmp_path):
    """A writer killed mid-transaction fails the query; the restart aborts its transaction and writes each event once."""
    topic = kafka_broker.create_topic(_name("crash"), partitions=2)
    text = failure(impulse(spark, 9_000, 3_000), kafka_broker, tmp_path / "ck", topic=topic,
                   **{"kafka.linger.ms": 0, "faultInjection": "point=mid_write,action=crash,batch=1,partition=0"})
    assert "batch 1" in text or "Python worker" in text or "crash" in text.lower() or "exited" in text
    run(impulse(spark, 9_000, 3_000), kafka_broker, tmp_path / "ck", topic=topic)
    assert events(kafka_broker, topic) == expected(9_000)
    assert stable(kafka_broker, topic)


def test_open_transaction_left_by_a_crashed_writer_is_aborted(spark, kafka_broker, tmp_path):
    """A producer with the partition's transactional id holds an open transaction (read_committed readers
    are stuck behind it); the query's writer fences it at once and the readers move on."""
    from confluent_kafka import KafkaException

    topic = kafka_broker.create_topic(_name("zombie"), partitions=1)
    commit_id = _name("q")
    zombie = kafka_broker.producer(transactional_id=transactional_id(DEFAULT_TRANSACTIONAL_ID_PREFIX, commit_id, 0),
                                   transaction_timeout_ms=600_000)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(5):
        zombie.produce(topic, json.dumps({"subtask_index": 99, "counter": i}).encode())
    assert zombie.flush(30) == 0
    assert kafka_broker.end_offsets(topic, "read_committed") == {0: 0}  # stalled behind the open transaction

    run(impulse(spark, 4_000, 2_000), kafka_broker, tmp_path / "ck", topic=topic, commitId=commit_id)
    assert events(kafka_broker, topic) == expected(4_000)
    assert stable(kafka_broker, topic)
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(30)
    assert fenced.value.args[0].fatal()


def test_newer_writer_with_the_same_ids_fences_the_first(kafka_broker):
    """Two writers of one (transactionalIdPrefix, commit id, partition): the one that opened last wins."""
    topic = kafka_broker.create_topic(_name("fence"), partitions=1)
    first = sink_for(kafka_broker, topic, transactionalIdPrefix="shared")
    second = sink_for(kafka_broker, topic, transactionalIdPrefix="shared")
    identity = WriteIdentity(_name("q"), 0, 0, 0)
    opened = {}

    def batches():
        yield rows(0, 0, 500)
        opened["second"] = second.open(identity)  # the other query's writer starts: it fences this one
        yield rows(0, 500, 1_000)

    conn = first.open(identity)
    assert not first.is_committed(conn, identity)
    try:
        with pytest.raises(FencedError, match="fenced"):
            first.write(conn, identity, batches())
    finally:
        first.close(conn)
    conn = opened["second"]
    try:
        assert not second.is_committed(conn, identity)
        second.write(conn, identity, iter([rows(0, 0, 1_000)]))
    finally:
        second.close(conn)
    conn = first.open(identity)
    try:
        assert first.is_committed(conn, identity)
    finally:
        first.close(conn)
    assert events(kafka_broker, topic) == [(0, c) for c in range(1_000)]
    assert set(events(kafka_broker, topic, "read_uncommitted")) == {(0, c) for c in range(1_000)}  # + aborted ones


@pytest.mark.parametrize("outage", ["restart", "kill"])
def test_broker_restart_mid_stream(spark, kafka_broker, tmp_path, outage):
    """The broker restarts (gracefully, or SIGKILL and 12 s down) while a query runs: librdkafka's and the
    protocol's retries carry it through, or it fails and a restart from the checkpoint finishes the job;
    either way each event is in Kafka once."""
    topic = kafka_broker.create_topic(_name(outage), partitions=2)
    limit = 12_000
    query = start(impulse(spark, limit, 500), kafka_broker, tmp_path / "ck", trigger={"processingTime": "200 milliseconds"},
                  topic=topic, writeRetries=8, retryBackoffMax="5s")
    try:
        wait_until(lambda: (query.lastProgress or {}).get("batchId", -1) >= 3 or not query.isActive, 180,
                   message="three committed batches")
        if outage == "restart":
            kafka_broker.restart()
        else:
            kafka_broker.kill()
            time.sleep(12)  # down across batch planning: the driver's check and the writes retry
            kafka_broker.start()

        def written() -> bool:
            if not query.isActive:
                return True
            try:
                return sum(kafka_broker.end_offsets(topic, "read_committed", timeout=10).values()) >= limit
            except Exception:  # noqa: BLE001 - broker still coming back
                return False

        wait_until(written, 300, 0.5, "all events written or the query stopped")
    finally:
        query.stop()
    run(impulse(spark, limit, 500), kafka_broker, tmp_path / "ck", topic=topic)
    assert events(kafka_broker, topic) == expected(limit)
    assert stable(kafka_broker, topic)


def test_at_least_once_survives_a_broker_restart(spark, kafka_broker, tmp_path):
    topic = kafka_broker.create_topic(_name("alo-restart"), partitions=2)
    limit = 8_000
    query = start(impulse(spark, limit, 500), kafka_broker, tmp_path / "ck", trigger={"processingTime": "200 milliseconds"},
                  topic=topic, deliveryGuarantee="at_least_once", writeRetries=8, retryBackoffMax="5s")
    try:
        wait_until(lambda: (query.lastProgress or {}).get("batchId", -1) >= 2 or not query.isActive, 180)
        kafka_broker.restart()
        wait_until(lambda: not query.isActive or _count(kafka_broker, topic) >= limit, 300, 0.5)
    finally:
        query.stop()
    run(impulse(spark, limit, 500), kafka_broker, tmp_path / "ck", topic=topic,
        deliveryGuarantee="at_least_once")
    assert sorted(set(events(kafka_broker, topic))) == expected(limit)


def _count(broker, topic: str) -> int:
    try:
        return sum(broker.end_offsets(topic, "read_uncommitted", timeout=10).values())
    except Exception:  # noqa: BLE001 - broker restarting
        return 0


# ---------------------------------------------------------------------------------------- refused writes


def test_unknown_topic_fails_with_the_brokers_reason(spark, kafka_broker, tmp_path):
    missing = _name("missing")
    text = failure(impulse(spark, 100), kafka_broker, tmp_path / "ck1", topic=missing)
    assert missing in text and "Unknown topic or partition" in text and "OptionError" in text

    existing = kafka_broker.create_topic(_name("exists"), partitions=1)
    df = impulse(spark, 100).selectExpr(f"'{missing}' AS topic", "CAST(counter AS STRING) AS value")
    text = failure(df, kafka_broker, tmp_path / "ck2", progressTopic=existing)
    assert "DeliveryError" in text and missing in text and "Unknown topic or partition" in text


def test_record_too_large_fails_with_the_brokers_reason(spark, kafka_broker, tmp_path):
    topic = kafka_broker.create_topic(_name("small"), partitions=1, config={"max.message.bytes": "1000"})
    df = impulse(spark, 100, payloadBytes=2_000).selectExpr("payload AS value")
    text = failure(df, kafka_broker, tmp_path / "ck", topic=topic, **{"kafka.compression.type": "none"})
    assert "DeliveryError" in text and f"topic '{topic}' refuses row 0 of batch 0 partition" in text
    assert "MSG_SIZE_TOO_LARGE" in text and "max.message.bytes 1000" in text and "'deadLetterTopic'" in text
    assert stable(kafka_broker, topic) and kafka_broker.consume_all(topic) == []


def test_partition_the_topic_lacks_fails_before_anything_is_written(spark, kafka_broker, tmp_path):
    topic = kafka_broker.create_topic(_name("two"), partitions=2)
    df = impulse(spark, 100).selectExpr("CAST(counter AS STRING) AS value", "CAST(counter % 3 AS INT) AS partition")
    text = failure(df, kafka_broker, tmp_path / "ck", topic=topic)
    assert "DeliveryError" in text and f"topic '{topic}' has no partition 2" in text
    assert stable(kafka_broker, topic) and kafka_broker.consume_all(topic, "read_uncommitted") == []


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_a_full_local_queue_holds_the_writer_back(spark, kafka_broker, tmp_path, guarantee):
    """A queue of 100 records for 20,000 per task: the writer waits for room, drops and reorders nothing."""
    topic = kafka_broker.create_topic(_name("queue"), partitions=1)
    df = impulse(spark, 40_000).selectExpr("CAST(subtask_index AS STRING) AS key", "to_json(struct(*)) AS value")
    run(df, kafka_broker, tmp_path / "ck", topic=topic, deliveryGuarantee=guarantee,
        **{"kafka.queue.buffering.max.messages": 100})
    got = [json.loads(m.value()) for m in kafka_broker.consume_all(topic)]
    assert sorted((e["subtask_index"], e["counter"]) for e in got) == expected(40_000)
    for subtask in (0, 1):  # each task's records in its row order
        counters = [e["counter"] for e in got if e["subtask_index"] == subtask]
        assert counters == sorted(counters)


def test_unreachable_cluster_is_named(spark, tmp_path):
    class Nowhere:
        bootstrap = f"127.0.0.1:{free_port()}"

    text = failure(impulse(spark, 10), Nowhere, tmp_path / "ck", topic="t", writeRetries=1)
    assert f"cannot reach Kafka at {Nowhere.bootstrap}" in text


@pytest.mark.parametrize("options, column_sql, word", [
    ({}, None, "'topic'"),                                                  # no topic option, no topic column
    ({"topic": "t", "deliveryGuarantee": "twice"}, None, "deliveryGuarantee"),
    ({"topic": "t", "kafka.transactional.id": "x"}, None, "transactionalIdPrefix"),
    ({"topic": "t", "transactionTimeout": "10"}, None, "transactionTimeout"),
    ({"topic": "t", "kafak.linger.ms": "1"}, None, "kafak.linger.ms"),
    ({"topic": "t", "kafka.enable.idempotence": "false"}, None, "kafka.enable.idempotence"),
    ({"topic": "t"}, "CAST(counter AS INT) AS partition, CAST(1 AS DOUBLE) AS value", "'value'"),
    ({"topic": "t"}, "CAST(counter AS STRING) AS value, 1 AS headers", "'headers'"),
])
def test_bad_options_fail_at_start(spark, kafka_broker, options, column_sql, word):
    schema = impulse(spark, 10)
    if column_sql:
        schema = schema.selectExpr(*column_sql.split(", "))
    source = KafkaSinkDataSource({"kafka.bootstrap.servers": kafka_broker.bootstrap, **options})
    with pytest.raises(OptionError) as error:
        source.streamWriter(schema.schema, False)
    assert word in str(error.value)


def test_bad_librdkafka_setting_is_an_option_error(kafka_broker):
    topic = kafka_broker.create_topic(_name("conf"), partitions=1)
    source = KafkaSinkDataSource({"kafka.bootstrap.servers": kafka_broker.bootstrap, "topic": topic,
                                  "kafka.no.such.property": "1"})

    writer = source.streamWriter(StructType([StructField("counter", LongType())]), False)
    with pytest.raises(OptionError, match="no.such.property"):
        pickle.dumps(writer)  # the query starts: Spark ships the writer to its tasks


def test_delivery_error_is_not_retried(kafka_broker):
    """A refused record is a DeliveryError (no protocol retry), and its transaction is aborted at once."""
    topic = kafka_broker.create_topic(_name("refused"), partitions=1, config={"max.message.bytes": "1000"})
    sink = sink_for(kafka_broker, topic, **{"kafka.compression.type": "none"})
    identity = WriteIdentity(_name("q"), 0, 0, 0)
    big = pa.RecordBatch.from_pydict({"value": pa.array([b"x" * 2_000], pa.binary())})
    sink.columns = Columns(value=True, key=False, topic=False, partition=False, headers=False, timestamp=False)
    conn = sink.open(identity)
    try:
        with pytest.raises(DeliveryError, match="refuses row 10 of .*MSG_SIZE_TOO_LARGE"):
            sink.write(conn, identity, iter([pa.RecordBatch.from_pydict({"value": pa.array([b"ok"] * 10, pa.binary())}), big]))
    finally:
        sink.close(conn)
    assert stable(kafka_broker, topic)


def _poison_rows(spark, limit: int, per_trigger: int):
    """impulse rows keyed ``<subtask_index>:<counter>``; every tenth (counter % 10 == 3) over 1,000 bytes."""
    return impulse(spark, limit, per_trigger).selectExpr(
        "concat(subtask_index, ':', counter) AS key",
        "CASE WHEN counter % 10 = 3 THEN repeat('x', 2000) ELSE CAST(counter AS STRING) END AS value")


def _keys(messages) -> list[tuple[int, int]]:
    return sorted(tuple(map(int, m.key().decode().split(":"))) for m in messages)


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_dead_letter_topic_takes_exactly_the_refused_records(spark, kafka_broker, tmp_path, guarantee):
    """Records over the topic's max.message.bytes go to deadLetterTopic with why and where; a crash in the middle
    of a write and the restart leave every record in one of the two topics, once (exactly_once)."""
    topic = kafka_broker.create_topic(_name("small"), partitions=2, config={"max.message.bytes": "1000"})
    dead = kafka_broker.create_topic(_name("dlq"), partitions=1)
    limit, options = 2_000, {"topic": topic, "deadLetterTopic": dead, "deliveryGuarantee": guarantee,
                              "metricsPath": str(tmp_path / "metrics.jsonl")}
    if guarantee == "exactly_once":
        failure(_poison_rows(spark, limit, 500), kafka_broker, tmp_path / "ck", **options,
                faultInjection="point=mid_write,action=crash,batch=1,partition=0")
    run(_poison_rows(spark, limit, 500), kafka_broker, tmp_path / "ck", **options)
    poisoned = [e for e in expected(limit) if e[1] % 10 == 3]
    landed, letters = kafka_broker.consume_all(topic), kafka_broker.consume_all(dead)
    if guarantee == "exactly_once":
        assert _keys(landed) == [e for e in expected(limit) if e not in poisoned]
        assert _keys(letters) == poisoned
        assert stable(kafka_broker, topic) and stable(kafka_broker, dead)
    else:  # at least once: nothing lost
        assert set(_keys(landed)) == {e for e in expected(limit) if e not in poisoned}
        assert set(_keys(letters)) == set(poisoned)
    letter = next(m for m in letters if m.key() == b"0:3")
    assert letter.value() == b"x" * 2_000
    about = {k: v.decode() for k, v in letter.headers()}
    assert about["impulse.error.code"] == "MSG_SIZE_TOO_LARGE" and "max.message.bytes 1000" in about["impulse.error.reason"]
    assert (about["impulse.topic"], about["impulse.batch"], about["impulse.partition"]) == (topic, "0", "0")
    assert about["impulse.row"] == "3"
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    counted = sum(m["deadLettered"] for m in metrics)
    if guarantee == "at_least_once":  # one run: every batch's count
        assert counted == len(poisoned)
    else:  # the partition of batch 1 committed before the crash is skipped by the restart, and counts 0
        assert 0 < counted < len(poisoned)


def test_a_compacted_topic_refuses_records_without_a_key(kafka_broker):
    topic = kafka_broker.create_topic(_name("compacted"), partitions=1, config={"cleanup.policy": "compact"})
    dead = kafka_broker.create_topic(_name("dlq"), partitions=1)
    sink = sink_for(kafka_broker, topic, deadLetterTopic=dead)
    sink.columns = Columns(value=True, key=True, topic=False, partition=False, headers=False, timestamp=False)
    identity = WriteIdentity(_name("q"), 0, 0, 0)
    conn = sink.open(identity)
    try:
        batch = pa.RecordBatch.from_pydict({"key": pa.array([b"a", None, b"c"], pa.binary()),
                                 "value": pa.array([b"1", b"2", b"3"], pa.binary())})
        assert sink.write(conn, identity, iter([batch])) == 1
    finally:
        sink.close(conn)
    assert [(m.key(), m.value()) for m in kafka_broker.consume_all(topic)] == [(b"a", b"1"), (b"c", b"3")]
    [letter] = kafka_broker.consume_all(dead)
    assert letter.key() is None and letter.value() == b"2"
    assert dict(letter.headers())["impulse.error.code"] == b"INVALID_RECORD"


def test_at_least_once_reuses_the_producer_of_a_successful_task(kafka_broker):
    """Like Spark's producer cache: the next task of a worker keeps the producer; a failed one's is dropped."""
    topic = kafka_broker.create_topic(_name("reuse"), partitions=1, config={"max.message.bytes": "1000"})
    query = _name("q")

    def task(sink: KafkaSink, batch_id: int, batch: pa.RecordBatch):
        """One task's hooks, as the protocol calls them; the producer it used."""
        identity = WriteIdentity(query, batch_id, 0, 0)
        conn = sink.open(identity)
        try:
            sink.write(conn, identity, iter([batch]))
        finally:
            sink.close(conn)
        return conn.producer

    at_least_once = sink_for(kafka_broker, topic, deliveryGuarantee="at_least_once")
    first = task(at_least_once, 0, rows(0, 0, 10))
    assert task(at_least_once, 1, rows(0, 10, 20)) is first
    too_large = pa.RecordBatch.from_pydict({"counter": pa.array([1], pa.int64()), "subtask_index": pa.array([0], pa.int64()),
                                 "pad": pa.array(["x" * 2_000])})
    with pytest.raises(DeliveryError):
        task(at_least_once, 2, too_large)
    after_failure = task(at_least_once, 3, rows(0, 20, 30))
    assert after_failure is not first
    assert events(kafka_broker, topic) == [(0, c) for c in range(30)]

    exactly_once = sink_for(kafka_broker, topic, transactionalIdPrefix=_name("eo"))
    producers = [task(exactly_once, batch_id, rows(0, 30 + batch_id, 31 + batch_id)) for batch_id in (0, 1)]
    assert producers[0] is not producers[1]  # exactly_once: a fresh producer per task, whose init fences older ones
    assert events(kafka_broker, topic) == [(0, c) for c in range(32)]


def test_idle_clients_are_taken_once_and_expire():
    now = [0.0]
    idle = IdleClients(max_idle_s=10.0, clock=lambda: now[0])
    idle.keep(("a",), "client-a")
    assert idle.take(("b",)) is None
    assert idle.take(("a",)) == "client-a" and idle.take(("a",)) is None  # one user at a time
    idle.keep(("a",), "client-a")
    now[0] = 5.0
    idle.keep(("b",), "client-b")
    now[0] = 12.0  # a: idle 12 s, dropped; b: idle 7 s, kept
    assert idle.take(("a",)) is None and idle.take(("b",)) == "client-b"


def test_check_keeps_the_client_that_answered_and_drops_one_that_failed(kafka_broker):
    """The driver's check asks the cluster every time, through one client per settings while it answers."""
    topic = kafka_broker.create_topic(_name("checked"), partitions=1)
    settings = {"deliveryGuarantee": "at_least_once", "kafka.client.id": _name("check")}
    sink = sink_for(kafka_broker, topic, **settings)
    missing = sink_for(kafka_broker, _name("missing"), **settings)
    assert missing._idle_key == sink._idle_key  # the topic is not a client setting: they share a client

    def kept():
        client = idle_checkers.take(sink._idle_key)
        if client is not None:
            idle_checkers.keep(sink._idle_key, client)
        return client

    sink.check()
    first = kept()
    assert first is not None
    sink.check()
    assert kept() is first
    with pytest.raises(OptionError, match="create it first"):
        missing.check()
    assert kept() is None
    sink.check()
    assert kept() not in (None, first)


def test_abort_after_the_topic_was_deleted_fences_without_the_topic_check(kafka_broker, caplog):
    """Spark makes a new writer to abort a batch: the driver's topic check, which fails once the topic is gone,
    must not stop the abort (it fences the failed partitions' transactional ids, which needs no topic)."""
    topic = kafka_broker.create_topic(_name("deleted"), partitions=1)
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "topic": topic, "writeRetries": "0",
               "commitId": _name("query")}
    schema = StructType([StructField("counter", LongType()), StructField("subtask_index", LongType())])

    def writer_as_spark_asks():
        return protocol.stream_writer(options, name="kafka sink",
                                      build=lambda reader: KafkaSinkDataSource(options).build(reader, schema))

    pickle.dumps(writer_as_spark_asks())  # the query started: the topic was there
    kafka_broker.delete_topic(topic)
    protocol._checked.clear()  # Spark asks for the abort's writer in a new Python process: nothing checked yet
    writer = writer_as_spark_asks()
    with caplog.at_level(logging.INFO, logger="impulse.connectors.kafka"):
        writer.abort([None], 3)
    assert not [r for r in caplog.records if "could not fence" in r.getMessage()], caplog.text
    fenced = [r.getMessage() for r in caplog.records if "fenced" in r.getMessage()]
    assert len(fenced) == 1 and "after batch 3 aborted" in fenced[0], caplog.text
    for refused in (lambda: writer.commit([None], 3), lambda: pickle.dumps(writer)):
        with pytest.raises(OptionError, match=f"'{topic}'.*create it first"):
            refused()


def test_a_sasl_client_to_a_plaintext_listener_is_named_not_reported_unreachable(kafka_broker):
    """The broker runs and answers; the SASL handshake fails: the error names the security protocol, not a broker
    that may be down."""
    topic = kafka_broker.create_topic(_name("sasl"), partitions=1)
    sink = sink_for(kafka_broker, topic, **{"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                                            "kafka.sasl.username": "user", "kafka.sasl.password": "secret"})
    with pytest.raises(OptionError) as err:
        sink.check()
    message = str(err.value)
    assert err.value.option == "kafka.security.protocol" and "'SASL_PLAINTEXT'" in message, message
    assert "SASL" in message.split("handshake failed (")[1] and "is the broker running" not in message, message
    sink_for(kafka_broker, topic).check()  # the same broker, PLAINTEXT: it was running all along


def test_the_readme_kafka_blocks_run(spark, kafka_broker, tmp_path):
    """The README's Kafka sink blocks as written (the broker's address, a topic name and a checkpoint of the test's
    own filled in): the AdminClient block makes the topic with 4 partitions, the stream block writes into it."""
    page = DOCS / "how-to" / "kafka-sink.md"
    stream, create = python_block("## A stream into a topic", page=page), python_block("## Create the topic", page=page)
    topic = _name("events")

    def filled(block: str) -> str:
        return (block.replace("localhost:9092", kafka_broker.bootstrap).replace('"events"', f'"{topic}"')
                .replace("/tmp/ck-kafka", str(tmp_path / "ck")))

    namespace: dict = {}
    before = {q.id for q in spark.streams.active}
    for block in (python_block("## Register the formats", page=DOCS / "how-to" / "install.md"), create, stream):
        exec(compile(filled(block), "README.md", "exec"), namespace)  # noqa: S102 - the README's own examples
    queries = [q for q in spark.streams.active if q.id not in before]  # the block starts one, unassigned
    assert len(queries) == 1
    try:
        assert len(kafka_broker.end_offsets(topic)) == 4
        wait_until(lambda: sum(kafka_broker.end_offsets(topic).values()) > 0, 120, 0.5, "records in the topic")
    finally:
        for q in queries:
            q.stop()
    message = kafka_broker.consume_all(topic)[0]
    row = json.loads(message.value())
    assert message.key().decode() == str(row["subtask_index"]) and {"counter", "timestamp"} <= set(row)
