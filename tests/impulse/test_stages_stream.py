"""Rate stages through Spark: a pinned stream stopped and restarted equals the batch read, and its events per
second of event time are the integral of the stages (small sizes; the 1M-event checks are in `test_stages.py`)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from pyspark.sql import functions as F

from impulse.options import ImpulseOptions
from tests.impulse.test_restart import restarted_stream_and_batch
from tests.impulse.test_stages import integral
from tests.readme import DOCS, python_block

pytestmark = pytest.mark.integration

OPTIONS = dict(rateStages="2s:2000,2s:2000,1s:8000,1s:0", numPartitions=2, startTime=0, maxEventsPerTrigger=2000)


def test_a_restarted_stream_equals_the_batch_read_and_counts_the_integral_per_second(spark, tmp_path):
    stream, batch = restarted_stream_and_batch(spark, tmp_path / "ck", OPTIONS)
    stages = ImpulseOptions.from_options({k: str(v) for k, v in OPTIONS.items()}).rate_stages
    assert len(stream) == 2 * stages.total == 2 * 7500 and stream == batch  # per partition 1000 + 2000 + 2500 + 2000
    for partition in (0, 1):
        seconds = [ts // 1_000_000 for counter, subtask, ts in stream if subtask == partition]
        for second in range(6):
            exact = integral(stages, (second + 1) * 1_000_000) - integral(stages, second * 1_000_000)
            assert abs(seconds.count(second) - exact) <= 1, (partition, second, seconds.count(second), exact)
    assert Fraction(stages.total) == integral(stages, stages.duration_us)


def test_the_readme_spike_test_counts_the_integral_of_its_stages(spark, tmp_path):
    block = python_block("## Rates that change", page=DOCS / "how-to" / "impulse-source.md")
    namespace = {"spark": spark, "F": F}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    query = (namespace["per_second"].writeStream.format("memory").queryName("spike_per_second").outputMode("complete")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert query.awaitTermination(300) and query.exception() is None
    counts = dict(spark.table("spike_per_second").selectExpr("unix_seconds(window.start)", "count").collect())
    stages = ImpulseOptions.from_options({"rateStages": "10s:1000,20s:1000,5s:10000,10s:10000,5s:1000,10s:1000",
                                          "numPartitions": "2"}).rate_stages
    start = 1_767_225_600  # 2026-01-01T00:00:00Z
    assert sorted(counts) == [start + s for s in range(60)] and sum(counts.values()) == 2 * stages.total == 190_000
    for second in range(60):
        exact = 2 * (integral(stages, (second + 1) * 1_000_000) - integral(stages, second * 1_000_000))
        assert abs(counts[start + second] - exact) <= 2, (second, counts[start + second], exact)
