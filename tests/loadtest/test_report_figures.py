"""What the reports say a run was: its PASS/FAIL and why, the figures of the query under test, what each latency
measures, and the check's example rows — on result objects made here (no Spark), written with `write_report` and
read back from the text, report.json, report.html's figures and the JUnit XML."""

from __future__ import annotations

import csv
import html
import json
import re
from dataclasses import replace

import numpy as np
import pytest

from connectors.latency import LatencyHistogram
from impulse.answer import CheckResult
from impulse.loadtest.load.ramp import RampResult
from impulse.loadtest.load.run import LoadResult
from impulse.loadtest.measure.metrics import Batch
from impulse.loadtest.reports.check_examples import example_rows, example_table
from impulse.loadtest.reports.html import render_html
from impulse.loadtest.reports.junit import junit_xml
from impulse.loadtest.reports.report import ramp_text, report_document, summary_text, write_report
from impulse.loadtest.reports.verdict import decide, decide_all
from impulse.loadtest.settings.config import LoadConfig, RampConfig
from impulse.loadtest.via.kafka import ViaResult
from impulse.loadtest.via.report import (PipelineBatch, assign_lag, attribute_latency, batch_rows, count_output,
                                         pipeline_batches)

START = 1_764_000_000_000_000   # epoch µs


def _histogram(values_us) -> dict:
    histogram = LatencyHistogram()
    if len(values_us):
        histogram.record(np.asarray(values_us, dtype=np.int64))
    return histogram.to_dict()


def _batches(rate: int, seconds: int, latency_ms: float, *, empty=(), partitions: int = 2) -> list[Batch]:
    """One batch a second of `rate` events, each `latency_ms` late; the batches in `empty` have no output (no
    latency), as an event-time run's batches that closed no window."""
    out, delivered = [], 0
    for i in range(seconds):
        delivered += rate
        ack = START + (i + 1) * 1_000_000
        latency = [] if i in empty else np.full(rate, int(latency_ms * 1e3)) + np.arange(rate)
        out.append(Batch(i, ack - 400_000, ack, ack, rate, delivered, 0, 0, rate * 40, 0,
                         {"addBatch": 100, "walCommit": 7, "triggerExecution": 150},
                         _histogram(latency), _histogram(np.full(rate, 5_000)), _histogram(latency), 0, 0,
                         None if i in empty else rate // 10,
                         tuple(delivered // partitions for _ in range(partitions))))
    return out


def _run(config: LoadConfig, batches: list[Batch], outcome: str = "completed", **more) -> LoadResult:
    return LoadResult(config, config.sink, {}, "q", batches, START, START - 500_000, START + len(batches) * 10**6,
                      outcome, **more)


def _specs(page: str) -> list[dict]:
    return json.loads(re.search(r'id="figures">(.*?)</script>', page, re.S).group(1))


def _text(page: str) -> str:
    """The page's words as a reader sees them (tags dropped, entities decoded, whitespace collapsed)."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page.split("<script")[0])))


# ------------------------------------------------------------------------------------------ PASS / FAIL


def test_the_headline_names_the_query_and_says_pass():
    config = LoadConfig(sink="noop", rate=1000, duration_s=5, transform="tests.loadtest.pipelines:evens")
    result = _run(config, _batches(1000, 5, 200))
    first = summary_text(result).splitlines()[0]
    assert first == "impulse-load: PASS — impulse events → --transform tests.loadtest.pipelines:evens (append) into noop"
    assert decide(result).exit_code == 0


def test_every_failed_gate_is_a_reason_and_the_exit_code_follows_the_gravest():
    config = LoadConfig(sink="noop", rate=1000, duration_s=5, thresholds=("p99<1ms", "errors==0"))
    check = CheckResult(100, 97, 3, 0, 0, {"lost": ['{"counter":7} (expected 1, delivered 0)']})
    result = _run(config, _batches(1000, 5, 200), check=check)
    decision = decide(result)
    assert [r.kind for r in decision.reasons] == ["threshold", "check"]
    assert decision.reasons[0].text.startswith("threshold p99<1ms failed (measured 2")
    assert decision.reasons[1].text == "check failed: 3 lost, 0 duplicated, 0 unexpected of 100 expected rows"
    assert decision.exit_code == 99
    first = summary_text(result, "orders").splitlines()[0]
    assert first.startswith("impulse-load 'orders': FAIL — impulse events into noop: threshold p99<1ms failed")
    assert first.endswith("; check failed: 3 lost, 0 duplicated, 0 unexpected of 100 expected rows")

    timed_out = _run(replace(config, thresholds=()), _batches(1000, 3, 200), "timed out",
                     error="3,000 of 5,000 events delivered")
    assert [(r.kind, r.text) for r in decide(timed_out).reasons] == [
        ("run", "the run timed out: 3,000 of 5,000 events delivered")]
    assert decide(timed_out).exit_code == 1
    stopped = _run(replace(config, thresholds=()), _batches(1000, 3, 200), "interrupted")
    assert decide(stopped).exit_code == 130
    # a file's scenarios: FAIL when one failed, each reason under its scenario's name
    both = decide_all([("steady", _run(replace(config, thresholds=()), _batches(1000, 5, 200))),
                       ("late", timed_out)])
    assert both.status == "FAIL" and [r.text for r in both.reasons] == [
        "late: the run timed out: 3,000 of 5,000 events delivered"]


def test_a_run_that_did_not_sustain_its_rate_but_passed_every_gate_passes():
    config = LoadConfig(sink="noop", rate=1000, duration_s=5, max_latency_s=0.001)
    result = _run(config, _batches(1000, 5, 200))
    assert not result.verdict.sustained
    assert decide(result).passed and "sustained: no: p99 latency" in summary_text(result)


def test_a_ramp_without_a_sustained_step_fails_in_text_json_html_and_junit(tmp_path):
    config = LoadConfig(sink="noop", partitions=2, max_latency_s=0.1)
    ramp = RampResult(config, RampConfig(1000, 1000, 3000, step_duration_s=5),
                      steps=[_run(replace(config, rate=1000, duration_s=5), _batches(1000, 5, 300))])
    decision = decide(ramp)
    assert [r.kind for r in decision.reasons] == ["ramp"] and decision.exit_code == 99
    assert decision.reasons[0].text.startswith("no step sustained: step 1 at 1,000 events/s: p99 latency")
    assert ramp_text(ramp).splitlines()[0] == "impulse-load: " + decision.headline()
    paths = write_report(ramp, tmp_path)
    report = json.loads(paths["report.json"].read_text())
    assert report["result"]["status"] == "FAIL" and report["result"]["reasons"][0]["kind"] == "ramp"
    page = paths["report.html"].read_text()
    assert re.search(r'<div class="headline FAIL">.*no step sustained', page)
    xml = junit_xml(report).decode()
    assert re.search(r'<testcase classname="impulse-load" name="a step sustained"[^>]*>\s*<failure '
                     r'type="ramp" message="no step sustained', xml)
    sustained = replace(ramp, steps=[_run(replace(config, rate=1000, duration_s=5), _batches(1000, 5, 20))])
    assert decide(sustained).passed
    assert re.search(r'name="a step sustained" time="0.000" />', junit_xml(report_document(sustained)[0]).decode())


# ------------------------------------------------------------------------------------------ what latency is


def test_an_event_time_run_names_its_latency_and_leaves_batches_without_output_out_of_its_charts(tmp_path):
    config = LoadConfig(sink="noop", rate=1000, duration_s=6, transform="tests.loadtest.pipelines:per_second",
                        event_time_column="window_end")
    result = _run(config, _batches(1000, 6, 900, empty=(1, 3, 5)), latency_definition="event-time")
    text = summary_text(result)
    assert ("  latency: event-time: the output's --event-time-column → the sink's acknowledgement, per output row"
            in text)
    assert re.search(r"^    event-time(\s+[\d,.]+){6}$", text, re.M)
    paths = write_report(result, tmp_path)
    rows = json.loads(paths["report.json"].read_text())["batches"]
    assert [row["latencyP99Ms"] is None for row in rows] == [False, True, False, True, False, True]
    specs = _specs(paths["report.html"].read_text())
    chart = next(s for s in specs if s["layout"]["title"]["text"].startswith("Latency per micro-batch"))
    assert chart["layout"]["title"]["text"] == "Latency per micro-batch: event-time (ms)"
    assert [trace["name"] for trace in chart["data"]] == ["p50 (event-time)", "p99 (event-time)", "max (event-time)"]
    measured_times = [row["timeS"] for row in rows if row["latencyP99Ms"] is not None]
    assert all(trace["x"] == measured_times and 0 not in trace["y"] for trace in chart["data"])
    assert "the output's --event-time-column" in chart["layout"]["annotations"][0]["text"]
    hdr = next(s for s in specs if s["layout"]["title"]["text"].startswith("Latency distribution"))
    assert hdr["data"][0]["name"] == "event-time"
    page = _text(paths["report.html"].read_text())
    assert re.search(r"Latency \(ms\) p50 p95 p99 p99\.9 p99\.99 max event-time [\d,. ]+schedule delay", page)
    assert "event-time: the output's --event-time-column → the sink's acknowledgement, per output row" in page
    properties = dict(re.findall(r'<property name="([^"]+)" value="([^"]*)"', junit_xml(
        report_document(result)[0]).decode()))
    assert properties["latencyDefinition"] == "event-time"
    assert properties["latencyMeasures"].startswith("the output's --event-time-column")
    assert properties["result"].startswith("PASS — impulse events → --transform")


# ------------------------------------------------------------------------------------------ through Kafka


def _via_result() -> ViaResult:
    """A filter through Kafka: the producer wrote 6,000 events in 6 batches; the pipeline read them in 4 batches
    and wrote 2,000 rows."""
    config = LoadConfig(sink="kafka", rate=1000, duration_s=6, via="kafka://127.0.0.1:9092/in", decode=True,
                        options={"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"},
                        transform="tests.loadtest.pipelines:evens")
    pipeline = []
    for i, rows in enumerate((1500, 1500, 1500, 1500)):
        start = START + i * 1_500_000 + 200_000
        pipeline.append(PipelineBatch(i, start, start + 900_000, rows, None,
                                      {"addBatch": 800 + i, "queryPlanning": 40, "triggerExecution": 900},
                                      _histogram(np.full(500, 300_000 + 1000 * i)), lag=100 * i))
    pipeline.append(PipelineBatch(4, START + 6_300_000, START + 6_400_000, 0, None,
                                  {"addBatch": 20, "triggerExecution": 100}))   # the no-data batch: no output
    latency, through = LatencyHistogram(), LatencyHistogram()
    latency.record(np.full(2000, 300_000))
    through.record(np.full(2000, 1_100_000))
    via = {"input": "kafka://127.0.0.1:9092/in", "trigger": "1s", "decode": True, "outputMode": "append",
           "rowsRead": 6000, "pipelineBatches": 5, "prefill": None, "lagSamples": [], "outputTopic": "out",
           "outputRows": 2000, "latencySource": "output topic's LogAppendTime − the value's 'timestamp' field",
           "pipelinePartMs": {"p50": 300.0, "p99": 300.0, "max": 300.0}}
    return ViaResult(config, "kafka", {}, "pipeline-id", _batches(1000, 6, 1500), START, START - 500_000,
                     START + 7_000_000, "completed", latency_definition="pipeline", via=via, pipeline_latency=latency,
                     pipeline_batches=pipeline, via_latency=through, via_latency_definition="via-end-to-end")


def test_through_kafka_the_summary_gives_the_pipelines_figures_and_the_producers_in_their_own_block():
    result = _via_result()
    text = summary_text(result)
    lines = text.splitlines()
    assert lines[0] == ("impulse-load: PASS — impulse events through kafka://127.0.0.1:9092/in → --transform "
                        "tests.loadtest.pipelines:evens (append) into kafka")
    assert re.search(r"^  events\s+6,000\s+6,000$", text, re.M)                 # the load: the producer's events
    assert re.search(r"^  records read \(pipeline\)\s+6,000$", text, re.M)
    assert re.search(r"^  output rows\s+2,000$", text, re.M)                    # the pipeline's, not 6,000
    assert re.search(r"^  batches \(pipeline\)\s+5$", text, re.M)
    assert "MB (Arrow)" not in text.split("  producer (")[0]
    assert "  latency: pipeline: the pipeline's own: each input record's commit into the input topic → its output " \
           "record's append to the output topic" in text
    assert re.search(r"^    pipeline\s+300\.0", text, re.M) and re.search(r"^    scheduled → output\s+1,100\.0", text, re.M)
    pipeline_phases = text.split("  Spark phase (ms), pipeline")[1].split("\n\n")[0]
    assert re.search(r"addBatch\s+645\.2\s+803", pipeline_phases)              # (800+801+802+803+20) / 5
    producer = text.split("  producer (impulse → kafka://127.0.0.1:9092/in, the load): ")[1]
    assert producer.startswith("6 micro-batches, 6,000 events, 0.2 MB (Arrow), achieved 1,000 of 1,000 events/s")
    assert "latency: producer: each event's schedule → the producer's commit of it into the input topic" in producer
    assert re.search(r"^      producer\s+1,50\d\.\d", producer, re.M)
    assert re.search(r"addBatch\s+100\.0\s+100", producer)


def test_through_kafka_report_json_and_html_give_the_pipelines_figures_and_a_producer_section(tmp_path):
    result = _via_result()
    paths = write_report(result, tmp_path)
    report = json.loads(paths["report.json"].read_text())
    summary = report["summary"]
    assert (summary["events"], summary["outputRows"], summary["batches"], summary["pipelineRows"]) == (6000, 2000, 5,
                                                                                                       6000)
    assert summary["latencyDefinition"] == "pipeline" and summary["latencyP99Ms"] == pytest.approx(300, rel=0.01)
    assert report["via"]["outputRows"] == 2000
    assert [row["events"] for row in report["batches"]] == [1500, 1500, 1500, 1500, 0]
    assert [row["lag"] for row in report["batches"]] == [0, 100, 200, 300, None]
    assert report["batches"][-1]["latencyP99Ms"] is None
    assert report["phasesMs"]["addBatch"]["max"] == 803
    (row,) = csv.DictReader(paths["summary.csv"].open())
    assert (row["batches"], row["addBatchMaxMs"], row["outputRows"]) == ("5", "803.0", "2000")
    assert [r["events"] for r in csv.DictReader(paths["batches.csv"].open())] == ["1500"] * 4 + ["0"]
    assert report["viaLatency"]["definition"] == "via-end-to-end"
    assert "scheduleDelayMs" not in report   # the producer's parts
    producer = report["producer"]
    assert producer["summary"]["batches"] == 6 and producer["summary"]["latencyDefinition"] == "producer"
    assert producer["phasesMs"]["addBatch"]["max"] == 100 and len(producer["batches"]) == 6
    assert producer["scheduleDelayMs"]["p50"] == pytest.approx(5.0, rel=0.01)
    page = paths["report.html"].read_text()
    text = _text(page)
    assert "The producer (impulse → kafka://127.0.0.1:9092/in): the load" in text
    assert re.search(r"max pipeline 300\.0 [\d,. ]+ scheduled → output 1,100\.0 [\d,. ]+ pipeline: the pipeline's own: "
                     r"each input record's commit into the input topic → its output record's append", text)
    assert "scheduled → output: through Kafka: each event's schedule → its output record's append" in text
    assert re.search(r"max producer 1,50\d\.\d [\d,. ]+ schedule delay [\d,. ]+ delivery [\d,. ]+ producer: each "
                     r"event's schedule → the producer's commit", text)
    titles = [s["layout"]["title"]["text"] for s in _specs(page)]
    assert titles.count("Latency per micro-batch: pipeline (ms)") == 1
    assert titles.count("Latency per micro-batch: producer (ms)") == 1
    assert "Spark's phases per micro-batch of the pipeline (ms)" in titles
    assert "Spark's phases per micro-batch of the producer (ms)" in titles
    assert "Lag: input records not yet read by the pipeline (after each batch)" in titles
    assert "\\u2212" not in page.split("<script")[0]   # no raw JSON of the via object: a table of it


def test_the_pipelines_batches_come_from_its_progress_and_its_output_is_attributed_by_append_time():
    def progress(batch_id, second, rows, durations, out=-1):
        return {"batchId": batch_id, "timestamp": f"2026-11-24T16:00:0{second}.000Z", "numInputRows": rows,
                "durationMs": durations, "sink": {"numOutputRows": out}, "sources": [{"endOffset": "{}"}]}

    records = [progress(0, 0, 10, {"addBatch": 300, "triggerExecution": 500}),
               progress(0, 0, 10, {"addBatch": 300, "triggerExecution": 500}),         # seen twice: once
               progress(1, 1, 0, {"triggerExecution": 2}),                             # an idle trigger: no batch
               progress(2, 2, 20, {"addBatch": 400, "triggerExecution": 800}, out=7),  # Spark counted its output
               progress(3, 4, 0, {"addBatch": 50, "triggerExecution": 100})]           # a no-data batch
    batches = pipeline_batches(records)
    assert [(b.batch_id, b.rows, b.output_rows) for b in batches] == [(0, 10, None), (2, 20, 7), (3, 0, None)]
    t0 = batches[0].start_us
    assert [(b.start_us - t0, b.end_us - t0) for b in batches] == [(0, 500_000), (2_000_000, 2_800_000),
                                                                   (4_000_000, 4_100_000)]
    # appended at 0.2 s and 0.5 s (batch 0), 1.0 s and 2.5 s (batch 2: the first to end after), 9 s (after the last)
    times = np.array([200_000, 500_000, 1_000_000, 2_500_000, 9_000_000], dtype=np.int64) + t0
    attribute_latency(batches, times, np.array([100_000, 200_000, 300_000, 400_000, 500_000]))
    count_output(batches, times)
    assert [b.output_rows for b in batches] == [2, 7, 1]      # Spark's own count is kept
    assert [(b.latency.count, b.latency.max_us // 1000) for b in batches] == [(2, 200), (2, 400), (1, 500)]
    assign_lag(batches, [(t0 + 600_000, 30), (t0 + 3_000_000, 5)])
    rows = batch_rows(batches, t0)
    assert [(r["timeS"], r["delivered"], r["lag"], r["latencyMaxMs"]) for r in rows] == [
        (0.5, 10, 30, pytest.approx(200, rel=0.01)), (2.8, 30, 5, pytest.approx(400, rel=0.01)),
        (4.1, 30, None, pytest.approx(500, rel=0.01))]
    empty = pipeline_batches(records[:1])
    attribute_latency(empty, np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert batch_rows(empty, t0)[0]["latencyP99Ms"] is None   # no output measured: no latency, not 0


# ------------------------------------------------------------------------------------------ check examples


def test_check_examples_are_a_table_of_the_rows_columns_with_their_counts():
    examples = {"lost": ['{"counter":7,"subtask_index":0} (expected 1, delivered 0)'],
                "duplicated": ['{"counter":11,"subtask_index":1} (expected 1, delivered 2)'],
                "unexpected": ['{"counter":-13,"subtask_index":1,"extra":{"a":1}} (expected 0, delivered 1)',
                               "not json (expected 0, delivered 1)"]}
    columns, cells = example_table(examples)
    assert columns == ["kind", "expected", "delivered", "counter", "subtask_index", "extra", "row"]
    assert cells == [["lost", 1, 0, 7, 0, None, None], ["duplicated", 1, 2, 11, 1, None, None],
                     ["unexpected", 0, 1, -13, 1, '{"a":1}', None], ["unexpected", 0, 1, None, None, None, "not json"]]
    config = LoadConfig(sink="noop", rate=1000, duration_s=3)
    result = _run(config, _batches(1000, 3, 20), check=CheckResult(2, 4, 1, 1, 2, examples, "append: every row"))
    page = render_html([("run", {"mode": "run", **report_document(result)[0]})], "t", "")
    table = re.search(r"<table class='examples'>(.*?)</table>", page, re.S).group(1)
    assert [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>.*?</th>", table)] == columns
    assert re.search(r"<td class=\"l\"><span class=\"FAIL\">lost</span></td><td>1</td><td>0</td>"
                     r"<td class=\"l\">7</td>", table)
    assert "{&quot;a&quot;:1}" in table
    assert "(expected 1, delivered 0)" not in page.split("<script")[0]   # no escaped JSON strings any more


@pytest.mark.integration
def test_the_examples_compare_writes_parse_back_into_their_columns(spark):
    """The table reads what `impulse.answer.compare` writes (not a copy of its format)."""
    from impulse.answer import compare

    expected = spark.createDataFrame([(0, 1), (0, 2), (1, 3)], "subtask_index INT, counter INT")
    delivered = spark.createDataFrame([(0, 1), (0, 1), (1, 3), (1, 9)], "subtask_index INT, counter INT")
    rows = example_rows(compare(expected, delivered).examples)
    assert [(r["kind"], r["expected"], r["delivered"], r["row"]) for r in rows] == [
        ("lost", 1, 0, {"subtask_index": 0, "counter": 2}), ("duplicated", 1, 2, {"subtask_index": 0, "counter": 1}),
        ("unexpected", 0, 1, {"subtask_index": 1, "counter": 9})]
