"""A run paced by the source's ``rateCurve`` (and ``bursts.*``): the harness reads the curve with the source's parser
into intervals (`impulse.loadtest.settings.curve`), the source gets it as written, and the report shows the curve's
target beside the achieved rate per interval. Pure arithmetic first; then one short CLI run on the shared session."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from connectors.latency import LatencyHistogram
from connectors.options import OptionReader
from impulse.curve import periodic_rate
from impulse.loadtest.cli import main
from impulse.loadtest.load.events import impulse_options
from impulse.loadtest.load.run import LoadResult
from impulse.loadtest.load.warm_pipeline import warm_options
from impulse.loadtest.measure.metrics import Batch
from impulse.loadtest.scenario import plan_from_args
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.curve import curve_plan, intervals_per_period
from impulse.loadtest.settings.units import LoadError

DAILY = {"rateCurve": "daily:min=200,max=1000,peak=06:00", "rateCurve.period": "10s"}


def test_the_plan_schedules_what_the_source_schedules_per_partition():
    options = {**DAILY, "bursts.every": "5s", "bursts.factor": "3", "bursts.duration": "1s"}
    partitions = 3
    plan = curve_plan(options, 25.0, partitions)
    source = periodic_rate(OptionReader(options, name="impulse source"), partitions, None)
    k = np.arange(0, 4_000, 37)   # one partition's events over the 25 s: the plan counts all partitions
    assert np.allclose(plan.time_of(k * partitions), source.offsets_us(k) / 1e6, atol=2e-6)
    # 10 s periods cut in 2 intervals of 5 s (at least MIN_INTERVAL_S), the run's end cuts the last one
    assert [(s.start_s, s.end_s) for s in plan.stages] == [(0, 5), (5, 10), (10, 15), (15, 20), (20, 25)]
    assert plan.duration_s == 25 and plan.option == "rateCurve"
    assert all(not s.hold and s.knots for s in plan.stages)   # judged on its rate, never as a hold
    # a burst (the last second of every 5 s) triples the curve: 06:00 of a 10 s day is 2.5 s, the peak, 1000/s
    assert plan.rate_at(2.5) == pytest.approx(1_000, abs=0.01) and plan.rate_at(4.5) == pytest.approx(
        3 * (200 + 800 * (1 + np.cos(2 * np.pi * (0.45 - 0.25))) / 2), rel=1e-3)
    budget = plan.total_events(partitions)
    assert budget % partitions == 0 and plan.events - partitions < budget <= plan.events


def test_a_sink_that_keeps_up_achieves_each_intervals_mean_rate():
    """Batches every 0.5 s of what is due, each acknowledged 0.3 s later (a sink that keeps up): each interval's
    achieved rate is its events over the time between acknowledgements, the curve's mean within a batch's worth
    (a least-squares slope would read the peak's interval 6 % high and the trough's 14 % low)."""
    config = LoadConfig(sink="noop", partitions=2, duration_s=20, source_options=DAILY)
    plan, total, start_us = config.stages, config.total_events, 1_700_000_000_000_000
    batches, delivered, t = [], 0, 0.5
    while delivered < total:
        due = min(total, math.floor(plan.events_by(t)))
        if due > delivered:
            ack_us = start_us + round((t + 0.3) * 1e6)
            batches.append(Batch(len(batches), ack_us - 300_000, ack_us, ack_us, due - delivered, due, 0, 0, 0, 0, {},
                                 LatencyHistogram().to_dict(), {}, {}))
            delivered = due
        t += 0.5
    result = LoadResult(config, "noop", {}, "q", batches, start_us, start_us, batches[-1].ack_us, "completed")
    intervals = result.stage_results
    assert [round(i.stage.mean_rate) for i in intervals] == [855, 345, 855, 345]
    assert sum(i.events for i in intervals) == total
    for interval in intervals:
        assert interval.achieved_rate == pytest.approx(interval.stage.mean_rate, rel=0.03), interval.stage.label
        assert interval.sustained is None   # a curve's interval is reported, not judged as a hold


def test_a_slow_first_batch_that_is_caught_up_does_not_read_as_delivered_faster_than_scheduled():
    """The first batch is acknowledged 1.5 s after its events were due, the next ones 0.3 s after (a pipeline
    settling, then keeping up): the first interval's rate is still its mean, not its events over 1.2 s less."""
    config = LoadConfig(sink="noop", partitions=2, duration_s=20, source_options=DAILY)
    plan, total, start_us = config.stages, config.total_events, 1_700_000_000_000_000
    batches, delivered, t = [], 0, 0.5
    while delivered < total:
        due = min(total, math.floor(plan.events_by(t)))
        if due > delivered and (t >= 1.5 or not batches):
            ack_us = start_us + round((t + (1.5 if not batches else 0.3)) * 1e6)
            batches.append(Batch(len(batches), ack_us - 300_000, ack_us, ack_us, due - delivered, due, 0, 0, 0, 0, {},
                                 LatencyHistogram().to_dict(), {}, {}))
            delivered = due
        t += 0.5
    result = LoadResult(config, "noop", {}, "q", batches, start_us, start_us, batches[-1].ack_us, "completed")
    first = result.stage_results[0]
    assert first.achieved_rate == pytest.approx(first.stage.mean_rate, rel=0.03)


def test_intervals_are_the_scaled_days_hours_or_fewer_of_at_least_five_seconds():
    assert [intervals_per_period(s) for s in (86_400, 600, 120, 60, 30, 20, 10, 4)] == [24, 24, 24, 12, 6, 4, 2, 1]


def test_the_source_gets_the_curve_as_written_and_the_warm_slice_and_rate_do_not():
    config = LoadConfig(sink="noop", partitions=2, duration_s=10, source_options=DAILY)
    options = impulse_options(config)
    assert {k: options[k] for k in DAILY} == DAILY and "eventsPerSecond" not in options
    assert options["limit"] == str(config.total_events) == "6000"   # the curve's mean, 600/s, over 10 s
    assert config.rate == pytest.approx(600) and config.duration_s == 10
    assert not set(warm_options(options, 600, 100)) & set(DAILY)


@pytest.mark.parametrize("argv, words", [
    (["--source-option", "rateCurve=daily:min=-5,max=10,peak=01:00"], "rateCurve.*a rate cannot be negative"),
    (["--source-option", "bursts.every=5s", "--source-option", "bursts.factor=2", "--source-option",
      "bursts.duration=1s"], r"bursts.*over a rateCurve.*a flat one"),
    (["--source-option", "rateCurve=daily:min=5,max=10,peak=01:00", "--rate", "100"], r"leave out --rate"),
    (["--source-option", "rateCurve=daily:min=5,max=10,peak=01:00", "--source-option", "bursts.every=7s",
      "--source-option", "bursts.factor=2", "--source-option", "bursts.duration=1s"], r"bursts.every.*a divisor"),
])
def test_a_bad_curve_is_refused_naming_the_option(argv, words):
    with pytest.raises(LoadError, match=words):
        plan_from_args(["--sink", "noop", *argv])


def test_a_bad_curve_exits_2_before_any_load(capsys):
    assert main(["--sink", "noop", "--source-option", "rateCurve=daily:min=-5,max=10,peak=01:00"]) == 2
    assert "rateCurve" in capsys.readouterr().err


@pytest.mark.integration
def test_a_daily_curve_over_a_compressed_day_is_followed_and_reported(spark, tmp_path, capsys):
    """A 10 s day (peak at 06:00 = 2.5 s) over 10 s into noop: two 5 s intervals whose mean targets are 855/s and
    345/s. An interval's achieved rate is its events over the time between the acknowledgements that bound it
    (0.5 s triggers): one batch's late acknowledgement on a loaded machine (up to ~0.5 s of the 5 s) moves it by
    ~10 % (a quiet run: +4.6 % and −2.6 %). A source that ignored the curve (600/s flat) is 30 % and 74 % off, so
    a 20 % tolerance tells the two apart."""
    code = main(["--sink", "noop", "--duration", "10s", "--partitions", "2", "--trigger", "500ms",
                 *[a for k, v in DAILY.items() for a in ("--source-option", f"{k}={v}")], "--output", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "rateCurve: rateCurve=daily:min=200,max=1000,peak=06:00, rateCurve.period=10s over 10s" in out
    report = json.loads((tmp_path / "report.json").read_text())
    intervals = report["stages"]
    assert [(s["startS"], s["durationS"]) for s in intervals] == [(0, 5), (5, 5)]
    # the cosine's mean over each half of the day around its peak: 600 ± 400·2/π
    assert [s["targetRate"] for s in intervals] == pytest.approx([600 + 800 / np.pi, 600 - 800 / np.pi], abs=1)
    assert sum(s["events"] for s in intervals) == report["summary"]["events"] == 6_000
    for interval in intervals:
        assert interval["achievedRate"] == pytest.approx(interval["targetRate"], rel=0.2), interval
        assert interval["knots"][0][0] == interval["startS"] and len(interval["knots"]) > 10
    assert re.search(r"0–5s curve, mean 855/s\s+855\s+[\d,]+\s+[\d,]+", out)
    html = (tmp_path / "report.html").read_text()
    assert "Intervals of rateCurve" in html
