"""The impulse source's periodic rate: ``rateCurve`` (a daily cycle over a scaled day) and ``bursts.*``, parsed on
the driver into one period of piecewise linear stages (`impulse.schedule.PeriodicRate`).

``rateCurve = "daily:min=2000,max=20000,peak=14:00"`` is a cosine over the day, events/s over all partitions:
``min + (max − min)·(1 + cos(2π(t/P − peak/24 h)))/2`` at the time ``t`` of the day since the stream's start
(its first event at 00:00), with ``P`` = ``rateCurve.period`` (default 24 h; ``10m`` compresses the day into
10 minutes). The curve is sampled at `SAMPLES` points a period and joined by straight lines (within 0.06 % of
``max − min`` of the cosine).

``bursts.every``, ``bursts.factor``, ``bursts.duration``: the last ``duration`` of every ``every`` multiplies the
rate (the curve's, or else ``eventsPerSecond``'s) by ``factor``, with 1 µs ramps at its edges; with a curve
``every`` divides its period.

The knots' rates are rounded to `DIGITS` decimals of events/s, so the table (stored in the stream's offset, read
back by the executors) is the same whichever machine computes it.
"""

from __future__ import annotations

import bisect
import math
import re

from connectors.errors import OptionError
from connectors.options import OptionReader
from impulse.schedule import PeriodicRate

__all__ = ["CURVE", "PERIOD", "BURSTS", "SHAPES", "periodic_rate"]

CURVE = "rateCurve"
PERIOD = "rateCurve.period"
BURSTS = ("bursts.every", "bursts.factor", "bursts.duration")
SHAPES = ("daily",)
DAY_US = 86_400_000_000
#: Points sampled on the curve per period
SAMPLES = 96
#: Decimals of events/s kept in the knots' rates
DIGITS = 3
#: The most knots a period may hold (it is stored in each offset)
MAX_KNOTS = 4_000

_EXPECTED = ("'daily:min=RATE,max=RATE,peak=HH:MM' (events/s over all partitions; min ≥ 0, max ≥ min and > 0; "
             "peak the time of the scaled day with the highest rate), e.g. 'daily:min=2000,max=20000,peak=14:00'")
_PEAK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


def _daily(text: str) -> tuple[float, float, float]:
    """``'daily:min=…,max=…,peak=HH:MM'`` → (min, max, the peak as a share of the day); `OptionError` naming
    ``rateCurve``."""
    shape, colon, rest = str(text).partition(":")
    if shape.strip().lower() not in SHAPES or not colon:
        raise OptionError(CURVE, text, _EXPECTED)
    values = {}
    for item in rest.split(","):
        name, equals, value = item.partition("=")
        if not equals or name.strip().lower() not in ("min", "max", "peak") or name.strip().lower() in values:
            raise OptionError(CURVE, text, _EXPECTED)
        values[name.strip().lower()] = value.strip()
    if set(values) != {"min", "max", "peak"}:
        raise OptionError(CURVE, text, _EXPECTED + "; min, max and peak are all needed")
    try:
        low, high = (float(values[k].replace("_", "")) for k in ("min", "max"))
    except ValueError:
        raise OptionError(CURVE, text, _EXPECTED) from None
    if not (math.isfinite(low) and math.isfinite(high)) or low < 0:
        raise OptionError(CURVE, text, _EXPECTED + f"; min is {values['min']}, a rate cannot be negative")
    if high < low or high <= 0:
        raise OptionError(CURVE, text, _EXPECTED + f"; max is {values['max']}")
    peak = _PEAK.match(values["peak"])
    if peak is None:
        raise OptionError(CURVE, text, _EXPECTED + f"; peak is {values['peak']!r}, not HH:MM")
    return low, high, (int(peak.group(1)) * 60 + int(peak.group(2))) / 1440


def periodic_rate(reader: OptionReader, partitions: int, base_rate: float | None) -> PeriodicRate | None:
    """``rateCurve``, ``rateCurve.period`` and ``bursts.*`` read from `reader` → one partition's `PeriodicRate`, None
    without them. `base_rate` (events/s over all partitions, from ``eventsPerSecond`` or ``delay``) is the rate the
    bursts multiply without a curve. `OptionError` naming the option for a bad value or a missing companion."""
    curve_text = reader.string(CURVE)
    period = reader.duration_us(PERIOD)
    every, duration = reader.duration_us(BURSTS[0]), reader.duration_us(BURSTS[2])
    factor = reader.number(BURSTS[1], above=0)
    burst_values = {BURSTS[0]: every, BURSTS[1]: factor, BURSTS[2]: duration}
    if curve_text is None and period is not None:
        raise OptionError(PERIOD, reader.string(PERIOD), f"with '{CURVE}' (the period of its day)")
    given = [name for name, value in burst_values.items() if value is not None]
    if given and len(given) != len(BURSTS):
        raise OptionError("/".join(BURSTS), {name: reader.string(name) for name in given},
                          "all three or none: 'bursts.every' (how often, e.g. '2m'), 'bursts.factor' (the rate's "
                          "multiplier, > 0) and 'bursts.duration' (how long, less than bursts.every)")
    if curve_text is None and not given:
        return None
    if given and duration >= every:
        raise OptionError(BURSTS[2], reader.string(BURSTS[2]), f"less than bursts.every ({reader.string(BURSTS[0])})")
    if curve_text is not None:
        low, high, peak = _daily(curve_text)
        period = period if period is not None else DAY_US
        if given and period % every:
            raise OptionError(BURSTS[0], reader.string(BURSTS[0]),
                              f"a divisor of {PERIOD} ({period / 1e6:g} s), so that bursts repeat with the day")

        def curve(t: int) -> float:
            return low + (high - low) * (1 + math.cos(2 * math.pi * (t / period - peak))) / 2
        samples = {round(i * period / SAMPLES) for i in range(SAMPLES + 1)}
    else:
        period, samples = every, {0, every}

        def curve(t: int) -> float:
            return base_rate
    edges = []
    if given:
        for end in range(every, period + 1, every):
            edges.append((end - duration, end))
    if len(samples) + 4 * len(edges) > MAX_KNOTS:
        raise OptionError(BURSTS[0], reader.string(BURSTS[0]), f"at most {(MAX_KNOTS - len(samples)) // 4:,} bursts a "
                          f"period ({period / 1e6:g} s), not {len(edges):,}")
    knots = set(samples)
    for begin, end in edges:
        knots.update((begin, begin + 1, end - 1, end))
    times = sorted(t for t in knots if 0 <= t <= period)
    begins = [begin + 1 for begin, _ in edges]   # a burst's full rate: from begin + 1 to end − 1 µs

    def rate(t: int) -> float:
        i = bisect.bisect_right(begins, t) - 1
        boost = factor if i >= 0 and t <= edges[i][1] - 1 else 1.0
        return round(curve(t) * boost / partitions, DIGITS)
    rates = [rate(t) for t in times]
    rates[-1] = rates[0]   # the period ends where it starts (the cosine's last bit may differ)
    stages = tuple((b - a, r) for a, b, r in zip(times, times[1:], rates[1:]) if b > a)
    return PeriodicRate(stages, rates[0])
