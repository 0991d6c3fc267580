"""One load run: impulse → sink as a streaming query, watched until every event is committed.

Sequence of `run_load`:

1. Pre-flight, before any load (and, for the project's sinks and ``noop``, before Spark starts):
   the run's values, the impulse options and the sink's writer (`impulse.loadtest.settings.target`); any
   problem raises a one-line `LoadError`.
2. The Spark session (the caller's, or `impulse.session.make_session`), the format lookup
   of a third-party sink, the user's module imported (`impulse.loadtest.query.transform.load`: its top-level UDFs need
   the session) and the query built and checked on Spark's analysed plan (`impulse.loadtest.query.plan`), all before
   any event is produced; then the session's one-time warm-up and the warm pipeline
   (`impulse.loadtest.load.warm_pipeline`: the run's own query on a short slice of events into ``noop``).
3. The query: ``impulse`` with ``eventsPerSecond``, ``numPartitions``, ``payloadBytes`` and
   ``limit`` = rate × duration (``startTime`` unset: the schedule starts when the first batch is
   planned; ``downtime`` default), or the ``nexmark`` source paced the same way, through the user's
   query if there is one (`impulse.loadtest.query.transform`: ``--transform`` / ``--sql``, its output mode),
   written to the sink with a new checkpoint, a processing-time trigger, and for the project's sinks
   ``metricsPath``.
4. Watching, a few times a second: new batches (`impulse.loadtest.measure.metrics.Collector`), the display,
   and the end: every event delivered (the normal end: the stream ran dry, the query is idle), the
   query failed, a stop was requested (Ctrl-C: the harness waits up to 10 s for the running batch
   to finish, so nothing is cut in half; a second Ctrl-C stops at once), or the drain time ran out.
5. The query is stopped and the run's last progress read: a `LoadResult`; with ``--check`` the target
   is then read back and compared with the expected answer over the same events, computed the way
   `impulse.loadtest.check.judge.expectation` decided before the load (`impulse.loadtest.check`).

Counting is exact: the report's events are the events of committed batches, which is what a
target deduplicating per event (or written exactly once by our sinks) holds — except after a
forced stop, when the batch that was cut may have left some partitions written.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql.types import StructType

from connectors.errors import ConnectorError
from connectors.latency import LatencyHistogram
from connectors.servers.receiver import Receiver
from impulse.loadtest.check.judge import expectation, run_check
from impulse.loadtest.check.readback import readback
from impulse.loadtest.load.display import Display
from impulse.loadtest.load.warm_pipeline import warm_pipeline
from impulse.loadtest.load.warmup import warm_up
from impulse.loadtest.measure.bound import Verdict, assess
from impulse.loadtest.measure.metrics import (
    Batch,
    Collector,
    achieved_rate,
    merged_latency,
    percentiles_ms,
    phase_stats,
)
from impulse.loadtest.query.plan import refuse_unfinal_check
from impulse.loadtest.query.transform import apply as apply_transform
from impulse.loadtest.query.transform import (
    check_mode,
    exception_text,
    final_after,
    latency_definition,
    output_mode,
    ship,
    with_event_time,
)
from impulse.loadtest.query.transform import load as load_transform
from impulse.loadtest.query.transform import resolve as resolve_transform
from impulse.loadtest.query.transform import start as start_query
from impulse.loadtest.settings.config import LoadConfig, LoadError
from impulse.loadtest.settings.stages import StageResult, stage_results
from impulse.loadtest.settings.target import check_format, preflight, redact_options
from impulse.loadtest.settings.thresholds import Check, evaluate, hopeless
from impulse.nexmark.source import NexmarkOptions
from impulse.options import ImpulseOptions
from impulse.schema import default_schema, row_spec
from impulse.session import deployment, make_session

__all__ = ["LoadResult", "StopRequest", "run_load", "impulse_options", "describe_run"]

_POLL_S = 0.25
_GRACE_S = 10.0             # how long a requested stop waits for the running batch to finish
_FIRST_BATCH_S = 300.0      # how long the query may take to complete its first batch
_LATENCY_KEYS = {"p50": "latencyP50Ms", "p95": "latencyP95Ms", "p99": "latencyP99Ms", "p99.9": "latencyP999Ms",
                 "p99.99": "latencyP9999Ms", "max": "latencyMaxMs", "mean": "latencyMeanMs"}
LATENCY_PARTS = (("latency", "end-to-end"), ("schedule_delay", "schedule delay"), ("delivery", "delivery"))


def _now_us() -> int:
    return time.time_ns() // 1_000


class StopRequest:
    """Asks a run to stop (thread- and signal-safe): the first `request` stops between two batches, the second at once."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.requests = 0

    def request(self) -> None:
        self.requests += 1
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    @property
    def forced(self) -> bool:
        return self.requests > 1

    def wait(self, timeout: float) -> bool:
        return self._event.wait(timeout)


@dataclass
class LoadResult:
    """What one run measured. Rates in events/s, times in epoch µs unless named otherwise."""

    config: LoadConfig
    sink: str
    options: dict                      # as given, secrets hidden
    query_id: str | None
    batches: list[Batch]
    schedule_start_us: int | None      # impulse startTime: when the first batch was planned
    started_us: int                    # when the query was started
    finished_us: int
    outcome: str                       # completed | interrupted | aborted (--abort-on-fail) | timed out | failed
    error: str | None = None
    receiver: dict | None = None       # the embedded receiver's counts for this run (webhook default)
    deployment: dict | None = None     # where it ran: `impulse.session.deployment`
    latency_definition: str = "end-to-end"   # or event-time / micro-batch (`impulse.loadtest.query.transform`)
    check: Any = None                  # `impulse.answer.CheckResult` of --check (None without it)
    warm_s: float | None = None        # seconds the warm pipeline ran before the load (None: it did not run)
    _histograms: dict = field(default_factory=dict, repr=False)   # merged histograms (and stages), computed once

    @property
    def target_rate(self) -> float:
        return self.config.rate

    @property
    def target_events(self) -> int:
        return self.config.total_events

    @property
    def events(self) -> int:
        """Events delivered and committed."""
        return self.batches[-1].delivered if self.batches else 0

    @property
    def output_rows(self) -> int | None:
        """Rows the sink acknowledged (the project's sinks, or Spark's count for others); None when unknown."""
        counts = [b.output_rows for b in self.batches]
        return None if not counts or any(c is None for c in counts) else sum(counts)

    @property
    def first_batch_ms(self) -> int | None:
        """The first measured micro-batch's time (Spark's ``triggerExecution``): what a query's start still costs
        once the pipeline is warm. None without a batch."""
        return self.batches[0].durations.get("triggerExecution") if self.batches else None

    @property
    def errors(self) -> int:
        """Failed task attempts the sink recovered from (partitions retried) plus 1 if the query failed."""
        return sum(b.retried for b in self.batches) + (1 if self.outcome == "failed" else 0)

    @property
    def dead_lettered(self) -> int:
        """Events the target refused for good and the sink sent to its dead-letter target (its ``deadLettered``)."""
        return sum(b.dead_lettered for b in self.batches)

    @property
    def achieved_rate(self) -> float:
        """Events/s in steady state (`impulse.loadtest.measure.metrics.achieved_rate`); with stages, whose rate changes,
        the events over the time from the schedule's start to the last acknowledgement (per stage: `stage_results`)."""
        if self.config.stages is not None:
            return self.events / self.duration_s if self.duration_s > 0 else 0.0
        return achieved_rate(self.batches, self.target_events, self.schedule_start_us)

    @property
    def stage_results(self) -> list[StageResult]:
        """Per stage of the source option ``rateStages``: target vs achieved rate, latency (empty without it)."""
        plan = self.config.stages
        if plan is None:
            return []
        if "stages" not in self._histograms:
            self._histograms["stages"] = stage_results(plan, self.batches, self.schedule_start_us,
                                                       self.config.max_latency_s)
        return self._histograms["stages"]

    @property
    def rate_share(self) -> float:
        """Achieved / target rate: of the run, or with stages the lowest of its hold stages (all stages if none)."""
        stages = self.stage_results
        if stages:
            holds = [stage for stage in stages if stage.stage.hold] or stages
            return min(stage.rate_share for stage in holds)
        return self.achieved_rate / self.target_rate if self.target_rate else 0.0

    def histogram(self, part: str) -> LatencyHistogram:
        """The run's merged histogram of `part`: ``latency``, ``schedule_delay`` or ``delivery`` (`LATENCY_PARTS`)."""
        if part not in self._histograms:
            self._histograms[part] = merged_latency(self.batches, part)
        return self._histograms[part]

    @property
    def latency(self) -> LatencyHistogram:
        """End to end: each event's scheduled time → the target's acknowledgement."""
        return self.histogram("latency")

    @property
    def schedule_delay(self) -> LatencyHistogram:
        """Each event's scheduled time → the start of the micro-batch that read it."""
        return self.histogram("schedule_delay")

    @property
    def delivery(self) -> LatencyHistogram:
        """The start of the event's micro-batch → the acknowledgement of its partition."""
        return self.histogram("delivery")

    @property
    def max_lag(self) -> int:
        """The largest lag (events due − delivered) at any batch's acknowledgement."""
        return max((b.lag for b in self.batches), default=0)

    @property
    def bytes(self) -> int:
        return sum(b.bytes for b in self.batches)

    @property
    def duration_s(self) -> float:
        """From the schedule's start (or the query's) to the last acknowledgement."""
        origin = self.schedule_start_us or self.started_us
        end = self.batches[-1].ack_us if self.batches else self.finished_us
        return max(0.0, (end - origin) / 1e6)

    @property
    def verdict(self) -> Verdict:
        return assess(self, self.config.max_latency_s)

    @property
    def checks(self) -> list[Check]:
        """The run's ``--threshold`` checks, each pass/fail (empty without thresholds)."""
        return evaluate(self.config.parsed_thresholds(), self)

    @property
    def thresholds_failed(self) -> bool:
        return any(not check.passed for check in self.checks)

    def summary(self) -> dict:
        """The headline numbers (one CSV row, one JSON object)."""
        latency = percentiles_ms(self.latency)
        out = {
            "sink": self.sink, "partitions": self.config.partitions, "payloadBytes": self.config.payload_bytes,
            "trigger": self.config.trigger, "durationS": self.config.duration_s,
            "targetRate": self.target_rate, "achievedRate": round(self.achieved_rate, 1),
            "targetEvents": self.target_events, "events": self.events, "errors": self.errors,
            "deadLettered": self.dead_lettered,
            "batches": len(self.batches), "bytes": self.bytes, "outcome": self.outcome,
            "sustained": self.verdict.sustained,
        }
        out.update({_LATENCY_KEYS[name]: value for name, value in latency.items()})
        out["outputRows"] = self.output_rows
        out["latencyDefinition"] = self.latency_definition
        out["firstBatchMs"] = self.first_batch_ms
        out["warmupS"] = None if self.warm_s is None else round(self.warm_s, 2)
        if self.receiver is not None:
            out["receiverRows"] = self.receiver["rows"]
        return out

    def to_dict(self) -> dict:
        origin = self.schedule_start_us or self.started_us
        config = asdict(self.config)
        config["options"] = self.options
        return {
            "summary": self.summary(),
            "config": config,
            "queryId": self.query_id,
            "deployment": self.deployment,
            "scheduleStartUs": self.schedule_start_us, "startedUs": self.started_us, "finishedUs": self.finished_us,
            "error": self.error,
            "verdict": {"sustained": self.verdict.sustained, "reasons": list(self.verdict.reasons)},
            "thresholds": [check.to_dict() for check in self.checks],
            "check": self.check.to_json() if self.check is not None else None,
            "checkDetail": ({"basis": self.check.basis, "examples": dict(self.check.examples)}
                            if self.check is not None else None),
            "latencyMs": percentiles_ms(self.latency),
            "scheduleDelayMs": percentiles_ms(self.schedule_delay),
            "deliveryMs": percentiles_ms(self.delivery),
            "latencyHistogram": self.latency.to_dict(),
            "scheduleDelayHistogram": self.schedule_delay.to_dict(),
            "deliveryHistogram": self.delivery.to_dict(),
            "phasesMs": phase_stats(self.batches),
            "stages": [stage.to_dict() for stage in self.stage_results],
            "receiver": self.receiver,
            "batches": [b.row(origin) for b in self.batches],
        }


# impulse options the harness sets from its own flags; --source-option may not override them
_HARNESS_SOURCE_OPTIONS = {"eventspersecond": "--rate", "delay": "--rate", "numpartitions": "--partitions",
                           "payloadbytes": "--payload-bytes", "limit": "--rate × --duration",
                           "limitperpartition": "--rate × --duration", "maxeventspertrigger": "--max-events-per-trigger",
                           "starttime": "the run's start (latency counts from each event's schedule)"}


def impulse_options(config: LoadConfig) -> dict[str, str]:
    """The options of the run's source, ``impulse`` or ``nexmark`` (validated like the source will)."""
    for key in config.source_options:
        if key.lower() in _HARNESS_SOURCE_OPTIONS:
            raise LoadError(f"--source-option {key}: set by the harness from {_HARNESS_SOURCE_OPTIONS[key.lower()]}")
    if config.source == "nexmark":
        return _nexmark_options(config)
    options = {
        **config.source_options,
        "numPartitions": str(config.partitions),
        "payloadBytes": str(config.payload_bytes),
        "limit": str(config.total_events),
    }
    if config.stages is None:  # with rateStages the source takes its rate from the stages (passed through as is)
        options["eventsPerSecond"] = repr(float(config.rate))
    if config.max_events_per_trigger:
        options["maxEventsPerTrigger"] = str(config.max_events_per_trigger)

    try:
        ImpulseOptions.from_options(options)
    except ConnectorError as exc:
        raise LoadError(f"impulse: {exc}") from exc
    return options


def _nexmark_options(config: LoadConfig) -> dict[str, str]:
    """The ``nexmark`` source's options of a run: its events paced like impulse's (no payload column)."""
    options = {**config.source_options, "numPartitions": str(config.partitions), "limit": str(config.total_events)}
    if config.stages is None:
        options["eventsPerSecond"] = repr(float(config.rate))
    if config.max_events_per_trigger:
        options["maxEventsPerTrigger"] = str(config.max_events_per_trigger)
    try:
        NexmarkOptions.from_options(options)
    except ConnectorError as exc:
        raise LoadError(f"nexmark: {exc}") from exc
    return options


def impulse_schema_for(spark, config: LoadConfig):
    """The run's impulse schema: ``--schema`` plus the built-in columns the sinks and the harness use (counter,
    subtask_index, timestamp, and payload when ``--payload-bytes`` > 0) where the DDL lacks them; None without
    ``--schema``. Checked against the ``fields.*`` options like the source will: `LoadError` naming the problem."""
    if not config.schema:
        return None


    try:
        declared = spark.createDataFrame([], config.schema).schema
    except Exception as exc:  # noqa: BLE001 - Spark's parse error, shown as one line
        raise LoadError(f"--schema: {config.schema!r} is not a Spark DDL schema ({exception_text(exc)})") from None
    names = {f.name.lower() for f in declared.fields}
    schema = StructType(declared.fields + [f for f in default_schema(config.payload_bytes).fields if f.name not in names])
    opts = ImpulseOptions.from_options(impulse_options(config))
    try:
        row_spec(schema, opts.fields, seed=opts.seed, payload_bytes=opts.payload_bytes)
    except ConnectorError as exc:
        raise LoadError(f"impulse: {exc}") from exc
    return schema


def _option(options: dict, name: str) -> str | None:
    return next((v for k, v in options.items() if k.lower() == name.lower()), None)


def run_load(config: LoadConfig, *, spark=None, display: Display | None = None, stop: Any = None,
             receiver: Receiver | None = None, label: str | None = None, exporter: Any = None) -> LoadResult:
    """Run one load test; see the module docstring. Raises `LoadError` before any load is sent.

    `spark`: a session to use (left running); default `make_session(config.master)`. `display`: where
    progress goes (None: silent). `stop`: a `StopRequest` (or any object with ``is_set()``) that ends
    the run early; the result then covers what was committed. `receiver`: the embedded receiver the
    sink writes to, whose counts go into the result. `exporter`: a
    `impulse.loadtest.reports.prometheus.Exporter` that serves the run's live metrics. With
    ``config.abort_on_fail`` the run stops (outcome ``aborted``) once a threshold failed for good.
    """
    config.validate()
    transform = resolve_transform(config)
    mode = output_mode(config, transform)
    check_mode(config.sink, mode)
    target = preflight(config.sink, config.options, config.payload_bytes, config.create_topic,
                       output_known=transform is None)
    source_options = impulse_options(config)
    reader = readback(config.sink, target.options, mode, receiver) if config.check else None
    spark = spark or make_session(config.master, remote=config.remote)
    check_format(spark, config.sink)
    transform = load_transform(spark, transform)
    ship(spark, transform)
    schema = impulse_schema_for(spark, config)

    def build(events):
        """The events → the DataFrame the run writes, checked on Spark's analysed plan (before any load)."""
        applied = apply_transform(spark, transform, events)
        out = with_event_time(config, applied, type(spark).__module__.startswith("pyspark.sql.connect"))
        if transform is not None:  # the options that name columns, against the transform's output
            preflight(config.sink, config.options, config.payload_bytes, schema=out.schema)
        return applied, out

    source = spark.readStream.format(config.source).options(**source_options)
    if schema is not None:
        source = source.schema(schema)
    applied, output = build(source.load())
    definition = latency_definition(config, applied)
    if definition != "end-to-end" and not target.reports_metrics:
        definition = "micro-batch"  # only the project's sinks measure latency from the rows they write
    if reader is not None:
        refuse_unfinal_check(applied, mode, final_after(config, transform),
                             transform.label if transform is not None else "the query")
    expected = expectation(spark, config, transform, source_options, schema) if reader is not None else None
    warm_s = None
    if config.warmup:
        if display is not None:
            display.line("warming up (Spark's Python workers and your pipeline; nothing is sent to the sink)…")
        warm_up(spark, config.partitions, config.sink)
        if transform is not None or schema is not None:
            warm_s = warm_pipeline(spark, config.source, source_options, config.rate, config.total_events,
                                   lambda events: build(events)[1], mode, schema, transform)

    workdir = tempfile.mkdtemp(prefix="impulse-load-")
    checkpoint = config.checkpoint_dir or os.path.join(workdir, "checkpoint")
    sink_options = dict(target.options)
    metrics_path = None
    if target.reports_metrics:
        metrics_path = _option(sink_options, "metricsPath")
        if metrics_path is None:
            metrics_path = sink_options["metricsPath"] = os.path.join(workdir, "metrics.jsonl")
    metrics_offset = os.path.getsize(metrics_path) if metrics_path and os.path.exists(metrics_path) else 0
    received_before = receiver.counts() if receiver is not None else None

    trigger_ms = round(config.trigger_s * 1000)
    writer = (
        output
        .writeStream.format(config.sink).options(**sink_options)
        .option("checkpointLocation", checkpoint)
        .queryName(f"impulse-load-{os.getpid()}-{int(time.time() * 1000)}")
        .trigger(processingTime=f"{trigger_ms} milliseconds")
    )
    if display is not None:
        display.start(label or _label(config), config.rate, config.total_events)
    started_us = _now_us()
    try:
        if reader is not None:
            reader.prepare()
        query = start_query(writer, mode, transform)
    except LoadError:
        if display is not None:
            display.finish()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    collector = Collector(query, total_events=config.total_events, partitions=config.partitions,
                          payload_bytes=config.payload_bytes, metrics_path=metrics_path,
                          metrics_offset=metrics_offset,
                          commit_id=_option(sink_options, "commitId") or str(query.id), stages=config.stages,
                          batch_latency=definition == "micro-batch")
    if exporter is not None:
        exporter.attach(collector, config, run_id=str(query.id))
    outcome, error = "completed", None
    try:
        outcome, error = _watch(query, collector, config, display, stop, started_us)
    except KeyboardInterrupt:
        outcome = "interrupted"
    finally:
        try:
            if query.isActive:
                # a check reads the target: a running micro-batch (a no-data one moving the watermark) finishes
                if reader is None:
                    query.stop()
                else:
                    _stop_between_batches(query, None)
            collector.poll(final=True)
        finally:
            if display is not None:
                display.finish()
            shutil.rmtree(workdir, ignore_errors=True)
    if outcome == "failed" and not collector.batches and re.search(r"does not support \w+ mode", error or ""):
        # Spark refuses the output mode for this sink when the first batch runs, before anything is written
        raise LoadError(f"--output-mode {mode}: Spark refuses it: {error}")
    if outcome in ("interrupted", "timed out") and collector.done:
        outcome = "completed"   # the last batch committed while the stop was waiting for it
    result = LoadResult(config=config, sink=config.sink, options=redact_options(config.options),
                        query_id=str(query.id), batches=collector.batches,
                        schedule_start_us=collector.schedule_start_us, started_us=started_us,
                        finished_us=_now_us(), outcome=outcome, error=error,
                        deployment=deployment(spark, config.remote), latency_definition=definition, warm_s=warm_s)
    if reader is not None and outcome == "completed" and collector.schedule_start_us is not None:
        if display is not None:
            display.line("checking: reading the target back and computing the expected answer…")
        result.check = run_check(spark, config, transform, mode, source_options, collector.schedule_start_us,
                                 query, reader, schema, expected)
    if receiver is not None and received_before is not None:
        after = receiver.counts()
        result.receiver = {"rows": after.rows - received_before.rows,
                           "requests": after.requests - received_before.requests,
                           "duplicates": after.duplicates - received_before.duplicates,
                           "bytes": after.bytes - received_before.bytes}
    return result


def describe_run(config: LoadConfig) -> str:
    """One line: sink, rate (or stages), duration, events, partitions, payload, trigger."""
    stages = config.stages
    rate = (f"rateStages {stages.text}" if stages is not None
            else f"{config.rate:,.0f} events/s for {config.duration_s:g}s")
    return (f"{config.sink}, {rate} ({config.total_events:,} events), {config.partitions} partitions, "
            f"{config.payload_bytes} B payload, trigger {config.trigger}")


def _label(config: LoadConfig) -> str:
    return f"impulse-load: {describe_run(config)}"


def _watch(query, collector: Collector, config: LoadConfig, display: Display | None, stop: Any,
           started_us: int) -> tuple[str, str | None]:
    """Poll until the run ends; returns (outcome, error)."""
    abort_checks = config.parsed_thresholds() if config.abort_on_fail else []
    while True:
        collector.poll()
        now = _now_us()
        if display is not None:
            display.update(collector, now, waiting="starting the query (the first micro-batch)")
        if collector.done:
            return "completed", None
        failed = next(filter(None, (hopeless(threshold, collector) for threshold in abort_checks)), None)
        if failed is not None:
            _stop_between_batches(query, None)
            return "aborted", f"threshold failed: {failed}"
        if not query.isActive:
            exc = query.exception()
            return ("failed", exception_text(exc)) if exc is not None else ("interrupted", "the query was stopped")
        if stop is not None and stop.is_set():
            _stop_between_batches(query, stop)
            return "interrupted", None
        if collector.schedule_start_us is None:
            if now - started_us > _FIRST_BATCH_S * 1e6:
                return "timed out", f"no micro-batch completed within {_FIRST_BATCH_S:g}s of the query's start"
        elif now - collector.schedule_start_us > (config.duration_s + config.drain_s) * 1e6:
            return "timed out", (f"{collector.delivered:,} of {collector.total:,} events delivered "
                                 f"{config.duration_s + config.drain_s:g}s after the start")
        if stop is not None and hasattr(stop, "wait"):
            stop.wait(_POLL_S)
        else:
            time.sleep(_POLL_S)


def _stop_between_batches(query, stop: Any) -> None:
    """Wait (≤ 10 s, unless the stop is forced) for the running micro-batch to finish, then stop."""
    deadline = time.monotonic() + _GRACE_S
    while time.monotonic() < deadline and not getattr(stop, "forced", False):
        try:
            if not query.isActive or not query.status.get("isTriggerActive", False):
                break
        except Exception:  # the query went away meanwhile
            break
        time.sleep(0.05)
    if query.isActive:
        query.stop()
