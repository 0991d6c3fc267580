"""A CDC pipeline through a crash: a Debezium topic (kafka-sink, debezium-json) read by Spark's Kafka source and
MERGEd into a Redis hash by the user's foreachBatch (`tests.sinks.cdc_merge_driver`), its driver SIGKILLed
mid-batch and restarted from its checkpoint, leaves exactly the changelog's final state per key: each live key's
last ``after``, the deleted keys gone (computed here from a batch read of the same options)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from connectors.session import kafka_package
from tests.sinks.debezium_readback import OPTIONS as READBACK
from tests.sinks.poison_driver import kill_driver_mid_batch

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.redis, pytest.mark.slow]

# the read-back tests' accounts, cut mid-way through a round of keys (1,200 events end with every key deleted)
OPTIONS = {**READBACK, "limit": "1130"}
PER_TRIGGER = 250   # Kafka records a micro-batch: the topic's ~1,350 records take 6 (the kill comes after 2)


def final_state(spark) -> tuple[dict[str, dict], int]:
    """Each live key's last ``after`` (by ``source.pos``), from the batch read: id (as text) → the row image; and
    how many keys the changelog had."""
    events = [r.asDict(recursive=True) for r in spark.read.format("impulse").options(**OPTIONS).load().collect()]
    last: dict[int, dict] = {}
    for event in sorted(events, key=lambda e: e["source"]["pos"]):
        last[event["key"]["id"]] = event
    return {str(k): e["after"] for k, e in last.items() if e["op"] != "d"}, len(last)


def test_a_merge_pipeline_killed_and_restarted_ends_at_the_changelogs_final_state(spark, kafka_broker, redis_server,
                                                                                   tmp_path):
    topic = kafka_broker.create_topic(f"cdc-{uuid.uuid4().hex[:8]}", partitions=2)
    query = (spark.readStream.format("impulse").options(**OPTIONS).load()
             .writeStream.format("kafka-sink").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
             .option("topic", topic).option("value.format", "debezium-json")
             .option("checkpointLocation", str(tmp_path / "ck-topic")).trigger(availableNow=True).start())
    assert query.awaitTermination(180) and query.exception() is None, query.exception()
    records = len(kafka_broker.consume_all(topic))

    checkpoint = tmp_path / "ck"
    args = {"bootstrap": kafka_broker.bootstrap, "topic": topic, "url": redis_server.url,
            "hash": f"accounts-{uuid.uuid4().hex[:8]}", "checkpoint": str(checkpoint), "perTrigger": PER_TRIGGER,
            "package": kafka_package()}
    command = [sys.executable, "-m", "tests.sinks.cdc_merge_driver", json.dumps(args)]
    kill_driver_mid_batch(command, checkpoint, -(-records // PER_TRIGGER))
    restarted = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert restarted.returncode == 0, restarted.stderr[-3000:]

    expected, keys = final_state(spark)
    table = {k.decode(): json.loads(v) for k, v in redis_server.client().hgetall(args["hash"]).items()}
    assert 0 < len(expected) < keys   # live keys and deleted ones: a pipeline ignoring deletes fails
    assert table == expected
