"""Step mode: a real ramp on ``noop`` that stops at once, and the bound itself on made-up runs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pytest

from connectors.latency import LatencyHistogram
from impulse.loadtest import LoadConfig, RampConfig, assess, ramp_text, run_ramp, write_report
from impulse.loadtest.metrics import Batch, achieved_rate
from tests.loadtest.helpers import assert_report_files


@pytest.mark.integration
def test_ramp_on_noop_stops_after_the_first_step_over_the_latency_bound(spark, tmp_path):
    # A 1 s trigger makes every event wait ~0.5 s or more: no step can have p99 ≤ 1 ms.
    config = LoadConfig(sink="noop", partitions=2, payload_bytes=0, max_latency_s=0.001)
    ramp = run_ramp(config, RampConfig(1_000, 1_000, 5_000, step_duration_s=2), spark=spark)

    assert len(ramp.steps) == 1  # the ramp stopped at the first step that was not sustained
    step = ramp.steps[0]
    assert step.outcome == "completed" and step.events == 2_000
    assert not step.verdict.sustained
    assert any("p99 latency" in reason and "> max latency 0.001s" in reason for reason in step.verdict.reasons)
    assert ramp.highest_sustained_rate is None
    text = ramp_text(ramp)
    assert "highest sustained rate: none" in text and "1,000" in text

    write_report(ramp, tmp_path)
    report = assert_report_files(tmp_path, step.events)
    assert report["mode"] == "ramp" and report["highestSustainedRate"] is None
    assert [s["summary"]["targetRate"] for s in report["steps"]] == [1_000]
    assert json.loads((tmp_path / "report.json").read_text())["bound"].startswith("completed, achieved ≥ 95%")


def test_ramp_rates():
    assert RampConfig(10_000, 10_000, 50_000).rates() == [10_000, 20_000, 30_000, 40_000, 50_000]
    assert RampConfig(1_000, 3_000, 8_000).rates() == [1_000, 4_000, 7_000]


# ------------------------------------------------------------------------------- the bound, on made-up runs

START = 1_000_000_000_000_000  # epoch µs


def _batches(rate: float, capacity: float, seconds: int, latency_us: int) -> list[Batch]:
    """One batch per second; the sink delivers min(rate, capacity) events/s, each with `latency_us`."""
    out, delivered = [], 0
    for i in range(seconds):
        rows = int(min(rate, capacity))
        delivered += rows
        due = int(rate * (i + 1))
        histogram = LatencyHistogram()
        histogram.record(np.full(rows, latency_us))
        ack = START + (i + 1) * 1_000_000
        out.append(Batch(i, ack - 500_000, ack, ack, rows, delivered, due - delivered, 0, rows * 24, 0, {},
                         histogram.to_dict(), {}, {}))
    return out


@dataclass
class _Run:
    """The attributes of a LoadResult that `assess` reads."""

    batches: list
    target_rate: float
    outcome: str = "completed"
    error: str | None = None
    target_events: int = 10**12
    latency: LatencyHistogram = field(init=False)

    def __post_init__(self):
        self.latency = LatencyHistogram()
        for b in self.batches:
            self.latency.merge(b.latency)
        self.events = self.batches[-1].delivered

    @property
    def achieved_rate(self):
        return achieved_rate(self.batches, self.target_events, START)


def test_a_sink_that_keeps_up_is_sustained():
    run = _Run(_batches(10_000, 50_000, 10, 800_000), 10_000)
    assert run.achieved_rate == pytest.approx(10_000)
    assert assess(run, max_latency_s=5).sustained


def test_a_sink_below_95_percent_of_the_rate_is_not_sustained():
    run = _Run(_batches(10_000, 9_000, 10, 800_000), 10_000)
    verdict = assess(run, max_latency_s=5)
    assert not verdict.sustained
    assert verdict.reasons == ("achieved 9,000 events/s < 95% of the target 10,000",)
    assert run.batches[-1].lag > run.batches[1].lag  # its lag grows at rate − achieved


def test_a_sink_over_the_latency_bound_is_not_sustained():
    verdict = assess(_Run(_batches(10_000, 50_000, 10, 6_000_000), 10_000), max_latency_s=5)
    assert not verdict.sustained and verdict.reasons[0].startswith("p99 latency 6.")


def test_a_failed_or_unfinished_run_is_not_sustained():
    failed = _Run(_batches(10_000, 50_000, 10, 800_000), 10_000, outcome="failed", error="boom")
    assert assess(failed, 5).reasons[0] == "the query failed: boom"
    late = _Run(_batches(10_000, 50_000, 10, 800_000), 10_000, outcome="timed out")
    assert "events were delivered within the drain time" in assess(late, 5).reasons[0]
