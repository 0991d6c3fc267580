"""format("replay") in Spark: a batch read is the recording in time order; a stream delivers each row exactly once
across a restart and across a SIGKILL of the driver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.readme import DOCS, python_block

pytestmark = pytest.mark.integration
ROWS = 300
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def recording(tmp_path) -> str:
    """ROWS rows over 3 s of recorded time, written in a shuffled order."""
    order = np.random.default_rng(3).permutation(ROWS)
    times = 1_700_000_000_000_000 + order * 10_000
    table = pa.table({"id": pa.array(order, pa.int64()), "ts": pa.array(times, pa.timestamp("us", tz="UTC")),
                      "word": pa.array([f"w{i % 7}" for i in order])})
    pq.write_table(table, tmp_path / "recording.parquet")
    return str(tmp_path / "recording.parquet")


def stream(spark, recording: str, checkpoint: str, out: str):
    """The replay query the tests run: 50 rows/s, at most 20 a micro-batch, into parquet files."""
    return (spark.readStream.format("replay").option("timeColumn", "ts").option("eventsPerSecond", 50)
            .option("maxEventsPerTrigger", 20).option("numPartitions", 2).load(recording)
            .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
            .trigger(processingTime="200 milliseconds").start())


def _ids(spark, out: str) -> list[int]:
    if not os.path.exists(os.path.join(out, "_spark_metadata")):
        return []
    return [r.id for r in spark.read.schema("id BIGINT, ts TIMESTAMP, word STRING").parquet(out).collect()]


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_a_batch_read_is_the_recording_in_time_order(spark, recording):
    frame = spark.read.format("replay").option("timeColumn", "ts").option("numPartitions", 3).load(recording)
    assert [f.name for f in frame.schema.fields] == ["id", "ts", "word"]
    rows = frame.collect()
    assert [r.id for r in rows] == list(range(ROWS))
    assert rows[5].word == "w5" and rows[1].ts > rows[0].ts
    laps = (spark.read.format("replay").option("timeColumn", "ts").option("loop", True).option("limit", 450)
            .load(recording).collect())
    assert [r.id for r in laps] == list(range(ROWS)) + list(range(150))
    assert (laps[300].ts - rows[0].ts).total_seconds() == pytest.approx((ROWS - 1) * 0.01)  # one span later


def test_a_stream_restarted_from_its_checkpoint_has_no_gap_and_no_duplicate(spark, recording, tmp_path):
    checkpoint, out = str(tmp_path / "cp"), str(tmp_path / "out")
    query = stream(spark, recording, checkpoint, out)
    _wait(lambda: len(_ids(spark, out)) >= 60, 120, "the first rows")
    query.stop()
    first = len(_ids(spark, out))
    assert first < ROWS
    query = stream(spark, recording, checkpoint, out)
    try:
        _wait(lambda: len(_ids(spark, out)) >= ROWS, 120, "every row")
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(_ids(spark, out)) == list(range(ROWS))


@pytest.mark.slow
def test_a_stream_survives_a_sigkill_of_its_driver(spark, recording, tmp_path):
    checkpoint, out = str(tmp_path / "cp"), str(tmp_path / "out")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    job = subprocess.Popen([sys.executable, "-m", "tests.replay.replay_job", recording, checkpoint, out], cwd=ROOT,
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait(lambda: len(_ids(spark, out)) >= 40, 300, "the killed driver's first rows")
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    before = len(_ids(spark, out))
    assert before < ROWS
    query = stream(spark, recording, checkpoint, out)
    try:
        _wait(lambda: len(_ids(spark, out)) >= ROWS, 120, "every row")
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(_ids(spark, out)) == list(range(ROWS))


def test_the_how_to_block_defines_a_replay_stream(spark, recording):
    """docs/how-to/profile-and-replay.md's block, as written, its recording's path filled in."""
    block = python_block("## Replay a recording", page=DOCS / "how-to/profile-and-replay.md")
    scope = {"spark": spark}
    exec(block.replace('"recordings/orders.parquet"', repr(recording)), scope)
    assert scope["recording"].isStreaming and scope["recording"].columns == ["id", "ts", "word"]
