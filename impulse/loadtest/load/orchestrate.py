"""One load run, whatever the topology: the shared steps written once, the topology's own steps behind `Topology`.

A topology says two things: where the events enter the user's pipeline (the ``impulse`` source directly,
`impulse.loadtest.load.run.Direct`; or impulse → a Kafka topic → Spark's Kafka source,
`impulse.loadtest.via.kafka.ThroughKafka`) and where latency is read (the sink's own measure from its metrics
file, else micro-batch times; through Kafka the output topic's broker times, or the pipeline sink's metrics file).
`orchestrate` runs the steps both share, in this order:

1. Pre-flight, before Spark starts (`prepare`, which the CLI also runs for every scenario before the first): the
   configuration validated (`LoadConfig.validate`), the user's query resolved
   (`impulse.loadtest.query.transform.resolve`), its output mode checked against the sink, then
   `Topology.preflight` (the sink's writer and the check's reader; through Kafka, the topics) and the source's
   options. Any problem raises one `LoadError`.
2. The session (the caller's, else `Topology.session`), the user's module loaded and shipped, ``--schema``.
3. A probe, before any event is produced: the run's events as the pipeline reads them
   (`Topology.pipeline_input`) through the user's query, checked on Spark's analysed plan (`Topology.inspect`;
   with ``--check`` its rows must be final, `impulse.loadtest.query.plan.refuse_unfinal_check`).
4. With ``--check`` the expected answer decided (`Topology.expectation`); the session's warm-up and, if the
   topology warms it (`Topology.warms`), the warm pipeline on a short slice (`impulse.loadtest.load.warm_pipeline`).
5. The load, in a work directory deleted afterwards: `Topology.execute` starts the queries, watches them to the
   end and stops them (its `Execution`), the display started before and finished after.
6. The result (`Topology.result`, from the fields every run has), the embedded receiver's counts, and with
   ``--check`` on a completed run the check (`Topology.check`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Protocol

from connectors.servers.receiver import Receiver
from impulse.loadtest.load.display import Display
from impulse.loadtest.load.events import impulse_options, impulse_schema_for
from impulse.loadtest.load.result import LoadResult
from impulse.loadtest.load.warm_pipeline import warm_pipeline
from impulse.loadtest.load.warmup import warm_up
from impulse.loadtest.measure.metrics import Collector
from impulse.loadtest.query.plan import refuse_unfinal_check
from impulse.loadtest.query.transform import Transform, check_mode, final_after, ship
from impulse.loadtest.query.transform import apply as apply_transform
from impulse.loadtest.query.transform import load as load_transform
from impulse.loadtest.query.transform import output_mode as transform_output_mode
from impulse.loadtest.query.transform import resolve as resolve_transform
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.target import redact_options
from impulse.session import deployment

__all__ = ["Run", "Execution", "Topology", "prepare", "orchestrate", "now_us"]

Query = Callable[[Any], Any]     # DataFrame → DataFrame


def now_us() -> int:
    """The wall clock, epoch µs."""
    return time.time_ns() // 1_000


@dataclass
class Run:
    """What the shared steps know of one run, filled in as they go; a topology reads it and adds its own."""

    config: LoadConfig
    display: Display | None = None
    stop: Any = None
    receiver: Receiver | None = None
    label: str | None = None
    exporter: Any = None
    resolved: Transform | None = None      # the config's --transform / --sql (None: none, or a caller's function)
    query: Query | None = None             # the user's query, DataFrame → DataFrame (None: the input as it is)
    mode: str = "append"                   # the output mode the query runs in
    check_mode: str = "append"             # the mode --check compares in (real-time update: append's rows)
    event_time_column: str | None = None   # the output's column of the scheduled time (None: the config's)
    source_options: dict = field(default_factory=dict)
    reader: Any = None                     # --check's `Readback` of the target (None without --check)
    spark: Any = None
    schema: Any = None                     # the impulse schema of ``--schema`` (None: the source's)
    expected: Any = None                   # --check's `Expectation`
    warm_s: float | None = None
    workdir: str = ""
    unnamed: str = "the query"             # what errors call a query without a label (a caller's function)

    @property
    def query_label(self) -> str:
        return self.resolved.label if self.resolved is not None else self.unnamed

    @property
    def final_rule(self) -> str | None:
        """The column whose rows are final under the watermark (`impulse.loadtest.query.transform.final_after`)."""
        return self.event_time_column or final_after(self.config, self.resolved)

    def pipeline(self, topology: Topology, events) -> tuple[Any, Any]:
        """Impulse `events` → (the user's query's output, the DataFrame written to the sink), as the topology's
        pipeline reads and writes them."""
        frame = topology.pipeline_input(self, events)
        applied = self.query(frame) if self.query is not None else frame
        return applied, topology.output(self, applied)


@dataclass
class Execution:
    """The load as it ran: the producing query's `collector`, its end and the pipeline's query (a topology's own
    execution may add its figures)."""

    collector: Collector
    outcome: str
    error: str | None
    query: Any                             # the query whose id the report gives (None: never started)
    started_us: int


class Topology(Protocol):
    """Where the events enter the user's pipeline and where its latency is read."""

    warm_sink: str          # the sink of the session's one-time warm-up (Python workers, the sink's modules)

    def preflight(self, run: Run, given_query: bool) -> None:
        """Before Spark: the target (and topics) reachable, `run`'s mode and reader; `LoadError` on a problem."""

    def session(self, run: Run) -> Any:
        """The session the harness makes (`impulse.session.make_session`)."""

    def pipeline_input(self, run: Run, events) -> Any:
        """Impulse `events` as the pipeline reads them (the user's query's input)."""

    def output(self, run: Run, applied) -> Any:
        """The user's query's output `applied` → the DataFrame written to the sink."""

    def inspect(self, run: Run, applied, output) -> None:
        """Refusals and facts read off the probe's plan (`applied`: the query's output; `output`: what is written),
        before any event is produced."""

    def expectation(self, run: Run) -> Any:
        """--check's expected answer, decided before the load."""

    def warms(self, run: Run) -> bool:
        """Whether the warm pipeline runs before the load."""

    def default_label(self, run: Run) -> str:
        """The display's label when the caller gives none."""

    def execute(self, run: Run) -> Execution:
        """Start the queries, watch them to the run's end, stop them; raise `LoadError` if refused at the start."""

    def result(self, run: Run, execution: Execution, common: dict) -> LoadResult:
        """The run's `LoadResult` (or a subclass) from `common`, the fields every run has."""

    def check(self, run: Run, execution: Execution) -> Any:
        """--check on a completed run: the target read back and compared (`impulse.answer.CheckResult`)."""


def prepare(config: LoadConfig, topology: Topology, receiver: Receiver | None = None, *, query: Query | None = None,
            output_mode: str | None = None, event_time_column: str | None = None) -> Run:
    """Step 1, the pre-flight before Spark starts (also the CLI's, for every scenario before the first runs): the
    config validated, the user's query resolved, its output mode checked against the sink
    (`impulse.loadtest.query.transform.check_mode`), the topology's own pre-flight, the source's options. Raises
    `LoadError`; returns the `Run` the next steps fill in."""
    config.validate()
    run = Run(config, receiver=receiver)
    run.resolved = resolve_transform(config) if query is None else None
    run.mode = output_mode or transform_output_mode(config, run.resolved)
    check_mode(config.sink, run.mode)
    run.check_mode = run.mode
    run.event_time_column = event_time_column or config.event_time_column
    topology.preflight(run, query is not None)
    run.source_options = impulse_options(config)
    return run


def orchestrate(config: LoadConfig, topology: Topology, *, spark=None, display: Display | None = None,
                stop: Any = None, receiver: Receiver | None = None, label: str | None = None, exporter: Any = None,
                query: Query | None = None, output_mode: str | None = None,
                event_time_column: str | None = None) -> LoadResult:
    """Run `config` in `topology`: the steps of the module docstring. `query`, `output_mode`, `event_time_column`:
    a caller's own function and its settings instead of the config's (None: the config's)."""
    run = prepare(config, topology, receiver, query=query, output_mode=output_mode,
                  event_time_column=event_time_column)
    run.display, run.stop, run.label, run.exporter = display, stop, label, exporter
    run.spark = spark or topology.session(run)
    spark = run.spark
    run.resolved = load_transform(spark, run.resolved)
    ship(spark, run.resolved)
    run.query = query if run.resolved is None else partial(apply_transform, spark, run.resolved)
    run.schema = impulse_schema_for(spark, config)

    events = spark.readStream.format(config.source).options(**run.source_options)
    applied, output = run.pipeline(topology, (events.schema(run.schema) if run.schema is not None else events).load())
    topology.inspect(run, applied, output)
    if config.check:
        refuse_unfinal_check(applied, run.check_mode, run.final_rule, run.query_label)
    run.expected = topology.expectation(run) if config.check else None
    if config.warmup:
        _warm(run, topology)

    received_before = receiver.counts() if receiver is not None else None
    run.workdir = tempfile.mkdtemp(prefix="impulse-load-")
    if display is not None:
        display.start(label or topology.default_label(run), config.rate, config.total_events)
    try:
        execution = topology.execute(run)
    finally:
        if display is not None:
            display.finish()
        shutil.rmtree(run.workdir, ignore_errors=True)
    collector = execution.collector
    result = topology.result(run, execution, dict(
        config=config, sink=config.sink, options=redact_options(config.options),
        query_id=str(execution.query.id) if execution.query is not None else None, batches=collector.batches,
        schedule_start_us=collector.schedule_start_us, started_us=execution.started_us, finished_us=now_us(),
        outcome=execution.outcome, error=execution.error, deployment=deployment(spark, config.remote),
        warm_s=run.warm_s))
    if run.reader is not None and execution.outcome == "completed" and collector.schedule_start_us is not None:
        if display is not None:
            display.line("checking: reading the target back and computing the expected answer…")
        result.check = topology.check(run, execution)
    if received_before is not None:
        after = receiver.counts()
        result.receiver = {"rows": after.rows - received_before.rows,
                           "requests": after.requests - received_before.requests,
                           "duplicates": after.duplicates - received_before.duplicates,
                           "bytes": after.bytes - received_before.bytes}
    return result


def _warm(run: Run, topology: Topology) -> None:
    """The session's one-time warm-up, then (if the topology warms it) the run's own pipeline on a short slice."""
    config = run.config
    if run.display is not None:
        run.display.line("warming up (Spark's Python workers and your pipeline; nothing is sent to the sink)…")
    warm_up(run.spark, config.partitions, topology.warm_sink)
    if topology.warms(run):
        run.warm_s = warm_pipeline(run.spark, config.source, run.source_options, config.rate, config.total_events,
                                   lambda events: run.pipeline(topology, events)[1], run.mode, run.schema,
                                   run.resolved)

