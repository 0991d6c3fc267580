"""``--check`` of rows with a ``value`` column written by kafka-sink: the column is the record's value itself
(``value.format=raw``, the default), so the check compares that column, as it does for Spark's ``kafka`` sink.

This is what a ``--via`` pipeline without ``--decode`` writes: the Kafka source's columns (``value``, ``offset``,
``timestamp`` …) passed on to kafka-sink.
"""

from __future__ import annotations

import json
import uuid

import pytest
from pyspark.sql import functions as F

from impulse.loadtest.check.judge import judge
from impulse.loadtest.check.readback import readback

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _rows(spark, n: int):
    """`n` rows shaped like the Kafka source's: a JSON event as a binary ``value``, its ``offset`` and ``timestamp``."""
    events = [(json.dumps({"counter": i, "subtask_index": i % 2}).encode(), i, i * 1_000) for i in range(n)]
    return (spark.createDataFrame(events, "value binary, offset long, ts long")
            .select("value", "offset", F.timestamp_millis("ts").alias("timestamp")))


def test_a_value_column_is_compared_as_the_record_value_and_a_lost_one_is_counted(spark, kafka_broker):
    topic = f"value-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "topic": topic}
    reader = readback("kafka-sink", options, "append")
    reader.prepare()
    rows = _rows(spark, 40)
    rows.write.format("kafka-sink").options(**options).mode("append").save()

    result = judge(spark, rows, reader, "append", None, None)
    assert result.passed and result.expected == result.delivered == 40, result

    more = rows.unionByName(_rows(spark, 41).where("offset = 40"))  # one expected row that never landed
    missing = judge(spark, more, reader, "append", None, None)
    assert not missing.passed and (missing.lost, missing.duplicated, missing.unexpected) == (1, 0, 0), missing
