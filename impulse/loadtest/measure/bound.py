"""When a sink keeps up with a rate: the bound of the ramp (step) mode, also reported for a single run.

A run at target rate R is **sustained** when all of these hold:

1. it completed: every event of its budget (R × duration) was delivered and committed within the
   drain time, and the query did not fail;
2. throughput: the achieved rate in steady state (`impulse.loadtest.measure.metrics.achieved_rate`, the
   slope of delivered events over acknowledgement time) is ≥ 95 % of R. Equivalently, the lag
   (events due − events delivered) grows by less than 5 % of R per second: a sink that cannot keep
   up sees its lag grow at R − achieved;
   With the source's ``rateStages`` the rate changes within the run: each hold stage (a constant rate)
   must achieve 95 % of its rate (`impulse.loadtest.settings.stages.StageResult`); ramps are not judged;
3. latency: the p99 end-to-end latency (event timestamp → sink acknowledgement) is ≤ the maximum
   latency (``--max-latency``, default 5 s).

The ramp reports the highest rate whose step was sustained, and stops after the first step that
was not.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Verdict", "assess", "THROUGHPUT_SHARE"]

THROUGHPUT_SHARE = 0.95


@dataclass(frozen=True)
class Verdict:
    """Whether a run kept up with its target, and if not, every reason why."""

    sustained: bool
    reasons: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "yes" if self.sustained else "no: " + "; ".join(self.reasons)


def assess(result, max_latency_s: float) -> Verdict:
    """Apply the bound of the module docstring to a `impulse.loadtest.load.run.LoadResult`."""
    reasons = []
    if result.outcome == "failed":
        reasons.append(f"the query failed: {result.error}")
    elif result.outcome == "aborted":
        reasons.append(f"aborted: {result.error}")
    elif result.outcome == "interrupted":
        reasons.append("interrupted before every event was delivered")
    elif result.outcome == "timed out":
        reasons.append(f"only {result.events:,} of {result.target_events:,} events were delivered within the "
                       f"drain time")
    stages = [s for s in getattr(result, "stage_results", ()) if s.stage.hold]
    for stage in stages:
        if stage.rate_share < THROUGHPUT_SHARE:
            reasons.append(f"stage {stage.index} ({stage.stage.label}): achieved {stage.achieved_rate:,.0f} "
                           f"events/s < {THROUGHPUT_SHARE:.0%} of its target")
    if not stages and result.achieved_rate < THROUGHPUT_SHARE * result.target_rate:
        reasons.append(f"achieved {result.achieved_rate:,.0f} events/s < {THROUGHPUT_SHARE:.0%} of the target "
                       f"{result.target_rate:,.0f}")
    p99_s = result.latency.percentile(99.0) / 1e6
    if p99_s > max_latency_s:
        reasons.append(f"p99 latency {p99_s:,.3f}s > max latency {max_latency_s:g}s")
    if result.latency.count == 0 and not reasons:
        reasons.append("no event was delivered")
    return Verdict(not reasons, tuple(reasons))
