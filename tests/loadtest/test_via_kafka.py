"""The production topology: impulse → a Kafka topic → the user's pipeline → its sink, against the real broker.

The end-to-end runs (`tests.loadtest.via_kafka_runs`) take one subprocess with its own Spark session (Spark's
Kafka connector is a ``spark.jars.packages`` of the session); each test checks one run's output exactly against
the events the producer wrote, read back from the input topic. The pure parts (the URL, the trigger, the JSON
scheduled times, the latency) have unit tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from impulse.loadtest.scenario import plan_from_args
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.units import LoadError
from impulse.loadtest.settings.via import PipelineTrigger, parse_pipeline_trigger, parse_via
from impulse.loadtest.via.output_latency import OutputRecords, output_latency, pipeline_part, scheduled_times_us
from tests.loadtest.via_kafka_runs import WINDOW_S

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------ unit tests


def test_via_url_and_options():
    via = parse_via("kafka://h1:9092,h2:9092/events",
                    {"kafka.security.protocol": "SASL_SSL", "maxOffsetsPerTrigger": "500"})
    assert (via.bootstrap, via.topic) == ("h1:9092,h2:9092", "events")
    assert via.producer_options()["kafka.security.protocol"] == "SASL_SSL"
    source = via.source_options({0: 5, 1: 7})
    assert source["kafka.security.protocol"] == "SASL_SSL" and source["maxOffsetsPerTrigger"] == "500"
    assert source["kafka.isolation.level"] == "read_committed"
    assert json.loads(source["startingOffsets"]) == {"events": {"0": 5, "1": 7}}
    assert "maxOffsetsPerTrigger" not in via.producer_options()


@pytest.mark.parametrize("url", ["http://h:1/t", "kafka://h:1", "kafka:///t", "kafka://h:1/a/b"])
def test_bad_via_url_names_the_flag(url):
    with pytest.raises(LoadError, match=r"--via .*kafka://HOST:PORT/TOPIC"):
        parse_via(url)


def test_via_option_may_not_replace_the_harness_settings():
    with pytest.raises(LoadError, match="--via-option subscribe: set by the harness"):
        parse_via("kafka://h:1/t", {"subscribe": "other"})


@pytest.mark.parametrize("text, expected", [
    ("0", PipelineTrigger("processingTime", 0.0)), ("500ms", PipelineTrigger("processingTime", 0.5)),
    ("availableNow", PipelineTrigger("availableNow")), ("realTime", PipelineTrigger("realTime", 5.0)),
    ("realTime=5 seconds", PipelineTrigger("realTime", 5.0)), ("realTime=2s", PipelineTrigger("realTime", 2.0))])
def test_pipeline_triggers(text, expected):
    assert parse_pipeline_trigger(text) == expected


@pytest.mark.parametrize("text", ["soon", "realTime 5s", "realTime=0", "-1s"])
def test_bad_pipeline_trigger_says_what_is_allowed(text):
    with pytest.raises(LoadError, match="--pipeline-trigger"):
        parse_pipeline_trigger(text)


def test_flags_and_keys_of_the_topology():
    config = plan_from_args(["--via", "kafka://h:1/t", "--via-option", "kafka.a=b", "--decode", "--prefill", "10",
                             "--pipeline-trigger", "realTime=5s", "--sink", "kafka"]).scenarios[0].config
    assert (config.via, dict(config.via_options), config.decode, config.prefill, config.pipeline_trigger) == \
        ("kafka://h:1/t", {"kafka.a": "b"}, True, 10, "realTime=5s")
    with pytest.raises(LoadError, match="--prefill is for the Kafka topology"):
        plan_from_args(["--prefill", "10"])
    with pytest.raises(LoadError, match="--ramp .* --via"):
        plan_from_args(["--via", "kafka://h:1/t", "--ramp", "1k:1k:2k"])
    with pytest.raises(LoadError, match="--abort-on-fail watches a direct run"):
        plan_from_args(["--via", "kafka://h:1/t", "--threshold", "p99<1s", "--abort-on-fail"])
    with pytest.raises(LoadError, match="real-time mode writes to Spark's kafka format only .*not kafka-sink"):
        plan_from_args(["--via", "kafka://h:1/t", "--pipeline-trigger", "realTime=5s", "--sink", "kafka-sink"])
    with pytest.raises(LoadError, match="--via-option subscribe"):
        LoadConfig(via="kafka://h:1/t", via_options={"subscribe": "x"}).validate()


def _us(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1_000_000)


def test_scheduled_times_from_json_values():
    values = [b'{"timestamp":"2026-11-26T06:30:00.123Z","x":1}', b'{"timestamp":"2026-11-26T07:30:00.125+01:00"}',
              b'not json', None, b'{"other":1}', b'{"window":{"start":"2026-11-26T06:29:58.000Z",'
                                                 b'"end":"2026-11-26T06:30:00.000Z"},"count":3}']
    got = scheduled_times_us(values)
    assert got.tolist() == [_us("2026-11-26T06:30:00.123Z"), _us("2026-11-26T06:30:00.125Z"), -1, -1, -1, -1]
    assert scheduled_times_us(values, "window.end").tolist() == [-1, -1, -1, -1, -1, _us("2026-11-26T06:30:00Z")]


def test_output_latency_is_broker_time_minus_scheduled_time():
    base = _us("2026-11-26T06:30:00Z")
    values = [json.dumps({"timestamp": datetime.fromtimestamp((base + d) / 1e6).astimezone().isoformat()}).encode()
              for d in (0, 1_000_000, 2_000_000)] + [b"{}"]
    times = np.array([base // 1000 + 50, base // 1000 + 1000 + 250, base // 1000 + 2000 + 900, 0], dtype=np.int64)
    records = OutputRecords("t", values, [None] * 4, times, np.full(4, 2, dtype=np.int8), {})
    measured = output_latency(records, from_us=base + 500_000)
    assert (measured.records, measured.measured, measured.before, measured.unmeasured) == (4, 2, 1, 1)
    assert measured.clock == "LogAppendTime"
    assert measured.histogram.count == 2
    assert 240_000 <= measured.histogram.percentile(1) <= 260_000
    assert 890_000 <= measured.histogram.max_us <= 910_000


def test_pipeline_part_runs_from_the_producer_batch_commit():
    base = _us("2026-11-26T06:30:00Z")
    stamp = datetime.fromtimestamp(base / 1e6).astimezone().isoformat()
    # partition 0: batch ends at counters 10 (commit base+1 s) and 20 (base+2 s); partition 1: 5 (base+1.5 s)
    commits = {0: (np.array([10, 20]), np.array([base + 1_000_000, base + 2_000_000])),
               1: (np.array([5]), np.array([base + 1_500_000]))}
    events = [(0, 3, 1_100), (0, 10, 2_300), (1, 4, 1_500), (1, 7, 9_000), (0, 25, 9_000)]
    values = [json.dumps({"subtask_index": p, "counter": c, "timestamp": stamp}).encode() for p, c, _ in events]
    values.append(b'{"count": 3}')
    times = np.array([base // 1000 + ms for *_, ms in events] + [0], dtype=np.int64)
    records = OutputRecords("t", values, [None] * 6, times, np.full(6, 2, dtype=np.int8), {})
    part = pipeline_part(records, commits)
    assert part.count == 3       # partition 1 counter 7 and partition 0 counter 25: after the last batch
    assert part.percentile(1) == 0     # partition 1 counter 4: out at its commit
    assert 99_000 <= part.percentile(50) <= 101_000 and 299_000 <= part.max_us <= 301_000


# ------------------------------------------------------------------------------------------ against the broker


@pytest.mark.integration
@pytest.mark.kafka
def test_a_missing_input_topic_exits_2_before_spark_starts(kafka_broker, capsys):
    from impulse.loadtest.cli import main

    code = main(["--via", f"kafka://{kafka_broker.bootstrap}/no-such-topic", "--sink", "kafka",
                 "-o", f"kafka.bootstrap.servers={kafka_broker.bootstrap}", "-o", "topic=out", "--duration", "1s"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--via: topic 'no-such-topic' does not exist" in err and "--create-topic N" in err



@pytest.fixture(scope="module")
def runs(kafka_broker, tmp_path_factory) -> dict:
    """The results of every run of `tests.loadtest.via_kafka_runs` (one subprocess, one Spark session)."""
    out = tmp_path_factory.mktemp("via-kafka") / "runs.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "tests.loadtest.via_kafka_runs", kafka_broker.bootstrap, str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0 and out.exists(), done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(out.read_text())


def _events(records: list[dict]) -> Counter:
    """(subtask_index, counter) of each record's JSON value, counted."""
    return Counter((e["subtask_index"], e["counter"]) for e in (json.loads(r["value"]) for r in records))


def _expected(options: dict) -> set:
    """The events of an impulse run with these options: (partition, counter) for each counter below its share."""
    from impulse.options import split_limit

    return {(p, c) for p, n in enumerate(split_limit(int(options["limit"]), int(options["numPartitions"])))
            for c in range(n)}


def _completed(run: dict) -> None:
    summary = run["summary"]
    assert summary["outcome"] == "completed", summary
    assert summary["events"] == summary["targetEvents"]


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_a_filter_through_kafka_gives_exactly_the_filtered_events(runs):
    run = runs["filter"]
    _completed(run)
    written = _events(run["input"])
    assert set(written) == _expected(run["producerOptions"]) and max(written.values()) == 1
    # the input records carry the scheduled time as their CreateTime
    assert all(r["tsType"] == 1 for r in run["input"])
    assert all(r["ts"] == _us(json.loads(r["value"])["timestamp"]) // 1000 for r in run["input"])
    delivered = _events(run["output"])
    expected = {e for e in written if e[1] % 3 == 0}
    assert set(delivered) == expected and max(delivered.values()) == 1, "lost or duplicated filtered events"
    assert run["via"]["rowsRead"] == len(written) and run["via"]["outputRows"] == len(expected)
    assert all(r["tsType"] == 2 for r in run["output"])          # LogAppendTime: the harness created the topic
    assert run["via"]["outputLatency"]["measured"] == len(expected)
    assert run["check"] == {"passed": True, "expected": len(expected), "delivered": len(expected), "lost": 0,
                            "duplicated": 0, "unexpected": 0}
    assert 0 < run["latencyMs"]["p50"] <= run["latencyMs"]["p99"] <= run["latencyMs"]["max"]


def _series(scrape: str, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples of series `name` in a Prometheus text scrape: (labels, value)."""
    return [(dict(re.findall(r'(\w+)="([^"]*)"', labels)), float(value))
            for labels, value in re.findall(rf"^{name}\{{([^}}]*)\}} (\S+)$", scrape, re.M)]


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_the_metrics_endpoint_serves_the_producer_and_the_pipelines_lag_during_a_via_run(runs):
    """``--metrics-port`` through Kafka: scraped while the filter's run went on (`tests.loadtest.via_kafka_runs`)."""
    run = runs["filter"]
    scrapes = run["scrapes"]
    assert scrapes, "the metrics endpoint served no series during the run"
    labels = {"sink": "kafka-sink", "run_id": run["report"]["queryId"]}
    delivered = [_series(s, "impulse_load_events_delivered_total") for s in scrapes]
    assert all([found for found, _ in d] == [labels] for d in delivered), (labels, delivered[-1])
    counts = [value for d in delivered for _, value in d]
    assert counts == sorted(counts) and 0 < counts[-1] <= run["summary"]["targetEvents"], counts
    lags = [value for s in scrapes for _, value in _series(s, "impulse_load_pipeline_lag_events")]
    assert lags and all(v >= 0 for v in lags), "no pipeline lag served"


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_the_filters_report_gives_the_pipelines_figures_and_the_producers_in_a_section_of_their_own(runs):
    run = runs["filter"]
    written = len(run["input"])
    report, text = run["report"], run["summaryText"]
    outputs = len(run["output"])
    assert 0 < outputs < written
    # the run's figures are the pipeline's: its output rows, micro-batches, phases and own latency …
    assert report["summary"]["outputRows"] == outputs and report["summary"]["events"] == written
    assert re.search(rf"^  output rows\s+{outputs:,}$", text, re.M)
    assert re.search(rf"^  records read \(pipeline\)\s+{written:,}$", text, re.M)
    pipeline_batches = report["batches"]
    assert sum(b["events"] for b in pipeline_batches) == written == run["via"]["rowsRead"]
    assert sum(b["outputRows"] for b in pipeline_batches) == outputs
    assert report["summary"]["batches"] == len(pipeline_batches) == run["via"]["pipelineBatches"]
    assert re.search(rf"^  batches \(pipeline\)\s+{len(pipeline_batches):,}$", text, re.M)
    add_batch = report["phasesMs"]["addBatch"]
    assert add_batch["max"] == max(b["addBatchMs"] for b in pipeline_batches)
    assert re.search(rf"^    addBatch\s+{add_batch['mean']:,.1f}\s+{add_batch['max']:,.0f}$",
                     text.split("Spark phase (ms), pipeline")[1].split("\n\n")[0], re.M)
    assert report["summary"]["latencyDefinition"] == "pipeline"
    assert report["latencyMs"] == run["via"]["pipelinePartMs"]
    assert report["viaLatency"]["definition"] == "via-end-to-end"
    assert report["viaLatency"]["ms"]["p50"] >= report["latencyMs"]["p50"]   # the producer's part on top
    assert "  latency: pipeline: the pipeline's own: each input record's commit into the input topic" in text
    # … and the producer's are its own: its batches, bytes, phases, its latency scheduled → committed
    producer = report["producer"]
    assert producer["summary"]["latencyDefinition"] == "producer" and producer["summary"]["events"] == written
    assert [b["delivered"] for b in producer["batches"]][-1] == written
    assert producer["summary"]["batches"] == len(producer["batches"]) and producer["summary"]["bytes"] > 0
    block = text.split("  producer (impulse → ")[1]
    assert f"{len(producer['batches']):,} micro-batches, {written:,} events" in block
    assert "latency: producer: each event's schedule → the producer's commit of it into the input topic" in block
    assert "MB (Arrow)" not in text.split("  producer (impulse → ")[0]
    assert text.splitlines()[0].startswith("impulse-load: PASS — impulse events through kafka://")


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_a_windowed_aggregation_through_kafka_counts_every_closed_window_exactly(runs):
    run = runs["window"]
    _completed(run)
    times = [json.loads(r["value"])["timestamp"] for r in run["input"]]
    per_window = Counter(_us(t) // (WINDOW_S * 1_000_000) for t in times)
    emitted = [json.loads(r["value"]) for r in run["output"]]
    got = Counter()
    for row in emitted:
        start = _us(row["window"]["start"]) // (WINDOW_S * 1_000_000)
        assert _us(row["window"]["end"]) - _us(row["window"]["start"]) == WINDOW_S * 1_000_000
        got[start] += 1
        assert row["count"] == per_window[start], f"window {row['window']}: {row['count']} of {per_window[start]}"
    assert max(got.values()) == 1, "a window emitted twice"
    # every window that closed under the last watermark (newest event − 1 s) is out, the newest ones may not be
    watermark = max(_us(t) for t in times) - 1_000_000
    closed = {w for w in per_window if (w + 1) * WINDOW_S * 1_000_000 <= watermark - WINDOW_S * 1_000_000}
    assert closed and closed <= set(got)
    assert run["via"]["latencySource"].endswith("'window.end' field")
    assert run["via"]["outputLatency"]["measured"] == len(emitted)
    assert run["check"]["passed"] and run["check"]["expected"] == len(emitted) == run["check"]["delivered"]
    # its latency is event-time (window.end → output), named so; the batches that closed no window have none
    assert run["report"]["summary"]["latencyDefinition"] == "via-event-time"
    assert "  latency: event-time → output: through Kafka: the output's --event-time-column" in run["summaryText"]
    assert re.search(rf"^  output rows\s+{len(emitted):,}$", run["summaryText"], re.M)
    with_output = [b for b in run["report"]["batches"] if b["outputRows"]]
    assert with_output and all(b["latencyP99Ms"] is not None for b in with_output)
    assert all(b["latencyP99Ms"] is None for b in run["report"]["batches"] if not b["outputRows"])


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_a_pipeline_that_drops_rows_in_streaming_only_fails_the_check_through_kafka_with_the_right_counts(runs):
    run = runs["drops"]
    _completed(run)
    written = _events(run["input"])
    expected = {e for e in written if e[1] % 3 == 0}
    dropped = {e for e in expected if e[1] % 7 == 0}
    assert dropped and set(_events(run["output"])) == expected - dropped
    assert run["check"] == {"passed": False, "expected": len(expected), "delivered": len(expected) - len(dropped),
                            "lost": len(dropped), "duplicated": 0, "unexpected": 0}
    assert run["checkLines"][0] == (f"check: FAIL: expected {len(expected):,}, delivered "
                                    f"{len(expected) - len(dropped):,}: {len(dropped):,} lost, 0 duplicated, 0 unexpected")
    assert any(line.lstrip().startswith("lost: {") for line in run["checkLines"])


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_check_unique_through_kafka_counts_the_redelivered_copies_a_pass_through_keeps(runs):
    run = runs["unique"]
    assert run["summary"]["outcome"] == "completed", run["summary"]
    written = _events(run["input"])
    copies = sum(written.values()) - len(written)
    assert copies > 0, "duplicateRate=0.2 should redeliver some events"
    assert _events(run["output"]) == written
    assert run["check"]["repeated"] == copies and run["check"]["unique"] == ["subtask_index", "counter"]
    assert run["check"]["passed"] is False and run["check"]["lost"] == run["check"]["duplicated"] == 0


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_real_time_mode_kafka_to_kafka_passes_every_event_once_with_its_latency(runs):
    run = runs["realtime"]
    _completed(run)
    assert run["via"]["trigger"] == "realTime=5s" and run["via"]["outputMode"].startswith("update")
    written = Counter(r["value"] for r in run["input"])
    delivered = Counter(r["value"] for r in run["output"])
    assert delivered == written and max(written.values()) == 1
    assert len(written) == run["summary"]["targetEvents"]
    latency = run["latencyMs"]
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert run["summary"]["latencyP99Ms"] == latency["p99"]
    assert run["via"]["outputLatency"]["measured"] == len(written)
    assert run["check"]["passed"] and run["check"]["expected"] == len(written)


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_a_prefilled_backlog_is_drained_while_the_producer_keeps_the_rate(runs):
    run = runs["prefill"]
    _completed(run)
    drain = run["via"]["prefill"]
    assert drain["events"] == 20_000
    assert drain["readS"] is not None and drain["readRate"] > 0
    assert drain["caughtUpS"] is not None and drain["caughtUpS"] >= drain["readS"]
    expected = _expected(run["prefillOptions"]) | _expected(run["producerOptions"])
    written = Counter((e["subtask_index"], e["counter"], e["timestamp"]) for e in
                      (json.loads(r["value"]) for r in run["input"]))
    assert len(written) == 20_000 + run["summary"]["targetEvents"] and max(written.values()) == 1
    assert {(p, c) for p, c, _ in written} == expected
    delivered = Counter((e["subtask_index"], e["counter"], _us(e["timestamp"])) for e in
                        (json.loads(r["value"]) for r in run["output"]))
    assert delivered == Counter((p, c, _us(t)) for p, c, t in written.elements())
    # the backlog's events are left out of the latency (scheduled before the run): the run's events only
    assert run["via"]["outputLatency"]["beforeRun"] == 20_000
    assert run["via"]["outputLatency"]["measured"] == run["summary"]["targetEvents"]
    # the check's answer counts the prefilled events: they pass through the pipeline
    assert run["check"]["passed"] and run["check"]["expected"] == 20_000 + run["summary"]["targetEvents"]


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_an_available_now_pipeline_reads_the_backlog_and_what_the_producer_wrote_once(runs):
    run = runs["available"]
    _completed(run)
    assert run["via"]["trigger"] == "availableNow"
    written = Counter(r["value"] for r in run["input"])
    assert len(written) == 5_000 + run["summary"]["targetEvents"] and max(written.values()) == 1
    assert Counter(r["value"] for r in run["output"]) == written
    assert run["via"]["prefill"]["readS"] is not None
    # without --decode: the answer over a batch read of the input topic's records between the run's offsets
    assert run["check"]["passed"] and run["check"]["expected"] == len(written)


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_a_pipeline_writing_parquet_through_kafka_passes_the_check_read_back_with_spark(runs):
    """impulse → Kafka → the user's query → Spark's Parquet sink, the files read back by --check with Spark."""
    run = runs["parquet"]
    _completed(run)
    thirds = sum(1 for _, counter in _expected(run["producerOptions"]) if counter % 3 == 0)
    assert run["check"] == {"passed": True, "expected": thirds, "delivered": thirds, "lost": 0, "duplicated": 0,
                            "unexpected": 0}, run["checkLines"]


@pytest.mark.integration
@pytest.mark.kafka
def test_a_foreach_batch_behind_kafka_passes_the_check_through_check_read_and_a_wrong_one_fails_it(kafka_broker,
                                                                                                  tmp_path):
    """The production shape ending in the user's writer: impulse → Kafka → the user's query → ``--foreach-batch``,
    the target read back by ``--check-read``; a writer appending every batch twice fails the check (exit 99)."""
    from tests.loadtest.test_delta import impulse_load

    run = ["--rate", "200", "--duration", "3s", "--partitions", "2", "--trigger", "500ms", "--drain-timeout", "5m",
           "--master", "local[2]", "--create-topic", "2", "--decode", "--transform", "tests.loadtest.pipelines:evens",
           "--check", "--check-read", "tests.loadtest.pipelines:read_parquet"]
    # the passing run starts warm (the default); the failing one's verdict owes nothing to the warm-up: skipped
    for writer, code, duplicated, warm in (("append_to_parquet", 0, 0, ()), ("append_twice", 99, 300, ("--no-warmup",))):
        target = tmp_path / f"{writer}-target"
        got, out, report = impulse_load(tmp_path, *run, *warm, "--via", f"kafka://{kafka_broker.bootstrap}/fb-{writer}",
                                        "--foreach-batch", f"tests.loadtest.pipelines:{writer}",
                                        env={"IMPULSE_TEST_FOREACH_TARGET": str(target)})
        assert got == code, out
        assert report["check"] == {"passed": code == 0, "expected": 300, "delivered": 300 + duplicated, "lost": 0,
                                   "duplicated": duplicated, "unexpected": 0}, report["check"]
        assert report["summary"]["via"].endswith(f"/fb-{writer}")
