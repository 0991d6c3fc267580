"""One load run: impulse → sink as a streaming query, watched until every event is committed.

`run_load` is `impulse.loadtest.load.orchestrate.orchestrate` with the direct topology, `Direct`: the events
enter the user's query from the ``impulse`` (or ``nexmark``) source itself, and latency is read where the sink
writes (the project's sinks' metrics files; Spark's batch times for other sinks). The sequence:

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
   planned; ``downtime`` default, with ``--checkpoint`` ``catchup``), or the ``nexmark`` source paced the same way, through the user's
   query if there is one (`impulse.loadtest.query.transform`: ``--transform`` / ``--sql``, its output mode),
   written to the sink with a new checkpoint (or ``--checkpoint``'s, resumed by a rerun:
   `impulse.loadtest.load.resume`), a processing-time trigger, and for the project's sinks
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
import threading
import time
from dataclasses import dataclass
from typing import Any

from connectors.servers.receiver import Receiver
from impulse.loadtest.check.judge import expectation, run_check
from impulse.loadtest.check.readback import readback
from impulse.loadtest.load.display import Display
from impulse.loadtest.load.events import impulse_options, impulse_schema_for
from impulse.loadtest.load.orchestrate import Execution, Run, now_us, orchestrate
from impulse.loadtest.load.result import LATENCY_PARTS, LoadResult
from impulse.loadtest.load.resume import committed_events, resumed_info, resumes
from impulse.loadtest.measure.commit_time import commit_clock
from impulse.loadtest.measure.metrics import Collector
from impulse.loadtest.query.foreach_batch import resolve as resolve_foreach_batch
from impulse.loadtest.query.foreach_batch import writer_function
from impulse.loadtest.query.transform import (
    exception_text,
    latency_definition,
    with_event_time,
)
from impulse.loadtest.query.transform import start as start_query
from impulse.loadtest.settings import delta
from impulse.loadtest.settings.config import LoadConfig, LoadError
from impulse.loadtest.settings.target import (
    FILE_SINKS,
    PATH_SINKS,
    TABLE_OPTION,
    Target,
    check_format,
    preflight,
    sink_option,
    table_name,
)
from impulse.loadtest.settings.thresholds import hopeless
from impulse.session import make_session

# LoadResult, LATENCY_PARTS, impulse_options and impulse_schema_for live in load/result.py and load/events.py;
# this module re-exports them, the names its callers have always imported from here
__all__ = ["LoadResult", "StopRequest", "run_load", "impulse_options", "describe_run", "Direct", "LATENCY_PARTS",
           "impulse_schema_for"]

_POLL_S = 0.25
_GRACE_S = 10.0             # how long a requested stop waits for the running batch to finish
_FIRST_BATCH_S = 300.0      # how long the query may take to complete its first batch


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
class Direct:
    """The direct topology: the source feeds the user's query, which writes to the sink; latency is the sink's own
    measure (each row's ``timestamp`` or ``--event-time-column`` → its acknowledgement, from its metrics file), or
    micro-batch latency for a sink that reports none."""

    warm_sink: str = ""
    target: Target | None = None
    definition: str = "end-to-end"
    frame: Any = None                  # the DataFrame the run writes (the probe is the run's own stream)
    foreach: Any = None                # --foreach-batch's resolved `Transform` (None: a sink)
    writer: Any = None                 # --foreach-batch's function, loaded on the session
    resumed: bool = False              # the query resumes an earlier run's --checkpoint (`impulse.loadtest.load.resume`)

    def preflight(self, run: Run, given_query: bool) -> None:
        config = run.config
        if config.foreach_batch is not None:   # the user's writer: nothing to check but its module and function
            self.foreach = resolve_foreach_batch(config.foreach_batch)
            self.warm_sink, self.target = "noop", Target(config.sink, {})
        else:
            self.warm_sink = config.sink
            self.target = preflight(config.sink, config.options, config.payload_bytes, config.create_topic,
                                    output_known=run.resolved is None and not given_query)
        run.reader = readback(config.sink, self.target.options, run.mode, run.receiver, check_read=config.check_read,
                              check_key=config.check_key) if config.check else None
        self.resumed = resumes(config.checkpoint_dir)
        done = committed_events(config.checkpoint_dir) if self.resumed else None
        if done is not None and done >= config.total_events:
            raise LoadError(f"--checkpoint {config.checkpoint_dir}: its query already committed all {done:,} events "
                            f"of the schedule ({config.total_events:,} asked), so a rerun has nothing to resume: give "
                            "a new --checkpoint DIR (and a new target) for a new run")

    def session(self, run: Run):
        return make_session(run.config.master, remote=run.config.remote)

    def pipeline_input(self, run: Run, events):
        return events

    def output(self, run: Run, applied):
        """The query's output with its event time (`with_event_time`); a query's columns checked against the sink's
        options that name columns."""
        spark, config = run.spark, run.config
        out = with_event_time(config, applied, type(spark).__module__.startswith("pyspark.sql.connect"))
        if run.query is not None:
            preflight(config.sink, config.options, config.payload_bytes, schema=out.schema)
        return out

    def inspect(self, run: Run, applied, output) -> None:
        if self.foreach is not None:
            self.writer = writer_function(run.spark, self.foreach)
        else:
            check_format(run.spark, run.config.sink)
        self.frame = output
        self.definition = latency_definition(run.config, applied)
        if self.foreach is None and (self.target.sink in PATH_SINKS or table_name(self.target.options)):
            self.definition = "commit"  # a committed table: each event's schedule → the commit showing its batch
        elif self.definition != "end-to-end" and not self.target.reports_metrics:
            self.definition = "micro-batch"  # only the project's sinks measure latency from the rows they write

    def expectation(self, run: Run):
        return expectation(run.spark, run.config, run.resolved, run.source_options, run.schema)

    def warms(self, run: Run) -> bool:
        return run.resolved is not None or run.schema is not None

    def default_label(self, run: Run) -> str:
        return _label(run.config)

    def execute(self, run: Run) -> Execution:
        config, display = run.config, run.display
        checkpoint = config.checkpoint_dir or os.path.join(run.workdir, "checkpoint")
        sink_options = dict(self.target.options)
        metrics_path = None
        if self.target.reports_metrics:
            metrics_path = sink_option(sink_options, "metricsPath")
            if metrics_path is None:
                metrics_path = sink_options["metricsPath"] = os.path.join(run.workdir, "metrics.jsonl")
        metrics_offset = os.path.getsize(metrics_path) if metrics_path and os.path.exists(metrics_path) else 0
        table = table_name(sink_options) if self.writer is None else None
        sink_options = {k: v for k, v in sink_options.items() if k.lower() != TABLE_OPTION}
        stream = self.frame.writeStream
        stream = (stream.foreachBatch(self.writer) if self.writer is not None
                  else stream.format(config.sink).options(**sink_options))
        writer = (
            stream
            .option("checkpointLocation", checkpoint)
            .queryName(f"impulse-load-{os.getpid()}-{int(time.time() * 1000)}")
            .trigger(processingTime=f"{round(config.trigger_s * 1000)} milliseconds")
        )
        started_us = now_us()
        if run.reader is not None and not self.resumed:   # resumed: the target holds the earlier runs' rows
            run.reader.prepare()
        query = start_query(writer, run.mode, run.resolved, table)
        collector = Collector(query, total_events=config.total_events, partitions=config.partitions,
                              payload_bytes=config.payload_bytes, metrics_path=metrics_path,
                              metrics_offset=metrics_offset,
                              commit_id=sink_option(sink_options, "commitId") or str(query.id), stages=config.stages,
                              batch_latency=self.definition == "micro-batch",
                              commit_clock=commit_clock(_commit_kind(config.sink), sink_option(sink_options, "path"),
                                                        str(query.id)) if self.definition == "commit" else None,
                              positional_rate=config.rate if config.source == "replay" else None)
        if run.exporter is not None:
            run.exporter.attach(collector, config, run_id=str(query.id))
        outcome, error = "completed", None
        try:
            outcome, error = _watch(query, collector, config, display, run.stop, started_us, self.resumed)
        except KeyboardInterrupt:
            outcome = "interrupted"
        finally:
            if query.isActive:
                # a check reads the target: a running micro-batch (a no-data one moving the watermark) finishes
                if run.reader is None:
                    query.stop()
                else:
                    _stop_between_batches(query, None)
            collector.poll(final=True)
        if outcome == "failed" and not collector.batches and re.search(r"does not support \w+ mode", error or ""):
            # Spark refuses the output mode for this sink when the first batch runs, before anything is written
            raise LoadError(f"--output-mode {run.mode}: Spark refuses it: {error}")
        if outcome in ("interrupted", "timed out") and collector.done:
            outcome = "completed"   # the last batch committed while the stop was waiting for it
        return Execution(collector, outcome, error, query, started_us)

    def result(self, run: Run, execution: Execution, common: dict) -> LoadResult:
        resumed = resumed_info(run.config.checkpoint_dir, execution.collector.batches) if self.resumed else None
        return LoadResult(**common, latency_definition=self.definition, resumed=resumed)

    def check(self, run: Run, execution: Execution):
        return run_check(run.spark, run.config, run.resolved, run.mode, run.source_options,
                         execution.collector.schedule_start_us, execution.query, run.reader, run.schema,
                         run.expected)


def _commit_kind(sink: str) -> str | None:
    """How `commit_clock` reads a table target's commits: Delta's log or a file sink's ``_spark_metadata``."""
    return "delta" if sink == delta.FORMAT else "files" if sink in FILE_SINKS else None


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
    return orchestrate(config, Direct(), spark=spark, display=display, stop=stop, receiver=receiver, label=label,
                       exporter=exporter)


def describe_run(config: LoadConfig) -> str:
    """One line: sink, rate (or stages), duration, events, partitions, payload, trigger."""
    stages = config.stages
    rate = (f"{stages.option} {stages.text}" if stages is not None
            else f"{config.rate:,.0f} events/s for {config.duration_s:g}s")
    return (f"{config.sink}, {rate} ({config.total_events:,} events), {config.partitions} partitions, "
            f"{config.payload_bytes} B payload, trigger {config.trigger}")


def _label(config: LoadConfig) -> str:
    return f"impulse-load: {describe_run(config)}"


def _watch(query, collector: Collector, config: LoadConfig, display: Display | None, stop: Any,
           started_us: int, resumed: bool = False) -> tuple[str, str | None]:
    """Poll until the run ends; returns (outcome, error). `resumed`: the query resumes an earlier run's checkpoint
    (`_drain_origin`)."""
    abort_checks = config.parsed_thresholds() if config.abort_on_fail else []
    while True:
        collector.poll()
        now = now_us()
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
        elif now - _drain_origin(collector.schedule_start_us, started_us, resumed) > \
                (config.duration_s + config.drain_s) * 1e6:
            origin = "the resumed run's start" if resumed else "the start"
            return "timed out", (f"{collector.delivered:,} of {collector.total:,} events delivered "
                                 f"{config.duration_s + config.drain_s:g}s after {origin}")
        if stop is not None and hasattr(stop, "wait"):
            stop.wait(_POLL_S)
        else:
            time.sleep(_POLL_S)


def _drain_origin(schedule_start_us: int, started_us: int, resumed: bool) -> int:
    """Where the run's time (duration + drain) counts from: the schedule's start, or for a resumed query, whose
    schedule started in an earlier run, this run's start if later (the downtime is not the rerun's to drain)."""
    return max(schedule_start_us, started_us) if resumed else schedule_start_us


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
