"""`impulse.schedule.Schedule`: when events are due, with and without ramp-up (no Spark)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from impulse.schedule import Schedule

ANCHOR = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in µs

SCHEDULES = [
    Schedule(ANCHOR, 1000.0),                     # 1 000 events/s per partition
    Schedule(ANCHOR, 1.5),                        # fractional µs delay
    Schedule(ANCHOR, 3 * 1e6 / 7),                # eventsPerSecond=7 over 3 partitions
    Schedule(ANCHOR, 0.25),                       # 4 events per µs
    Schedule(ANCHOR, 1000.0, ramp_us=2_000_000),  # ramp-up of 2 s
    Schedule(ANCHOR, 7.0 / 3.0, ramp_us=10_000),
    Schedule(ANCHOR, 0.3, ramp_us=1_000),
]


def _count_due(schedule: Schedule, offsets: np.ndarray, now: int) -> int:
    """The definition: how many events have ``anchor + offset(k) ≤ now``."""
    return int(np.searchsorted(offsets, now - schedule.anchor_us, side="right"))


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_offsets_are_non_decreasing_integers_starting_at_zero(schedule):
    offsets = schedule.offsets_us(np.arange(200_000, dtype=np.int64))
    assert offsets.dtype == np.int64
    assert offsets[0] == 0
    assert (np.diff(offsets) >= 0).all()


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_due_counts_exactly_the_events_whose_offset_has_passed(schedule):
    offsets = schedule.offsets_us(np.arange(200_000, dtype=np.int64))
    horizon = int(offsets[-1]) - 1
    step = max(1, horizon // 4_000)
    previous = 0
    for elapsed in list(range(0, horizon, step)) + list(range(0, min(horizon, 300))):
        due = schedule.due(ANCHOR + elapsed)
        assert due == _count_due(schedule, offsets, ANCHOR + elapsed), elapsed
    for elapsed in range(0, horizon, step):  # monotone in time
        due = schedule.due(ANCHOR + elapsed)
        assert due >= previous
        previous = due


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_event_k_is_due_exactly_at_its_offset(schedule):
    ks = np.array([0, 1, 2, 10, 999, 12_345, 100_000], dtype=np.int64)
    for k, offset in zip(ks, schedule.offsets_us(ks)):
        assert schedule.due(ANCHOR + int(offset)) > k            # due at its time
        if offset > 0:
            assert schedule.due(ANCHOR + int(offset) - 1) <= k   # not a µs before


def test_nothing_is_due_before_the_anchor_and_the_first_event_at_it():
    schedule = Schedule(ANCHOR, 1000.0, ramp_us=1_000_000)
    assert schedule.due(ANCHOR - 1) == 0
    assert schedule.due(ANCHOR - 10**12) == 0
    assert schedule.due(ANCHOR) == 1


def test_without_ramp_events_are_evenly_spaced():
    schedule = Schedule(ANCHOR, 250_000.0)  # delay 250ms
    assert list(schedule.offsets_us(np.arange(5, dtype=np.int64))) == [0, 250_000, 500_000, 750_000, 1_000_000]
    assert schedule.due(ANCHOR + 999_999) == 4
    assert schedule.due(ANCHOR + 1_000_000) == 5


def test_fractional_delay_loses_no_rate():
    """eventsPerSecond=7 over 3 partitions: each partition runs at 7/3 events/s, not 2."""
    schedule = Schedule(ANCHOR, 3 * 1e6 / 7)
    hour = 3_600_000_000
    assert schedule.due(ANCHOR + hour) == math.floor(3600 * 7 / 3) + 1


def test_due_is_exact_far_from_the_anchor():
    """Epoch-sized elapsed times (startTime=0) stay exact."""
    schedule = Schedule(0, 1000.0)
    now = 1_795_000_000_123_456
    assert schedule.due(now) == now // 1000 + 1


# --- ramp-up -----------------------------------------------------------------------------------------

DELAY = 1000.0       # 1 000 events/s per partition at full rate
RAMP = 10_000_000    # 10 s


def test_ramp_is_quadratic_then_linear():
    schedule = Schedule(ANCHOR, DELAY, RAMP)
    seconds = 1_000_000
    # during the ramp: the rate grows linearly, so the count grows as t² / (2 · T · delay)
    for t in (1, 2, 5, 9):
        expected = (t * seconds) ** 2 / (2 * RAMP * DELAY)
        assert schedule.due(ANCHOR + t * seconds) == math.floor(expected) + 1
    # after it: full rate, lagging the unramped schedule by T/2
    for t in (10, 11, 20, 100):
        expected = (t * seconds - RAMP / 2) / DELAY
        assert schedule.due(ANCHOR + t * seconds) == math.floor(expected) + 1
    # the rate doubles from 2 s to 4 s of ramp, and then stays at the full rate
    rate = lambda a, b: schedule.due(ANCHOR + b) - schedule.due(ANCHOR + a)  # noqa: E731
    assert rate(2 * seconds, 2 * seconds + 100_000) == pytest.approx(2 * rate(1 * seconds, 1 * seconds + 100_000), abs=2)
    assert rate(12 * seconds, 13 * seconds) == rate(50 * seconds, 51 * seconds) == 1000


def test_ramp_is_continuous_at_its_end():
    schedule = Schedule(ANCHOR, DELAY, RAMP)
    k_end = int(RAMP / 2 / DELAY)  # the event due at the end of the ramp
    offsets = schedule.offsets_us(np.arange(k_end - 3, k_end + 4, dtype=np.int64))
    assert offsets[3] == RAMP
    assert (np.diff(offsets) > 0).all() and (np.diff(offsets) <= 2 * DELAY).all()


def test_ramp_does_not_stall_the_first_second():
    """Spark's rate source emits nothing while rowsPerSecond / rampUpTime (integer division) is 0."""
    # 5 events/s per partition ramping over 60 s: Spark's integer division would give 0 rows/s for 12 s.
    schedule = Schedule(ANCHOR, 200_000.0, ramp_us=60_000_000)
    assert schedule.due(ANCHOR + 1_000_000) >= 1
    assert schedule.due(ANCHOR + 5_000_000) > schedule.due(ANCHOR + 1_000_000)
    fast = Schedule(ANCHOR, DELAY, RAMP)
    assert fast.due(ANCHOR + 1_000_000) - 1 == math.floor(1e12 / (2 * RAMP * DELAY))  # 50 events in the first second


def test_total_ramp_events_are_half_the_full_rate():
    schedule = Schedule(ANCHOR, DELAY, RAMP)
    assert schedule.due(ANCHOR + RAMP) == pytest.approx(RAMP / DELAY / 2, abs=1)


def test_schedules_are_pure_values():
    a, b = Schedule(ANCHOR, 1.5, 10), Schedule(ANCHOR, 1.5, 10)
    assert a == b and hash(a) == hash(b)
    ks = np.arange(1000, dtype=np.int64)
    assert np.array_equal(a.offsets_us(ks), b.offsets_us(ks))


@pytest.mark.parametrize("schedule", [s for s in SCHEDULES if not s.ramp_us], ids=repr)
def test_due_many_is_due_at_every_time(schedule):
    offsets = schedule.offsets_us(np.arange(200_000, dtype=np.int64))
    times = np.concatenate([np.arange(-3, 400), np.linspace(0, offsets[-1] - 1, 5000).astype(np.int64),
                            offsets[::997], offsets[1::997] - 1]) + ANCHOR
    assert list(schedule.due_many(times)) == [schedule.due(int(t)) for t in times]
