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

    def elapsed_us() -> int:
        progress = query.lastProgress
        if not progress or not progress["sources"] or progress["sources"][0]["endOffset"] is None:
            return 0
        end = json.loads(progress["sources"][0]["endOffset"])
        started = int(datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp() * 1_000_000)
        return started - end["anchorTime"]

    try:
        poll_query(query, lambda: elapsed_us() >= RUN_US, timeout=120, what="20 s of events")
    finally:
        query.stop()
    batches = [_planned(p) for p in query.recentProgress if p.sources and p.sources[0].endOffset]
    first_start, _, first = batches[0]
    anchor = first["anchorTime"]
    assert all(end["anchorTime"] == anchor and end["delayUs"] == PARTITIONS * 1e6 / RATE for _, _, end in batches)

    schedule = Schedule(anchor, PARTITIONS * 1e6 / RATE)
    for started, ended, end in batches:
        emitted = sum(end["counters"])
        # exact: what was planned is what was due at some moment of the trigger (the offsets hold no guess)
        assert PARTITIONS * schedule.due(started) <= emitted <= PARTITIONS * schedule.due(ended)
        assert end["counters"][0] == end["counters"][1]

    started, _, last = batches[-1]
    elapsed_s = (started - anchor) / 1e6
    emitted = sum(last["counters"])
    assert elapsed_s >= 20
    assert abs(emitted - RATE * elapsed_s) <= 0.01 * RATE * elapsed_s, (emitted, RATE * elapsed_s)
    # the rate between two batches ten or more seconds apart, from their offsets alone
    early = next(b for b in batches if b[0] - first_start >= 1_000_000)
    span_s = (started - early[0]) / 1e6
    assert span_s >= 10
    assert abs((emitted - sum(early[2]["counters"])) / span_s - RATE) <= 0.01 * RATE
