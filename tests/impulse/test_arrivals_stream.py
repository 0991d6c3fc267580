"""Poisson arrivals through Spark: the stream's event times equal the batch read's, and they are not evenly spaced."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.integration

OPTIONS = {"eventsPerSecond": "2000000", "startTime": "0", "numPartitions": "2", "limit": "4000",
           "maxEventsPerTrigger": "1500", "arrival": "poisson", "seed": "8"}


def test_a_poisson_stream_equals_the_batch_read(spark, tmp_path):
    rows: list[tuple] = []
    query = (spark.readStream.format("impulse").options(**OPTIONS).load()
             .writeStream.foreachBatch(lambda df, _: rows.extend(tuple(r) for r in df.collect()))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert query.awaitTermination(180) and query.exception() is None
    batch = [tuple(r) for r in spark.read.format("impulse").options(**OPTIONS).load().collect()]
    assert sorted(rows) == sorted(batch) and len(batch) == 4000
    times = np.array([r[2].timestamp() * 1e6 for r in sorted(batch) if r[1] == 0])  # partition 0, counter order
    gaps = np.diff(times)
    assert (gaps >= 0).all() and len(set(gaps.round().tolist())) > 3  # a uniform 1 µs schedule has one gap
