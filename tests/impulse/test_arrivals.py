"""Poisson arrivals without Spark: exponential gaps (their mean and coefficient of variation within 5σ of a Poisson
process's), events in counter order, the configured rate exact per block, the same times for any range of counters,
the events due at any time consistent with the times, independent partitions; bad options refused."""

from __future__ import annotations

import numpy as np
import pytest

from connectors.errors import OptionError
from impulse.options import ImpulseOptions
from impulse.schedule import POISSON_BLOCK, RateStages, Schedule

DELAY = 1_000.0  # µs between events of a partition, on average: 1000 events/s
N = 200_000


def test_gaps_are_exponential_with_the_configured_mean():
    times = Schedule(0, DELAY, poisson_seed=3).times_us(np.arange(N, dtype=np.int64), 0, subtask=2)
    gaps = np.diff(times).astype(np.float64)
    assert (gaps >= 0).all()  # counter order
    assert abs(gaps.mean() - DELAY) < 5 * DELAY / np.sqrt(len(gaps))
    cv = gaps.std() / gaps.mean()
    assert abs(cv - 1.0) < 5 * np.sqrt(2.0 / len(gaps))  # an exponential's CV is 1; the estimate's σ ≈ √(2/n)
    assert np.mean(gaps < DELAY) == pytest.approx(1 - np.exp(-1), abs=5 * 0.5 / np.sqrt(len(gaps)))  # P(X < mean)
    blocks = times[::POISSON_BLOCK]  # every block holds exactly B events
    assert (np.abs(blocks - np.arange(len(blocks)) * POISSON_BLOCK * DELAY) < POISSON_BLOCK * DELAY).all()


def test_uniform_arrivals_are_unchanged():
    k = np.arange(10, dtype=np.int64)
    assert Schedule(0, DELAY).times_us(k, 0).tolist() == (k * 1000).tolist()


@pytest.mark.parametrize("schedule", [Schedule(5_000, DELAY, poisson_seed=1),
                                      Schedule(5_000, DELAY, ramp_us=2_000_000, poisson_seed=1),
                                      Schedule(5_000, DELAY, stages=RateStages.parse("2s:500,3s:2000"), poisson_seed=1)])
def test_times_do_not_depend_on_the_range_and_due_counts_agree(schedule):
    base = 700
    counters = np.arange(base, base + 8_000, dtype=np.int64)
    times = schedule.times_us(counters, base, 1)
    assert (np.diff(times) >= 0).all()
    assert (schedule.times_us(counters[3_001:5_500], base, 1) == times[3_001:5_500]).all()
    for now in (4_999, 5_000, int(times[0]), int(times[1234]), int(times[1234]) + 1, int(times[-2000]) - 7):
        due = schedule.next_counter(now, base, 1)
        assert due == base + int(np.count_nonzero(times <= now)), now


def test_partitions_draw_their_own_arrivals():
    schedule, k = Schedule(0, DELAY, poisson_seed=0), np.arange(2_000, dtype=np.int64)
    assert not np.array_equal(schedule.times_us(k, 0, 0), schedule.times_us(k, 0, 1))
    assert np.array_equal(schedule.times_us(k, 0, 1), Schedule(0, DELAY, poisson_seed=0).times_us(k, 0, 1))
    assert not np.array_equal(schedule.times_us(k, 0, 1), Schedule(0, DELAY, poisson_seed=1).times_us(k, 0, 1))


def test_the_offset_keeps_the_arrival():
    schedule = Schedule.of_offset({"anchorTime": 0, "delayUs": DELAY, "rampUs": 0, "poissonSeed": 4})
    assert schedule == Schedule(0, DELAY, poisson_seed=4)
    assert Schedule.of_offset({"anchorTime": 0, "delayUs": DELAY, "rampUs": 0}).poisson_seed is None


@pytest.mark.parametrize("options, option", [({"arrival": "bursty"}, "arrival"),
                                             ({"arrival": "poisson", "interval": "1ms"}, "arrival")])
def test_bad_arrival_options_are_refused(options, option):
    with pytest.raises(OptionError, match=rf"option '{option}'"):
        ImpulseOptions.from_options({"eventsPerSecond": "100", **options})
