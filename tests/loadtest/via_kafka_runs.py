"""Runs of the Kafka topology for ``test_via_kafka.py``, in a process of their own (Spark's Kafka connector needs a
session started with it): ``python -m tests.loadtest.via_kafka_runs BOOTSTRAP OUT.json [NAME…]``.

Each run writes its result's summary, its summary text and report.json object, and what it read back (input and
output records) into OUT.json, one object per run name; the tests check them. The runs share one Spark session and the broker at BOOTSTRAP.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import urllib.request
import uuid
from contextlib import ExitStack
from dataclasses import replace

from connectors.kafka_topics import read_topic
from impulse.loadtest.measure.metrics import percentiles_ms
from impulse.loadtest.reports.prometheus import Exporter
from impulse.loadtest.reports.report import report_document, summary_text
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.via.kafka import run_via_kafka
from impulse.session import make_session

WINDOW_S = 2


def keep_every_third(events):
    """A filter: the events whose counter is a multiple of 3."""
    return events.filter(events.counter % 3 == 0)


def count_per_window(events):
    """A windowed aggregation with a watermark: events per 2-second window of their scheduled time."""
    from pyspark.sql import functions as F

    return (events.withWatermark("timestamp", "1 second")
            .groupBy(F.window("timestamp", f"{WINDOW_S} seconds")).count())


def drops_in_streaming_only(events):
    """A pipeline with a streaming-only bug: the filter, less the events whose counter is a multiple of 7 when it
    runs as a stream (the batch answer keeps them)."""
    kept = keep_every_third(events)
    return kept.filter(kept.counter % 7 != 0) if events.isStreaming else kept


def _records(bootstrap: str, topic: str) -> list[dict]:
    """Every committed record of `topic`: value (text), timestamp (ms) and its type."""
    return [{"value": m.value().decode() if m.value() is not None else None, "ts": m.timestamp()[1],
             "tsType": m.timestamp()[0]} for m in read_topic({"bootstrap.servers": bootstrap}, topic)]


def runs(bootstrap: str) -> dict:
    """name → (config, transform, output mode, event-time column)."""
    def config(name: str, sink: str, **more) -> LoadConfig:
        suffix = uuid.uuid4().hex[:8]
        return LoadConfig(sink=sink, options={"kafka.bootstrap.servers": bootstrap, "topic": f"{name}-out-{suffix}"},
                          via=f"kafka://{bootstrap}/{name}-in-{suffix}", create_topic=2, partitions=2,
                          payload_bytes=16, warmup=False, **more)

    return {
        "filter": (config("filter", "kafka-sink", rate=2000, duration_s=6, trigger="1s", decode=True, check=True),
                   keep_every_third, "append", None),
        "window": (config("window", "kafka", rate=2000, duration_s=8, trigger="1s", decode=True, check=True),
                   count_per_window, "append", "window.end"),
        "drops": (config("drops", "kafka-sink", rate=1000, duration_s=4, trigger="1s", decode=True, check=True),
                  drops_in_streaming_only, "append", None),
        "realtime": (config("realtime", "kafka", rate=2000, duration_s=10, trigger="0",
                            pipeline_trigger="realTime=5s", check=True), None, "append", None),
        # 28,000 events through the pipeline after an 8 s load: the default drain (30 s) timed out on a machine
        # 2.3x slower than usual with another test worker beside it; the drain's length is not what this run tests
        "prefill": (config("prefill", "kafka-sink", rate=1000, duration_s=8, trigger="1s", decode=True,
                           prefill=20_000, pipeline_trigger="0", check=True, drain_timeout_s=120), None, "append", None),
        "available": (config("available", "kafka", rate=2000, duration_s=4, trigger="0", prefill=5_000,
                             pipeline_trigger="availableNow", check=True), None, "append", None),
        "parquet": (replace(config("parquet", "parquet", rate=1000, duration_s=4, trigger="1s", decode=True,
                                   check=True), options={"path": os.path.join(tempfile.mkdtemp(), "parquet-out")}),
                    keep_every_third, "append", None),
        "unique": (config("unique", "kafka-sink", rate=500, duration_s=3, trigger="1s", decode=True, check=True,
                          check_unique="subtask_index,counter",
                          source_options={"duplicateRate": "0.2", "duplicateDelay": "200ms"}), None, "append", None),
    }


SCRAPED = "filter"   # the run whose Prometheus endpoint is scraped while it runs (``--metrics-port``)


def _scraping(exporter: Exporter, scrapes: list[str], done: threading.Event) -> threading.Thread:
    """A thread that scrapes `exporter` until `done`, keeping every answer that holds a series."""
    def scrape() -> None:
        while not done.is_set():
            try:
                with urllib.request.urlopen(exporter.url, timeout=2) as answer:
                    text = answer.read().decode()
            except OSError:
                text = ""
            if "impulse_load_" in text:
                scrapes.append(text)
            done.wait(0.2)

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> None:
    bootstrap, out, *names = argv
    spark = make_session("local[4]", "via-kafka-tests", kafka=True)
    results = {}
    table = runs(bootstrap)
    for name in names or list(table):
        config, transform, mode, column = table[name]
        scrapes: list[str] = []
        with ExitStack() as stack:
            exporter = stack.enter_context(Exporter(0)) if name == SCRAPED else None
            if exporter is not None:
                done = threading.Event()
                stack.callback(_scraping(exporter, scrapes, done).join, 10)
                stack.callback(done.set)
            result = run_via_kafka(replace(config, warmup=not results), transform=transform, output_mode=mode,
                                   event_time_column=column, spark=spark, exporter=exporter)
        input_topic = config.via.rsplit("/", 1)[1]
        results[name] = {
            "summary": result.summary(), "via": result.via, "latencyMs": percentiles_ms(result.latency),
            "producerOptions": result.producer_options, "prefillOptions": result.prefill_options,
            "scheduleStartUs": result.schedule_start_us,
            "check": result.check.to_json() if result.check is not None else None,
            "checkLines": result.check.lines() if result.check is not None else None,
            "input": _records(bootstrap, input_topic),
            "output": _records(bootstrap, config.options["topic"]) if "topic" in config.options else None,
            "summaryText": summary_text(result), "report": report_document(result)[0], "scrapes": scrapes,
        }
        with open(out, "w") as sink:
            json.dump(results, sink)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
