"""The impulse source's rate curve (``rateCurve``, ``rateCurve.period``, ``bursts.*``), as the harness reads it for
its report: a `StagePlan` of the run's ``--duration`` whose stages are intervals of the curve.

The curve is parsed by the source's own parser (`impulse.curve.periodic_rate`, with the run's partitions, so the
rates are the ones the source schedules) and repeated over the run. Each period is cut into `intervals_per_period`
equal intervals — 24 (the scaled day's hours), or fewer so that an interval lasts at least `MIN_INTERVAL_S` (a few
micro-batches, which the achieved rate's slope needs) — and the run's end cuts the last one. Each interval keeps the
curve's exact piecewise-linear rate (`Stage.knots`): its target is the mean of the curve over it (the events it
schedules over its length), the display shows the curve's rate now, report.json and the HTML report the target
beside the achieved rate per interval, as for ``rateStages``.

Bursts go with a curve in the harness (a flat one, ``min`` = ``max``, for bursts over a constant rate): the run's
rate is then the curve's, not ``--rate``.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from connectors.errors import OptionError
from connectors.options import OptionReader
from impulse.curve import BURSTS, CURVE, PERIOD, periodic_rate
from impulse.loadtest.settings.stages import Stage, StagePlan
from impulse.loadtest.settings.units import LoadError

__all__ = ["CURVE_OPTIONS", "MIN_INTERVAL_S", "curve_plan", "intervals_per_period"]

#: The source options of a rate curve (the harness passes them to the source as written)
CURVE_OPTIONS = (CURVE, PERIOD, *BURSTS)
#: The shortest interval of the curve the report judges on its own, seconds
MIN_INTERVAL_S = 5.0
_DIVISIONS = (24, 12, 8, 6, 4, 3, 2, 1)   # intervals per period: the scaled day's hours, or whole groups of them


def intervals_per_period(period_s: float) -> int:
    """How many equal intervals a period of `period_s` is cut into: the most of 24, 12, …, 1 that last at least
    `MIN_INTERVAL_S` each (1 for a shorter period)."""
    return next((n for n in _DIVISIONS if period_s / n >= MIN_INTERVAL_S), 1)


def curve_plan(source_options: Mapping[str, str], duration_s: float, partitions: int) -> StagePlan | None:
    """The curve of `source_options` over `duration_s` seconds as a `StagePlan` (rates over all `partitions`);
    None without ``rateCurve`` or ``bursts.*``. `LoadError` naming the option for a bad value, and for bursts
    without ``rateCurve``."""
    given = {k: v for k, v in source_options.items() if k.lower() in {o.lower() for o in CURVE_OPTIONS}}
    if not given:
        return None
    if not any(k.lower() == CURVE.lower() for k in given):
        raise LoadError(f"--source-option {'/'.join(sorted(given))}: the harness runs bursts over a {CURVE} (for a "
                        f"constant rate with bursts, a flat one: {CURVE}=daily:min=R,max=R,peak=00:00)")
    try:
        periodic = periodic_rate(OptionReader(given, name="impulse source"), partitions, None)
    except OptionError as error:
        raise LoadError(f"--source-option {error}") from None
    durations = np.array([d for d, _ in periodic.stages], dtype=np.float64)
    period_s = float(durations.sum()) / 1e6
    times = np.concatenate([[0.0], np.cumsum(durations) / 1e6])
    rates = np.array([periodic.start] + [r for _, r in periodic.stages]) * partitions
    periods = max(1, math.ceil(duration_s / period_s))
    all_t = np.concatenate([times[:-1] + k * period_s for k in range(periods)] + [[periods * period_s]])
    all_r = np.concatenate([rates[:-1]] * periods + [rates[-1:]])
    per = intervals_per_period(period_s)
    bounds = [b for b in (period_s * i / per for i in range(periods * per)) if b < duration_s] + [duration_s]
    stages = []
    for a, b in zip(bounds, bounds[1:]):
        inside = (all_t > a) & (all_t < b)
        t = np.concatenate([[a], all_t[inside], [b]])
        r = np.interp(t, all_t, all_r)
        stages.append(Stage(a, b - a, float(r[0]), float(r[-1]), tuple(zip(t.tolist(), r.tolist()))))
    text = ", ".join(f"{k}={v}" for k, v in given.items()) + f" over {duration_s:g}s"
    return StagePlan(tuple(stages), text, CURVE)
