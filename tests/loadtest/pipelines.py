"""Users' pipelines for the harness tests (``--transform tests.loadtest.pipelines:NAME``): each a function of the
events DataFrame, returning the DataFrame to write; and the writers and readers of --foreach-batch and --check-read."""

from __future__ import annotations

import os
import signal

from pyspark.sql import functions as F


def evens(events):
    """A filter and a projection."""
    return events.where(F.col("counter") % 2 == 0).select("counter", "subtask_index", "timestamp")


def per_second(events):
    """A windowed aggregation with a watermark: events per 1-second window and partition (final once the watermark
    passed the window's end)."""
    return (events.withWatermark("timestamp", "1 second")
            .groupBy(F.window("timestamp", "1 second"), "subtask_index").agg(F.count(F.lit(1)).alias("events"))
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "subtask_index", "events"))


def joined_with_itself(events):
    """A stream-stream inner join: the events divisible by 2 with those divisible by 3, within a second."""
    timed = events.withWatermark("timestamp", "2 seconds")
    left = timed.where(F.col("counter") % 2 == 0).select("subtask_index", "counter", F.col("timestamp").alias("lt"))
    right = timed.where(F.col("counter") % 3 == 0).select(F.col("subtask_index").alias("rs"),
                                                          F.col("counter").alias("rc"), F.col("timestamp").alias("rt"))
    return (left.join(right, F.expr("subtask_index = rs AND counter = rc AND rt BETWEEN lt AND lt + INTERVAL 1 SECOND"))
            .select("subtask_index", "counter"))


def loses_and_duplicates(events):
    """A buggy pipeline that goes wrong in the stream only (as a bug a micro-batch boundary triggers would): it
    drops the events whose counter % 50 is 7, writes those at 11 twice and those at 13 with a wrong counter."""
    if not events.isStreaming:
        return events.select("subtask_index", "counter")
    kept = events.where(F.col("counter") % 50 != 7)
    twice = kept.where(F.col("counter") % 50 == 11)
    return (kept.unionByName(twice).select(
        "subtask_index", F.when(F.col("counter") % 50 == 13, -F.col("counter")).otherwise(F.col("counter"))
        .alias("counter")))


def raises(events):
    return events.select(1 / 0)


def returns_a_number(events):
    return 42


def returns_a_batch_frame(events):
    return events.sparkSession.range(3)


def returns_none(events):
    events.select("counter")  # forgot the return


def pairs_once(events):
    """Deduplication the streaming way (Spark runs dropDuplicatesWithinWatermark on streams only): each key
    ``counter DIV 2`` once; its four events (counters 2k and 2k+1 of both partitions) are scheduled within a few
    milliseconds, well inside the 5-second watermark, so the stream drops the same duplicates one micro-batch does."""
    return (events.withColumn("k", F.expr("counter DIV 2")).withWatermark("timestamp", "5 seconds")
            .dropDuplicatesWithinWatermark(["k"]).select("k"))


def pairs_once_forgetting(events):
    """A dedup bug that shows after the first micro-batch only: key ``counter % 10`` recurs every 10 events of a
    partition, but a watermark delay of 0 lets Spark forget each key once a micro-batch has passed it, so every
    later micro-batch writes the ten keys again; one micro-batch holding every event writes each key once."""
    return (events.withColumn("k", F.col("counter") % 10).withWatermark("timestamp", "0 seconds")
            .dropDuplicatesWithinWatermark(["k"]).select("k"))


def in_kilometres(events):
    """A unit conversion with a bug its batch run shares: the counter (metres) in kilometres, divided by 100."""
    return events.select("subtask_index", "counter", (F.col("counter") / 100).alias("km"))


def in_kilometres_fixed(events):
    """The conversion done right: metres / 1000."""
    return events.select("subtask_index", "counter", (F.col("counter") / 1000).alias("km"))


def in_kilometres_expected(events):
    """``--expect`` for the conversions, in pandas: the right answer, computed apart from the query."""
    rows = events.select("subtask_index", "counter").toPandas()
    rows["km"] = rows["counter"] / 1000
    return rows


def in_kilometres_wrong_columns(events):
    """A bad ``--expect``: rows whose columns are not the output's."""
    return [{"subtask_index": 0, "metres": 1}]


def forgets_to_dedup(events):
    """A stage meant to dedup redelivered events that passes them through, copies included."""
    return events.select("subtask_index", "counter", "timestamp")


def dedups(events):
    """A dedup stage: each (subtask_index, counter) once, within a watermark longer than the redelivery delay."""
    return (events.withWatermark("timestamp", "2 seconds").dropDuplicatesWithinWatermark(["subtask_index", "counter"])
            .select("subtask_index", "counter", "timestamp"))


# ------------------------------------------------------------ --foreach-batch writers and --check-read readers
# (the target directory from the environment: foreachBatch runs on the driver, where the test set it)


def _target() -> str:
    return os.environ["IMPULSE_TEST_FOREACH_TARGET"]


def append_to_parquet(batch_df, batch_id):
    """Each micro-batch appended to the Parquet directory (idempotent only as long as no batch is retried)."""
    batch_df.write.mode("append").parquet(_target())


def append_twice(batch_df, batch_id):
    """A wrong writer: every micro-batch appended twice."""
    batch_df.write.mode("append").parquet(_target())
    batch_df.write.mode("append").parquet(_target())


def overwrite_parquet(batch_df, batch_id):
    """An upsert target the simple way: complete mode's whole state replaces the directory each micro-batch."""
    batch_df.write.mode("overwrite").parquet(_target())


def one_argument(batch_df):
    """Not a foreachBatch function: it takes no batch id."""


def read_parquet(spark):
    """--check-read: the target directory as a DataFrame."""
    return spark.read.parquet(_target())


# ------------------------------------------------------------ Delta Lake targets (tests/loadtest/test_delta.py)


def merge_into_delta(batch_df, batch_id):
    """A MERGE upsert of ``per_second``'s windows into the Delta table at the target path, per (window_start,
    subtask_index): idempotent, so a replayed batch leaves the table as it was."""
    path = _target()
    spark = batch_df.sparkSession
    if not os.path.isdir(os.path.join(path, "_delta_log")):
        batch_df.limit(0).write.format("delta").mode("ignore").save(path)
    batch_df.createOrReplaceTempView("impulse_merge_updates")
    spark.sql(f"MERGE INTO delta.`{path}` AS t USING impulse_merge_updates AS s "
              "ON t.window_start = s.window_start AND t.subtask_index = s.subtask_index "
              "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


def read_delta(spark):
    """--check-read: the Delta table at the target path."""
    return spark.read.format("delta").load(_target())


def append_then_die(batch_df, batch_id):
    """A deliberately non-idempotent writer: each micro-batch appended to the Parquet directory; with
    ``IMPULSE_TEST_DIE`` set, the driver kills itself (SIGKILL) right after appending the first batch with rows,
    before Spark commits it, so a rerun from the checkpoint replays that batch and appends its rows again."""
    batch_df.write.mode("append").parquet(_target())
    if os.environ.get("IMPULSE_TEST_DIE") and batch_df.count() > 0:
        os.kill(os.getpid(), signal.SIGKILL)
