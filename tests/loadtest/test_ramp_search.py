"""``--ramp search:LO:HI``: the bisection on made-up sinks whose breaking point is known, its flags and file keys,
its report; and one short search on a real query whose capacity is capped (a micro-batch of at most N events
every T)."""

from __future__ import annotations

import json
import re

import pytest

from impulse.loadtest import LoadConfig, LoadError, RampConfig, RampResult, Verdict, ramp_text
from impulse.loadtest.cli import main
from impulse.loadtest.load.ramp import CONFIRM, PROBE, search_rate
from impulse.loadtest.scenario import load_plan, plan_from_args
from tests.loadtest.test_ramp import _Step


class _Sink:
    """Sustains a rate up to `capacity` (events/s); a confirming run, up to `confirmed` (default: `capacity`)."""

    def __init__(self, capacity: float, confirmed: float | None = None):
        self.capacity, self.confirmed = capacity, capacity if confirmed is None else confirmed
        self.probes: list[tuple[float, str]] = []

    def __call__(self, rate: float, role: str) -> bool:
        self.probes.append((rate, role))
        return rate <= (self.confirmed if role == CONFIRM else self.capacity)


@pytest.mark.parametrize("capacity", [1_000, 3_333, 7_777, 19_999])
@pytest.mark.parametrize("precision", [0.05, 0.01])
def test_the_search_finds_a_known_breaking_point_to_within_its_precision(capacity, precision):
    sink = _Sink(capacity)
    found = search_rate(1_000, 20_000, precision, sink)
    assert found is not None and found <= capacity  # a rate it sustains…
    failed = min((r for r, _ in sink.probes if r > capacity), default=None)
    assert failed is not None and failed - found <= precision * found + 1  # …within the precision of one it does not
    assert capacity - found <= precision * found + 1
    assert sink.probes[:2] == [(1_000, PROBE), (20_000, PROBE)] and sink.probes[-1] == (found, CONFIRM)
    assert [role for _, role in sink.probes].count(CONFIRM) == 1


def test_a_search_whose_high_end_is_sustained_confirms_it_and_one_whose_low_end_is_not_finds_nothing():
    sink = _Sink(50_000)
    assert search_rate(1_000, 20_000, 0.05, sink) == 20_000
    assert sink.probes == [(1_000, PROBE), (20_000, PROBE), (20_000, CONFIRM)]
    sink = _Sink(500)
    assert search_rate(1_000, 20_000, 0.05, sink) is None
    assert sink.probes == [(1_000, PROBE)]


def test_a_failed_confirming_run_sends_the_search_below_it():
    sink = _Sink(10_000, confirmed=6_000)  # sustains 10,000 for a step, only 6,000 for twice as long
    found = search_rate(1_000, 20_000, 0.05, sink)
    assert found is not None and 6_000 / 1.05 - 1 <= found <= 6_000  # the long runs' breaking point, to 5 %
    confirms = [r for r, role in sink.probes if role == CONFIRM]
    assert confirms[0] > 6_000 and found in confirms
    assert all(role == CONFIRM for _, role in sink.probes[sink.probes.index((confirms[0], CONFIRM)):])
    sink = _Sink(10_000, confirmed=10)  # nothing holds for a long run, LO included
    assert search_rate(1_000, 20_000, 0.05, sink) is None and sink.probes[-1] == (1_000, CONFIRM)


def test_a_stopped_search_returns_nothing():
    calls = []

    def stopped(rate, role):
        calls.append(rate)
        return True if len(calls) == 1 else None
    assert search_rate(1_000, 20_000, 0.05, stopped) is None and calls == [1_000, 20_000]


SUSTAINED, TOO_SLOW = Verdict(True), Verdict(False, ("achieved 9,000 events/s < 95% of the target 10,000",))


def _search(steps) -> RampResult:
    ramp = RampConfig(1_000, 19_000, 20_000, 3, search=True)
    return RampResult(LoadConfig(sink="noop"), ramp, [_Step(rate, verdict) for rate, _, verdict in steps],
                      roles=[role for _, role, _ in steps])


def test_the_search_result_is_its_confirmed_rate_and_the_report_shows_every_probe():
    result = _search([(1_000, PROBE, SUSTAINED), (20_000, PROBE, TOO_SLOW), (10_500, PROBE, SUSTAINED),
                      (10_500, CONFIRM, SUSTAINED)])
    assert result.highest_sustained_rate == 10_500 and result.passed
    document = result.to_dict()
    assert [s["role"] for s in document["steps"]] == [PROBE, PROBE, PROBE, CONFIRM]
    assert document["ramp"]["search"] is True and document["ramp"]["precision"] == 0.05
    text = ramp_text(result)
    assert "search 1,000–20,000 events/s to within 5%" in text
    assert len(re.findall(r"^  probe ", text, re.M)) == 3 and len(re.findall(r"^  confirm ", text, re.M)) == 1
    assert "sustainable rate (confirmed): 10,500 events/s" in text
    unconfirmed = _search([(1_000, PROBE, SUSTAINED), (20_000, PROBE, TOO_SLOW), (1_000, CONFIRM, TOO_SLOW)])
    assert unconfirmed.highest_sustained_rate is None
    assert unconfirmed.failures == ["no rate sustained its confirming run: step 3 at 1,000 events/s: achieved 9,000 "
                                    "events/s < 95% of the target 10,000"]


def test_search_and_its_precision_are_flags_and_file_keys(tmp_path):
    ramp = plan_from_args(["--sink", "noop", "--ramp", "search:10k:200k"]).scenarios[0].ramp
    assert (ramp.search, ramp.start, ramp.maximum, ramp.precision) == (True, 10_000, 200_000, 0.05)
    ramp = plan_from_args(["--sink", "noop", "--ramp", "search:10k:200k", "--ramp-precision", "2%"]).scenarios[0].ramp
    assert ramp.precision == 0.02
    path = tmp_path / "search.toml"
    path.write_text('sink = "noop"\nramp = "search:1k:4k"\nramp-precision = 0.1\n')
    ramp = load_plan(path).scenarios[0].ramp
    assert (ramp.search, ramp.start, ramp.maximum, ramp.precision) == (True, 1_000, 4_000, 0.1)
    for argv, words in ((["--ramp", "search:10k"], "is not search:LO:HI"),
                        (["--ramp", "search:20k:10k"], "needs 0 < LO < HI"),
                        (["--ramp", "search:10k:20k", "--ramp-precision", "150%"], "between 0 and 1"),
                        (["--ramp", "search:10k:20k", "--ramp-precision", "fine"], "'fine' is not a share"),
                        (["--ramp", "10k:10k:50k", "--ramp-precision", "1%"], "--ramp-precision applies to a search")):
        with pytest.raises(LoadError, match=re.escape(words)):
            plan_from_args(["--sink", "noop", *argv])


@pytest.mark.integration
def test_a_search_on_a_capped_query_never_confirms_a_rate_above_its_capacity(spark, tmp_path, capsys):
    # At most 100 events per micro-batch, one every 250 ms: at most 400 events/s, whatever the machine (a busy one
    # may sustain less, even nothing). HI (1,600) can never be sustained; what the search confirms is at most 400.
    code = main(["--sink", "noop", "--partitions", "2", "--payload-bytes", "0", "--ramp", "search:100:1600",
                 "--ramp-precision", "50%", "--step-duration", "3s", "--trigger", "250ms",
                 "--max-events-per-trigger", "100", "--max-latency", "30s", "--output", str(tmp_path)])
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "report.json").read_text())
    steps = [(s["summary"]["targetRate"], s["role"], s["summary"]["sustained"]) for s in report["steps"]]
    assert steps[0][:2] == (100, PROBE), out
    if not steps[0][2]:  # LO not sustained: the search ends there
        assert len(steps) == 1 and report["highestSustainedRate"] is None and code == 99, out
        return
    assert steps[1] == (1600, PROBE, False) and any(role == CONFIRM for _, role, _ in steps), out
    best = report["highestSustainedRate"]
    assert best is None or 100 <= best <= 400, out
    assert (code == 0) == (best is not None), out
    assert "sustainable rate" in out
