"""Step mode: raise the rate step by step until the sink stops keeping up.

Each step is a complete run (`impulse.loadtest.load.run.run_load`) at one rate for the step duration: a
new query with a new checkpoint, so no step inherits another's backlog — simple, and honest about
what each rate costs. A step is judged by the bound of `impulse.loadtest.measure.bound` (completed,
achieved ≥ 95 % of the target, p99 ≤ the maximum latency). The ramp stops after the first step that
fails it (or at the maximum rate, or when stopped); the result is the highest sustained rate.

With ``--ramp search:LO:HI`` (`RampConfig.search`) the steps are a search instead: LO, then HI, then a bisection
of the bracket (the highest rate sustained, the lowest not) until it is within `RampConfig.precision` of its lower
end; that rate then runs again for twice the step duration, a confirming run. The result is the rate a confirming
run sustained. When it does not, the same bisection runs again between LO and it with confirming runs only (then
LO's own, when none above it was sustained). With HI sustained, HI is confirmed (the search says ≥ HI); with LO
not sustained, nothing is.

A ramp is also a gate (`RampResult.failures`, one plain sentence per reason; empty: it passed): it fails
when no step was sustained, or when its highest sustained rate is below ``--min-sustained``. Its text
summary, report.json, JUnit file and the CLI's exit code (99) all read that one list.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from connectors.servers.receiver import Receiver
from impulse.loadtest.load.display import Display
from impulse.loadtest.load.run import LoadResult, impulse_options, run_load
from impulse.loadtest.measure.bound import THROUGHPUT_SHARE
from impulse.loadtest.settings.config import LoadConfig, RampConfig
from impulse.loadtest.settings.target import preflight
from impulse.session import make_session

__all__ = ["RampResult", "run_ramp", "search_rate", "PROBE", "CONFIRM"]

PROBE, CONFIRM = "probe", "confirm"  # a search's steps: a bisection probe, or a confirming run of twice the duration


@dataclass
class RampResult:
    """The steps that ran, in order, and the highest rate one of them sustained."""

    config: LoadConfig
    ramp: RampConfig
    steps: list[LoadResult] = field(default_factory=list)
    interrupted: bool = False
    roles: list[str] = field(default_factory=list)  # a search's: PROBE or CONFIRM per step; empty for steps

    @property
    def highest_sustained_rate(self) -> float | None:
        """The highest rate a step sustained; for a search, the highest a confirming run sustained."""
        rates = [s.target_rate for s, role in zip(self.steps, self.step_roles) if s.verdict.sustained
                 and role != PROBE]
        return max(rates) if rates else None

    @property
    def step_roles(self) -> list[str]:
        return self.roles if self.ramp.search else ["step"] * len(self.steps)

    @property
    def failures(self) -> list[str]:
        """Why the ramp fails as a gate (see the module docstring), e.g. ``no step sustained: step 1 at 5,000
        events/s: p99 latency 8.700s > max latency 5s``; empty when it passed."""
        best = self.highest_sustained_rate
        minimum = self.ramp.min_sustained
        if best is None and self.ramp.search and any(s.verdict.sustained for s in self.steps):
            return [f"no rate sustained its confirming run: {self._first_not_sustained(CONFIRM)}"]
        if best is None:
            return [f"no step sustained: {self._first_not_sustained()}"]
        if minimum is not None and best < minimum:
            return [f"highest sustained rate {best:,.0f} events/s < min-sustained {minimum:,.0f} events/s: "
                    f"{self._first_not_sustained()}"]
        return []

    @property
    def passed(self) -> bool:
        return not self.failures

    def _first_not_sustained(self, role: str | None = None) -> str:
        """The step that ended the ramp and why, e.g. ``step 2 at 20,000 events/s: achieved …`` (the first of
        `role`, when given)."""
        for index, (step, its_role) in enumerate(zip(self.steps, self.step_roles), 1):
            if not step.verdict.sustained and role in (None, its_role):
                return f"step {index} at {step.target_rate:,.0f} events/s: " + "; ".join(step.verdict.reasons)
        if not self.steps:
            return "no step ran" + (" (interrupted)" if self.interrupted else "")
        return "interrupted before a faster step ran" if self.interrupted else "no faster step ran"

    @property
    def bound(self) -> str:
        return (f"completed, achieved ≥ {THROUGHPUT_SHARE:.0%} of target, "
                f"p99 ≤ {self.config.max_latency_s:g}s")

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self.steps)

    def to_dict(self) -> dict:
        return {
            "mode": "ramp",
            "ramp": {"start": self.ramp.start, "step": None if self.ramp.search else self.ramp.step,
                     "max": self.ramp.maximum, "stepDurationS": self.ramp.step_duration_s,
                     "minSustained": self.ramp.min_sustained, "search": self.ramp.search,
                     **({"precision": self.ramp.precision} if self.ramp.search else {})},
            "bound": self.bound,
            "highestSustainedRate": self.highest_sustained_rate,
            "passed": self.passed,
            "failures": self.failures,
            "interrupted": self.interrupted,
            "steps": [{**s.to_dict(), **({"role": role} if self.ramp.search else {})}
                      for s, role in zip(self.steps, self.step_roles)],
        }


def run_ramp(config: LoadConfig, ramp: RampConfig, *, spark=None, display: Display | None = None,
             stop: Any = None, receiver: Receiver | None = None, exporter: Any = None) -> RampResult:
    """Run the steps of `ramp` with the sink and options of `config`; see the module docstring.

    `exporter` (`impulse.loadtest.reports.prometheus.Exporter`) serves each step's live metrics in turn."""
    ramp.validate()
    config.validate()
    rates = ramp.rates()
    for rate in (rates[0], rates[-1]):  # every problem found before the first step, and before Spark starts
        impulse_options(replace(config, rate=rate, duration_s=ramp.step_duration_s))
    preflight(config.sink, config.options, config.payload_bytes, config.create_topic)
    spark = spark or make_session(config.master)
    result = RampResult(config, ramp)

    def one(rate: float, role: str, of: str) -> bool | None:
        """Run one step: sustained or not; None when the ramp was stopped."""
        seconds = ramp.step_duration_s * (2 if role == CONFIRM else 1)
        step = replace(config, rate=rate, duration_s=seconds)  # each step warm: its own warm pipeline
        index = len(result.steps) + 1
        name = {PROBE: "probe", CONFIRM: "confirming run"}.get(role, "step")
        label = (f"{name} {index}{of}: {config.sink} at {rate:,.0f} events/s for {seconds:g}s "
                 f"({step.total_events:,} events), {config.partitions} partitions")
        run = run_load(step, spark=spark, display=display, stop=stop, receiver=receiver, label=label,
                       exporter=exporter)
        result.steps.append(run)
        result.roles.append(role)
        if display is not None:
            display.line(f"  {name} {index}: achieved {run.achieved_rate:,.0f} events/s, "
                         f"p99 {run.latency.percentile(99.0) / 1e3:,.1f} ms → sustained: {run.verdict}")
        if run.outcome == "interrupted" or (stop is not None and stop.is_set()):
            result.interrupted = True
            return None
        return run.verdict.sustained

    if ramp.search:
        search_rate(ramp.start, ramp.maximum, ramp.precision, lambda rate, role: one(rate, role, ""))
        return result
    for rate in rates:
        if not one(rate, "step", f"/{len(rates)}"):
            break
    return result


def search_rate(lo: float, hi: float, precision: float, probe: Callable[[float, str], bool | None]) -> float | None:
    """The highest rate in [`lo`, `hi`] that `probe` sustains, by bisection to within `precision` (a share of the
    bracket's lower end), confirmed: see the module docstring.

    `probe(rate, role)` runs one step (`PROBE`, or `CONFIRM` for a run twice as long) and says whether it was
    sustained, or None to stop the search. Returns the confirmed rate, or None (nothing sustained, none
    confirmed, or stopped). Probed rates are whole events/s."""
    first = probe(lo, PROBE)
    if not first:
        return None
    top = probe(hi, PROBE)
    if top is None:
        return None
    best = _bisect(lo, hi, precision, lambda rate: probe(rate, PROBE)) if not top else hi
    if best is None:
        return None
    confirmed = probe(best, CONFIRM)
    if confirmed or confirmed is None:
        return best if confirmed else None
    # not sustained for twice as long: the same bisection below it, every probe a confirming run
    below = _bisect(lo, best, precision, lambda rate: probe(rate, CONFIRM))
    if below is None or below != lo:
        return below
    return lo if probe(lo, CONFIRM) else None  # no confirming run above LO was sustained: LO needs its own


def _bisect(good: float, bad: float, precision: float, probe: Callable[[float], bool | None]) -> float | None:
    """Bisect between `good`, a rate taken as sustained, and `bad`, one not, until within `precision` of `good`: the
    highest rate sustained (`good` itself when no probe above it was), or None when stopped."""
    while bad - good > precision * good:
        mid = float(round((good + bad) / 2))
        if mid in (good, bad):
            break
        ok = probe(mid)
        if ok is None:
            return None
        if ok:
            good = mid
        else:
            bad = mid
    return good
