"""The impulse source in Spark queries on the shared local session: bounded streams, batch reads, options.

Every query here starts in the past (``startTime``) with a limit and ``Trigger.AvailableNow``, so it is
fast and its rows are exactly known.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from pyspark.sql.functions import window

from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from tests.impulse.helpers import impulse, rows, run_available_now, unique

pytestmark = pytest.mark.integration

START_ISO = "2026-01-01T00:00:00Z"
START_US = 1_767_225_600_000_000


def expected_payload(counter: int, subtask: int, size: int) -> bytes:
    head = counter.to_bytes(8, "big") + subtask.to_bytes(8, "big")
    return (head + b"impulse." * (size // 8 + 1))[:size]


def per_partition_counts(spark, table: str) -> dict[int, int]:
    return {r[0]: r[1] for r in spark.sql(f"SELECT subtask_index, count(*) FROM {table} GROUP BY 1").collect()}


def test_schema_of_the_stream(spark):
    schema = impulse(spark, delay="1ms", payloadBytes=4).schema
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in schema] == [
        ("counter", "bigint", False), ("subtask_index", "bigint", False), ("timestamp", "timestamp", False),
        ("payload", "binary", False)]
    assert impulse(spark, delay="1ms").schema.fieldNames() == ["counter", "subtask_index", "timestamp"]


def test_limit_is_split_with_the_remainder_to_the_lowest_partitions(spark):
    table, _ = run_available_now(spark, delay="1ms", numPartitions=4, limit=1002, startTime=0)
    got = rows(spark, table, "counter, subtask_index")
    limits = ImpulseOptions.from_options({"delay": "1ms", "numPartitions": "4", "limit": "1002"}).limits
    assert limits == (251, 251, 250, 250)
    assert got == sorted((c, i) for i, n in enumerate(limits) for c in range(n))  # no gap, no duplicate


def test_limit_per_partition(spark):
    table, _ = run_available_now(spark, eventsPerSecond=1000, numPartitions=3, limitPerPartition=77, startTime=0)
    assert per_partition_counts(spark, table) == {0: 77, 1: 77, 2: 77}
    assert spark.sql(f"SELECT max(counter) FROM {table}").first()[0] == 76


def test_max_events_per_trigger_bounds_every_micro_batch_and_all_rows_arrive(spark):
    table, query = run_available_now(spark, delay="1us", numPartitions=3, limit=1000, startTime=0, maxEventsPerTrigger=150)
    sizes = [p.numInputRows for p in query.recentProgress if p.numInputRows]
    assert all(s <= 150 for s in sizes) and sum(sizes) == 1000 and len(sizes) == 7
    assert len(rows(spark, table, "counter, subtask_index")) == len(set(rows(spark, table, "counter, subtask_index"))) == 1000


def test_available_now_ends_the_query_when_the_limit_is_reached(spark):
    table, query = run_available_now(spark, eventsPerSecond=100_000, numPartitions=2, limit=5000, startTime=0)
    assert not query.isActive
    end = json.loads(query.recentProgress[-1].sources[0].endOffset)
    assert end["counters"] == [2500, 2500]
    assert spark.sql(f"SELECT count(*) FROM {table}").first()[0] == 5000


def test_interval_timestamp_is_start_plus_interval_times_counter(spark):
    table, _ = run_available_now(spark, delay="1us", numPartitions=3, limit=3000, startTime=START_ISO, interval="7ms")
    got = rows(spark, table)
    assert len(got) == 3000
    assert all(ts == START_US + 7_000 * counter for counter, _, ts in got)


def test_scheduled_timestamps_follow_the_rate(spark):
    """Without an interval, event k of a partition carries its scheduled time: start + offset(k)."""
    table, _ = run_available_now(spark, eventsPerSecond=3000, numPartitions=2, limit=4000, startTime=START_ISO,
                                 rampUpTime="500ms")
    got = np.array(rows(spark, table), dtype=np.int64)
    delay = ImpulseOptions.from_options({"eventsPerSecond": "3000", "numPartitions": "2"}).delay_us
    expected = START_US + Schedule(START_US, delay, 500_000).offsets_us(got[:, 0])
    assert np.array_equal(got[:, 2], expected)


def test_start_time_iso_and_epoch_millis_give_the_same_rows(spark):
    a, _ = run_available_now(spark, delay="3ms", numPartitions=2, limit=100, startTime=START_ISO)
    b, _ = run_available_now(spark, delay="3ms", numPartitions=2, limit=100, startTime=START_US // 1000)
    assert rows(spark, a) == rows(spark, b)
    assert min(ts for _, _, ts in rows(spark, a)) == START_US


def test_alignment_rounds_the_start_time_down(spark):
    table, query = run_available_now(spark, delay="1ms", numPartitions=2, limit=10, interval="1s",
                                     startTime="2026-01-01T00:00:37.250Z", alignment="1m")
    assert json.loads(query.recentProgress[-1].sources[0].endOffset)["startTime"] == START_US
    assert min(ts for _, _, ts in rows(spark, table)) == START_US


def test_payload_is_deterministic_and_of_the_exact_size(spark):
    table, _ = run_available_now(spark, delay="1ms", numPartitions=2, limit=500, startTime=0, payloadBytes=37)
    got = spark.sql(f"SELECT counter, subtask_index, payload FROM {table}").collect()
    assert len(got) == 500
    assert all(len(r.payload) == 37 and bytes(r.payload) == expected_payload(r.counter, r.subtask_index, 37) for r in got)
    assert "payload" not in spark.sql(f"SELECT * FROM {run_available_now(spark, delay='1ms', limit=1, startTime=0)[0]}").columns


def test_windowed_aggregate_gives_exact_counts(spark):
    """interval=10ms, 4 partitions, limit 1002: partition i holds counters 0..250 (i < 2) or 0..249."""
    name = unique("windows")
    stream = impulse(spark, delay="1us", numPartitions=4, limit=1002, interval="10ms", startTime=START_ISO)
    counts = stream.groupBy(window("timestamp", "1 second")).count()
    query = counts.writeStream.format("memory").outputMode("complete").queryName(name).trigger(availableNow=True).start()
    assert query.awaitTermination(120)
    got = {r[0]: r[1] for r in spark.sql(f"SELECT unix_micros(window.start) - {START_US}, `count` FROM {name}").collect()}
    # 100 events per second per partition: [0 s, 1 s) and [1 s, 2 s) have 4 × 100; [2 s, 3 s) has 4 × 50 + 2
    assert got == {0: 400, 1_000_000: 400, 2_000_000: 202}


def test_ramp_up_does_not_stall_the_first_second(spark):
    """With a ramp, the events due in the first second come out (Spark's rate: none while rate/ramp < 1)."""
    start_ms = int(time.time() * 1000) - 1000  # one second ago
    table, _ = run_available_now(spark, eventsPerSecond=20, numPartitions=2, rampUpTime="5s", startTime=start_ms)
    due = Schedule(start_ms * 1000, 100_000.0, 5_000_000).due(start_ms * 1000 + 1_000_000)
    got = per_partition_counts(spark, table)
    assert due >= 2 and got[0] >= due and got[1] >= due


def test_batch_read_gives_the_rows_of_the_bounded_stream(spark):
    options = dict(eventsPerSecond=5000, numPartitions=3, limit=2000, startTime=START_ISO, payloadBytes=20, rampUpTime="1s")
    table, _ = run_available_now(spark, **options)
    batch = spark.read.format("impulse").options(**{k: str(v) for k, v in options.items()}).load()
    batch_rows = sorted(tuple(r) for r in batch.selectExpr("counter", "subtask_index", "unix_micros(timestamp)", "payload").collect())
    stream_rows = sorted(tuple(r) for r in spark.sql(f"SELECT counter, subtask_index, unix_micros(timestamp), payload FROM {table}").collect())
    assert len(batch_rows) == 2000 and batch_rows == stream_rows


def test_batch_read_without_a_limit_fails_clearly(spark):
    with pytest.raises(Exception) as err:
        spark.read.format("impulse").option("delay", "1ms").load().count()
    message = str(err.value)
    assert "option 'limit'" in message and "spark.read" in message and "unbounded" in message


@pytest.mark.parametrize("options, words", [
    ({"eventsPerSecond": "10", "delay": "1s"}, ["'eventsPerSecond/delay/rateStages/rateCurve'", "exactly one of"]),
    ({"eventsPerSecond": "0"}, ["option 'eventsPerSecond'", "'0'", "a number > 0"]),
    ({"delay": "1ms", "limit": "-5"}, ["option 'limit'", "'-5'", "an integer ≥ 0"]),
    ({"delay": "1fortnight"}, ["option 'delay'", "'1fortnight'", "a known unit"]),
    ({"delay": "1ms", "startTime": "yesterday"}, ["option 'startTime'", "'yesterday'", "ISO-8601"]),
    ({"delay": "1ms", "numPartitions": "0"}, ["option 'numPartitions'", "'0'", "an integer from 1"]),
    ({"delay": "1ms", "eventsPerSecnod": "10"}, ["unknown option 'eventsPerSecnod'", "known:"]),
])
def test_bad_options_fail_when_the_query_starts(spark, options, words):
    with pytest.raises(Exception) as err:
        query = spark.readStream.format("impulse").options(**options).load().writeStream.format("noop").start()
        query.stop()  # not reached: the error comes before any micro-batch
    message = str(err.value)
    assert "OptionError" in message
    for word in words:
        assert word.lower() in message.lower()  # Spark passes option names in lower case
