"""Debezium change events through Kafka: the impulse source's envelope written by kafka-sink as debezium-json (with
and without the schema/payload wrapper), read back with a real consumer and Spark's from_json over Debezium's
envelope schema: every event once, equal to the batch read, a tombstone right after each delete, and the compacted
topic holding the changelog's final state."""

from __future__ import annotations

import uuid

import pytest
from pyspark.sql import functions as F

from tests.sinks.debezium_readback import OPTIONS, PAYLOAD

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


@pytest.mark.parametrize("schemas_enable", ["true", "false"])
def test_debezium_json_reads_back_as_the_changelog(spark, kafka_broker, tmp_path, schemas_enable):
    topic = kafka_broker.create_topic(f"dbz-{uuid.uuid4().hex[:8]}", partitions=3)
    query = (spark.readStream.format("impulse").options(**OPTIONS).load()
             .writeStream.format("kafka-sink").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
             .option("topic", topic).option("value.format", "debezium-json").option("schemas.enable", schemas_enable)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert query.awaitTermination(180) and query.exception() is None, query.exception()
    messages = kafka_broker.consume_all(topic)
    events = [r.asDict(recursive=True) for r in spark.read.format("impulse").options(**OPTIONS).load().collect()]
    deletes = sum(e["op"] == "d" for e in events)
    assert len(events) == 1200 and deletes > 0 and {e["op"] for e in events} == {"r", "c", "u", "d"}
    assert len(messages) == len(events) + deletes

    wrapped = schemas_enable == "true"
    key_schema = "payload STRUCT<id BIGINT>" if wrapped else "id BIGINT"
    value_schema = f"payload STRUCT<{PAYLOAD}>" if wrapped else PAYLOAD
    sent = spark.createDataFrame(
        [(m.key().decode(), None if m.value() is None else m.value().decode(), m.partition(), m.offset())
         for m in messages], "key STRING, value STRING, partition INT, offset BIGINT")
    parsed = sent.select(F.from_json("key", key_schema).alias("k"), F.from_json("value", value_schema).alias("v"),
                         "value", "partition", "offset")
    if wrapped:
        parsed = parsed.select(F.col("k.payload").alias("k"), F.col("v.payload").alias("v"), "value", "partition",
                               "offset")
    rows = sorted(parsed.collect(), key=lambda r: (r["partition"], r["offset"]))
    by_pos = {}
    previous = None
    for row in rows:
        key = row["k"]["id"]
        if row["value"] is None:  # a tombstone: right after its key's delete
            assert previous is not None and previous["v"]["op"] == "d" and previous["k"]["id"] == key
            assert (previous["partition"], previous["offset"] + 1) == (row["partition"], row["offset"])
        else:
            value = row["v"].asDict(recursive=True)
            by_pos[value["source"]["pos"]] = {"key": {"id": key}, **value}
        previous = row
    assert by_pos == {e["source"]["pos"]: e for e in events}

    final: dict[int, dict] = {}  # the changelog's final state: each key's last event
    for event in sorted(events, key=lambda e: e["source"]["pos"]):
        final[event["key"]["id"]] = event["after"]
    compacted: dict[int, object] = {}  # what a compacted topic keeps: each key's last record
    for row in rows:
        after = None if row["value"] is None else row["v"]["after"]  # a delete's after is null too
        compacted[row["k"]["id"]] = None if after is None else after.asDict()
    assert {k: v for k, v in compacted.items() if v is not None} == {k: v for k, v in final.items() if v is not None}
