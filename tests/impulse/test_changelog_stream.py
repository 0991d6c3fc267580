"""A changelog stream through Spark: stopped and restarted, it ends in the state computed from the batch read."""

from __future__ import annotations

import pytest

from tests.impulse.helpers import committed_batches, poll_query

pytestmark = pytest.mark.integration

SCHEMA = "subtask_index BIGINT, counter BIGINT, id BIGINT, op STRING, balance DOUBLE"
OPTIONS = {"eventsPerSecond": "1000000", "startTime": "0", "numPartitions": "3", "limit": "30000",
           "maxEventsPerTrigger": "4000", "seed": "4", "changelog.key": "id", "changelog.weights": "20,70,10",
           "changelog.liveKeys": "100", "fields.balance.kind": "normal", "fields.balance.mean": "100"}


def final_state(rows) -> dict[int, tuple]:
    """Apply changes (subtask_index, counter, id, op, balance) in counter order per partition: the state of every key."""
    state: dict[int, tuple] = {}
    for subtask, counter, key, op, balance in sorted(rows):
        if op == "delete":
            del state[key]  # a delete finds its key: never changed after, inserted before
        else:
            assert (op == "insert") == (key not in state), (key, op)
            state[key] = (balance,)
    return state


class Recorder:
    """foreachBatch: the rows of each batch id (a replay counted once)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[tuple]] = {}

    def __call__(self, df, batch_id: int) -> None:
        self.batches.setdefault(batch_id, [tuple(r) for r in df.selectExpr(*COLUMNS).collect()])

    def rows(self) -> list[tuple]:
        return [row for rows in self.batches.values() for row in rows]


COLUMNS = ["subtask_index", "counter", "id", "op", "balance"]


def test_the_state_after_a_restart_equals_the_state_of_the_batch_read(spark, tmp_path):
    checkpoint, recorder = tmp_path / "ck", Recorder()
    reader = spark.readStream.format("impulse").schema(SCHEMA).options(**OPTIONS)
    query = (reader.load().writeStream.foreachBatch(recorder).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="0 seconds").start())
    try:
        poll_query(query, lambda: len(committed_batches(checkpoint)) >= 2, what="2 committed batches")
    finally:
        query.stop()
    assert 0 < len(recorder.rows()) < 30_000
    query = (reader.load().writeStream.foreachBatch(recorder).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180) and query.exception() is None
    batch = [tuple(r) for r in spark.read.format("impulse").schema(SCHEMA).options(**OPTIONS).load()
             .selectExpr(*COLUMNS).collect()]
    assert sorted(recorder.rows()) == sorted(batch) and len(batch) == 30_000
    state = final_state(recorder.rows())
    assert state == final_state(batch) and 0 < len(state) < 30_000
