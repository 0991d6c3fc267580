"""``rateCurve`` and ``bursts.*`` (`impulse.curve`, `impulse.schedule.PeriodicRate`): the periodic rate's arithmetic
and its options' errors (no Spark)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from connectors.errors import OptionError
from impulse.options import ImpulseOptions
from impulse.schedule import PeriodicRate, Schedule, rate_from_json

# numpy 2 renamed trapz to trapezoid; the lowest numpy impulse allows (1.26) has only trapz
_trapezoid = getattr(np, "trapezoid", None) or np.trapz

ANCHOR = 1_767_225_600_000_000
DAILY = "daily:min=2000,max=20000,peak=14:00"


def _rate(**options) -> PeriodicRate:
    return ImpulseOptions.from_options({k.replace("_", "."): v for k, v in options.items()}).rate_stages


def _daily(t_s: np.ndarray, period_s: float) -> np.ndarray:
    return 2000 + 18000 * (1 + np.cos(2 * np.pi * (t_s / period_s - 14 / 24))) / 2


def test_a_daily_curve_over_a_scaled_day_follows_the_cosine():
    curve = _rate(rateCurve=DAILY, rateCurve_period="10m", numPartitions="2")
    assert curve.period_us == 600_000_000 and curve.peak * 2 == 20_000
    t = np.arange(0, 1_200_000_000, 1_000_000)                     # two periods, each second
    assert np.allclose(curve.rate_at(t) * 2, _daily(t / 1e6, 600), rtol=0, atol=0.0006 * 18000)
    assert curve.rate_at(np.array([350_000_000]))[0] * 2 == pytest.approx(20_000)   # 14:00 of a 10-minute day
    # the events of each minute are the curve's integral over it, within one event
    k = np.arange(0, 7_000_000)
    offsets = curve.offsets_us(k)
    assert (np.diff(offsets) >= 0).all()
    per_minute = np.diff(np.searchsorted(offsets, np.arange(0, 1_200_000_001, 60_000_000)))
    minutes = np.arange(0, 1200, 0.01)
    expected = [_trapezoid(_daily(m, 600), m) / 2 for m in np.split(minutes, 20)]
    assert np.allclose(per_minute, expected, rtol=2e-3)


def test_due_is_exactly_the_count_of_offsets_due():
    curve = _rate(rateCurve="daily:min=0,max=3000,peak=06:00", rateCurve_period="2s", numPartitions="1",
                  bursts_every="500ms", bursts_factor="4", bursts_duration="100ms")
    offsets = curve.offsets_us(np.arange(0, 20_000))
    for elapsed in [0, 1, 499_999, 500_000, 1_999_999, 2_000_000, 2_000_001, 5_123_457, 7_999_999]:
        assert curve.due(elapsed) == int(np.searchsorted(offsets, elapsed, side="right")), elapsed


def test_bursts_multiply_the_rate_for_the_last_duration_of_each_interval():
    bursts = _rate(eventsPerSecond="1000", numPartitions="2", bursts_every="1m", bursts_factor="3",
                   bursts_duration="10s")
    rate = bursts.rate_at(np.array([0, 49_000_000, 50_500_000, 59_000_000, 60_000_000, 110_500_000])) * 2
    assert rate.tolist() == [1000, 1000, 3000, 3000, 1000, 3000]
    offsets = bursts.offsets_us(np.arange(0, 200_000))
    per_10s = np.diff(np.searchsorted(offsets, np.arange(0, 180_000_001, 10_000_000)))
    assert per_10s.tolist() == [5000] * 5 + [15000] + [5000] * 5 + [15000] + [5000] * 5 + [15000]


def test_a_restart_resumes_the_profile_at_the_next_counter():
    curve = _rate(rateCurve=DAILY, rateCurve_period="1m", numPartitions="1")
    first = Schedule(ANCHOR, 50.0, 0, curve)
    later = Schedule(ANCHOR + 3_600_000_000, 50.0, 0, curve)        # re-anchored an hour later at counter 300,000
    gaps = np.diff(first.times_us(np.arange(300_000, 300_100), 0))
    assert (np.diff(later.times_us(np.arange(300_000, 300_100), 300_000)) == gaps).all()
    assert later.next_counter(ANCHOR + 3_600_000_000, 300_000) == 300_001


def test_poisson_arrivals_follow_the_curve():
    curve = _rate(rateCurve="daily:min=1000,max=9000,peak=12:00", rateCurve_period="10s", numPartitions="1")
    poisson = Schedule(ANCHOR, 100.0, 0, curve, poisson_seed=7)
    times = poisson.times_us(np.arange(0, 50_000), 0) - ANCHOR
    assert (np.diff(times) >= 0).all()
    per_second = np.diff(np.searchsorted(times, np.arange(0, 10_000_001, 1_000_000)))
    uniform = np.diff(np.searchsorted(curve.offsets_us(np.arange(0, 50_000)), np.arange(0, 10_000_001, 1_000_000)))
    assert np.abs(per_second - uniform).max() <= 1024                  # within a Poisson block of the curve
    assert poisson.next_counter(ANCHOR + 5_000_000, 0) == int(np.searchsorted(times, 5_000_000, side="right"))


def test_the_table_is_stored_in_the_offset_and_read_back_the_same():
    curve = _rate(rateCurve=DAILY, rateCurve_period="10m", numPartitions="3", bursts_every="2m", bursts_factor="2",
                  bursts_duration="5s")
    stored = curve.to_json()
    assert rate_from_json(stored) == curve and Schedule.of_offset(
        {"anchorTime": ANCHOR, "delayUs": 1.0, "rampUs": 0, "stages": stored}).stages == curve
    assert all(round(r, 3) == r for _, r in stored["stages"]) and stored["stages"][-1][1] == stored["start"]
    k = np.arange(0, 1_000_000, 997)
    assert (rate_from_json(stored).offsets_us(k) == curve.offsets_us(k)).all()
    assert math.isfinite(curve.peak) and curve.total is None


@pytest.mark.parametrize(("options", "named", "says"), [
    ({"rateCurve": "daily:min=-5,max=10,peak=14:00"}, "rateCurve", "min is -5, a rate cannot be negative"),
    ({"rateCurve": "daily:min=50,max=10,peak=14:00"}, "rateCurve", "max is 10"),
    ({"rateCurve": "daily:min=5,max=10"}, "rateCurve", "min, max and peak are all needed"),
    ({"rateCurve": "daily:min=5,max=10,peak=24:00"}, "rateCurve", "peak is '24:00', not HH:MM"),
    ({"rateCurve": "weekly:min=5,max=10,peak=14:00"}, "rateCurve", "daily:min=RATE"),
    ({"rateCurve": DAILY, "eventsPerSecond": "5"}, "eventsPerSecond/delay/rateStages/rateCurve", "exactly one"),
    ({"eventsPerSecond": "5", "rateCurve.period": "1m"}, "rateCurve.period", "with 'rateCurve'"),
    ({"rateCurve": DAILY, "rateCurve.period": "0s"}, "rateCurve.period", None),
    ({"eventsPerSecond": "5", "bursts.every": "1m"}, "bursts.every/bursts.factor/bursts.duration", "all three"),
    ({"eventsPerSecond": "5", "bursts.every": "1m", "bursts.factor": "2", "bursts.duration": "1m"},
     "bursts.duration", "less than bursts.every"),
    ({"eventsPerSecond": "5", "bursts.every": "1m", "bursts.factor": "0", "bursts.duration": "1s"},
     "bursts.factor", None),
    ({"rateCurve": DAILY, "rateCurve.period": "10m", "bursts.every": "7m", "bursts.factor": "2",
      "bursts.duration": "1s"}, "bursts.every", "a divisor of rateCurve.period"),
    ({"rateStages": "10s:5", "bursts.every": "1m", "bursts.factor": "2", "bursts.duration": "1s"},
     "bursts.every", "no bursts with 'rateStages'"),
    ({"rateCurve": DAILY, "rampUpTime": "10s"}, "rampUpTime", "no 'rampUpTime' with 'rateCurve'"),
])
def test_bad_curves_and_bursts_fail_at_start_naming_the_option(options, named, says):
    with pytest.raises(OptionError, match=says) as caught:
        ImpulseOptions.from_options({"numPartitions": "1", **options})
    assert caught.value.option == named


def test_too_many_bursts_a_period_are_refused_naming_the_option():
    with pytest.raises(OptionError, match=r"at most 975 bursts a period \(86400 s\), not 1,440") as caught:
        ImpulseOptions.from_options({"rateCurve": DAILY, "bursts.every": "1m", "bursts.factor": "2",
                                     "bursts.duration": "1s", "numPartitions": "1"})
    assert caught.value.option == "bursts.every"
