"""Step mode: a real ramp on ``noop`` that stops at once, the bound itself on made-up runs, and the ramp as a CI gate
(`RampResult.failures`) on made-up steps and in two short CLI runs into ``noop`` (exit 99, a JUnit failure)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import xmlschema
from junitparser import Failure, JUnitXml

from connectors.latency import LatencyHistogram
from impulse.loadtest import LoadConfig, LoadError, RampConfig, RampResult, Verdict, assess, ramp_text, run_ramp, \
    write_report
from impulse.loadtest.cli import main
from impulse.loadtest.measure.metrics import Batch, achieved_rate
from impulse.loadtest.reports.junit import junit_xml
from impulse.loadtest.scenario import load_plan, plan_from_args
from tests.loadtest.helpers import assert_report_files

JUNIT_SCHEMA = Path(__file__).with_name("data") / "junit-10.xsd"


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


# ------------------------------------------------------------------------------- the ramp as a gate, made-up steps


@dataclass
class _Step:
    """The attributes of a LoadResult that RampResult, ramp_text and the JUnit file read."""

    target_rate: float
    verdict: Verdict
    achieved_rate: float = 0.0
    events: int = 0
    errors: int = 0
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    outcome: str = "completed"

    def to_dict(self) -> dict:
        return {"summary": {"targetRate": self.target_rate, "outcome": "completed",
                            "sustained": self.verdict.sustained}, "thresholds": []}


SUSTAINED = Verdict(True)
TOO_SLOW = Verdict(False, ("p99 latency 8.700s > max latency 5s",))


def _ramp(verdicts, min_sustained=None, interrupted=False) -> RampResult:
    ramp = RampConfig(5_000, 5_000, 20_000, 3, min_sustained)
    steps = [_Step(rate, verdict) for rate, verdict in zip(ramp.rates(), verdicts)]
    return RampResult(LoadConfig(sink="noop"), ramp, steps, interrupted)


def test_a_ramp_without_a_sustained_step_fails_with_the_first_steps_reasons():
    ramp = _ramp([TOO_SLOW])
    assert ramp.failures == ["no step sustained: step 1 at 5,000 events/s: p99 latency 8.700s > max latency 5s"]
    assert not ramp.passed
    two = _ramp([Verdict(False, ("the query failed: boom", "p99 latency 8.700s > max latency 5s"))])
    assert two.failures == ["no step sustained: step 1 at 5,000 events/s: the query failed: boom; "
                            "p99 latency 8.700s > max latency 5s"]
    assert _ramp([], interrupted=True).failures == ["no step sustained: no step ran (interrupted)"]


def test_a_ramp_passes_with_a_sustained_step_and_its_minimum_reached():
    assert _ramp([SUSTAINED, TOO_SLOW]).failures == []
    assert _ramp([SUSTAINED, SUSTAINED, TOO_SLOW], min_sustained=10_000).passed
    assert _ramp([SUSTAINED] * 4, min_sustained=20_000).passed


def test_a_ramp_below_min_sustained_fails_naming_both_rates_and_the_step_that_stopped_it():
    ramp = _ramp([SUSTAINED, TOO_SLOW], min_sustained=15_000)
    assert ramp.failures == ["highest sustained rate 5,000 events/s < min-sustained 15,000 events/s: "
                             "step 2 at 10,000 events/s: p99 latency 8.700s > max latency 5s"]
    stopped = _ramp([SUSTAINED], min_sustained=15_000, interrupted=True)
    assert stopped.failures == ["highest sustained rate 5,000 events/s < min-sustained 15,000 events/s: "
                                "interrupted before a faster step ran"]
    none = _ramp([TOO_SLOW], min_sustained=15_000)  # one reason: nothing was sustained
    assert none.failures == ["no step sustained: step 1 at 5,000 events/s: p99 latency 8.700s > max latency 5s"]


def test_the_text_the_json_and_the_junit_file_say_the_same_verdict():
    for ramp in (_ramp([SUSTAINED, TOO_SLOW], min_sustained=15_000), _ramp([SUSTAINED, SUSTAINED, TOO_SLOW])):
        text, document = ramp_text(ramp), ramp.to_dict()
        assert document["passed"] is ramp.passed and document["failures"] == ramp.failures
        assert document["ramp"]["minSustained"] == ramp.ramp.min_sustained
        xml = junit_xml({"name": "orders", **document}).decode()
        xmlschema.XMLSchema(str(JUNIT_SCHEMA)).validate(xml)
        parsed = JUnitXml.fromstring(xml)
        gate = [suite for suite in parsed if suite.name == "orders"]
        assert len(gate) == 1 and len(list(parsed)) == len(ramp.steps) + 1  # one suite per step, and the gate
        (case,) = list(gate[0])
        if ramp.passed:
            assert "ramp: passed" in text and "FAILED" not in text
            assert case.name == "a step sustained" and list(case.result) == [] and parsed.failures == 0
        else:
            assert "ramp: FAILED (min-sustained 15,000 events/s)" in text and f"  {ramp.failures[0]}" in text
            assert case.name == "highest sustained rate ≥ 15,000 events/s"
            (failure,) = case.result
            assert isinstance(failure, Failure) and failure.message == ramp.failures[0]
            assert parsed.failures == 1


def test_min_sustained_is_a_rate_a_step_can_reach_and_only_with_a_ramp():
    plan = plan_from_args(["--sink", "noop", "--ramp", "10k:10k:50k", "--min-sustained", "30k"])
    assert plan.scenarios[0].ramp.min_sustained == 30_000
    assert plan_from_args(["--sink", "noop", "--ramp", "10k:10k:50k"]).scenarios[0].ramp.min_sustained is None
    for argv, words in ((["--rate", "1k", "--min-sustained", "1k"], "--min-sustained gates a ramp"),
                        (["--ramp", "10k:10k:50k", "--min-sustained", "60k"], "its steps go up to 50,000"),
                        (["--ramp", "10k:10k:50k", "--min-sustained", "lots"], "'lots' is not a rate")):
        with pytest.raises(LoadError, match=re.escape(words)):
            plan_from_args(["--sink", "noop", *argv])


def test_min_sustained_is_a_file_key(tmp_path):
    path = tmp_path / "gate.toml"
    path.write_text('sink = "noop"\nramp = "1k:1k:4k"\nmin-sustained = "3k"\n')
    assert load_plan(path).scenarios[0].ramp.min_sustained == 3_000
    path.write_text('sink = "noop"\nmin-sustained = 3000\n')
    with pytest.raises(LoadError, match=r"gate.toml: key 'min-sustained' gates a ramp.*give key 'ramp'"):
        load_plan(path)


# ------------------------------------------------------------------------------- the gate, end to end


def _gate_run(capsys, tmp_path, *argv: str) -> tuple[int, str, dict, JUnitXml]:
    """`main()` in-process on the shared session: a short ramp into noop with --output and --junit."""
    code = main(["--sink", "noop", "--partitions", "2", "--payload-bytes", "0", "--step-duration", "2s", *argv,
                 "--output", str(tmp_path / "report"), "--junit", str(tmp_path / "junit.xml")])
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    xml = (tmp_path / "junit.xml").read_text()
    xmlschema.XMLSchema(str(JUNIT_SCHEMA)).validate(xml)
    return code, out, report, JUnitXml.fromstring(xml)


@pytest.mark.integration
def test_a_ramp_with_no_sustained_step_exits_99_with_a_junit_failure(spark, tmp_path, capsys):
    # A 1 s trigger makes every event wait ~0.5 s or more: no step can have p99 ≤ 1 ms.
    code, out, report, junit = _gate_run(capsys, tmp_path, "--ramp", "500:500:1k", "--max-latency", "1ms")
    assert code == 99, out
    assert report["passed"] is False and report["highestSustainedRate"] is None
    (reason,) = report["failures"]
    assert re.fullmatch(r"no step sustained: step 1 at 500 events/s: .*p99 latency [\d.]+s > max latency 0.001s.*",
                        reason), reason
    assert f"ramp: FAILED\n  {reason}" in out
    (gate,) = [suite for suite in junit if suite.name == "impulse-load"]
    (case,) = list(gate)
    (failure,) = case.result
    assert isinstance(failure, Failure) and failure.message == reason and junit.failures >= 1


@pytest.mark.integration
def test_a_ramp_below_min_sustained_exits_99(spark, tmp_path, capsys):
    # At most 100 events per micro-batch, one every 250 ms: 100 events/s is sustained even at one batch a second,
    # 1,000 events/s cannot be (≤ 400 events/s). Steps of 3 s: a slope over a dozen micro-batches.
    code, out, report, junit = _gate_run(capsys, tmp_path, "--ramp", "100:900:1000", "--step-duration", "3s",
                                         "--trigger", "250ms", "--max-events-per-trigger", "100",
                                         "--max-latency", "30s", "--min-sustained", "1k")
    assert code == 99, out
    sustained = [s["summary"]["sustained"] for s in report["steps"]]
    assert report["passed"] is False
    (reason,) = report["failures"]
    if sustained == [False]:  # a loaded machine: the first 3-s step fell short of 95 % of 100 events/s
        assert report["highestSustainedRate"] is None and reason.startswith("no step sustained: step 1 at 100 "), out
    else:
        assert sustained == [True, False] and report["highestSustainedRate"] == 100, out
        assert reason.startswith("highest sustained rate 100 events/s < min-sustained 1,000 events/s: step 2 at "
                                 "1,000 events/s: achieved "), reason
    assert f"ramp: FAILED (min-sustained 1,000 events/s)\n  {reason}" in out
    (gate,) = [suite for suite in junit if suite.name == "impulse-load"]
    (case,) = list(gate)
    assert case.name == "highest sustained rate ≥ 1,000 events/s" and case.result[0].message == reason
