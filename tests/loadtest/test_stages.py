"""Stages of ``rateStages`` in the report: the k6 arithmetic, the cut of a run's batches into stages, target vs
achieved rate and latency per stage, the verdict and ``rate`` threshold of a staged run, and ``compare`` reading a
file's report. Pure logic on batches made from the contract (no Spark): what a sink that keeps up, or one capped
below the spike, acknowledges."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from connectors.latency import LatencyHistogram
from impulse.loadtest.load.run import LoadResult, impulse_options
from impulse.loadtest.measure.metrics import Batch
from impulse.loadtest.reports.compare import compare_text, load_runs
from impulse.loadtest.reports.report import summary_text, write_report
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.stages import parse_stages
from impulse.loadtest.settings.units import LoadError
from impulse.schedule import RateStages

SPIKE = "5s:5000,10s:5000,5s:20000,10s:20000,5s:5000,10s:5000"   # 0 → 5k → 20k → 5k, each target held for 10 s
START_US = 1_700_000_000_000_000


def test_stages_follow_k6_linear_ramps_from_zero():
    plan = parse_stages("30s:1000,1m:1000,30s:5000")
    assert [(s.start_s, s.duration_s, s.start_rate, s.target_rate) for s in plan.stages] == [
        (0, 30, 0, 1000), (30, 60, 1000, 1000), (90, 30, 1000, 5000)]
    assert [s.hold for s in plan.stages] == [False, True, False]
    # the area under the rate: a triangle, a rectangle, a trapezoid
    expected = 30 * 1000 / 2 + 60 * 1000 + 30 * (1000 + 5000) / 2
    assert plan.events == expected and plan.duration_s == 120
    times = np.linspace(0, 120, 241)
    assert np.allclose(plan.time_of(plan.events_by(times)), times, atol=1e-9)
    assert plan.events_by(15.0) == pytest.approx(1000 / 30 * 15**2 / 2)  # ∫ r(t) over a ramp from 0
    assert [plan.rate_at(t) for t in (0, 15, 30, 60, 105, 120, 121)] == [0, 500, 1000, 1000, 3000, 5000, 0]
    budget = plan.total_events(4)
    assert budget % 4 == 0 and expected - 4 < budget <= expected  # never more than the stages schedule
    down = parse_stages("10s:100,10s:0")  # a ramp down to 0 ends the events
    assert down.events == 1000 and down.time_of(down.events) == pytest.approx(20)


@pytest.mark.parametrize("text, words", [
    ("", "duration:events per second"), ("30s", "duration:events per second"),
    ("soon:100", "soon"), ("30s:lots", "duration:events per second"),
    ("30:100", "30"), ("30s:5k", "duration:events per second"),  # as the source: a unit, a plain number
    ("0s:100", "durations are > 0"), ("10s:-1", "targets are numbers ≥ 0"), ("10s:0", "at least one target > 0"),
])
def test_a_bad_stage_list_names_the_option_and_the_form(text, words):
    with pytest.raises(LoadError, match=words) as error:
        parse_stages(text)
    assert "rateStages" in str(error.value)


def test_the_source_gets_the_stages_as_written_and_no_rate_of_the_harness():
    config = LoadConfig(sink="noop", partitions=2, source_options={"rateStages": SPIKE})
    plan = parse_stages(SPIKE)
    assert config.total_events == plan.total_events(2) and config.stages == plan
    options = impulse_options(config)
    assert options["rateStages"] == SPIKE and "eventsPerSecond" not in options
    assert options["limit"] == str(config.total_events)


def _run(capacity: float, *, trigger_s: float = 0.5, processing_s: float = 0.2) -> LoadResult:
    """A run of SPIKE against a sink that delivers at most `capacity` events/s: at each trigger it takes what is due
    (up to its capacity since the last batch) and acknowledges `processing_s` later. Latency per event = ack − its
    scheduled time."""
    config = LoadConfig(sink="noop", partitions=2, max_latency_s=5.0, source_options={"rateStages": SPIKE})
    plan, total = config.stages, config.total_events
    batches, delivered, t, batch_id = [], 0, trigger_s, 0
    while delivered < total:
        due = min(total, math.floor(plan.events_by(t)))
        target = min(due, delivered + math.floor(capacity * trigger_s))
        if target > delivered:
            ack_us = START_US + round((t + processing_s) * 1e6)
            scheduled = START_US + np.floor(plan.time_of(np.arange(delivered, target)) * 1e6).astype(np.int64)
            latency = LatencyHistogram()
            latency.record(ack_us - scheduled)
            batches.append(Batch(batch_id, ack_us - round(processing_s * 1e6), ack_us, ack_us, target - delivered,
                                 target, max(0, due - target), 0, 0, 0, {}, latency.to_dict(), {}, {}))
            delivered, batch_id = target, batch_id + 1
        t += trigger_s
    return LoadResult(config, "noop", {}, "q", batches, START_US, START_US, batches[-1].ack_us, "completed")


def test_a_sink_that_keeps_up_achieves_every_hold_stage_within_5_percent():
    result = _run(capacity=1e9)
    stages = result.stage_results
    assert [s.index for s in stages] == [1, 2, 3, 4, 5, 6]
    assert sum(s.events for s in stages) == result.events == result.target_events
    for stage in stages:
        assert stage.events == pytest.approx(stage.stage.events, abs=stage.stage.target_rate * 0.5 + 2)
        if stage.stage.hold:
            assert stage.achieved_rate == pytest.approx(stage.stage.target_rate, rel=0.05), stage.stage.label
            assert stage.sustained is True
        else:
            assert stage.sustained is None  # a ramp is reported, not judged
        assert 0 < stage.latency.percentile(50) <= stage.latency.percentile(99) <= 0.8e6
    assert result.verdict.sustained and result.rate_share >= 0.95


def test_a_sink_capped_below_the_spike_fails_the_spike_stage_and_the_rate_threshold():
    result = _run(capacity=12_000)
    before, spike, after = (result.stage_results[i] for i in (1, 3, 5))  # the three holds: 5k, 20k, 5k
    assert before.sustained and before.achieved_rate == pytest.approx(5_000, rel=0.05)
    assert spike.sustained is False and spike.achieved_rate == pytest.approx(12_000, rel=0.05)
    # after the spike the sink drains its backlog at its capacity: the rate is above the target, the latency not
    assert after.achieved_rate > 5_000 and after.latency.percentile(99) > 5e6 and after.sustained is False
    assert result.rate_share == pytest.approx(spike.rate_share)
    assert not result.verdict.sustained
    assert any("stage 4" in reason and "of its target" in reason for reason in result.verdict.reasons)
    checks = {c.threshold.text: c.passed for c in LoadResult(
        LoadConfig(sink="noop", partitions=2, source_options={"rateStages": SPIKE}, thresholds=("rate>=95%",
                                                                                                "rate>=50%")),
        "noop", {}, "q", result.batches, START_US, START_US, result.finished_us, "completed").checks}
    assert checks == {"rate>=95%": False, "rate>=50%": True}


def test_the_report_has_a_section_per_scenario_and_per_stage_and_compare_reads_it(tmp_path):
    kept, capped = _run(capacity=1e9), _run(capacity=12_000)
    text = summary_text(capped, "spike")
    assert "impulse-load summary of 'spike': noop" in text and f"rateStages: {SPIKE}" in text
    assert [line.split()[0] for line in text.splitlines() if line.startswith("  ") and line.split()[0].isdigit()
            ][:6] == ["1", "2", "3", "4", "5", "6"]
    assert "20–30s hold 20,000/s" in text and "– (ramp)" in text

    write_report([("kept", kept), ("capped", capped)], tmp_path, file="spike.toml")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["mode"] == "scenarios" and report["file"] == "spike.toml"
    assert [s["name"] for s in report["scenarios"]] == ["kept", "capped"]
    stages = report["scenarios"][1]["stages"]
    assert [s["stage"] for s in stages] == [1, 2, 3, 4, 5, 6]
    assert stages[3]["targetRate"] == 20_000 and stages[3]["sustained"] is False
    assert stages[3]["latencyMs"]["p99"] >= stages[3]["latencyMs"]["p50"] > 0
    assert (tmp_path / "summary.csv").read_text().splitlines()[0].startswith("scenario,sink,")

    runs = load_runs([tmp_path])
    names = [run.name for run in runs]
    assert names[0] == f"{tmp_path.name}/kept" and f"{tmp_path.name}/capped stage 4" in names
    assert len(runs) == 2 * (1 + 6)
    table = compare_text(runs)
    row = next(line for line in table.splitlines() if line.startswith(f"{tmp_path.name}/capped stage 4"))
    assert row.split()[-1] == "no" and "20,000" in row


@pytest.mark.parametrize("text", [SPIKE, "30s:1000,1m:1000,30s:5000", "2s:7,3s:0,1s:13", "1500ms:1_000"])
@pytest.mark.parametrize("partitions", [1, 3])
def test_the_report_reads_the_stages_as_the_source_schedules_them(text, partitions):
    """The harness reads the stage list with the source's parser and cuts a run by its float integral; the source
    schedules by `RateStages`: both say the same duration, and the harness's event budget never exceeds what the
    source's partitions hold."""
    plan, source = parse_stages(text), RateStages.parse(text, partitions)
    assert plan.duration_s == source.duration_us / 1e6
    assert partitions * source.total - partitions <= plan.total_events(partitions) <= partitions * source.total
    for bad in ("5k:10", "10:1s", "1s:-1", "1s:0"):
        with pytest.raises(Exception):
            parse_stages(bad)
        with pytest.raises(Exception):
            RateStages.parse(bad, partitions)
