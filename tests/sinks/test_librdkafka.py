"""`sinks.kafka.librdkafka.ArrowProducer` against a real broker: what lands, in what order, and how it fails."""

from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from sinks.kafka.librdkafka import ArrowProducer

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _topic(broker, partitions: int = 1, **config: str) -> str:
    return broker.create_topic(f"rdk-{uuid.uuid4().hex[:8]}", partitions=partitions, config=config)


@pytest.fixture
def producer(kafka_broker):
    made = []

    def make(**config) -> ArrowProducer:
        made.append(ArrowProducer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 5, **config}))
        return made[-1]

    yield make
    for p in made:
        p.close()


def test_values_keys_and_nulls_land_in_row_order(kafka_broker, producer):
    topic = _topic(kafka_broker)
    values = pa.array([b"a", None, b"", "ü".encode()] + [b"v%d" % i for i in range(996)], pa.binary())
    keys = pa.array([None, b"k1", b"k2", None] + [b"k"] * 996, pa.binary())
    p = producer()
    p.produce(topic, values.slice(1), keys.slice(1))  # a slice: buffers start before the array does
    assert p.flush(10) == 0 and p.failures == []
    got = kafka_broker.consume_all(topic)
    assert [m.value() for m in got] == values.slice(1).to_pylist()  # None: a tombstone, b"": an empty value
    assert [m.key() for m in got] == keys.slice(1).to_pylist()


def test_a_full_queue_waits_and_keeps_order(kafka_broker, producer):
    topic = _topic(kafka_broker)
    p = producer(**{"queue.buffering.max.messages": 100})
    values = pa.array([str(i).encode() for i in range(5_000)], pa.binary())
    p.produce(topic, values)  # 50 times the queue: produce_batch refuses the tail, the producer waits
    assert p.flush(10) == 0 and p.failures == []
    assert [int(m.value()) for m in kafka_broker.consume_all(topic)] == list(range(5_000))


def test_explicit_partitions_and_the_java_partitioner(kafka_broker, producer):
    topic = _topic(kafka_broker, partitions=3)
    p = producer(partitioner="murmur2_random")
    keys = pa.array([b"user-%d" % i for i in range(60)], pa.binary())
    partitions = np.array([i % 3 if i < 30 else -1 for i in range(60)], np.int32)  # -1: by key
    p.produce(topic, keys, keys, partitions)
    assert p.flush(10) == 0
    landed = {m.key(): m.partition() for m in kafka_broker.consume_all(topic)}
    assert len(landed) == 60
    for i, key in enumerate(keys.to_pylist()):
        assert landed[key] == (i % 3 if i < 30 else (_murmur2(key) & 0x7FFFFFFF) % 3)


def test_one_partition_for_a_whole_call(kafka_broker, producer):
    topic = _topic(kafka_broker, partitions=3)
    p = producer()
    assert p.topic_error(topic, 10) is None and p.partition_count(topic) == 3
    values = pa.array([str(i).encode() for i in range(3_000)], pa.binary())
    p.produce(topic, values, None, None, 2)
    with pytest.raises(KafkaException) as refused:  # refused before anything is enqueued
        p.produce(topic, values, None, None, 3)
    assert refused.value.args[0].name() == "_UNKNOWN_PARTITION" and "no partition 3" in refused.value.args[0].str()
    with pytest.raises(ValueError):
        p.produce(topic, values, None, np.zeros(3_000, np.int32), 1)
    assert p.flush(10) == 0 and p.failures == []
    got = kafka_broker.consume_all(topic)
    assert {m.partition() for m in got} == {2}
    assert [int(m.value()) for m in got] == list(range(3_000))


def test_timestamps_and_headers(kafka_broker, producer):
    topic = _topic(kafka_broker, **{"retention.ms": "-1"})
    p = producer()
    values = pa.array([b"h0", b"h1", None], pa.binary())
    headers = [[("a", b"1"), ("a", b"2"), ("none", None)], None, [("b", b"")]]
    p.produce_each(topic, values, pa.array([b"k", None, b"k"], pa.binary()), None,
                   np.array([1_700_000_000_123, 0, 5], np.int64), headers)
    assert p.flush(10) == 0
    got = kafka_broker.consume_all(topic)
    assert [m.value() for m in got] == [b"h0", b"h1", None]
    assert [m.headers() for m in got] == headers
    assert got[0].timestamp()[1] == 1_700_000_000_123 and got[2].timestamp()[1] == 5
    assert got[1].timestamp()[1] > 1_700_000_000_123  # 0: the time it was produced


def test_a_record_refused_at_once_raises(kafka_broker, producer):
    topic = _topic(kafka_broker, partitions=2)
    p = producer()
    assert p.topic_error(topic, 10) is None  # as the sink does first: the partition count is known
    with pytest.raises(KafkaException) as refused:  # before anything is enqueued
        p.produce(topic, pa.array([b"a", b"b"], pa.binary()), None, np.array([0, 7], np.int32))
    assert refused.value.args[0].name() == "_UNKNOWN_PARTITION" and "record 1 of 2" in refused.value.args[0].str()
    # over message.max.bytes (1 MB), between two records taken: refused alone, named by its index and code
    assert p.produce(topic, pa.array([b"x", b"y" * 2_000_000, b"z"], pa.binary()), None,
                     np.array([0, 0, 1], np.int32)) == [(1, 10)]
    assert p.flush(10) == 0
    assert sorted(m.value() for m in kafka_broker.consume_all(topic)) == [b"x", b"z"]  # nothing twice


def test_a_record_the_broker_refuses_is_a_failure(kafka_broker, producer):
    topic = _topic(kafka_broker, **{"max.message.bytes": "1000"})
    p = producer()
    # under the client's limit, over the topic's: the failure names the row given
    p.produce(topic, pa.array([b"x" * 5_000], pa.binary()), rows=np.array([41], np.uint64))
    p.flush(10)
    assert [(err.name(), t, partition, row) for err, t, partition, row in p.failures] == [
        ("MSG_SIZE_TOO_LARGE", topic, 0, 41)]


def test_topic_error(kafka_broker, producer):
    p = producer()
    assert p.topic_error(_topic(kafka_broker), 10) is None
    assert "Unknown topic" in p.topic_error(f"missing-{uuid.uuid4().hex[:8]}", 10)


def test_transaction_commits_data_and_progress_and_a_newer_producer_fences(kafka_broker, producer):
    topic = _topic(kafka_broker)
    txid = f"rdk-tx-{uuid.uuid4().hex[:8]}"
    first = producer(**{"transactional.id": txid})
    first.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, pa.array([b"t1", b"t2"], pa.binary()))
    first.send_offsets_to_transaction(topic, 0, 42, txid, 30)
    first.commit_transaction(30)

    second = producer(**{"transactional.id": txid})
    second.init_transactions(30)
    first.begin_transaction()
    first.produce(topic, pa.array([b"zombie"], pa.binary()))
    with pytest.raises(KafkaException) as fenced:
        first.commit_transaction(30)
    assert fenced.value.args[0].fatal()
    assert first.fatal_error() is not None and first.fatal_error().fatal()

    assert [m.value() for m in kafka_broker.consume_all(topic)] == [b"t1", b"t2"]
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": txid})
    try:
        assert consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 42
    finally:
        consumer.close()


def test_bad_setting_is_refused():
    with pytest.raises(KafkaException) as refused:
        ArrowProducer({"bootstrap.servers": "127.0.0.1:1", "no.such.property": 1})
    assert "no.such.property" in refused.value.args[0].str()


def _murmur2(data: bytes) -> int:
    """Kafka's Java ``Utils.murmur2`` (the default partitioner's hash), as an unsigned 32-bit value."""
    m, length = 0x5BD1E995, len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        h = ((h * m) & 0xFFFFFFFF) ^ ((k * m) & 0xFFFFFFFF)
    tail = data[length - length % 4:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h = ((h ^ tail[0]) * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)
