"""When each event of a partition is due: the pure arithmetic of the impulse rate.

Every partition follows the same schedule, relative to an *anchor* (a wall-clock time in epoch
microseconds) and the partition's counter at that anchor. The k-th event after the anchor
(k = 0, 1, …) is due at ``anchor + offset(k)``:

- without ramp-up: ``offset(k) = k × delay``;
- with a ramp-up of T µs the rate grows linearly from 0 to 1/delay over T, so
  ``offset(k) = sqrt(2·T·delay·k)`` while ``k·delay < T/2`` and ``k·delay + T/2`` after.

With rate stages (`RateStages`, k6's ramping-arrival-rate stages) the rate is a piecewise linear
function r(t) of the time since the start of the profile, and event k is due at ``N⁻¹(k)``, the exact
inverse of the cumulative rate ``N(t) = ∫₀ᵗ r``: the events due by t are the k with ``N⁻¹(k) ≤ t``,
so their number is known exactly from the integral. The profile is a function of the counter: a
re-anchored schedule (a restart with ``downtime=skip``) pauses the profile during the downtime and
resumes it where it stopped, at the partition's next counter.

A periodic rate (`PeriodicRate`: ``rateCurve``, ``bursts.*``, parsed by `impulse.curve`) is one period of such
stages, starting and ending at the same rate, repeated: event k of ``E`` events a period of length P is due at
``⌊k/E⌋·P + N⁻¹(k mod E)``, a function of the counter like the stages.

With Poisson arrivals (``arrival=poisson``, `Schedule.poisson_seed` set) the event numbers are first spread
as a Poisson process: partition p's events are cut in blocks of `POISSON_BLOCK`, and event i of block j sits at
the continuous position ``B·(j + U₍ᵢ₎)`` where ``U₍₀₎ ≤ … ≤ U₍B₋₁₎`` are B uniforms drawn for (seed, p, j) and
sorted; the schedule above then maps that position to time as it maps k. The gaps between events are the
spacings of sorted uniforms: exponential with the configured mean (the inter-arrival times of a Poisson process
given its count per block), while every block of B events still takes exactly B event times, so the rate is
the configured one over any longer stretch and a partition's events stay in counter order.

Offsets are floored to whole microseconds. All of it is deterministic: the same anchor, delay and
k give the same time on every machine (IEEE-754 double arithmetic, no clock involved).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Sequence

import numpy as np

from connectors.errors import OptionError
from connectors.options import parse_duration_us
from impulse import draws

__all__ = ["Schedule", "RateStages", "PeriodicRate", "rate_from_json", "POISSON_BLOCK", "ARRIVALS"]

ARRIVALS = ("uniform", "poisson")
#: Events per block of Poisson arrivals: each block's events take exactly its B event times
POISSON_BLOCK = 1024


@dataclass(frozen=True)
class RateStages:
    """A changing rate of one partition: k6's stages, each a linear ramp from the previous target.

    `stages` is ``((duration µs, target events/s), …)``: the rate starts at 0 and goes linearly to each
    stage's target over its duration; the profile ends after the last stage. With ``r(t)`` that rate and
    ``N(t) = ∫₀ᵗ r`` (events), event ``k`` (0, 1, …) is scheduled ``offset(k) = ⌊N⁻¹(k)⌋`` µs after the
    start of the profile, and the profile holds `total` = ``⌈N(end)⌉`` events (those with ``N⁻¹(k) <
    end``). So the number of events scheduled in ``[a, b)`` (whole µs) is the integral of the rate over the
    interval within one event (``⌈N(b)⌉ − ⌈N(a)⌉`` in exact arithmetic; the inverse is computed in
    doubles, so an event due within a rounding error of a whole µs may land one µs off).

    Public interface, for whatever schedules events by a rate: `parse`, `offsets_us`, `due`, `total`,
    `to_json`/`from_json` (what an offset stores). Deterministic: IEEE-754 doubles only, no clock.
    """

    stages: tuple[tuple[int, float], ...]
    start: float = 0.0  # the rate at the start of the profile, events/s (k6's stages: 0)
    total: int = field(init=False)
    _table: tuple = field(init=False, repr=False, compare=False)  # per stage: start µs, events before, r0, slope, D

    def __post_init__(self) -> None:
        if not self.stages or any(d <= 0 or not (r >= 0 and math.isfinite(r)) for d, r in self.stages):
            raise ValueError(f"stages need durations > 0 and finite targets ≥ 0: {self.stages}")
        if not (self.start >= 0 and math.isfinite(self.start)):
            raise ValueError(f"stages need a finite start rate ≥ 0: {self.start}")
        starts, counts, r0s, slopes = [], [], [], []
        t, n, previous = 0, Fraction(0), self.start
        for duration, target in self.stages:
            starts.append(t)
            counts.append(float(n))
            r0, r1 = previous / 1e6, target / 1e6  # events per µs
            r0s.append(r0)
            slopes.append((r1 - r0) / duration)
            n += (Fraction(previous) + Fraction(target)) * duration / 2_000_000  # exact: the stage's events
            t, previous = t + duration, target
        durations = [d for d, _ in self.stages]
        object.__setattr__(self, "total", math.ceil(n))
        object.__setattr__(self, "_table", tuple(np.array(v, dtype=dtype) for v, dtype in (
            (starts, np.int64), (counts, np.float64), (r0s, np.float64), (slopes, np.float64),
            (durations, np.int64))))

    @classmethod
    def parse(cls, text: str, partitions: int = 1, option: str = "rateStages") -> "RateStages":
        """``"30s:1000,1m:1000,30s:5000"`` (duration:target events/s over all partitions) → one partition's stages.

        Raises `OptionError` naming `option` for a malformed list, a target < 0 or no target > 0.
        """
        expected = ("comma-separated stages 'duration:events per second', e.g. '30s:1000,1m:1000,30s:5000' "
                    "(a linear ramp from the previous target, starting at 0, to each target over its duration)")
        stages = []
        for item in str(text).split(","):
            duration, colon, target = item.partition(":")
            if not colon:
                raise OptionError(option, text, expected)
            try:
                rate = float(target.strip().replace("_", ""))
            except ValueError:
                raise OptionError(option, text, expected) from None
            if not (rate >= 0 and math.isfinite(rate)):
                raise OptionError(option, text, expected + "; targets are numbers ≥ 0")
            us = parse_duration_us(duration, option)
            if us <= 0:
                raise OptionError(option, text, expected + "; durations are > 0")
            stages.append((us, rate / partitions))
        if not any(rate > 0 for _, rate in stages):
            raise OptionError(option, text, expected + "; at least one target > 0")
        return cls(tuple(stages))

    def to_json(self) -> list[list]:
        return [[d, r] for d, r in self.stages]

    @classmethod
    def from_json(cls, stages: Sequence[Sequence]) -> "RateStages":
        return cls(tuple((int(d), float(r)) for d, r in stages))

    @property
    def duration_us(self) -> int:
        """The length of the profile."""
        return sum(d for d, _ in self.stages)

    @property
    def peak(self) -> float:
        """The highest target (or the start rate), events/s."""
        return max(self.start, *(r for _, r in self.stages))

    def offsets_us(self, k: np.ndarray) -> np.ndarray:
        """µs from the start of the profile to each event in `k` (int64 array, k ≥ 0): ``⌊N⁻¹(k)⌋``.

        Within a stage that starts at T with Nₛ events before it, rate r₀ and slope a (events/µs²),
        ``N⁻¹(k) = T + 2m / (r₀ + √(r₀² + 2am))`` with ``m = k − Nₛ`` (the root of ``r₀τ + aτ²/2 = m``
        that stays exact for a = 0 and for a ramp down). Events past the profile (``k ≥ total``)
        get its end.
        """
        starts, counts, r0s, slopes, durations = self._table
        kd = k.astype(np.float64)
        if not len(kd):
            return np.zeros(0, dtype=np.int64)
        ends = np.clip(np.searchsorted(counts, [kd.min(), kd.max()], side="right") - 1, 0, len(counts) - 1)
        if ends[0] == ends[1]:  # one stage (a record batch usually is): its parameters as scalars
            stage = ends[0]
        else:
            stage = np.searchsorted(counts, kd, side="right")
            stage -= 1
            np.clip(stage, 0, len(counts) - 1, out=stage)
        kd -= counts[stage]  # m: events into the stage
        r0, slope = r0s[stage], slopes[stage]
        root = slope * kd
        root *= 2.0
        root += r0 * r0
        np.maximum(root, 0.0, out=root)
        np.sqrt(root, out=root)
        root += r0
        tau = np.zeros_like(kd)
        kd *= 2.0
        np.divide(kd, root, out=tau, where=kd > 0)
        np.minimum(tau, durations[stage], out=tau)
        np.floor(tau, out=tau)
        out = tau.astype(np.int64)
        out += starts[stage]
        return out

    def offset_us(self, k: int) -> int:
        return int(self.offsets_us(np.array([k], dtype=np.int64))[0])

    def events_before(self, elapsed_us: float) -> float:
        """N(t): the integral of the rate over the first `elapsed_us` µs of the profile (events, a float)."""
        starts, counts, r0s, slopes, durations = self._table
        if elapsed_us <= 0:
            return 0.0
        i = max(0, int(np.searchsorted(starts, elapsed_us, side="right")) - 1)
        tau = min(elapsed_us - float(starts[i]), float(durations[i]))
        return float(counts[i] + r0s[i] * tau + slopes[i] * tau * tau / 2.0)

    def due(self, elapsed_us: int) -> int:
        """How many events have ``offset(k) ≤ elapsed_us`` (at most `total`; 0 before the start).

        Exactly consistent with `offsets_us`: the integral gives an estimate, corrected against it.
        """
        if elapsed_us < 0:
            return 0
        k = min(self.total, max(0, math.ceil(self.events_before(elapsed_us + 1))))
        while k < self.total and self.offset_us(k) <= elapsed_us:
            k += 1
        while k > 0 and self.offset_us(k - 1) > elapsed_us:
            k -= 1
        return k


@dataclass(frozen=True)
class PeriodicRate:
    """A rate that repeats: one period of piecewise linear stages (`RateStages` from `start`, ending at `start`
    again), then the same period again, without end (a daily curve with bursts, `impulse.curve`).

    With ``E`` the events of one period (``N(P)``, a float) and ``P`` its length, event ``k`` is due
    ``q·P + offset₁(k − q·E)`` µs after the start of the profile, with ``q = ⌊k / E⌋`` and ``offset₁`` the one
    period's `RateStages.offsets_us`: the same arithmetic as the stages (IEEE-754 doubles, no clock), so the
    profile is a function of the counter as theirs is, and restarts resume it. The same interface as
    `RateStages` for `Schedule` (`offsets_us`, `offset_us`, `due`, `to_json`, `peak`); `total` is None (no end).
    """

    stages: tuple[tuple[int, float], ...]
    start: float
    total: None = field(init=False, default=None)
    _one: RateStages = field(init=False, repr=False, compare=False)
    _per_period: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        one = RateStages(self.stages, self.start)
        if one.stages[-1][1] != self.start:
            raise ValueError(f"a period must end at its start rate {self.start}: {self.stages}")
        per_period = one.events_before(one.duration_us)
        if not per_period > 0:
            raise ValueError(f"a period needs events: {self.stages}")
        object.__setattr__(self, "_one", one)
        object.__setattr__(self, "_per_period", per_period)

    @property
    def period_us(self) -> int:
        return self._one.duration_us

    @property
    def peak(self) -> float:
        """The highest rate, events/s."""
        return self._one.peak

    def to_json(self) -> dict:
        return {"start": self.start, "stages": self._one.to_json()}

    def rate_at(self, elapsed_us: np.ndarray) -> np.ndarray:
        """The rate (events/s) at each time of `elapsed_us` (µs since the start of the profile)."""
        starts, _, r0s, slopes, durations = self._one._table
        t = np.asarray(elapsed_us, dtype=np.float64) % self.period_us
        i = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, len(starts) - 1)
        return (r0s[i] + slopes[i] * np.minimum(t - starts[i], durations[i])) * 1e6

    def offsets_us(self, k: np.ndarray) -> np.ndarray:
        """µs from the start of the profile to each event in `k` (k ≥ 0; int64, or float positions)."""
        kd = np.asarray(k, dtype=np.float64)
        q = np.floor(kd / self._per_period)
        m = kd - q * self._per_period
        np.maximum(m, 0.0, out=m)
        out = self._one.offsets_us(m)
        out += q.astype(np.int64) * self.period_us
        return out

    def offset_us(self, k: int) -> int:
        return int(self.offsets_us(np.array([k], dtype=np.int64))[0])

    def due(self, elapsed_us: int) -> int:
        """How many events have ``offset(k) ≤ elapsed_us`` (0 before the start); exactly consistent with
        `offsets_us` (the integral's estimate corrected against it)."""
        if elapsed_us < 0:
            return 0
        q, within = divmod(elapsed_us, self.period_us)
        k = max(0, math.ceil(q * self._per_period + self._one.events_before(within + 1)))
        while self.offset_us(k) <= elapsed_us:
            k += 1
        while k > 0 and self.offset_us(k - 1) > elapsed_us:
            k -= 1
        return k


def rate_from_json(stored) -> "RateStages | PeriodicRate":
    """What an offset's ``stages`` stores: a list is `RateStages`, ``{"start", "stages"}`` a `PeriodicRate`."""
    if isinstance(stored, dict):
        return PeriodicRate(tuple((int(d), float(r)) for d, r in stored["stages"]), float(stored["start"]))
    return RateStages.from_json(stored)


@dataclass(frozen=True)
class Schedule:
    """The schedule of one partition: `delay_us` between events (> 0), `ramp_us` of linear ramp-up (≥ 0),
    or `stages` (then `delay_us` and `ramp_us` are not used)."""

    anchor_us: int
    delay_us: float
    ramp_us: int = 0
    stages: RateStages | PeriodicRate | None = None
    poisson_seed: int | None = None  # None: uniform arrivals; else Poisson arrivals drawn with this seed

    @classmethod
    def of_offset(cls, offset: dict) -> "Schedule":
        """The schedule an impulse offset describes (``anchorTime``, ``delayUs``, ``rampUs``, optional ``stages``
        and ``poissonSeed``)."""
        stages = offset.get("stages")
        return cls(offset["anchorTime"], offset["delayUs"], offset["rampUs"],
                   None if stages is None else rate_from_json(stages), offset.get("poissonSeed"))

    def next_counter(self, now_us: int, base: int, subtask: int = 0) -> int:
        """The first counter not yet due at `now_us` of partition `subtask`, whose counter at the anchor was `base`."""
        if self.poisson_seed is not None:
            return self._poisson_next(now_us, base, subtask)
        if self.stages is None:
            return base + self.due(now_us)
        elapsed = now_us - self.anchor_us
        if elapsed < 0:
            return base
        return max(base, self.stages.due(elapsed + self.stages.offset_us(base)))

    def times_us(self, counters: np.ndarray, base: int, subtask: int = 0) -> np.ndarray:
        """Scheduled epoch µs of the `counters` of partition `subtask`, whose counter at the anchor was `base`.

        With stages the profile is a function of the counter: event ``c`` is due at ``anchor +
        offset(c) − offset(base)``, so a re-anchored schedule resumes the profile where it stopped.
        """
        if self.stages is None:
            times = self.offsets_us(self.positions(counters - base, subtask))
        else:
            times = self.stages.offsets_us(self.positions(counters, subtask))
            times -= self.stages.offsets_us(self.positions(np.array([base], dtype=np.int64), subtask))[0]
        times += self.anchor_us
        return times

    def positions(self, k: np.ndarray, subtask: int = 0) -> np.ndarray:
        """The continuous position of each event number in `k` (int64, ≥ 0): `k` itself for uniform arrivals; with
        Poisson arrivals ``B·(j + U₍ᵢ₎)`` for event i of block j (module docstring), float64."""
        if self.poisson_seed is None or not len(k):
            return k
        b = POISSON_BLOCK
        first, last = int(k.min()) // b, int(k.max()) // b
        key = draws.stream_key(self.poisson_seed, "arrival", "poisson")
        blocks = np.sort(draws.uniform(draws.words(key, subtask, first * b, (last - first + 1) * b)).reshape(-1, b),
                         axis=1)
        out = blocks[k // b - first, k % b]
        out += k // b
        out *= b
        return out

    def _poisson_next(self, now_us: int, base: int, subtask: int) -> int:
        """`next_counter` with Poisson arrivals: a position is within one block of its event number, so the events
        due lie within a block of the uniform schedule's count; the offsets of that stretch settle it exactly."""
        uniform = Schedule(self.anchor_us, self.delay_us, self.ramp_us, self.stages)
        guess = uniform.next_counter(now_us, base)
        lo = max(base, guess - POISSON_BLOCK - 2)
        window = np.arange(lo, guess + POISSON_BLOCK + 2, dtype=np.int64)
        due = self.times_us(window, base, subtask) <= now_us
        return lo + int(np.count_nonzero(due))

    def due(self, now_us: int) -> int:
        """How many events since the anchor are due at `now_us` (those with ``anchor + offset(k) ≤ now_us``).

        Exactly consistent with `offsets_us`: the closed form is only an estimate (offsets are floored
        to whole µs, and float rounding), corrected against `offsets_us` itself.
        """
        elapsed = now_us - self.anchor_us
        if elapsed < 0:
            return 0
        if self.stages is not None:
            return self.stages.due(elapsed)
        ramp, delay = self.ramp_us, self.delay_us
        # event k is due when floor(offset(k)) ≤ elapsed, i.e. offset(k) < elapsed + 1
        if ramp and elapsed < ramp:
            k = math.ceil((elapsed + 1) ** 2 / (2.0 * ramp * delay))
        else:
            k = math.ceil((elapsed + 1 - ramp / 2.0) / delay)
        k = max(k, 0)
        while self._offset_us(k) <= elapsed:
            k += 1
        while k > 0 and self._offset_us(k - 1) > elapsed:
            k -= 1
        return k

    def due_many(self, now_us: np.ndarray) -> np.ndarray:
        """`due` at each time of `now_us` (int64 epoch µs), vectorised; a constant rate only (no ramp, no stages).

        Exactly consistent with `offsets_us` (the same double products, floored), like `due`.
        """
        if self.ramp_us or self.stages is not None:
            raise ValueError("due_many takes a constant rate")
        elapsed = (now_us - self.anchor_us).astype(np.float64)
        n = np.ceil((elapsed + 1.0) / self.delay_us)
        np.maximum(n, 0.0, out=n)
        for _ in range(2):  # the estimate is off by at most one event: correct it against the offsets
            n += np.floor(n * self.delay_us) <= elapsed
            n -= (n > 0) & (np.floor((n - 1.0) * self.delay_us) > elapsed)
        n[elapsed < 0] = 0.0
        return n.astype(np.int64)

    def _offset_us(self, k: int) -> int:
        return int(self.offsets_us(np.array([k], dtype=np.int64))[0])

    def offsets_us(self, k: np.ndarray) -> np.ndarray:
        """Microseconds from the anchor to each event in `k` (int64 array of event numbers since the anchor).

        Computed in place in one float64 buffer: fresh temporaries of a record batch's size cost page
        faults that dominated the time (same IEEE-754 operations, same results).
        """
        if self.stages is not None:
            return self.stages.offsets_us(k)
        kd = k.astype(np.float64)  # a copy: `k` may be `positions`' own array
        kd *= self.delay_us
        if self.ramp_us:
            half = self.ramp_us / 2.0
            ramping = kd < half
            if ramping.any():
                kd[ramping] = np.sqrt(2.0 * self.ramp_us * kd[ramping])
                np.add(kd, half, out=kd, where=~ramping)
            else:
                kd += half
        np.floor(kd, out=kd)
        return kd.astype(np.int64)
