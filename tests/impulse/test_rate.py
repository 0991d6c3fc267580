"""The rate over a 20 s run, measured from the offsets Spark records (shared session)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from impulse.schedule import Schedule
from tests.impulse.helpers import impulse, poll_query

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 2000.0
PARTITIONS = 2
RUN_US = 20_000_000


def _planned(progress) -> tuple[int, int, dict]:
    """(trigger start µs, trigger end µs, end offset) of one micro-batch's progress."""
    start = int(datetime.fromisoformat(progress.timestamp.replace("Z", "+00:00")).timestamp() * 1_000_000)
    return start, start + progress.durationMs["triggerExecution"] * 1000, json.loads(progress.sources[0].endOffset)


def test_rate_over_twenty_seconds_is_within_one_percent(spark):
    query = (impulse(spark, eventsPerSecond=RATE, numPartitions=PARTITIONS).writeStream.format("noop")
             .trigger(processingTime="1 second").start())

    def long_enough() -> bool:
        """20 s since the start, and 10 s between the second micro-batch (workers started) and the last."""
        batches = [_planned(p) for p in query.recentProgress if p.sources and p.sources[0].endOffset]
        return (len(batches) >= 3 and batches[-1][0] - batches[0][2]["anchorTime"] >= RUN_US
                and batches[-1][0] - batches[1][0] >= 10_000_000)

    try:
        poll_query(query, long_enough, timeout=180, interval=0.5, what="20 s of events")
    finally:
        query.stop()
    batches = [_planned(p) for p in query.recentProgress if p.sources and p.sources[0].endOffset]
    _, _, first = batches[0]
    anchor = first["anchorTime"]
    assert all(end["anchorTime"] == anchor and end["delayUs"] == PARTITIONS * 1e6 / RATE for _, _, end in batches)

    schedule = Schedule(anchor, PARTITIONS * 1e6 / RATE)
    for started, ended, end in batches:
        emitted = sum(end["counters"])
        # exact: what was planned is what was due at some moment of the trigger (the offsets hold no guess)
        assert PARTITIONS * schedule.due(started) <= emitted <= PARTITIONS * schedule.due(ended)
        assert end["counters"][0] == end["counters"][1]

    # 1 % of rate × elapsed, elapsed being when the batch was planned: some moment of its trigger
    started, ended, last = batches[-1]
    emitted = sum(last["counters"])
    assert (started - anchor) / 1e6 >= 20
    assert 0.99 * RATE * (started - anchor) / 1e6 <= emitted <= 1.01 * RATE * (ended - anchor) / 1e6, emitted
    # the rate between two batches ten or more seconds apart, from their offsets alone
    early_started, early_ended, early = batches[1]  # not batches[0]: it may be slow (it starts the workers)
    assert started - early_started >= 10_000_000
    grown = emitted - sum(early["counters"])
    slowest, fastest = grown / ((ended - early_started) / 1e6), grown / ((started - early_ended) / 1e6)
    assert slowest <= 1.01 * RATE and fastest >= 0.99 * RATE, (slowest, fastest)
