"""Step mode: raise the rate step by step until the sink stops keeping up.

Each step is a complete run (`impulse.loadtest.load.run.run_load`) at one rate for the step duration: a
new query with a new checkpoint, so no step inherits another's backlog — simple, and honest about
what each rate costs. A step is judged by the bound of `impulse.loadtest.measure.bound` (completed,
achieved ≥ 95 % of the target, p99 ≤ the maximum latency). The ramp stops after the first step that
fails it (or at the maximum rate, or when stopped); the result is the highest sustained rate.

A ramp is also a gate (`RampResult.failures`, one plain sentence per reason; empty: it passed): it fails
when no step was sustained, or when its highest sustained rate is below ``--min-sustained``. Its text
summary, report.json, JUnit file and the CLI's exit code (99) all read that one list.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from connectors.servers.receiver import Receiver
from impulse.loadtest.load.display import Display
from impulse.loadtest.load.run import LoadResult, impulse_options, run_load
from impulse.loadtest.measure.bound import THROUGHPUT_SHARE
from impulse.loadtest.settings.config import LoadConfig, RampConfig
from impulse.loadtest.settings.target import preflight
from impulse.session import make_session

__all__ = ["RampResult", "run_ramp"]


@dataclass
class RampResult:
    """The steps that ran, in order, and the highest rate one of them sustained."""

    config: LoadConfig
    ramp: RampConfig
    steps: list[LoadResult] = field(default_factory=list)
    interrupted: bool = False

    @property
    def highest_sustained_rate(self) -> float | None:
        rates = [s.target_rate for s in self.steps if s.verdict.sustained]
        return max(rates) if rates else None

    @property
    def failures(self) -> list[str]:
        """Why the ramp fails as a gate (see the module docstring), e.g. ``no step sustained: step 1 at 5,000
        events/s: p99 latency 8.700s > max latency 5s``; empty when it passed."""
        best = self.highest_sustained_rate
        minimum = self.ramp.min_sustained
        if best is None:
            return [f"no step sustained: {self._first_not_sustained()}"]
        if minimum is not None and best < minimum:
            return [f"highest sustained rate {best:,.0f} events/s < min-sustained {minimum:,.0f} events/s: "
                    f"{self._first_not_sustained()}"]
        return []

    @property
    def passed(self) -> bool:
        return not self.failures

    def _first_not_sustained(self) -> str:
        """The step that ended the ramp and why, e.g. ``step 2 at 20,000 events/s: achieved …``."""
        for index, step in enumerate(self.steps, 1):
            if not step.verdict.sustained:
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
            "ramp": {"start": self.ramp.start, "step": self.ramp.step, "max": self.ramp.maximum,
                     "stepDurationS": self.ramp.step_duration_s, "minSustained": self.ramp.min_sustained},
            "bound": self.bound,
            "highestSustainedRate": self.highest_sustained_rate,
            "passed": self.passed,
            "failures": self.failures,
            "interrupted": self.interrupted,
            "steps": [s.to_dict() for s in self.steps],
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
    for index, rate in enumerate(rates, 1):
        step = replace(config, rate=rate, duration_s=ramp.step_duration_s)  # each step warm: its own warm pipeline
        label = (f"step {index}/{len(rates)}: {config.sink} at {rate:,.0f} events/s for {ramp.step_duration_s:g}s "
                 f"({step.total_events:,} events), {config.partitions} partitions")
        run = run_load(step, spark=spark, display=display, stop=stop, receiver=receiver, label=label,
                       exporter=exporter)
        result.steps.append(run)
        verdict = run.verdict
        if display is not None:
            display.line(f"  step {index}: achieved {run.achieved_rate:,.0f} events/s, "
                         f"p99 {run.latency.percentile(99.0) / 1e3:,.1f} ms → sustained: {verdict}")
        if run.outcome == "interrupted" or (stop is not None and stop.is_set()):
            result.interrupted = True
            break
        if not verdict.sustained:
            break
    return result
