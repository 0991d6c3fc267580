"""Redelivered duplicates through Spark: a stream stopped and restarted from its checkpoint delivers exactly the
rows of the batch read, copies included (each the very same row as its original)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.impulse.helpers import committed_batches, poll_query

pytestmark = pytest.mark.integration

SCHEMA = "subtask_index BIGINT, counter BIGINT, timestamp TIMESTAMP, amount DOUBLE"
OPTIONS = {"eventsPerSecond": "1000000", "startTime": "0", "numPartitions": "2", "limit": "6000",
           "maxEventsPerTrigger": "1000", "seed": "5", "duplicateRate": "0.1", "duplicateDelay": "100us"}
COLUMNS = ["subtask_index", "counter", "timestamp", "amount"]


class Recorder:
    """foreachBatch: the rows of each batch id (a replay counted once)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple]] = {}

    def __call__(self, df, batch_id: int) -> None:
        self.batches.setdefault(batch_id, [tuple(r) for r in df.collect()])

    def rows(self) -> list[tuple]:
        return [row for rows in self.batches.values() for row in rows]


def test_a_restarted_stream_delivers_the_batch_reads_copies(spark, tmp_path):
    checkpoint, recorder = tmp_path / "ck", Recorder()
    reader = spark.readStream.format("impulse").schema(SCHEMA).options(**OPTIONS)
    query = (reader.load().selectExpr(*COLUMNS).writeStream.foreachBatch(recorder)
             .option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds").start())
    try:
        poll_query(query, lambda: len(committed_batches(checkpoint)) >= 2, what="2 committed batches")
    finally:
        query.stop()
    query = (reader.load().selectExpr(*COLUMNS).writeStream.foreachBatch(recorder)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert query.awaitTermination(180) and query.exception() is None
    frame = spark.read.format("impulse").schema(SCHEMA).options(**OPTIONS).load()
    batch = [tuple(r) for r in frame.selectExpr(*COLUMNS).collect()]
    assert Counter(recorder.rows()) == Counter(batch)
    copies = len(batch) - 6000
    assert 6000 * 0.1 - 5 * 23.3 < copies < 6000 * 0.1 + 5 * 23.3  # binomial: σ = √(6000·0.1·0.9) ≈ 23.3
    assert len(set(batch)) == 6000  # a copy is the very same row
    assert frame.dropDuplicates(["subtask_index", "counter"]).count() == 6000
