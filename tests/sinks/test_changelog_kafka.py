"""A changelog applied to Kafka by the kafka-sink: a delete is a tombstone (a null value), as with Spark's own
sink, each key's changes land in order on one partition, and the compacted view is the changelog's final state."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.impulse.test_changelog_stream import final_state

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

SCHEMA = "subtask_index BIGINT, counter BIGINT, id BIGINT, op STRING, balance DOUBLE"
OPTIONS = {"eventsPerSecond": "1000000", "startTime": "0", "numPartitions": "2", "limit": "6000",
           "maxEventsPerTrigger": "2500", "changelog.key": "id", "changelog.weights": "1,3,1",
           "changelog.liveKeys": "50", "fields.balance.kind": "normal", "fields.balance.mean": "100"}
TO_KAFKA = ("CAST(id AS STRING) AS key",
            "CASE WHEN op = 'delete' THEN NULL ELSE to_json(named_struct('balance', balance)) END AS value")


def test_deletes_are_tombstones_and_the_compacted_topic_is_the_final_state(spark, kafka_broker, tmp_path):
    topic = kafka_broker.create_topic(f"changelog-{uuid.uuid4().hex[:8]}", partitions=3)
    query = (spark.readStream.format("impulse").schema(SCHEMA).options(**OPTIONS).load().selectExpr(*TO_KAFKA)
             .writeStream.format("kafka-sink").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
             .option("topic", topic).option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True)
             .start())
    assert query.awaitTermination(180) and query.exception() is None, query.exception()
    messages = kafka_broker.consume_all(topic)
    batch = sorted(tuple(r) for r in spark.read.format("impulse").schema(SCHEMA).options(**OPTIONS).load().collect())
    assert len(messages) == len(batch) == 6000
    landed: dict[int, list] = {}
    for m in messages:
        value = None if m.value() is None else json.loads(m.value())["balance"]
        landed.setdefault(int(m.key()), []).append((m.partition(), value))
    expected: dict[int, list] = {}
    for subtask, counter, key, op, balance in batch:  # sorted: each key's changes in counter order
        expected.setdefault(key, []).append(None if op == "delete" else balance)
    assert {k: [v for _, v in changes] for k, changes in landed.items()} == expected  # in order, deletes null
    assert all(len({p for p, _ in changes}) == 1 for changes in landed.values())  # one partition per key
    assert sum(v is None for changes in expected.values() for v in changes) > 0
    compacted = {k: changes[-1][1] for k, changes in landed.items() if changes[-1][1] is not None}
    assert compacted == {k: v[0] for k, v in final_state(batch).items()}
