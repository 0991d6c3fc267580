"""The harness's schedule arithmetic follows each partition's own arrivals: with ``arrival=poisson`` partition i's
events are due at times of its own, so latency, the newest scheduled time and the due count take the partition index
of each entry of the offset."""

from __future__ import annotations

import numpy as np

from impulse.loadtest.measure.metrics import newest_schedule_us, offsets_latency
from impulse.schedule import Schedule

ANCHOR_US = 1_700_000_000_000_000
OFFSET = {"anchorTime": ANCHOR_US, "delayUs": 1_000, "rampUs": 0, "poissonSeed": 7, "anchorCounters": [0, 0]}


def test_poisson_partitions_have_their_own_times_and_the_metrics_use_them():
    schedule = Schedule.of_offset(OFFSET)
    counters = np.arange(0, 200, dtype=np.int64)
    first, second = schedule.times_us(counters, 0, 0), schedule.times_us(counters, 0, 1)
    assert not np.array_equal(first, second), "the two partitions' Poisson arrivals should differ"

    start, end = {"counters": [0, 0]}, {**OFFSET, "counters": [0, 200]}  # only partition 1 read events
    ack_us = int(second.max()) + 5_000
    histogram = offsets_latency(start, end, ack_us)
    assert histogram.max_us == ack_us - int(second.min())
    assert newest_schedule_us(start, end) == int(second[-1])
