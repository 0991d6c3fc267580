"""Stop a query and restart it from its checkpoint: counters continue, replays are identical (shared session).

A crash between a batch's offsets and its commit is simulated by deleting the batch's file from
``<checkpoint>/commits``: Spark then re-runs it with the same batch id and the same offsets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from connectors.conformance.harness import kill_tree
from impulse.schedule import Schedule
from tests.impulse.helpers import (BatchRecorder, checkpoint_offsets, committed_batches, impulse, poll, poll_query,
                                   uncommit_last_batch)

pytestmark = pytest.mark.integration


def run_to_end(spark, checkpoint, recorder, **options):
    """Run with Trigger.AvailableNow into `recorder` until the query ends by itself."""
    query = (impulse(spark, **options).writeStream.foreachBatch(recorder)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the query did not end"
    if query.exception() is not None:
        raise query.exception()
    return query


def restarted_stream_and_batch(spark, checkpoint, options: dict) -> tuple[list, list]:
    """A pinned stream of `options` run for 2 micro-batches, stopped and restarted to its end, and the batch read of
    the same options: each as sorted (counter, subtask_index, epoch µs) rows."""
    recorder = BatchRecorder()
    run_batches(spark, checkpoint, recorder, 2, **options)  # a backfill: startTime 0 is long past
    assert 1 <= len(committed_batches(checkpoint))
    run_to_end(spark, checkpoint, recorder, **options)
    stream = sorted(row[:3] for row in recorder.rows())
    batch = sorted(tuple(r) for r in spark.read.format("impulse").options(**{k: str(v) for k, v in options.items()})
                   .load().selectExpr("counter", "subtask_index", "unix_micros(timestamp)").collect())
    return stream, batch


def run_batches(spark, checkpoint, recorder, batches: int, **options):
    """Run with a processing-time trigger until `batches` more micro-batches reached the sink, then stop.

    Stopping may leave the last planned batch uncommitted; only the first batches after a restart are checked.
    """
    done = recorder.runs()
    query = (impulse(spark, **options).writeStream.foreachBatch(recorder)
             .option("checkpointLocation", str(checkpoint)).trigger(processingTime="200 milliseconds").start())
    try:
        poll_query(query, lambda: recorder.runs() >= done + batches, what=f"{batches} batches")
    finally:
        query.stop()
    assert query.exception() is None
    return query


def a_second_ago_ms() -> int:
    return time.time_ns() // 1_000_000 - 1000


def assert_no_gap_no_duplicate(recorder: BatchRecorder, partitions: int) -> dict[int, int]:
    """Each partition's counters over all batches (replays counted once) are exactly 0..n-1."""
    seen: dict[int, list[int]] = {i: [] for i in range(partitions)}
    for counter, subtask, *_ in recorder.rows():
        seen[subtask].append(counter)
    for subtask, counters in seen.items():
        assert sorted(counters) == list(range(len(counters))), f"partition {subtask}: gap or duplicate"
    return {i: len(c) for i, c in seen.items()}


def assert_replays_identical(recorder: BatchRecorder, replayed: int) -> None:
    runs = recorder.calls[replayed]
    assert len(runs) == 2, f"batch {replayed} ran {len(runs)} times"
    assert runs[0] and runs[1] == runs[0]  # rows, timestamps and payloads


def test_restart_continues_counters_and_replays_identically(spark, tmp_path):
    """Deterministic: a backfill from the epoch, 100 events per micro-batch, limit raised on restart."""
    options = dict(delay="1ms", numPartitions=3, startTime=0, interval="1ms", payloadBytes=24,
                   maxEventsPerTrigger=100)
    recorder = BatchRecorder()
    run_to_end(spark, tmp_path, recorder, limit=450, **options)
    assert sorted(recorder.calls) == [0, 1, 2, 3, 4]
    replayed = uncommit_last_batch(tmp_path)
    run_to_end(spark, tmp_path, recorder, limit=900, **options)
    assert_replays_identical(recorder, replayed)
    assert assert_no_gap_no_duplicate(recorder, 3) == {0: 300, 1: 300, 2: 300}
    assert all(len(runs[0]) <= 100 for runs in recorder.calls.values())
    assert all(ts == counter * 1000 for counter, _, ts, _ in recorder.rows())


def test_restart_after_downtime_skips_the_missed_time(spark, tmp_path):
    """downtime=skip (the default without startTime/interval; explicit here, beside a startTime that only
    places the first start): real-time rate; the schedule re-anchors at the restart, counters go on."""
    options = dict(eventsPerSecond=400, numPartitions=2, payloadBytes=16, startTime=a_second_ago_ms(), downtime="skip")
    recorder = BatchRecorder()
    run_to_end(spark, tmp_path, recorder, **options)  # ~400 events: the second before the start
    replayed = uncommit_last_batch(tmp_path)
    stopped = checkpoint_offsets(tmp_path)[replayed]
    restart_us = time.time_ns() // 1000
    run_batches(spark, tmp_path, recorder, 3, **options)  # the replay, then at least two new batches
    assert_replays_identical(recorder, replayed)
    assert_no_gap_no_duplicate(recorder, 2)

    first_new = checkpoint_offsets(tmp_path)[replayed + 1]
    assert first_new["startTime"] == stopped["startTime"]
    assert first_new["anchorTime"] >= restart_us > stopped["anchorTime"]
    assert first_new["anchorCounters"] == stopped["counters"]
    assert first_new["counters"] == [c + 1 for c in stopped["counters"]]  # only the event due at the re-anchor
    # rows after the restart follow the new anchor: no event carries a time inside the downtime
    schedule = Schedule(first_new["anchorTime"], first_new["delayUs"])
    for counter, subtask, ts, _ in recorder.rows():
        base = first_new["anchorCounters"][subtask]
        if counter >= base:
            assert ts == schedule.anchor_us + int(schedule.offsets_us(np.array([counter - base]))[0])
        else:
            assert ts < restart_us


def test_restart_of_a_pinned_timeline_emits_the_missed_events(spark, tmp_path):
    """startTime pins the timeline (default downtime=catchup): the anchor stays; every event missed while down
    is due at once, on its original time."""
    options = dict(eventsPerSecond=400, numPartitions=2, startTime=a_second_ago_ms())
    recorder = BatchRecorder()
    run_to_end(spark, tmp_path, recorder, **options)
    stopped = checkpoint_offsets(tmp_path)
    last = max(stopped)
    restart_us = time.time_ns() // 1000
    run_to_end(spark, tmp_path, recorder, **options)
    assert_no_gap_no_duplicate(recorder, 2)
    first_new = checkpoint_offsets(tmp_path)[last + 1]
    assert {k: v for k, v in first_new.items() if k != "counters"} == {k: v for k, v in stopped[last].items() if k != "counters"}
    due = Schedule(first_new["anchorTime"], first_new["delayUs"]).due(restart_us)
    assert all(c >= due for c in first_new["counters"])  # everything due by the restart, in one batch
    assert due - max(stopped[last]["counters"]) >= 2
    timestamps = sorted(ts for _, subtask, ts, _ in recorder.rows() if subtask == 0)
    gaps = np.diff(timestamps)
    assert gaps.max() <= first_new["delayUs"] + 1  # no hole in event time


def test_restart_with_a_new_rate_reanchors_and_counters_continue(spark, tmp_path):
    recorder = BatchRecorder()
    run_to_end(spark, tmp_path, recorder, eventsPerSecond=200, numPartitions=2, startTime=a_second_ago_ms())
    stopped = checkpoint_offsets(tmp_path)
    last = max(stopped)
    restart_us = time.time_ns() // 1000
    run_batches(spark, tmp_path, recorder, 3, eventsPerSecond=2000, numPartitions=2, startTime=0)
    assert_no_gap_no_duplicate(recorder, 2)
    first_new = checkpoint_offsets(tmp_path)[last + 1]
    assert stopped[last]["delayUs"] == 10_000.0 and first_new["delayUs"] == 1000.0
    assert first_new["anchorTime"] >= restart_us and first_new["anchorCounters"] == stopped[last]["counters"]
    assert first_new["startTime"] == stopped[last]["startTime"]  # the checkpoint's start time wins over the option
    # every row after the restart sits on the new schedule: 1 ms apart per partition
    schedule = Schedule(first_new["anchorTime"], first_new["delayUs"])
    new_rows = [(c, i, ts) for c, i, ts, _ in recorder.rows() if c >= first_new["anchorCounters"][i]]
    assert len(new_rows) > 2
    for counter, subtask, ts in new_rows:
        assert ts == schedule.anchor_us + (counter - first_new["anchorCounters"][subtask]) * 1000


def test_restart_with_other_num_partitions_fails_clearly(spark, tmp_path):
    recorder = BatchRecorder()
    run_to_end(spark, tmp_path, recorder, delay="1ms", numPartitions=2, startTime=0, limit=10)
    with pytest.raises(Exception) as err:
        run_to_end(spark, tmp_path, recorder, delay="1ms", numPartitions=3, startTime=0, limit=20)
    message = str(err.value)
    assert "OptionError" in message and "option 'numPartitions'" in message
    assert "'3'" in message or " 3 " in message or "3 for" in message
    assert "2, the number of partitions in this query's checkpoint" in message


# --- a pinned backfill (a restart with the default downtime must not move the timeline and lose the rest) ---

BACKFILL = dict(eventsPerSecond=1_000_000_000, numPartitions=2, limit=60_000, maxEventsPerTrigger=5_000,
                startTime="2020-01-01T00:00:00Z", payloadBytes=16)


def to_parquet(spark, out, checkpoint, trigger: dict, **options):
    return (impulse(spark, **options).writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())


def finish_backfill_and_compare(spark, out, checkpoint, options: dict) -> None:
    """Restart with Trigger.AvailableNow (default downtime): every event lands once, equal to the batch read."""
    query = to_parquet(spark, out, checkpoint, {"availableNow": True}, **options)
    assert query.awaitTermination(180), "Trigger.AvailableNow did not end the query"
    assert query.exception() is None
    batch = spark.read.format("impulse").options(**{k: str(v) for k, v in options.items()}).load()
    stream = spark.read.parquet(str(out)).select(*batch.columns)  # every column, payload included
    assert stream.count() == stream.select("subtask_index", "counter").distinct().count() == options["limit"]
    assert stream.exceptAll(batch).count() == 0 and batch.exceptAll(stream).count() == 0


def test_a_stopped_backfill_restarted_with_available_now_finishes_equal_to_the_batch_read(spark, tmp_path):
    out, checkpoint = tmp_path / "out", tmp_path / "ck"
    query = to_parquet(spark, out, checkpoint, {"processingTime": "0 seconds"}, **BACKFILL)
    try:
        poll_query(query, lambda: len(committed_batches(checkpoint)) >= 3, what="3 committed batches")
    finally:
        query.stop()
    before = spark.read.parquet(str(out)).count()
    assert 15_000 <= before < BACKFILL["limit"], before
    finish_backfill_and_compare(spark, out, checkpoint, BACKFILL)


def test_a_killed_backfill_restarted_with_available_now_finishes_equal_to_the_batch_read(spark, tmp_path):
    """The driver's whole process tree (Python workers included) gets SIGKILL mid-backfill."""
    out, checkpoint = tmp_path / "out", tmp_path / "ck"
    args = {"format": "parquet", "options": {"path": str(out)}, "checkpoint": str(checkpoint),
            "limit": 200_000, "per_trigger": 5_000, "partitions": 2}
    options = dict(eventsPerSecond=1_000_000, numPartitions=2, startTime=0, limit=200_000, maxEventsPerTrigger=5_000)
    process = subprocess.Popen([sys.executable, "-m", "connectors.conformance.driver", json.dumps(args)],
                               start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        poll(lambda: process.poll() is not None or len(committed_batches(checkpoint)) >= 3,
             timeout=180, what="3 committed batches in the driver process")
        assert process.poll() is None, f"the driver exited early: {process.stderr.read().decode()[-2000:]}"
    finally:
        kill_tree(process.pid)
        process.wait(30)
    assert len(committed_batches(checkpoint)) < 40, "the kill came too late to cut the backfill"
    finish_backfill_and_compare(spark, out, checkpoint, options)
