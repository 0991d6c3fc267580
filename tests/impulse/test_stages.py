"""Rate stages (``rateStages``): the exact inverse of the cumulative rate, and the reader planning with it
(pure numpy and a fake clock; the Spark runs are in `test_stages_stream.py`)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from connectors.errors import OptionError
from impulse.options import ImpulseOptions
from impulse.schedule import RateStages, Schedule
from impulse.source import ImpulseBatchReader
from tests.impulse.test_source import SECOND, T0, clock, reader, rows  # noqa: F401 (clock: a fixture)


def integral(stages: RateStages, t_us: int) -> Fraction:
    """N(t), exactly: the area under the piecewise linear rate over the first `t_us` µs (events)."""
    total, start, previous = Fraction(0), 0, Fraction(0)
    for duration, target in stages.stages:
        target = Fraction(target)
        if t_us <= start:
            break
        tau = min(t_us - start, duration)
        at_tau = previous + (target - previous) * Fraction(tau, duration)
        total += (previous + at_tau) * tau / 2_000_000
        start, previous = start + duration, target
    return total


# ≥ 1M events: ramps up, holds, spikes, ramps down to 0, holds at 0, and a fractional per-partition rate
SPIKE = RateStages.parse("10s:50000,20s:50000,5s:200000,5s:0,2s:0,3s:7000", partitions=3)


def test_parse_divides_the_targets_among_the_partitions_and_keeps_the_durations():
    stages = RateStages.parse("30s:1000, 1m:1000 ,500ms:0", partitions=4)
    assert stages.stages == ((30 * SECOND, 250.0), (60 * SECOND, 250.0), (500_000, 0.0))
    assert stages.total == math.ceil(Fraction(30 * 250, 2) + 60 * 250 + Fraction(250, 4)) == 18813
    assert RateStages.from_json(stages.to_json()) == stages


@pytest.mark.parametrize("text, words", [
    ("30s", "duration:events per second"), ("30s:fast", "duration:events per second"),
    ("30s:-5", "targets are numbers ≥ 0"), ("0s:100", "durations are > 0"), ("10s:0,5s:0", "at least one target > 0"),
    ("30parsecs:10", "a known unit"), ("30s:inf", "targets are numbers ≥ 0"),
])
def test_bad_stages_name_the_option_and_what_is_allowed(text, words):
    with pytest.raises(OptionError) as err:
        ImpulseOptions.from_options({"rateStages": text})
    assert err.value.option == "rateStages" and words in str(err.value)


@pytest.mark.parametrize("other", [{"eventsPerSecond": "10"}, {"delay": "1s"}])
def test_stages_are_exclusive_with_a_fixed_rate(other):
    with pytest.raises(OptionError) as err:
        ImpulseOptions.from_options({"rateStages": "1s:10", **other})
    assert err.value.option == "eventsPerSecond/delay/rateStages/rateCurve" and "exactly one of" in str(err.value)


@pytest.mark.parametrize("other", [{"rampUpTime": "1s"}, {"interval": "1ms"}])
def test_stages_refuse_ramp_up_and_interval(other):
    with pytest.raises(OptionError) as err:
        ImpulseOptions.from_options({"rateStages": "1s:10", **other})
    assert err.value.option == next(iter(other)) and "rateStages" in str(err.value)


def test_the_stream_ends_after_the_last_stage_like_a_limit():
    opts = ImpulseOptions.from_options({"rateStages": "10s:1000,10s:1000", "numPartitions": "4"})
    assert opts.limits == (3750,) * 4 and opts.rate_stages.total == 3750  # (5000 + 10000) / 4
    capped = ImpulseOptions.from_options({"rateStages": "10s:1000,10s:1000", "numPartitions": "4", "limit": "10002"})
    assert capped.limits == (2501, 2501, 2500, 2500)
    assert opts.events_per_second == pytest.approx(1000)  # the peak


def test_offsets_are_the_floored_exact_inverse_of_the_integral_on_over_a_million_events():
    k = np.arange(SPIKE.total, dtype=np.int64)
    assert SPIKE.total > 1_000_000 // 3
    offsets = SPIKE.offsets_us(k)
    assert offsets[0] == 0 and (np.diff(offsets) >= 0).all() and offsets[-1] < SPIKE.duration_us
    # event k is due at ⌊N⁻¹(k)⌋: N(offset) ≤ k < N(offset + 1), checked exactly on a sample
    # event k is due at ⌊N⁻¹(k)⌋: N(offset) ≤ k < N(offset + 1), checked exactly on a sample (doubles may move
    # an event that falls within 1e-9 µs of a whole µs by one µs)
    for i in map(int, np.linspace(0, SPIKE.total - 1, 400).astype(np.int64)):
        t = int(offsets[i])
        assert integral(SPIKE, t - 1) <= i < integral(SPIKE, t + 2)


@pytest.mark.parametrize("partitions", [1, 3])
def test_events_per_second_equal_the_integral_of_the_stages_within_one_per_partition(partitions):
    stages = RateStages.parse("10s:50000,20s:50000,5s:200000,5s:0,2s:0,3s:7000", partitions)
    offsets = stages.offsets_us(np.arange(stages.total, dtype=np.int64))
    assert stages.total * partitions >= 1_000_000
    per_second = np.bincount(offsets // SECOND, minlength=stages.duration_us // SECOND)
    assert len(per_second) == stages.duration_us // SECOND
    for second, count in enumerate(per_second):
        exact = integral(stages, (second + 1) * SECOND) - integral(stages, second * SECOND)
        assert abs(count - exact) <= 1, (second, count, exact)  # the acceptance: ±1 per partition
    assert stages.total == math.ceil(integral(stages, stages.duration_us))


def test_due_counts_exactly_the_events_whose_time_has_passed():
    offsets = SPIKE.offsets_us(np.arange(SPIKE.total, dtype=np.int64))
    times = list(range(-5, 400)) + list(np.linspace(0, SPIKE.duration_us + 10, 3000).astype(int))
    times += [int(t) + d for t in offsets[:: SPIKE.total // 200] for d in (-1, 0, 1)]
    for t in times:
        assert SPIKE.due(t) == int(np.searchsorted(offsets, t, side="right")), t
    assert SPIKE.due(10 ** 15) == SPIKE.total


def test_a_reanchored_schedule_resumes_the_profile_at_the_next_counter():
    schedule = Schedule(T0, 1.0, 0, SPIKE)
    base = 400_000
    resumed = Schedule(T0 + 3600 * SECOND, 1.0, 0, SPIKE)
    counters = np.arange(base, base + 1000, dtype=np.int64)
    shift = resumed.anchor_us - schedule.anchor_us - SPIKE.offset_us(base)
    assert np.array_equal(resumed.times_us(counters, base), schedule.times_us(counters, 0) + shift)
    assert resumed.times_us(counters[:1], base)[0] == resumed.anchor_us  # due at once
    assert resumed.next_counter(resumed.anchor_us - 1, base) == base
    assert resumed.next_counter(resumed.anchor_us, base) == base + 1
    end = resumed.anchor_us + SPIKE.duration_us
    assert resumed.next_counter(end, base) == SPIKE.total  # the rest of the profile, no more


# --- the reader, on a fake clock ----------------------------------------------------------------------

STAGES = "2s:1000,3s:1000,1s:4000"  # 1000 + 3000 + 2500 = 6500 events over all partitions


def test_a_pinned_stream_equals_the_batch_read_and_ends_after_the_last_stage(clock):
    r = reader(rateStages=STAGES, numPartitions=2, startTime=T0 // 1000)
    offsets = [r.initialOffset()]
    assert offsets[0]["stages"] == [[2 * SECOND, 500.0], [3 * SECOND, 500.0], [SECOND, 2000.0]]
    for _ in range(7):
        clock.now += SECOND
        offsets.append(r.latestOffset(offsets[-1], ReadAllAvailable()))
    assert offsets[-1]["counters"] == [3250, 3250] == [offsets[-2]["counters"][0]] * 2
    stream = pa.concat_tables(rows(r, a, b) for a, b in zip(offsets, offsets[1:]))
    batch = ImpulseBatchReader(r.options)
    read = pa.Table.from_batches([b for p in batch.partitions() for b in batch.read(p)])
    assert stream.sort_by([("subtask_index", "ascending"), ("counter", "ascending")]).equals(
        read.sort_by([("subtask_index", "ascending"), ("counter", "ascending")]))
    times = read.column("timestamp").cast(pa.int64()).to_numpy() - T0
    per_second = np.bincount(times // SECOND)
    assert list(per_second) == [250, 750, 1000, 1000, 1000, 2500]  # the integral of each second


def test_latest_offset_follows_the_integral(clock):
    r = reader(rateStages=STAGES, numPartitions=2, startTime=T0 // 1000)
    start = r.initialOffset()
    clock.now = T0 + SECOND
    # per partition: N(1s) = 125 events; events 0..125 have N⁻¹(k) ≤ 1s
    assert r.latestOffset(start, ReadAllAvailable())["counters"] == [126, 126]


def test_restart_with_skip_pauses_the_profile_and_resumes_it(clock):
    first = reader(rateStages=STAGES, numPartitions=2)
    start = first.initialOffset()
    clock.now += 2 * SECOND
    last = first.latestOffset(start, ReadAllAvailable())
    assert last["counters"] == [501, 501]  # N(2s) = 500 per partition, and event 0 at the start
    clock.now += 3600 * SECOND
    restarted = reader(rateStages=STAGES, numPartitions=2)
    end = restarted.latestOffset(last, ReadAllAvailable())
    assert end["anchorTime"] == clock.now and end["anchorCounters"] == [501, 501] and end["counters"] == [502, 502]
    offsets = drain_clock(restarted, end, clock)
    assert offsets[-1]["counters"] == [3250, 3250]
    times = rows(restarted, last, offsets[-1]).column("timestamp").cast(pa.int64()).to_numpy()
    schedule = Schedule(T0, 1.0, 0, restarted.options.rate_stages)
    expected = schedule.times_us(np.arange(501, 3250), 0) + (end["anchorTime"] - T0 - schedule.stages.offset_us(501))
    assert np.array_equal(np.sort(times), np.sort(np.concatenate([expected, expected])))


def test_restart_with_other_stages_reanchors_with_them(clock):
    first = reader(rateStages=STAGES, numPartitions=2, startTime=T0 // 1000)
    last = first.latestOffset(first.initialOffset(), ReadAllAvailable())
    clock.now += SECOND
    changed = reader(rateStages="10s:100", numPartitions=2, startTime=T0 // 1000)
    end = changed.latestOffset(last, ReadAllAvailable())
    assert end["stages"] == [[10 * SECOND, 50.0]] and end["anchorTime"] == clock.now
    fixed = reader(eventsPerSecond=10, numPartitions=2, startTime=T0 // 1000)
    end = fixed.latestOffset(last, ReadAllAvailable())
    assert "stages" not in end and end["anchorTime"] == clock.now and end["delayUs"] == 200_000


def drain_clock(r, start: dict, clock, step: int = SECOND) -> list[dict]:
    offsets = [start]
    for _ in range(100):
        clock.now += step
        end = r.latestOffset(offsets[-1], ReadAllAvailable())
        if end["counters"] == offsets[-1]["counters"] and clock.now > end["anchorTime"] + 10 * 60 * SECOND:
            return offsets
        offsets.append(end)
    return offsets
