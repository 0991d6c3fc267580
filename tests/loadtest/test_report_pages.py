"""report.html and --junit: the page and the JUnit XML drawn from report.json documents.

Unit tests render documents made here (a run with a ``check`` and keys the page does not know, a ramp, a file's
scenarios) and validate the JUnit XML against the Surefire schema Jenkins and GitLab read (``data/junit-10.xsd``)
and with junitparser. The integration tests make two real runs (``main()`` in-process on the shared session, the
``noop`` sink, a few seconds each): one whose thresholds pass, one with a failing threshold; their JUnit files are
validated, and the failing run's report.html is opened in a real headless Chromium (`tests.loadtest.chromium`),
which must draw every chart, show the run's numbers, and make no request beyond the file.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml

from connectors.latency import LatencyHistogram
from impulse.loadtest.cli import main
from impulse.loadtest.reports.compare import write_compare_html
from impulse.loadtest.reports.html import render_html
from impulse.loadtest.reports.junit import junit_xml
from impulse.loadtest.scenario import plan_from_args
from tests.loadtest.chromium import Chromium, RecordingProxy

SCHEMA = Path(__file__).with_name("data") / "junit-10.xsd"
RATE = 2_000


def _histogram(values_ms: np.ndarray) -> dict:
    histogram = LatencyHistogram()
    histogram.record((values_ms * 1e3).astype(np.int64))
    return histogram.to_dict()


def _run(rate: float, p99_ms: float, *, thresholds=(), seed: int = 1, **extra) -> dict:
    """A run's report.json object: batches, latency histograms, summary, thresholds (as `LoadResult.to_dict`)."""
    rng = np.random.default_rng(seed)
    latency = rng.uniform(1, p99_ms, 2_000)
    batches = [{"batchId": i, "timeS": 0.5 * (i + 1), "events": int(rate / 2), "delivered": int(rate / 2) * (i + 1),
                "lag": 10 * i, "latencyP50Ms": p99_ms / 2, "latencyP99Ms": p99_ms, "latencyMaxMs": p99_ms * 1.1,
                "scheduleDelayP50Ms": 1.0, "scheduleDelayP99Ms": 2.0, "deliveryP50Ms": p99_ms / 2,
                "deliveryP99Ms": p99_ms, "addBatchMs": 100 + i, "walCommitMs": 20, "triggerExecutionMs": 130 + i}
               for i in range(6)]
    return {
        "summary": {"sink": "noop", "targetRate": rate, "achievedRate": rate * 0.99, "targetEvents": int(rate * 3),
                    "events": int(rate * 3), "errors": 0, "outcome": "completed", "sustained": True,
                    "latencyP99Ms": p99_ms},
        "config": {"sink": "noop", "rate": rate, "options": {"url": "redis://***@localhost"}},
        "deployment": {"master": "local[2]", "executors": 0, "cores": 2},
        "startedUs": 1_764_000_000_000_000,
        "verdict": {"sustained": True, "reasons": []},
        "thresholds": list(thresholds),
        "latencyMs": {"p50": p99_ms / 2, "p99": p99_ms, "max": p99_ms * 1.1},
        "latencyHistogram": _histogram(latency), "scheduleDelayHistogram": _histogram(latency / 10),
        "deliveryHistogram": _histogram(latency * 0.9),
        "phasesMs": {"addBatch": {"mean": 102.5, "max": 105}},
        "batches": batches, **extra,
    }


PASS = {"threshold": "p99<1s", "metric": "p99", "passed": True, "actual": 812_300.0, "measured": "812.3 ms"}
FAIL = {"threshold": "p50<1ms", "metric": "p50", "passed": False, "actual": 480_000.0, "measured": "480.0 ms"}
CHECK = {"passed": False, "expected": 6_000, "delivered": 5_998, "lost": 3, "duplicated": 1, "unexpected": 0}
CHECK_DETAIL = {"basis": "the query over a batch read of the same events",
                "examples": {"lost": ["Row(counter=17)", "Row(counter=4242)"]}}


def _validate(xml: bytes) -> JUnitXml:
    """Valid against junit-10.xsd, and read by junitparser."""
    xmlschema.XMLSchema(str(SCHEMA)).validate(xml.decode("utf-8"))
    return JUnitXml.fromstring(xml.decode("utf-8"))


def _poll(condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _cases(parsed: JUnitXml) -> dict[tuple[str, str], list]:
    return {(suite.name, case.name): list(case.result) for suite in parsed for case in suite}


# ------------------------------------------------------------------------------------------ the page


def test_the_page_shows_every_gate_a_check_and_keys_it_does_not_know():
    run = _run(RATE, 800.0, thresholds=[PASS, FAIL], check=CHECK, checkDetail=CHECK_DETAIL, sinkCommit={"mode": "2pc"})
    run["summary"]["outputRows"] = 5_999
    page = render_html([("orders", {"mode": "run", "name": "orders", **run})], "impulse-load: orders", "/*js*/")
    text = re.sub(r"<[^>]+>", " ", page.split("<script")[0])
    assert re.search(r"pass\s+p99&lt;1s\s+812\.3 ms", text) and re.search(r"FAIL\s+p50&lt;1ms\s+480\.0 ms", text)
    assert "Thresholds: 1 of 2 passed" in text
    assert re.search(r"Check:\s+FAIL\s+lost 3, duplicated 1, unexpected 0 of 6,000 expected \(5,998 delivered\)", text)
    assert "Row(counter=4242)" in page and "compared: the query over a batch read" in text  # the check's detail
    assert re.search(r"outputRows\s+5,999", text)   # a summary key added by someone else
    assert "sinkCommit" in text and "2pc" in text   # … and a key of the run's object
    assert "redis://***@localhost" in text and "local[2]" in text  # configuration, deployment
    assert "<script src" not in page and "<link" not in page  # nothing to fetch
    specs = json.loads(re.search(r'id="figures">(.*?)</script>', page, re.S).group(1))
    titles = [spec["layout"]["title"]["text"] for spec in specs]
    assert [t.split(":")[0].split(" (")[0] for t in titles] == [
        "Rate", "Lag", "Latency per micro-batch", "Schedule delay vs delivery per micro-batch",
        "Spark's phases per micro-batch", "Latency distribution"]
    hdr = specs[-1]["data"][0]
    assert hdr["name"] == "end-to-end" and hdr["y"] == sorted(hdr["y"]) and hdr["x"] == sorted(hdr["x"])
    assert hdr["y"][-1] == pytest.approx(LatencyHistogram.from_dict(run["latencyHistogram"]).max_us / 1e3)
    assert all(f'id="{spec["id"]}"' in page for spec in specs)


def test_a_resumed_run_says_under_its_headline_what_its_figures_cover():
    run = _run(RATE, 800.0)
    run["summary"]["resumed"] = {"checkpoint": "/data/ckpt", "firstBatchId": 7, "eventsBefore": 12_345}
    page = render_html([("orders", {"mode": "run", "name": "orders", **run})], "impulse-load: orders", "")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.split("<script")[0]))
    assert re.search(r"Resumed run — resumed from --checkpoint /data/ckpt at micro-batch 7: 12,345 events committed "
                     r"by earlier runs; latency runs from each event's original schedule", html.unescape(text))
    assert page.index('class="resumed"') < page.index('class="cards"')   # above the figures it qualifies
    assert "eventsBefore" not in page      # not repeated as raw JSON in the summary table
    plain = render_html([("orders", {"mode": "run", "name": "orders", **_run(RATE, 800.0)})], "t", "")
    assert 'class="resumed"' not in plain and "Resumed run" not in plain


def test_a_ramp_and_a_file_get_a_section_per_step_and_scenario_and_their_comparison():
    ramp = {"mode": "ramp", "ramp": {"start": 1000, "step": 1000, "max": 3000, "stepDurationS": 3},
            "bound": "completed, achieved ≥ 95% of target, p99 ≤ 1s", "highestSustainedRate": 2000.0,
            "interrupted": False, "steps": [_run(1000, 50, seed=1), _run(2000, 90, seed=2), _run(3000, 2500, seed=3)]}
    document = {"mode": "scenarios", "file": "spike.toml", "scenarios": [
        {"name": "steady", "mode": "run", **_run(500, 20, thresholds=[PASS])}, {"name": "ramp", **ramp}]}
    page = render_html([("spike.toml", document)], "impulse-load: spike.toml", "")
    text = re.sub(r"<[^>]+>", " ", page.split("<script")[0])
    assert "Comparison of 4 runs" in text
    for name in ("spike.toml / steady", "spike.toml / ramp / step 1: 1,000 events/s",
                 "spike.toml / ramp / step 3: 3,000 events/s"):
        assert text.count(name) == 2, name     # a row of the comparison, a section of its own
    assert re.search(r"2,000\.0\s+highest sustained rate", text)
    specs = json.loads(re.search(r'id="figures">(.*?)</script>', page, re.S).group(1))
    overlay = next(s for s in specs if s["layout"]["title"]["text"].startswith("p99 latency per micro-batch"))
    assert [t["name"] for t in overlay["data"]] == ["spike.toml / steady"] + [
        f"spike.toml / ramp / step {i}: {r:,} events/s" for i, r in ((1, 1000), (2, 2000), (3, 3000))]


def test_compare_writes_one_page_of_several_reports(tmp_path):
    for name, p99 in (("redis", 40.0), ("kafka", 90.0)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps({"mode": "run", **_run(RATE, p99)}))
    page = write_compare_html([tmp_path / "redis", tmp_path / "kafka"], tmp_path / "compare.html").read_text()
    assert "Plotly" in page and "Comparison of 2 runs" in page
    assert page.index('<h2>redis</h2>') < page.index('<h2>kafka</h2>')


# ------------------------------------------------------------------------------------------ JUnit


def test_junit_has_a_case_per_threshold_and_check_and_a_suite_per_step_and_scenario():
    failing = junit_xml({"mode": "run", "name": "orders", **_run(RATE, 800, thresholds=[PASS, FAIL], check=CHECK)})
    parsed = _validate(failing)
    cases = _cases(parsed)
    assert list(cases) == [("orders", "p99<1s"), ("orders", "p50<1ms"),
                           ("orders", "check: every expected row delivered exactly once"), ("orders", "run completed")]
    assert cases[("orders", "p99<1s")] == [] and cases[("orders", "run completed")] == []
    (failure,) = cases[("orders", "p50<1ms")]
    assert isinstance(failure, Failure) and failure.message == "measured 480.0 ms; bound p50<1ms"
    (check,) = cases[("orders", "check: every expected row delivered exactly once")]
    assert check.message.startswith("lost 3, duplicated 1, unexpected 0 of 6,000 expected")
    assert (parsed.tests, parsed.failures, parsed.errors) == (4, 2, 0)

    passed = dict(CHECK, passed=True, delivered=6_000, lost=0, duplicated=0)
    timed_out = _run(1000, 50, check=passed, error="1,000 of 3,000 events delivered 6s after the start")
    timed_out["summary"]["outcome"] = "timed out"
    ramp = {"mode": "ramp", "steps": [_run(1000, 50), _run(2000, 90)]}
    document = {"mode": "scenarios", "scenarios": [{"name": "slow", **timed_out}, {"name": "up", **ramp}]}
    parsed = _validate(junit_xml(document))
    assert [suite.name for suite in parsed] == ["impulse-load / slow", "impulse-load / up / step 1: 1,000 events/s",
                                               "impulse-load / up / step 2: 2,000 events/s"]
    cases = _cases(parsed)
    assert cases[("impulse-load / slow", "check: every expected row delivered exactly once")] == []
    (error,) = cases[("impulse-load / slow", "run completed")]
    assert isinstance(error, Error) and "timed out: 1,000 of 3,000" in error.message
    suite = next(iter(parsed))
    assert {p.name: p.value for p in suite.properties()}["targetRate"] == "1000"


def test_the_schema_rejects_what_ci_cannot_read():
    """The check can fail: a suite without its counts, and a time Surefire cannot parse."""
    good = junit_xml({"mode": "run", **_run(RATE, 80, thresholds=[PASS], check=None)}).decode()
    assert [case.name for suite in _validate(good.encode()) for case in suite] == ["p99<1s", "run completed"]
    schema = xmlschema.XMLSchema(str(SCHEMA))
    assert schema.is_valid(good)
    assert not schema.is_valid(re.sub(r' failures="\d+"', "", good))
    assert not schema.is_valid(re.sub(r'time="[\d.]+"', 'time="3.1234"', good, count=1))


def test_junit_flag_is_a_run_wide_key():
    assert plan_from_args(["--sink", "noop", "--junit", "out/junit.xml"]).junit == "out/junit.xml"
    assert plan_from_args(["--sink", "noop"]).junit is None


# ------------------------------------------------------------------------------------------ real runs


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """Two real runs with --output and --junit: thresholds that pass (exit 0), one that fails (exit 99)."""
    root = tmp_path_factory.mktemp("pages")
    common = ["--sink", "noop", "--rate", str(RATE), "--duration", "3s", "--trigger", "0"]
    codes = {
        "passing": main([*common, "--output", str(root / "passing"), "--junit", str(root / "passing.xml"),
                         "--threshold", "p99<60s", "--threshold", "errors==0"]),
        "failing": main([*common, "--output", str(root / "failing"), "--junit", str(root / "failing.xml"),
                         "--threshold", "p99<60s", "--threshold", "p50<1ms", "--threshold", "errors==0"]),
    }
    return root, codes


@pytest.mark.integration
def test_junit_of_a_passing_and_a_failing_run(runs):
    root, codes = runs
    assert codes == {"passing": 0, "failing": 99}
    passing = _validate((root / "passing.xml").read_bytes())
    assert (passing.tests, passing.failures, passing.errors) == (3, 0, 0)
    failing = _validate((root / "failing.xml").read_bytes())
    assert (failing.tests, failing.failures, failing.errors) == (4, 1, 0)
    report = json.loads((root / "failing" / "report.json").read_text())
    (failure,) = _cases(failing)[("impulse-load", "p50<1ms")]
    measured = next(c["measured"] for c in report["thresholds"] if c["threshold"] == "p50<1ms")
    assert failure.message == f"measured {measured}; bound p50<1ms"


@pytest.mark.integration
def test_report_html_opens_in_chromium_offline_with_the_runs_numbers(runs, tmp_path):
    root, _ = runs
    page = root / "failing" / "report.html"
    report = json.loads((root / "failing" / "report.json").read_text())
    browser_proxy, page_proxy = RecordingProxy(), RecordingProxy()
    try:
        with Chromium(proxy_port=browser_proxy.port, page_proxy_port=page_proxy.port) as browser:
            browser.send("Network.enable")
            browser.send("Page.navigate", {"url": page.as_uri()})
            assert browser.wait_for("document.body && document.body.getAttribute('data-charts')") == "rendered"
            drawn = browser.evaluate("document.querySelectorAll('.js-plotly-plot .main-svg').length")
            assert drawn >= 6  # every chart drew its SVG
            text = browser.evaluate("document.body.innerText")
            summary = report["summary"]
            assert f"{summary['events']:,} / {summary['targetEvents']:,}" in text
            p99 = summary["latencyP99Ms"]
            assert re.search(r"latency p99 \(ms\)\s+" + re.escape(f"{p99:,.3f}" if p99 < 10 else f"{p99:,.1f}"), text)
            for check in report["thresholds"]:
                mark = "pass" if check["passed"] else "FAIL"
                assert re.search(rf"{mark}\s+{re.escape(check['threshold'])}\s+{re.escape(check['measured'])}", text)
            assert "FAIL\tp50<1ms" in text and "pass\tp99<60s" in text
            screenshot = browser.screenshot(tmp_path / "report.png")
            requests = [event["params"]["request"]["url"] for event in browser.events
                        if event.get("method") == "Network.requestWillBeSent"]
            assert requests and all(url == page.as_uri() or url.startswith(("data:", "blob:")) for url in requests), \
                requests
            assert page_proxy.requests == []  # no connection left the page
            # the control: a request the page does make reaches the page's proxy
            browser.evaluate("fetch('http://impulse-probe.invalid/').catch(function () {}), true")
            assert _poll(lambda: any("impulse-probe.invalid" in line for line in page_proxy.requests)), \
                page_proxy.requests
    finally:
        browser_proxy.close()
        page_proxy.close()
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 20_000
    keep = os.environ.get("IMPULSE_REPORT_SCREENSHOT")  # where to keep the screenshot (the README's)
    if keep:
        shutil.copy(screenshot, keep)
