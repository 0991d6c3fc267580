"""The harness as a CI gate and a live dashboard: thresholds and exit codes, the Prometheus endpoint scraped
during a run, latency from each event's scheduled time through a sink stall, and ``compare`` on two real runs.

Real runs use the shared Spark session (``main()`` in-process) and small loads: 2 000 events/s for a few seconds.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
import uuid

import pytest

from connectors.servers import free_port
from impulse.loadtest import LoadConfig, LoadError, run_load
from impulse.loadtest.cli import main
from impulse.loadtest.reports.compare import main as compare_main
from impulse.loadtest.settings.thresholds import parse_threshold
from tests.loadtest.helpers import assert_result_plausible

RATE = 2_000


# ------------------------------------------------------------------------------- parsing, no Spark


def test_thresholds_parse_as_written():
    assert parse_threshold("p99<1s").limit == 1_000_000 and parse_threshold("p99<1s").op == "<"
    assert parse_threshold(" p99.9 <= 250ms ").limit == 250_000
    assert parse_threshold("p99.99<2.5s").metric == "p99.99"
    assert parse_threshold("max<=1m").limit == 60_000_000
    assert parse_threshold("rate>=95%").limit == parse_threshold("rate >= 95").limit == 0.95
    assert parse_threshold("errors==0").limit == 0 and parse_threshold("lag<50k").limit == 50_000
    for bad, words in (("p99<500", "unit"), ("p99>1s", "< or <="), ("p42<1s", "unknown metric"),
                       ("rate>=lots", "percentage"), ("rate>=150%", "(0%, 100%]"), ("errors=0", "METRIC OP VALUE"),
                       ("lag<many", "number of events"), ("p99<soon", "duration")):
        with pytest.raises(LoadError, match=re.escape(words)):
            parse_threshold(bad)


@pytest.mark.parametrize("argv, words", [
    (["--threshold", "p99<500"], "give the duration a unit"),
    (["--threshold", "throughput>1"], "unknown metric 'throughput'"),
    (["--abort-on-fail"], "--abort-on-fail needs at least one --threshold"),
    (["--ramp", "1k:1k:2k", "--threshold", "p99<1s"], "--threshold checks a single run"),
])
def test_a_bad_threshold_exits_2_before_any_load(argv, words, capsys):
    assert main(["--sink", "noop", *argv]) == 2
    captured = capsys.readouterr()
    assert words in captured.err and "Traceback" not in captured.err
    assert "starting Spark" not in captured.out  # refused before Spark, before any load


# ------------------------------------------------------------------------------- real runs


@pytest.mark.integration
def test_thresholds_pass_fail_and_compare_two_runs(spark, tmp_path, capsys):
    common = ["--sink", "noop", "--rate", str(RATE), "--duration", "3s", "--trigger", "0"]
    passing = main([*common, "--output", str(tmp_path / "a"), "--threshold", "errors==0", "--threshold", "rate>=50%",
                    "--threshold", "p99<60s", "--threshold", "lag<1M"])
    out = capsys.readouterr().out
    assert passing == 0, out
    assert "thresholds: 4 of 4 passed" in out
    assert re.search(r"^\s+pass\s+p99<60s\s+measured [\d,.]+ ms$", out, re.MULTILINE)

    failing = main([*common, "--output", str(tmp_path / "b"), "--threshold", "p50<1ms", "--threshold", "errors==0"])
    out = capsys.readouterr().out
    assert failing == 99, out
    assert "thresholds: 1 of 2 passed" in out and re.search(r"^\s+FAIL\s+p50<1ms\s+measured", out, re.MULTILINE)
    report = json.loads((tmp_path / "b" / "report.json").read_text())  # written before the exit
    assert [(c["threshold"], c["passed"]) for c in report["thresholds"]] == [("p50<1ms", False), ("errors==0", True)]

    # compare: one table row per run, one overlay PNG
    png = tmp_path / "compare.png"
    assert compare_main([str(tmp_path / "a"), str(tmp_path / "b"), "--output", str(png)]) == 0
    out = capsys.readouterr().out
    head, *rows = out.splitlines()[:3]
    assert re.search(r"target/s\s+achieved/s\s+p50 ms\s+p95 ms\s+p99 ms\s+p99\.9 ms\s+p99\.99 ms\s+max ms\s+errors", head)
    assert [row.split()[0] for row in rows] == ["a", "b"]
    for row, name in zip(rows, "ab"):
        summary = json.loads((tmp_path / name / "report.json").read_text())
        assert f"{summary['latencyMs']['p99.99']:,.1f}" in row and f"{RATE:,}" in row
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    page = (tmp_path / "compare.html").read_text()  # beside the PNG: both runs on one page
    assert page.index("<h2>a</h2>") < page.index("<h2>b</h2>") and "Comparison of 2 runs" in page
    assert compare_main([str(tmp_path / "missing")]) == 2
    assert "no report.json" in capsys.readouterr().err


@pytest.mark.integration
def test_abort_on_fail_stops_at_the_first_hopeless_check(spark, tmp_path, capsys):
    # every event takes > 1 ms: max<1ms is lost with the first batch; the run of 60 s must stop long before
    code = main(["--sink", "noop", "--rate", str(RATE), "--duration", "60s", "--output", str(tmp_path),
                 "--threshold", "max<1ms", "--threshold", "errors==0", "--abort-on-fail"])
    out = capsys.readouterr().out
    assert code == 99, out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"]["outcome"] == "aborted", out
    assert report["error"].startswith("threshold failed: max<1ms: an event took")
    assert 0 < report["summary"]["events"] < RATE * 60 / 2
    assert [c["passed"] for c in report["thresholds"]] == [False, True]


@pytest.mark.integration
def test_prometheus_endpoint_is_scraped_live(spark, capsys):
    port = free_port()
    scraped: list[dict] = []
    done = threading.Event()
    scraper = threading.Thread(target=_scrape_until_delivered, args=(f"http://127.0.0.1:{port}/metrics", done, scraped))
    scraper.start()
    try:  # the run in this thread (Spark's Python data sources are looked up per thread's session)
        code = main(["--sink", "noop", "--rate", str(RATE), "--duration", "8s", "--metrics-port", str(port)])
    finally:
        done.set()
        scraper.join(60)
    assert code == 0
    assert f"Prometheus metrics at http://127.0.0.1:{port}/metrics" in capsys.readouterr().out
    assert scraped, "no scrape during the run showed delivered events"
    families = scraped[0]

    samples = {(s.name, s.labels.get("le"), s.labels.get("phase")): s for f in families.values() for s in f.samples}
    due = samples[("impulse_load_events_due_total", None, None)]
    delivered = samples[("impulse_load_events_delivered_total", None, None)].value
    assert due.labels["sink"] == "noop" and re.fullmatch(r"[0-9a-f-]{36}", due.labels["run_id"])
    assert 0 < delivered <= due.value <= RATE * 8
    assert samples[("impulse_load_lag_events", None, None)].value == due.value - delivered
    assert samples[("impulse_load_target_rate", None, None)].value == RATE
    assert samples[("impulse_load_events_failed_total", None, None)].value == 0
    assert families["impulse_load_achieved_rate"].type == "gauge"
    for part in ("latency", "schedule_delay", "delivery"):
        name = f"impulse_load_{part}_seconds"
        assert families[f"impulse_load_{part}_seconds"].type == "histogram"
        buckets = [s for s in families[name].samples if s.name == name + "_bucket"]
        counts = [s.value for s in buckets]
        assert counts == sorted(counts) and buckets[-1].labels["le"] == "+Inf"
        assert counts[-1] == samples[(name + "_count", None, None)].value == delivered  # one per delivered event
    total = {part: samples[(f"impulse_load_{part}_seconds_sum", None, None)].value
             for part in ("latency", "schedule_delay", "delivery")}
    assert total["latency"] > 0 and total["delivery"] > 0
    # each event's latency is its schedule delay plus its delivery (timestamps of ms precision)
    assert total["latency"] <= total["schedule_delay"] + total["delivery"] + delivered * 0.001
    phase = samples[("impulse_load_batch_phase_seconds_count", None, "addBatch")]
    assert phase.value >= 1 and phase.labels["run_id"] == due.labels["run_id"]


def _scrape_until_delivered(url: str, done: threading.Event, out: list) -> None:
    """Scrape until a scrape shows delivered events (appended to `out` as its families) or `done` is set."""
    from prometheus_client.parser import text_string_to_metric_families

    while not done.is_set():
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                text = response.read().decode()
        except OSError:  # not listening yet
            done.wait(0.2)
            continue
        families = {f.name: f for f in text_string_to_metric_families(text)}
        delivered = families.get("impulse_load_events_delivered")
        if delivered is not None and delivered.samples and delivered.samples[0].value > 0:
            out.append(families)
            return
        done.wait(0.2)


@pytest.mark.integration
@pytest.mark.redis
def test_a_3s_sink_stall_shows_in_the_latency_of_the_events_behind_it(spark, redis_server):
    """Latency counts from each event's scheduled time: Redis paused for 3 s once, the events due meanwhile show it.

    Events scheduled in the first 2 s of the pause cannot be acknowledged before it ends, so at least
    2 s × rate of them take ≥ 1 s, wherever Spark read them; a harness measuring from the read would
    see only the one batch that was writing when the pause began.
    """
    prefix = f"stall-{uuid.uuid4().hex[:8]}:"
    client = redis_server.client()
    paused_at: list[float] = []

    def pause_once_the_load_flows() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if next(client.scan_iter(match=f"{prefix}*", count=1000), None) is not None:
                paused_at.append(time.time())
                client.execute_command("CLIENT", "PAUSE", 3000, "ALL")
                return
            time.sleep(0.05)

    pauser = threading.Thread(target=pause_once_the_load_flows)
    pauser.start()
    result = run_load(LoadConfig(sink="redis-sink", options={"url": redis_server.url, "keyPrefix": prefix}, rate=RATE,
                                 duration_s=8, partitions=2, payload_bytes=16, trigger="0"), spark=spark)
    pauser.join(60)

    assert_result_plausible(result)
    assert paused_at and paused_at[0] * 1e6 < result.schedule_start_us + 5.5e6, "the pause came too late to measure"
    behind = result.latency.count_above(1_000_000)
    assert behind >= 0.9 * 2 * RATE, (behind, result.latency)
    # the split says where the 3 s went: the batch waiting on Redis (delivery) or the ones after it (schedule delay)
    assert max(result.schedule_delay.max_us, result.delivery.max_us) >= 2_000_000, (result.schedule_delay,
                                                                                    result.delivery)
    assert result.latency.count == result.schedule_delay.count == result.delivery.count == result.events
    for batch in result.batches:  # each event's latency is its schedule delay plus its delivery
        assert batch.latency.max_us <= batch.schedule_delay.max_us + batch.delivery.max_us + 1_000
