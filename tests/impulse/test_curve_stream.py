"""``rateCurve`` and ``bursts.*`` through Spark: a pinned stream stopped and restarted equals the batch read, and the
how-to's compressed day counts the curve's integral per second of event time (small sizes; the schedule's own
checks are in `test_curve.py`)."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import functions as F

from tests.impulse.test_restart import restarted_stream_and_batch
from tests.readme import DOCS, python_block

pytestmark = pytest.mark.integration

OPTIONS = {"rateCurve": "daily:min=500,max=3000,peak=06:00", "rateCurve.period": "4s", "bursts.every": "1s",
           "bursts.factor": "2", "bursts.duration": "200ms", "numPartitions": 2, "startTime": 0, "limit": 12_000,
           "maxEventsPerTrigger": 2000}


def test_a_restarted_curve_stream_equals_the_batch_read(spark, tmp_path):
    stream, batch = restarted_stream_and_batch(spark, tmp_path / "ck", OPTIONS)
    assert len(stream) == 12_000 and stream == batch


def _rate(t_s: np.ndarray) -> np.ndarray:
    """The how-to's rate, events/s over both partitions, from its formula: the cosine, ×3 in each burst."""
    curve = 200 + 1800 * (1 + np.cos(2 * np.pi * (t_s / 20 - 0.5))) / 2
    return curve * np.where(t_s % 5 >= 4.5, 3.0, 1.0)


def test_the_how_to_day_counts_the_curve_s_integral_per_second(spark, tmp_path):
    block = python_block("## A daily cycle and bursts", page=DOCS / "how-to" / "impulse-source.md")
    namespace = {"spark": spark, "F": F}
    exec(compile(block, "impulse-source.md", "exec"), namespace)  # noqa: S102 - the how-to's own example
    counts = dict(namespace["per_second"].selectExpr("unix_seconds(window.start)", "count").collect())
    start = 1_767_225_600  # 2026-01-01T00:00:00Z
    assert sum(counts.values()) == 30_000
    full = sorted(counts)[:-1]  # the last second is cut by the limit
    assert full[0] == start and full == list(range(start, start + len(full))) and len(full) >= 20
    for second in full:
        t = np.linspace(second - start, second - start + 1, 20_001)
        exact = np.trapezoid(_rate(t), t)
        assert abs(counts[second] - exact) <= 0.01 * exact + 2, (second - start, counts[second], exact)
