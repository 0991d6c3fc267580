"""The impulse reader's planning, driven by a fake clock, and `_admit` (no Spark session).

Spark calls these on the driver: `initialOffset`, `latestOffset(start, limit)`, `partitions(start, end)`;
`read(partition)` runs on executors from a pickled copy of the reader.
"""

from __future__ import annotations

import itertools
import json
import pickle
import random

import pyarrow as pa
import pytest
from pyspark import cloudpickle
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import impulse.source as source
from connectors.errors import OptionError
from impulse.events import arrow_schema
from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from impulse.source import ImpulseBatchReader, ImpulseDataSource, ImpulseStreamReader, _admit

T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z, µs
SECOND = 1_000_000


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock(T0)
    monkeypatch.setattr(source, "now_us", fake)
    return fake


def reader(**options) -> ImpulseStreamReader:
    return ImpulseStreamReader(ImpulseOptions.from_options({k: str(v) for k, v in options.items()}))


def rows(reader_, start, end) -> pa.Table:
    batches = [b for p in reader_.partitions(start, end) for b in reader_.read(p)]
    opts = reader_.options
    return pa.Table.from_batches(batches, schema=arrow_schema(opts.payload_bytes))


def drain(r: ImpulseStreamReader, start: dict, limit=None, batches: int = 1000) -> list[dict]:
    """Plan micro-batches like Spark with AvailableNow: until latestOffset returns its start."""
    offsets = [start]
    for _ in range(batches):
        end = r.latestOffset(offsets[-1], limit or r.getDefaultReadLimit())
        if end == offsets[-1]:
            return offsets
        offsets.append(end)
    raise AssertionError("did not end")


# --- offsets -----------------------------------------------------------------------------------------

def test_initial_offset_holds_start_rate_and_zero_counters(clock):
    offset = reader(eventsPerSecond=3000, numPartitions=3).initialOffset()
    assert offset == {"startTime": T0, "anchorTime": T0, "delayUs": 1000.0, "rampUs": 0,
                      "anchorCounters": [0, 0, 0], "counters": [0, 0, 0]}


def test_initial_offset_uses_start_time_and_alignment(clock):
    offset = reader(delay="1ms", startTime="2026-01-01T00:00:37.5Z", alignment="1m").initialOffset()
    assert offset["startTime"] == offset["anchorTime"] == T0
    clock.now = T0 + 37_500_000
    assert reader(delay="1ms", alignment="10s").initialOffset()["startTime"] == T0 + 30 * SECOND


def test_latest_offset_emits_what_is_due_per_partition(clock):
    r = reader(eventsPerSecond=2000, numPartitions=2)  # 1 000 events/s per partition
    start = r.initialOffset()
    assert r.latestOffset(start, ReadAllAvailable())["counters"] == [1, 1]  # event 0 is due at the start
    clock.now += 2 * SECOND
    end = r.latestOffset(start, ReadAllAvailable())
    assert end["counters"] == [2001, 2001]
    assert {k: v for k, v in end.items() if k != "counters"} == {k: v for k, v in start.items() if k != "counters"}


def test_offsets_are_json_round_trippable(clock):
    r = reader(eventsPerSecond=7, numPartitions=3, rampUpTime="3s")
    start = r.initialOffset()
    clock.now += 10 * SECOND
    end = r.latestOffset(start, ReadAllAvailable())
    assert json.loads(json.dumps(end)) == end


def test_latest_offset_never_goes_back(clock):
    r = reader(eventsPerSecond=1000, numPartitions=2)
    start = r.initialOffset()
    clock.now += SECOND
    end = r.latestOffset(start, ReadAllAvailable())
    clock.now -= 10 * SECOND  # the wall clock jumps back
    assert r.latestOffset(end, ReadAllAvailable())["counters"] == end["counters"]


def test_limit_caps_every_partition_and_then_the_stream_ends(clock):
    r = reader(eventsPerSecond=1000, numPartitions=4, limit=10, startTime=0)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end["counters"] == [3, 3, 2, 2]
    clock.now += 100 * SECOND
    assert r.latestOffset(end, ReadAllAvailable()) == end


def test_limit_per_partition(clock):
    r = reader(delay="1us", numPartitions=3, limitPerPartition=5, startTime=0)
    start = r.initialOffset()
    assert r.latestOffset(start, ReadAllAvailable())["counters"] == [5, 5, 5]


def test_max_events_per_trigger_bounds_each_batch_and_all_rows_come(clock):
    r = reader(delay="1us", numPartitions=3, limit=1000, startTime=0, maxEventsPerTrigger=64)
    assert isinstance(r.getDefaultReadLimit(), ReadMaxRows) and r.getDefaultReadLimit().max_rows == 64
    offsets = drain(r, r.initialOffset())
    sizes = [sum(b["counters"]) - sum(a["counters"]) for a, b in zip(offsets, offsets[1:])]
    assert all(0 < s <= 64 for s in sizes) and sum(sizes) == 1000
    assert offsets[-1]["counters"] == [334, 333, 333]
    for offset in offsets:  # fair: the partitions stay level
        assert max(offset["counters"]) - min(offset["counters"]) <= 1


def test_without_max_events_the_default_limit_reads_all(clock):
    assert isinstance(reader(delay="1ms").getDefaultReadLimit(), ReadAllAvailable)


def test_available_now_plans_up_to_the_time_it_was_prepared(clock):
    r = reader(eventsPerSecond=1000, numPartitions=2, startTime=T0 // 1000 - 10_000, maxEventsPerTrigger=3000)
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    clock.now += 60 * SECOND  # time passes while the batches run: not more events
    offsets = drain(r, start)
    assert offsets[-1]["counters"] == [5001, 5001]
    assert len(offsets) == 1 + 4  # 10 002 events, 3 000 per batch


def test_available_now_prepared_before_the_initial_offset_reads_what_is_due_at_the_start(clock):
    """Spark prepares AvailableNow before it asks a new query for its initial offset."""
    r = reader(eventsPerSecond=1000, numPartitions=2)
    r.prepareForTriggerAvailableNow()
    clock.now += 1_000  # the initial offset is made a millisecond later
    start = r.initialOffset()
    offsets = drain(r, start)
    assert offsets[-1]["counters"] == [1, 1]  # event 0 of each partition is due at the start


def test_partitions_cover_start_to_end_and_skip_empty_ones(clock):
    r = reader(delay="1ms", numPartitions=3, startTime=0, limitPerPartition=100)
    start = {**r.initialOffset(), "counters": [10, 100, 0]}
    end = r.latestOffset(start, ReadAllAvailable())
    parts = r.partitions(start, end)
    assert [(p.subtask_index, p.first, p.end) for p in parts] == [(0, 10, 100), (2, 0, 100)]
    assert r.partitions(end, end) == []


def test_report_latest_offset_ignores_admission_control(clock):
    r = reader(eventsPerSecond=1000, numPartitions=2, maxEventsPerTrigger=10)
    assert r.reportLatestOffset() is None
    start = r.initialOffset()
    clock.now += SECOND
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert sum(end["counters"]) == 10
    assert r.reportLatestOffset()["counters"] == [501, 501]


def test_ramp_up_emits_events_in_the_first_second(clock):
    r = reader(eventsPerSecond=10, numPartitions=2, rampUpTime="60s")  # Spark's rate would emit nothing here
    start = r.initialOffset()
    clock.now += SECOND
    first = r.latestOffset(start, ReadAllAvailable())["counters"]
    assert first == [Schedule(T0, 200_000.0, 60 * SECOND).due(T0 + SECOND)] * 2 and first[0] >= 1


# --- restarts ----------------------------------------------------------------------------------------

def run(r: ImpulseStreamReader, start: dict, clock: Clock, seconds: int) -> dict:
    for _ in range(seconds):
        clock.now += SECOND
        start = r.latestOffset(start, r.getDefaultReadLimit())
    return start


def test_restart_with_skip_reanchors_and_counters_continue(clock):
    first = reader(eventsPerSecond=1000, numPartitions=2)
    last = run(first, first.initialOffset(), clock, 3)
    assert last["counters"] == [1501, 1501]
    clock.now += 3600 * SECOND  # down for an hour
    restarted = reader(eventsPerSecond=1000, numPartitions=2)  # no initialOffset: resumes from the checkpoint
    end = restarted.latestOffset(last, ReadAllAvailable())
    assert end["anchorTime"] == clock.now and end["anchorCounters"] == last["counters"]
    assert end["startTime"] == last["startTime"] and end["delayUs"] == last["delayUs"]
    assert end["counters"] == [1502, 1502]  # the missed hour has no events; the first event is due now
    later = run(restarted, end, clock, 2)
    assert later["counters"] == [2502, 2502]
    table = rows(restarted, last, later)
    assert sorted(table.column("counter").to_pylist()) == sorted(list(range(1501, 2502)) * 2)
    times = table.filter(pa.compute.equal(table.column("subtask_index"), 0)).column("timestamp").cast(pa.int64()).to_pylist()
    assert times == [end["anchorTime"] + 2000 * k for k in range(1001)]


@pytest.mark.parametrize("pin", [{"startTime": T0 // 1000}, {"interval": "1ms"}])
def test_restart_of_a_pinned_timeline_keeps_the_anchor_by_default(clock, pin):
    """startTime or interval with the default downtime: what was due before the restart stays due."""
    first = reader(eventsPerSecond=1000, numPartitions=2, **pin)
    last = run(first, first.initialOffset(), clock, 3)
    clock.now += 60 * SECOND
    restarted = reader(eventsPerSecond=1000, numPartitions=2, **pin)
    end = restarted.latestOffset(last, ReadAllAvailable())
    assert end == {**last, "counters": [31501, 31501]}
    skipping = reader(eventsPerSecond=1000, numPartitions=2, downtime="skip", **pin)  # explicit: honoured
    assert skipping.latestOffset(last, ReadAllAvailable())["anchorTime"] == clock.now


def test_restart_with_catchup_makes_the_missed_events_due_at_once(clock):
    first = reader(eventsPerSecond=1000, numPartitions=2, downtime="catchup")
    last = run(first, first.initialOffset(), clock, 3)
    clock.now += 60 * SECOND
    restarted = reader(eventsPerSecond=1000, numPartitions=2, downtime="catchup")
    end = restarted.latestOffset(last, ReadAllAvailable())
    assert end == {**last, "counters": [31501, 31501]}
    times = rows(restarted, last, end).column("timestamp").cast(pa.int64()).to_numpy()
    assert times.min() == T0 + 3 * SECOND + 2000 and times.max() == T0 + 63 * SECOND  # original schedule


def test_catchup_backlog_is_bounded_by_max_events_per_trigger(clock):
    options = dict(eventsPerSecond=1000, numPartitions=2, downtime="catchup", maxEventsPerTrigger=5000)
    first = reader(**options)
    last = run(first, first.initialOffset(), clock, 1)
    clock.now += 60 * SECOND
    restarted = reader(**options)
    end = restarted.latestOffset(last, restarted.getDefaultReadLimit())
    assert sum(end["counters"]) - sum(last["counters"]) == 5000


def test_restart_without_downtime_keeps_the_anchor(clock):
    first = reader(eventsPerSecond=1000, numPartitions=2)
    last = run(first, first.initialOffset(), clock, 2)
    restarted = reader(eventsPerSecond=1000, numPartitions=2)
    assert restarted.latestOffset(last, ReadAllAvailable()) == last  # nothing due yet: nothing to re-anchor


def test_restart_with_a_new_rate_reanchors_with_it(clock):
    first = reader(eventsPerSecond=1000, numPartitions=2, downtime="catchup")
    last = run(first, first.initialOffset(), clock, 2)
    restarted = reader(eventsPerSecond=4000, numPartitions=2, downtime="catchup")
    end = restarted.latestOffset(last, ReadAllAvailable())
    assert end["delayUs"] == 500.0 and end["anchorTime"] == clock.now and end["anchorCounters"] == last["counters"]
    later = run(restarted, end, clock, 1)
    assert [c - b for c, b in zip(later["counters"], last["counters"])] == [2001, 2001]  # the new rate from the restart


def test_restart_with_a_new_ramp_reanchors_and_ramps(clock):
    first = reader(eventsPerSecond=1000, numPartitions=1)
    last = run(first, first.initialOffset(), clock, 1)
    restarted = reader(eventsPerSecond=1000, numPartitions=1, rampUpTime="10s")
    end = restarted.latestOffset(last, ReadAllAvailable())
    assert end["rampUs"] == 10 * SECOND and end["anchorTime"] == clock.now
    later = run(restarted, end, clock, 1)
    assert later["counters"][0] - last["counters"][0] == Schedule(0, 1000.0, 10 * SECOND).due(SECOND)


def test_restart_that_reruns_batch_zero_is_still_a_restart(clock):
    """To re-run an uncommitted batch 0 Spark calls initialOffset() on the new reader; it must still resume."""
    first = reader(eventsPerSecond=1000, numPartitions=2)
    batch0 = first.latestOffset(first.initialOffset(), ReadAllAvailable())
    clock.now += 60 * SECOND
    restarted = reader(eventsPerSecond=2000, numPartitions=2)
    restarted.initialOffset()  # the start of the re-run batch 0
    end = restarted.latestOffset(batch0, ReadAllAvailable())
    assert end["anchorTime"] == clock.now and end["delayUs"] == 1000.0 and end["anchorCounters"] == batch0["counters"]
    assert end["counters"] == [c + 1 for c in batch0["counters"]]


def test_a_new_query_does_not_reanchor(clock):
    r = reader(eventsPerSecond=1000, numPartitions=2, startTime=(T0 - 10 * SECOND) // 1000)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {**start, "counters": [5001, 5001]}  # the backfill from startTime, not skipped


def test_restart_with_other_num_partitions_fails_clearly(clock):
    first = reader(eventsPerSecond=1000, numPartitions=2)
    last = run(first, first.initialOffset(), clock, 1)
    with pytest.raises(OptionError) as err:
        reader(eventsPerSecond=1000, numPartitions=3).latestOffset(last, ReadAllAvailable())
    message = str(err.value)
    assert err.value.option == "numPartitions" and "3" in message and "checkpoint" in message
    assert "2, the number of partitions" in message and "new checkpointLocation" in message


def test_replayed_batch_yields_identical_rows(clock):
    """A restart re-runs the last batch with the same offsets: a new reader gives the very same rows."""
    options = dict(eventsPerSecond=1000, numPartitions=3, payloadBytes=32, rampUpTime="2s")
    first = reader(**options)
    start = run(first, first.initialOffset(), clock, 1)
    end = run(first, start, clock, 2)
    original = rows(first, start, end)
    clock.now += 1000 * SECOND
    assert rows(reader(**options), start, end).equals(original)


# --- read() on executors ----------------------------------------------------------------------------

@pytest.mark.parametrize("dumps, loads", [(pickle.dumps, pickle.loads), (cloudpickle.dumps, pickle.loads)])
def test_pickled_reader_reads_the_same_batches(clock, monkeypatch, dumps, loads):
    r = reader(eventsPerSecond=5000, numPartitions=3, payloadBytes=20, rampUpTime="1s", interval="3ms")
    start = r.initialOffset()
    clock.now += 2 * SECOND
    end = r.latestOffset(start, ReadAllAvailable())
    partitions = r.partitions(start, end)
    expected = [list(r.read(p)) for p in partitions]
    copy = loads(dumps(r))
    clock.now += 3600 * SECOND  # the executor's clock differs: read() must not care
    monkeypatch.setattr("time.time_ns", lambda: 0)
    got = [list(copy.read(loads(dumps(p)))) for p in partitions]
    assert len(got) == 3 and all(len(g) == len(e) > 0 for g, e in zip(got, expected))
    assert all(a.equals(b) for g, e in zip(got, expected) for a, b in zip(g, e))
    assert all(isinstance(b, pa.RecordBatch) for g in got for b in g)


# --- batch reads ------------------------------------------------------------------------------------

def test_batch_reader_needs_a_limit():
    with pytest.raises(OptionError) as err:
        ImpulseBatchReader(ImpulseOptions.from_options({"delay": "1ms"}))
    assert err.value.option == "limit" and "spark.read" in str(err.value) and "unbounded" in str(err.value)


def test_batch_reader_reads_the_first_limit_events(clock):
    opts = ImpulseOptions.from_options({"delay": "1ms", "numPartitions": "4", "limit": "10", "interval": "1s"})
    r = ImpulseBatchReader(opts)
    parts = r.partitions()
    assert [(p.subtask_index, p.first, p.end) for p in parts] == [(0, 0, 3), (1, 0, 3), (2, 0, 2), (3, 0, 2)]
    t = pa.Table.from_batches([b for p in parts for b in pickle.loads(pickle.dumps(r)).read(p)])
    assert t.num_rows == 10
    assert t.column("timestamp").cast(pa.int64()).to_pylist()[:3] == [T0, T0 + SECOND, T0 + 2 * SECOND]


def test_batch_reader_with_a_zero_limit_reads_nothing(clock):
    r = ImpulseBatchReader(ImpulseOptions.from_options({"delay": "1ms", "limit": "0"}))
    assert sum(b.num_rows for p in r.partitions() for b in r.read(p)) == 0


def test_data_source_name_schema_and_readers():
    ds = ImpulseDataSource({"delay": "1ms", "payloadBytes": "4", "limit": "1"})
    assert ImpulseDataSource.name() == "impulse"
    assert ds.schema() == ("counter BIGINT NOT NULL, subtask_index BIGINT NOT NULL, timestamp TIMESTAMP NOT NULL, "
                           "payload BINARY NOT NULL")
    assert isinstance(ds.streamReader(None), ImpulseStreamReader)
    assert isinstance(ds.reader(None), ImpulseBatchReader)
    with pytest.raises(OptionError, match="'delay'"):
        ImpulseDataSource({"delay": "soon"}).schema()


# --- _admit -----------------------------------------------------------------------------------------

def test_admit_passes_everything_under_the_cap():
    assert _admit([0, 5], [10, 9], 100) == [10, 9]


def test_admit_shares_evenly_and_gives_unused_shares_to_others():
    assert _admit([0, 0, 0], [100, 100, 100], 30) == [10, 10, 10]
    assert _admit([0, 0], [5, 100], 10) == [5, 5]
    assert _admit([0, 0, 0], [2, 100, 100], 30) == [2, 14, 14]
    assert _admit([0, 0, 0], [0, 7, 7], 5) == [0, 3, 2]
    assert _admit([0, 0, 0], [0, 7, 9], 5) == [0, 2, 3]


def test_admit_leftover_goes_to_the_partitions_furthest_behind():
    assert _admit([0, 0, 0], [100, 100, 100], 2) == [1, 1, 0]
    assert _admit([1, 1, 0], [101, 101, 101], 2) == [2, 1, 1]  # partition 2 is one behind, then the lowest index
    assert _admit([5, 4, 4], [10, 9, 9], 2) == [5, 5, 5]  # equal wants: the lowest counters
    assert _admit([1, 1, 0], [101, 101, 101], 1) == [1, 1, 1]


@pytest.mark.parametrize("cap", [1, 2, 5, 10])
def test_admit_never_starves_a_partition(cap):
    counters = [0, 0, 0, 0, 0]
    for batch in range(50):
        counters = _admit(counters, [1_000_000 + batch] * 5, cap)
        assert max(counters) - min(counters) <= 1
    assert min(counters) >= 50 * cap // 5


def test_admit_invariants_on_random_inputs():
    rng = random.Random(42)
    for _ in range(5000):
        n = rng.randint(1, 8)
        counters = [rng.randint(0, 100) for _ in range(n)]
        ends = [c + rng.choice([0, 0, rng.randint(0, 50)]) for c in counters]
        cap = rng.randint(1, 120)
        got = _admit(counters, ends, cap)
        assert all(c <= g <= e for c, g, e in zip(counters, got, ends))
        assert sum(got) - sum(counters) == min(cap, sum(ends) - sum(counters))
        grants = [g - c for g, c in zip(got, counters)]
        wants = [e - c for e, c in zip(ends, counters)]
        for i, j in itertools.permutations(range(n), 2):  # max-min fair
            if grants[i] < wants[i]:
                assert grants[j] <= grants[i] + 1
