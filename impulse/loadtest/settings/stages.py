"""The stages of the impulse source's ``rateStages`` option, as the harness reads them for its report.

``rateStages = "30s:1000,1m:1000,30s:5000"`` is k6's ``stages``: starting at 0 events/s, the rate moves
linearly from the previous stage's target to each stage's target over the stage's duration, and the
stream ends after the last stage. A stage whose target equals the previous one is a **hold** (a
constant rate, where a sink's achieved rate is judged); the others are **ramps**. Rates are events/s
over all partitions, times in seconds since the schedule's start.

The source generates the events; the harness only needs the arithmetic to cut a run into stages:
`StagePlan.events_by` (events due by a time, the integral of the rate) and its inverse
`StagePlan.time_of` (when the n-th event is due), vectorised with numpy. Both are exact for the
piecewise-linear rate; the source's own rounding to whole events and microseconds may differ by an
event per partition.

A rate curve (the source's ``rateCurve`` with ``bursts.*``, `impulse.loadtest.settings.curve`) is reported through
the same plan: each of its stages is an *interval* of the curve whose rate is piecewise linear (`Stage.knots`), not
a single ramp; the arithmetic then runs over those linear pieces, the report over the intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Sequence

import numpy as np

from connectors.errors import OptionError
from connectors.latency import LatencyHistogram
from impulse.loadtest.measure.bound import THROUGHPUT_SHARE
from impulse.loadtest.measure.metrics import Batch, merged_latency, percentiles_ms
from impulse.loadtest.settings.units import LoadError
from impulse.schedule import RateStages

__all__ = ["Stage", "StagePlan", "StageResult", "parse_stages", "stage_results", "STAGES_OPTION"]

STAGES_OPTION = "rateStages"   # the impulse source option the stages come from


@dataclass(frozen=True)
class Stage:
    """One stage: from `start_rate` to `target_rate` (events/s) over `duration_s`, starting at `start_s`.

    `knots`, for an interval of a rate curve: the (seconds, events/s) corners of its piecewise-linear rate from
    `start_s` to `end_s` (the rate between them is not a straight line); empty for a linear stage."""

    start_s: float
    duration_s: float
    start_rate: float
    target_rate: float
    knots: tuple[tuple[float, float], ...] = ()

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @property
    def events(self) -> float:
        """Events due during the stage (the area under its rate)."""
        if self.knots:
            t, r = np.array(self.knots).T
            return float(np.sum((r[1:] + r[:-1]) / 2 * np.diff(t)))
        return (self.start_rate + self.target_rate) / 2 * self.duration_s

    @property
    def mean_rate(self) -> float:
        return self.events / self.duration_s

    @property
    def hold(self) -> bool:
        """A constant rate (target = the previous target, > 0); a curve's interval is never one."""
        return not self.knots and self.start_rate == self.target_rate > 0

    @property
    def label(self) -> str:
        if self.knots:
            return f"{self.start_s:g}–{self.end_s:g}s curve, mean {self.mean_rate:,.0f}/s"
        shape = f"hold {self.target_rate:,.0f}/s" if self.hold else f"{self.start_rate:,.0f} → {self.target_rate:,.0f}/s"
        return f"{self.start_s:g}–{self.end_s:g}s {shape}"


@dataclass(frozen=True)
class StagePlan:
    """The stages of one run, in order; `option` is the source option they come from (`text` its value)."""

    stages: tuple[Stage, ...]
    text: str
    option: str = STAGES_OPTION

    @cached_property
    def pieces(self) -> tuple[Stage, ...]:
        """The linear pieces of the rate: the stages, with each curve interval cut at its knots."""
        out: list[Stage] = []
        for stage in self.stages:
            if not stage.knots:
                out.append(stage)
                continue
            out += [Stage(t0, t1 - t0, r0, r1) for (t0, r0), (t1, r1) in zip(stage.knots, stage.knots[1:]) if t1 > t0]
        return tuple(out)

    @property
    def duration_s(self) -> float:
        return self.stages[-1].end_s

    @property
    def events(self) -> float:
        return sum(stage.events for stage in self.stages)

    @property
    def mean_rate(self) -> float:
        return self.events / self.duration_s

    def total_events(self, partitions: int) -> int:
        """The run's event budget (impulse ``limit``): every partition's whole events, never more than the stages
        schedule (so the source's own count, which rounds the same or up, always reaches it)."""
        return max(partitions, partitions * math.floor(self.events / partitions + 1e-9))

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        pieces = self.pieces
        starts = np.array([s.start_s for s in pieces])
        durations = np.array([s.duration_s for s in pieces])
        r0 = np.array([s.start_rate for s in pieces])
        r1 = np.array([s.target_rate for s in pieces])
        before = np.concatenate([[0.0], np.cumsum((r0 + r1) / 2 * durations)[:-1]])
        return starts, durations, r0, r1, before

    def events_by(self, t_s: np.ndarray | float) -> np.ndarray:
        """Events due by `t_s` seconds after the start (a float: the integral of the rate), for each time."""
        t = np.clip(np.asarray(t_s, dtype=np.float64), 0.0, self.duration_s)
        starts, durations, r0, r1, before = self._arrays()
        i = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, len(starts) - 1)
        tau = t - starts[i]
        return before[i] + r0[i] * tau + (r1[i] - r0[i]) * tau * tau / (2 * durations[i])

    def time_of(self, n: np.ndarray | float) -> np.ndarray:
        """Seconds after the start at which event number `n` (0-based, over all partitions) is due: the inverse of
        `events_by`; beyond the last event, the end of the last stage."""
        n = np.clip(np.asarray(n, dtype=np.float64), 0.0, self.events)
        starts, durations, r0, r1, before = self._arrays()
        # the stage holding n: the last one whose events start at or below it (a pause at 0 shares its
        # `before` with the next stage, which is the one taken)
        i = np.searchsorted(before, n, side="right") - 1
        i = np.clip(i, 0, len(starts) - 1)
        left = n - before[i]
        a = (r1[i] - r0[i]) / (2 * durations[i])
        # a·τ² + r0·τ = left, in the form that is stable for a = 0 and for ramps down (a < 0)
        root = np.sqrt(np.maximum(r0[i] * r0[i] + 4 * a * left, 0.0))
        denominator = r0[i] + root
        tau = np.divide(2 * left, denominator, out=np.zeros_like(left), where=denominator > 0)
        return np.minimum(starts[i] + tau, self.duration_s)

    def rate_at(self, t_s: float) -> float:
        """The target rate (events/s) `t_s` seconds after the start (0 after the last stage)."""
        if not 0 <= t_s <= self.duration_s:
            return 0.0
        ends = np.array([s.end_s for s in self.pieces])
        stage = self.pieces[min(int(np.searchsorted(ends, t_s, side="left")), len(ends) - 1)]
        return stage.start_rate + (stage.target_rate - stage.start_rate) * (t_s - stage.start_s) / stage.duration_s

    def stage_of(self, t_s: np.ndarray | float) -> np.ndarray:
        """The index of the stage each time (seconds after the start) falls in (a stage's end belongs to it)."""
        ends = np.array([s.end_s for s in self.stages])
        return np.minimum(np.searchsorted(ends, np.asarray(t_s, dtype=np.float64), side="left"), len(ends) - 1)


def parse_stages(text: str, where: str = STAGES_OPTION) -> StagePlan:
    """``'30s:1000,1m:1000,30s:5000'`` → `StagePlan`, read by the source's own parser (`RateStages.parse`), so
    the harness accepts and refuses exactly what the source does.

    Raises `LoadError` naming `where`, the value and the form expected.
    """
    try:
        rates = RateStages.parse(text, partitions=1, option=where)
    except OptionError as error:
        raise LoadError(str(error)) from None
    stages: list[Stage] = []
    start_s, rate = 0.0, 0.0
    for duration_us, target in rates.stages:
        stages.append(Stage(start_s, duration_us / 1e6, rate, target))
        start_s, rate = start_s + duration_us / 1e6, target
    return StagePlan(tuple(stages), str(text))


@dataclass
class StageResult:
    """What a run achieved in one stage. A batch belongs to the stage in which its last event was scheduled.

    `achieved_rate` (events/s): the slope of a least-squares line through the (acknowledgement, delivered)
    points of the stage's batches (with fewer than three, the events of its batches over the time since the
    previous stage's last acknowledgement). A sink that keeps up delivers along the schedule, so in a hold
    stage the slope is the stage's rate; one that falls behind delivers at its own capacity.

    For a curve's interval (`Stage.knots`) the rate is not constant, and a least-squares slope would weigh its
    middle most (above the mean around a peak, below it around a trough): its achieved rate is the events
    delivered since the previous interval's last acknowledgement over the time since then, comparable with its
    target, the curve's mean. The first interval counts from the schedule's start shifted by the least delay of
    its batches (a batch's acknowledgement minus its last event's scheduled time), so that the pipeline's latency
    cancels out as it does between two acknowledgements; the least, because a slow first batch (a pipeline
    still settling) followed by batches that catch up would otherwise read as delivered faster than scheduled.
    """

    index: int                      # 1-based
    stage: Stage
    batches: list[Batch] = field(repr=False)
    events: int                     # events of the stage's batches
    achieved_rate: float
    max_latency_s: float
    _latency: LatencyHistogram | None = field(default=None, repr=False)

    @property
    def latency(self) -> LatencyHistogram:
        if self._latency is None:
            self._latency = merged_latency(self.batches)
        return self._latency

    @property
    def rate_share(self) -> float:
        """Achieved / target (the stage's mean rate)."""
        return self.achieved_rate / self.stage.mean_rate if self.stage.mean_rate else 0.0

    @property
    def sustained(self) -> bool | None:
        """For a hold stage: achieved ≥ 95 % of its rate and p99 ≤ the run's maximum latency; None for a ramp."""
        if not self.stage.hold:
            return None
        return (self.rate_share >= THROUGHPUT_SHARE and self.latency.count > 0
                and self.latency.percentile(99.0) / 1e6 <= self.max_latency_s)

    def to_dict(self) -> dict:
        """A flat record for report.json (rates in events/s, latencies in ms)."""
        stage = self.stage
        return {"stage": self.index, "label": stage.label, "startS": stage.start_s, "durationS": stage.duration_s,
                "fromRate": stage.start_rate, "toRate": stage.target_rate, "hold": stage.hold,
                "targetRate": round(stage.mean_rate, 1), "achievedRate": round(self.achieved_rate, 1),
                "targetEvents": round(stage.events), "events": self.events, "batches": len(self.batches),
                "sustained": self.sustained, "latencyMs": percentiles_ms(self.latency),
                **({"knots": [[round(t, 6), round(r, 3)] for t, r in stage.knots]} if stage.knots else {})}


def stage_results(plan: StagePlan, batches: Sequence[Batch], schedule_start_us: int | None,
                  max_latency_s: float) -> list[StageResult]:
    """The run's `batches` cut into the stages of `plan` (see `StageResult`)."""
    ends = np.array([b.delivered for b in batches], dtype=np.float64)
    index = plan.stage_of(plan.time_of(np.maximum(ends - 1, 0))) if len(batches) else np.zeros(0, dtype=np.int64)
    out = []
    previous = (float(schedule_start_us or (batches[0].start_us if batches else 0)), 0)  # (ack µs, delivered)
    if batches and schedule_start_us and plan.stages[0].knots:   # a curve: the start at its least batch delay
        first = [b for b, i in zip(batches, index) if i == 0] or batches[:1]
        due_us = plan.time_of(np.maximum(np.array([b.delivered for b in first], dtype=np.float64) - 1, 0)) * 1e6
        previous = (float(np.min(np.array([b.ack_us for b in first], dtype=np.float64) - due_us)), 0)
    for number, stage in enumerate(plan.stages):
        members = [b for b, i in zip(batches, index) if i == number]
        events = sum(b.rows for b in members)
        rate = 0.0
        if members and stage.knots:
            if members[-1].ack_us > previous[0]:
                rate = (members[-1].delivered - previous[1]) / ((members[-1].ack_us - previous[0]) / 1e6)
        elif len(members) >= 3:
            t = np.array([b.ack_us for b in members], dtype=np.float64) / 1e6
            n = np.array([b.delivered for b in members], dtype=np.float64)
            if np.ptp(t) > 0:
                rate = float(np.polyfit(t - t[0], n, 1)[0])
        elif members and members[-1].ack_us > previous[0]:
            rate = (members[-1].delivered - previous[1]) / ((members[-1].ack_us - previous[0]) / 1e6)
        if members:
            previous = (float(members[-1].ack_us), members[-1].delivered)
        out.append(StageResult(number + 1, stage, members, events, rate, max_latency_s))
    return out
