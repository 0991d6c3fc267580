"""Pass/fail checks on a run (``--threshold``), so that a load test can gate CI like k6's thresholds.

An expression is ``METRIC OP VALUE`` (spaces optional)::

    p50|p95|p99|p99.9|p99.99|max  <|<=  DURATION   end-to-end latency from each event's scheduled time,
                                                   with a unit: 500ms, 1s, 1.5s, 2m
    rate    >=|>  PERCENT      achieved rate / target rate, e.g. 95% (the % may be left out); with the
                               source's rateStages, of the hold stage that achieved the least
    errors  ==|<=|<  N         failed task attempts (+1 if the query failed), see `LoadResult.errors`
    deadLettered  ==|<=|<  N   events the target refused for good and the sink dead-lettered
                               (its ``deadLettered``, see `LoadResult.dead_lettered`); the name is case-insensitive
    lag     <|<=  EVENTS       the largest lag (events due − delivered) at any batch's acknowledgement

A bad expression raises `LoadError` (the CLI exits 2 before any load). After the run every check is
shown pass/fail in the summary and ``report.json``; any failure makes the CLI exit 99 (k6's code).

`hopeless` tells, during a run, whether a check has failed for good whatever the rest of the run
does (``--abort-on-fail``): a latency percentile once more events lie above its bound than the
run's event budget can ever outweigh, ``max`` once an event exceeded it, ``errors``, ``deadLettered``
and ``lag`` once exceeded. ``rate`` can always recover, so it never aborts a run.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Sequence

from impulse.loadtest.settings.units import LoadError, parse_rate, parse_seconds

__all__ = ["Threshold", "Check", "parse_threshold", "evaluate", "hopeless", "LATENCY_METRICS"]

LATENCY_METRICS = {"p50": 50.0, "p95": 95.0, "p99": 99.0, "p99.9": 99.9, "p99.99": 99.99, "max": 100.0}
# metric → the comparisons it accepts (a latency, a lag, errors must stay low; the rate high)
_OPERATORS = {**{name: ("<", "<=") for name in LATENCY_METRICS}, "rate": (">=", ">"), "errors": ("==", "<=", "<"),
              "deadlettered": ("==", "<=", "<"), "lag": ("<", "<=")}
_COMPARE = {"<": operator.lt, "<=": operator.le, ">=": operator.ge, ">": operator.gt, "==": operator.eq}
_EXPRESSION = re.compile(r"^\s*([a-z][a-z0-9.]*)\s*(<=|>=|==|<|>)\s*(\S.*?)\s*$", re.IGNORECASE)
_FORMS = ("p50|p95|p99|p99.9|p99.99|max <|<= DURATION, rate >= PERCENT, errors == N, deadLettered == N, "
          "lag < EVENTS")


@dataclass(frozen=True)
class Threshold:
    """One parsed check: `limit` is in µs for latencies, a fraction for ``rate``, a count otherwise."""

    text: str
    metric: str
    op: str
    limit: float

    def passes(self, actual: float) -> bool:
        return _COMPARE[self.op](actual, self.limit)


@dataclass(frozen=True)
class Check:
    """A threshold and what the run measured."""

    threshold: Threshold
    actual: float
    passed: bool

    @property
    def measured(self) -> str:
        """The measured value in the threshold's unit, e.g. ``812.3 ms``, ``97.1%``, ``0``."""
        metric = self.threshold.metric
        if metric in LATENCY_METRICS:
            return f"{self.actual / 1e3:,.1f} ms"
        if metric == "rate":
            return f"{self.actual:.1%}"
        return f"{self.actual:,.0f}"

    def to_dict(self) -> dict:
        return {"threshold": self.threshold.text, "metric": self.threshold.metric, "passed": self.passed,
                "actual": self.actual, "measured": self.measured}


def parse_threshold(text: str) -> Threshold:
    """``'p99<1s'`` → `Threshold`; raises `LoadError` naming the expression and the forms allowed."""
    match = _EXPRESSION.match(str(text))
    if not match:
        raise LoadError(f"--threshold: {text!r} is not METRIC OP VALUE; the forms are {_FORMS}")
    metric, op, value = match.group(1).lower(), match.group(2), match.group(3)
    if metric not in _OPERATORS:
        raise LoadError(f"--threshold: {text!r}: unknown metric {metric!r}; the forms are {_FORMS}")
    if op not in _OPERATORS[metric]:
        raise LoadError(f"--threshold: {text!r}: {metric} takes {' or '.join(_OPERATORS[metric])}, not {op}")
    if metric in LATENCY_METRICS:
        if re.fullmatch(r"[\d.]+", value):
            raise LoadError(f"--threshold: {text!r}: give the duration a unit, e.g. {value}ms or {value}s")
        limit = parse_seconds(value, f"--threshold {text!r}") * 1e6
    elif metric == "rate":
        number = value[:-1] if value.endswith("%") else value
        try:
            limit = float(number) / 100
        except ValueError:
            raise LoadError(f"--threshold: {text!r}: {value!r} is not a percentage, e.g. 95%") from None
        if not 0 < limit <= 1:
            raise LoadError(f"--threshold: {text!r}: the rate is a share of the target rate, in (0%, 100%]")
    else:
        try:
            limit = parse_rate(value, f"--threshold {text!r}")  # a count: 0, 5000, 50k
        except LoadError:
            raise LoadError(f"--threshold: {text!r}: {value!r} is not a number of "
                            f"{'errors' if metric == 'errors' else 'events'}") from None
    return Threshold(" ".join(str(text).split()), metric, op, limit)


def _actual(metric: str, result) -> float:
    if metric in LATENCY_METRICS:
        latency = result.latency
        return float(latency.max_us) if metric == "max" else latency.percentile(LATENCY_METRICS[metric])
    if metric == "rate":
        return result.rate_share
    if metric == "errors":
        return float(result.errors)
    if metric == "deadlettered":
        return float(result.dead_lettered)
    return float(result.max_lag)


def evaluate(thresholds: Sequence[Threshold], result) -> list[Check]:
    """Each threshold against a `impulse.loadtest.load.run.LoadResult`. A run without events fails its latency
    checks."""
    checks = []
    for threshold in thresholds:
        actual = _actual(threshold.metric, result)
        passed = threshold.passes(actual)
        if threshold.metric in LATENCY_METRICS and result.latency.count == 0:
            passed = False  # nothing was measured: nothing passed
        checks.append(Check(threshold, actual, passed))
    return checks


def hopeless(threshold: Threshold, collector) -> str | None:
    """Why `threshold` has failed for good, from a running `impulse.loadtest.measure.metrics.Collector` (None: it may
    pass)."""
    metric, limit = threshold.metric, threshold.limit
    latency = collector.latency
    if metric == "max":
        if not threshold.passes(latency.max_us):
            return f"{threshold.text}: an event took {latency.max_us / 1e3:,.1f} ms"
    elif metric in LATENCY_METRICS:
        total = collector.total
        rank = max(1, math.ceil(total * LATENCY_METRICS[metric] / 100 - 1e-9))
        above = latency.count_above(limit)
        if above > total - rank:
            return (f"{threshold.text}: {above:,} of the run's {total:,} events already took longer than "
                    f"{limit / 1e3:,.1f} ms")
    elif metric in ("errors", "deadlettered"):
        count = sum(b.retried if metric == "errors" else b.dead_lettered for b in collector.batches)
        if count > limit or (threshold.op == "<" and count >= limit):
            return f"{threshold.text}: {count:,} {'errors' if metric == 'errors' else 'events dead-lettered'} so far"
    elif metric == "lag":
        lag = max((b.lag for b in collector.batches), default=0)
        if not threshold.passes(lag):
            return f"{threshold.text}: the lag reached {lag:,} events"
    return None
