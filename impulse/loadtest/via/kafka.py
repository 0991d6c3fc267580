"""The production topology: impulse fills a Kafka topic, the user's query reads it, and the harness measures it.

::

    impulse ──(producer query: kafka-sink, exactly once)──▶ input topic ──(pipeline query)──▶ the user's sink
      each record: value = the event as JSON,                  │ spark.readStream.format("kafka")
      Kafka timestamp (CreateTime) = the scheduled time        │   (isolation.level read_committed)
                                                                │ → decode (optional) → transform
                                                                ▼
                                                  Kafka sink: output topic read back (read_committed)

Two streaming queries in one Spark session (`run_via_kafka`):

- the **producer**: ``impulse`` (``--schema`` and ``--source-option`` as for a direct run) → one record per
  event into the input topic, ``value`` = the event as a JSON object (``to_json``), the record's timestamp =
  the event's scheduled time, written by ``kafka-sink`` exactly once at the run's rate and ``--trigger``;
- the **pipeline**: ``spark.readStream.format("kafka")`` on the input topic from the offsets it had before
  the run, ``kafka.isolation.level=read_committed`` (the producer's aborted attempts are never read), the
  ``--via-option`` settings; with `decode` the events parsed back from the values (``from_json`` with the
  producer's schema: the same columns the direct topology gives a transform); then the user's `transform`;
  written to the run's sink, or handed to the user's ``--foreach-batch`` function (Spark's ``foreachBatch``), with
  `PipelineTrigger` (a processing-time interval, ``0``, ``availableNow`` or ``realTime``). Real-time mode takes
  Spark's ``kafka`` format (and ``foreach``) as sink only.

The run ends when the producer delivered every event and the pipeline has read the input topic up to the
end (then, for micro-batches, once it is idle: the last no-data batch that closes windows has run).

Latency, scheduled time → output: for a Kafka pipeline sink (Spark's ``kafka`` or ``kafka-sink``) each
output record's broker time minus the scheduled time its value carries (`impulse.loadtest.via.output_latency`);
for the project's other sinks, their own measure (each output row's ``timestamp`` → the target's
acknowledgement, from their metrics file). The producer's own latency (scheduled → committed into the input
topic) is reported beside it.

Backlog (`prefill`): that many events are written into the input topic (an impulse query of their own, as
fast as it goes) before the pipeline starts; the report says when the pipeline had read them and when its
lag came down to at most one second (or one trigger interval, if longer) of the producer's events.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Iterator, Mapping

import numpy as np
from pyspark.sql import functions as F

from connectors.kafka_topics import create_topic, end_offsets
from connectors.latency import LatencyHistogram
from impulse.answer import last_watermark
from impulse.loadtest.check.unique import columns
from impulse.loadtest.load.events import impulse_options, impulse_schema_for
from impulse.loadtest.load.orchestrate import Execution, Run, now_us, orchestrate
from impulse.loadtest.load.result import LoadResult
from impulse.loadtest.measure.metrics import Collector, percentiles_ms, phase_stats
from impulse.loadtest.query.foreach_batch import resolve as resolve_foreach_batch
from impulse.loadtest.query.foreach_batch import writer_function
from impulse.loadtest.query.plan import refuse_real_time
from impulse.loadtest.query.transform import exception_text
from impulse.loadtest.settings.config import DEFAULT_MASTER, OUTPUT_MODES, LoadConfig, LoadError
from impulse.loadtest.settings.curve import CURVE_OPTIONS
from impulse.loadtest.settings.target import check_format, impulse_schema, preflight, project_sinks, sink_option
from impulse.loadtest.settings.units import epoch_us, iso_us
from impulse.loadtest.settings.via import PipelineTrigger, Via, parse_pipeline_trigger, parse_via
from impulse.loadtest.via.check import (
    OutputTopicReadback,
    as_records,
    decode,
    run_via_check,
    via_expectation,
    via_readback,
)
from impulse.loadtest.via.output_latency import (
    LOG_APPEND_TIME,
    OutputLatency,
    output_latency,
    output_latency_values,
    pipeline_part_values,
    read_output,
    timestamp_type,
)
from impulse.loadtest.via.report import (
    PipelineBatch,
    assign_lag,
    attribute_latency,
    batch_rows,
    count_output,
    pipeline_batches,
    producer_section,
    via_lines,
)
from impulse.loadtest.via.watch import Watch, committed_ends
from impulse.session import make_session
from sinks.kafka.options import CHECK_TIMEOUT_S
from sinks.kafka.security import HandshakeWatch

__all__ = ["Via", "parse_via", "PipelineTrigger", "parse_pipeline_trigger", "ViaResult", "run_via_kafka", "ThroughKafka",
           "producer_frame", "pipeline_source", "kafka_columns", "session_master", "KAFKA_SINKS", "Transform",
           "via_lines"]

Transform = Callable[[Any], Any]     # DataFrame → DataFrame
KAFKA_SINKS = ("kafka", "kafka-sink")   # pipeline sinks whose output topic the harness reads back
_POLL_S = 0.25              # how often the prefill is polled
_PREFILL_RATE = 1_000_000.0  # events/s of the prefill's schedule: as fast as the producer can write
@dataclass
class ViaResult(LoadResult):
    """A run through Kafka. Its `batches` are the producer's: the run's events and its target vs achieved rate are
    the events written into the input topic (the load). The reports give the pipeline's figures as the run's
    (`impulse.loadtest.via.report`): its micro-batches (`pipeline_batches`), its output rows (``via["outputRows"]``)
    and its latency (`pipeline_latency`, named by `latency_definition`), with `via_latency` (named by
    `via_latency_definition`: through Kafka, scheduled or event-time → output) beside it when the run's latency is
    the pipeline's own part; the producer's own figures are `producer_run`'s."""

    via: dict = field(default_factory=dict)                     # the pipeline's counts, drain, latency source
    pipeline_latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    producer_options: dict = field(default_factory=dict)        # the impulse options of the run's events
    prefill_options: dict | None = None                          # … of the prefill's events
    pipeline_batches: list[PipelineBatch] = field(default_factory=list)
    via_latency: LatencyHistogram | None = None
    via_latency_definition: str | None = None

    def histogram(self, part: str) -> LatencyHistogram:
        if part == "latency":
            return self.pipeline_latency
        return super().histogram(part)

    @property
    def producer_latency(self) -> LatencyHistogram:
        """Scheduled time → the producer's commit into the input topic."""
        return super().histogram("latency")

    @property
    def output_rows(self) -> int | None:
        """The pipeline's output rows: records in the output topic, or rows the sink acknowledged (None: unknown)."""
        return self.via.get("outputRows")

    def producer_run(self) -> LoadResult:
        """The producer as a run of its own (impulse → kafka-sink into the input topic): its figures."""
        return LoadResult(config=self.config, sink="kafka-sink", options={}, query_id=None, batches=self.batches,
                          schedule_start_us=self.schedule_start_us, started_us=self.started_us,
                          finished_us=self.finished_us, outcome=self.outcome, error=self.error)

    def producer_document(self) -> dict:
        """report.json's ``producer`` object (`impulse.loadtest.via.report.producer_section`)."""
        return producer_section(self.producer_run().to_dict())

    def summary(self) -> dict:
        out = super().summary()
        out["batches"] = len(self.pipeline_batches)      # the pipeline's micro-batches; the producer's: its own
        out.pop("bytes", None)                            # the producer's Arrow bytes: the pipeline's are not known
        out["via"] = self.via.get("input")
        out["pipelineTrigger"] = self.via.get("trigger")
        out["pipelineRows"] = self.via.get("rowsRead")
        out["latencySource"] = self.via.get("latencySource")
        return out

    def to_dict(self) -> dict:
        out = super().to_dict()
        origin = self.schedule_start_us or self.started_us
        out["batches"] = batch_rows(self.pipeline_batches, origin)
        out["phasesMs"] = phase_stats(self.pipeline_batches)
        for key in ("scheduleDelayMs", "deliveryMs", "scheduleDelayHistogram", "deliveryHistogram"):
            out.pop(key, None)   # the parts of the producer's latency: in its section
        out["via"] = self.via
        if self.via_latency is not None:
            out["viaLatency"] = {"definition": self.via_latency_definition, "ms": percentiles_ms(self.via_latency),
                                 "histogram": self.via_latency.to_dict()}
        out["producer"] = self.producer_document()
        return out


def producer_frame(spark, config: LoadConfig, options: Mapping[str, str]):
    """The producer's streaming DataFrame: impulse with `options` (and the run's ``--schema``) as Kafka records,
    ``value`` = the event as JSON and ``timestamp`` = its scheduled time (kafka-sink's record timestamp)."""
    reader = spark.readStream.format("impulse").options(**options)
    schema = impulse_schema_for(spark, config)
    if schema is not None:
        reader = reader.schema(schema)
    return as_records(reader.load())


def events_schema(spark, config: LoadConfig):
    """The Spark schema of the events the producer writes (impulse's, or ``--schema`` with its added columns)."""
    schema = impulse_schema_for(spark, config)
    if schema is not None:
        return schema

    return impulse_schema(config.payload_bytes)


def pipeline_source(spark, via: Via, starting: Mapping[int, int], decode_schema=None):
    """The pipeline's input: Spark's Kafka source on the input topic from `starting`; with `decode_schema` the
    events parsed from the values (``from_json``: the columns of that schema) instead of the Kafka columns."""
    frame = spark.readStream.format("kafka").options(**via.source_options(starting)).load()
    return frame if decode_schema is None else decode(frame, decode_schema)


def kafka_columns(events, topic: str):
    """`events` in the columns Spark's Kafka source gives the pipeline (``key``, ``value``, ``topic``, ``partition``,
    ``offset``, ``timestamp``, ``timestampType``), the value as the producer writes it (`as_records`): what the
    pipeline would read, for the plan checks and the warm pipeline."""
    records = as_records(events)
    return records.select(F.lit(None).cast("binary").alias("key"), F.col("value").cast("binary").alias("value"),
                          F.lit(topic).alias("topic"), F.lit(0).alias("partition"), F.lit(0).cast("long").alias("offset"),
                          "timestamp", F.lit(0).alias("timestampType"))


def session_master(config: LoadConfig) -> str:
    """The master of the session the harness makes for `config`: with real-time mode and the default master
    (``local[*]``), ``local[N]`` with a task slot for every input partition and every producer partition besides
    (real-time mode keeps a task running per input partition for the whole batch); else ``config.master``. The
    input topic must exist (`prepare_topics`)."""
    if config.via is None or config.remote is not None or config.master != DEFAULT_MASTER:
        return config.master
    trigger = parse_pipeline_trigger(config.pipeline_trigger or config.trigger)
    if trigger.kind != "realTime":
        return config.master

    needed = _input_slots(parse_via(config.via, config.via_options), config)
    return f"local[{max(needed, os.cpu_count() or 1)}]"


def _output_frame(frame, sink: str):
    """What goes to a Kafka sink: the `frame` without the Kafka source's ``topic`` and ``partition`` columns (the
    sink's ``topic`` option says where the output goes, not the input's), and for Spark's ``kafka`` format, which
    needs a ``value``, the row as JSON when the frame has none."""
    if sink not in KAFKA_SINKS:
        return frame
    frame = frame.drop("topic", "partition")
    if sink == "kafka" and "value" not in frame.columns:
        frame = frame.select(*([F.col("key").cast("string").alias("key")] if "key" in frame.columns else []),
                             F.to_json(F.struct(*[F.col(c) for c in frame.columns if c != "key"])).alias("value"))
    return frame



def _sink_client(options: Mapping[str, str]) -> dict[str, str]:
    """A Kafka sink's client settings (``kafka.*`` options, prefix removed) for the harness's own consumer."""
    producer_only = ("linger.ms", "batch.", "compression", "acks", "enable.idempotence", "queue.", "message.timeout")
    return {k[len("kafka."):]: v for k, v in options.items()
            if k.lower().startswith("kafka.") and not k[len("kafka."):].lower().startswith(producer_only)}


def prepare_topics(via: Via, config: LoadConfig) -> str | None:
    """Before any load: reach the input topic (created with ``config.create_topic`` partitions when missing and
    asked), and for a Kafka pipeline sink its output topic (created likewise, ``message.timestamp.type=
    LogAppendTime``). Returns the output topic's timestamp type (None without a Kafka sink). `LoadError` when a
    topic is missing or the cluster cannot be reached."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 - the kafka extra's client
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - the kafka extra's client


    wanted = [(via.client_config, via.topic, "--via", {})]
    if config.sink in KAFKA_SINKS:
        topic = sink_option(config.options, "topic")
        servers = sink_option(config.options, "kafka.bootstrap.servers")
        if not topic or not servers:
            raise LoadError(f"{config.sink}: the pipeline's Kafka sink needs the options kafka.bootstrap.servers and "
                            "topic (--option topic=NAME): the harness reads that topic back")
        wanted.append(({"bootstrap.servers": servers, **_sink_client(config.options)}, topic, "--option topic",
                       {"message.timestamp.type": LOG_APPEND_TIME}))
    kind = None
    for client, topic, flag, topic_config in wanted:
        watch = HandshakeWatch()
        admin = AdminClient({**client, "error_cb": watch})
        try:
            _reach(admin, watch, client, "--via-option" if flag == "--via" else "--option")
            if config.create_topic is not None:
                create_topic(admin, topic, config.create_topic, config=topic_config, exist_ok=True)
            found = admin.list_topics(topic, timeout=15).topics.get(topic)
            if found is None or found.error is not None:
                raise LoadError(f"{flag}: topic '{topic}' does not exist at {client['bootstrap.servers']}; create it "
                                "or pass --create-topic N")
            if topic_config:
                kind = timestamp_type(admin, topic)
        except KafkaException as exc:
            raise LoadError(f"{flag}: Kafka at {client['bootstrap.servers']}: {exc.args[0].str()}") from None
    return kind


def _reach(admin, watch: HandshakeWatch, client: Mapping[str, str], flag: str) -> None:
    """Reach the cluster of `admin` (an ``AdminClient`` whose ``error_cb`` is `watch`) within the sink's check time;
    a refused TLS or SASL handshake is a `LoadError` naming ``FLAG kafka.<the setting to fix>`` (an address the
    broker's certificate does not name: ``--via`` or ``--option kafka.bootstrap.servers``)."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 - the kafka extra's client

    try:
        admin.list_topics(timeout=CHECK_TIMEOUT_S)
    except KafkaException as exc:
        admin.poll(0)  # serve the error callbacks librdkafka queued meanwhile
        refused = watch.error(dict(client), client["bootstrap.servers"])
        if refused is None:
            raise
        name = "--via" if (flag, refused.option) == ("--via-option", "kafka.bootstrap.servers") \
            else f"{flag} {refused.option}"
        raise LoadError(f"{name}: {refused.expected}") from exc


@contextmanager
def _quiet_jvm_logs(spark, quiet: bool, settle_s: float = 10.0) -> Iterator[None]:
    """With `quiet`, Spark's JVM logs off while the harness stops its own queries after a completed run, until no
    stage runs any more (at most `settle_s`): stopping a real-time batch interrupts its Kafka tasks, which log an
    ERROR and an InterruptException trace per task although nothing went wrong. A classic session only."""
    if not quiet or type(spark).__module__.startswith("pyspark.sql.connect"):
        yield
        return
    jvm = spark.sparkContext._jvm
    level = str(jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel())
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield
        deadline = time.monotonic() + settle_s
        tracker = spark.sparkContext.statusTracker()
        while tracker.getActiveStageIds() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        spark.sparkContext.setLogLevel(level)


def _stop_quietly(query) -> None:
    try:
        if query is not None and query.isActive:
            query.stop()
    except Exception:  # noqa: BLE001 - stopping after a failure: the failure is the message
        pass


@dataclass
class ViaExecution(Execution):
    """The load through Kafka as it ran: the `Execution` of the producer (its collector) and the pipeline (its query),
    with the pipeline's counts (`via_info`, report.json's ``via``), batches and latency (`figures`: `ViaResult`'s
    fields) and the input topic's offsets before the run (`input_start`)."""

    via_info: dict = field(default_factory=dict)
    pipeline_batches: list[PipelineBatch] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    input_start: dict[int, int] = field(default_factory=dict)


@dataclass
class ThroughKafka:
    """The production topology: a producer query writes the events into the input topic, the pipeline reads them
    with Spark's Kafka source; latency is read off the output topic (a Kafka sink) or the sink's metrics file."""

    warm_sink: str = "kafka-sink"
    via: Via | None = None
    trigger: PipelineTrigger | None = None
    mode_note: str | None = None
    output_kind: str | None = None
    sink_options: dict = field(default_factory=dict)
    producer_options: dict = field(default_factory=dict)
    prefill_options: dict | None = None
    foreach: Any = None                # --foreach-batch's resolved `Transform` (None: a sink)
    writer: Any = None                 # --foreach-batch's function, loaded on the session

    def preflight(self, run: Run, given_query: bool) -> None:
        config = run.config
        run.unnamed = "the pipeline"
        if config.via is None:
            raise LoadError("the Kafka topology needs --via kafka://HOST:PORT/TOPIC")
        self.via = parse_via(config.via, config.via_options)
        self.trigger = parse_pipeline_trigger(config.pipeline_trigger or config.trigger,
                                              "--pipeline-trigger" if config.pipeline_trigger else "--trigger")
        if self.trigger.kind == "realTime" and run.mode == "append":
            # real-time mode refuses append (STREAMING_REAL_TIME_MODE.OUTPUT_MODE_NOT_SUPPORTED); it allows update,
            # which for a query without an aggregation writes the same rows
            run.mode = "update"
            self.mode_note = "update (real-time mode takes no append; without an aggregation the same rows)"
        if run.mode not in OUTPUT_MODES:
            raise LoadError(f"--output-mode {run.mode!r}: allowed: {', '.join(OUTPUT_MODES)}")
        run.check_mode = "append" if self.mode_note else run.mode  # real-time mode's update: the same rows as append
        self.producer_options = impulse_options(config)
        if config.prefill:
            self.prefill_options = _prefill_options(config)
        self.output_kind = prepare_topics(self.via, config)
        if config.foreach_batch is not None:   # the user's writer: nothing to check but its module and function
            self.foreach = resolve_foreach_batch(config.foreach_batch)
            self.sink_options = {}
        elif config.sink != "kafka":
            target = preflight(config.sink, config.options, config.payload_bytes, None,
                               output_known=run.resolved is None and not given_query)
            self.sink_options = dict(target.options)
        else:
            self.sink_options = dict(config.options)
        run.reader = via_readback(config, self.sink_options, run.check_mode, run.receiver) if config.check else None

    def session(self, run: Run):
        return make_session(session_master(run.config), remote=run.config.remote, kafka=True)

    def pipeline_input(self, run: Run, events):
        """Impulse events as the pipeline would read them from the input topic (its Kafka or decoded columns)."""
        return events if run.config.decode else kafka_columns(events, self.via.topic)

    def output(self, run: Run, applied):
        return _output_frame(applied, run.config.sink)

    def inspect(self, run: Run, applied, output) -> None:
        if self.foreach is not None:
            self.writer = writer_function(run.spark, self.foreach)
        else:
            check_format(run.spark, run.config.sink)
        if self.trigger.kind == "realTime":
            refuse_real_time(run.spark, applied, f"--pipeline-trigger {self.trigger.text}")
            _check_slots(run.spark, self.via, run.config)

    def expectation(self, run: Run):
        return via_expectation(run.spark, run.config, self.via, run.query, self.producer_options,
                               read_schema=run.schema, decode_schema=self._decode_schema(run))

    def warms(self, run: Run) -> bool:
        return run.query is not None and self.trigger.kind != "realTime"  # real-time mode runs no Python

    def default_label(self, run: Run) -> str:
        return f"impulse-load via {self.via.topic}: {run.config.sink}, trigger {self.trigger.text}"

    def _decode_schema(self, run: Run):
        return events_schema(run.spark, run.config) if run.config.decode else None

    def execute(self, run: Run) -> Execution:
        config, spark, via, workdir, display = run.config, run.spark, self.via, run.workdir, run.display
        output_topic = sink_option(config.options, "topic") if config.sink in KAFKA_SINKS else None
        output_client = ({"bootstrap.servers": sink_option(config.options, "kafka.bootstrap.servers"),
                          **_sink_client(config.options)} if output_topic else None)
        sink_options = dict(self.sink_options)
        metrics_path = None
        if config.sink in project_sinks() and config.sink != "kafka-sink" and sink_option(sink_options, "metricsPath") is None:
            metrics_path = sink_options["metricsPath"] = os.path.join(workdir, "pipeline-metrics.jsonl")
        input_start = committed_ends(via.client_config, via.topic)
        output_start = committed_ends(output_client, output_topic) if output_topic else {}
        if run.reader is not None:
            run.reader.prepare()
        elif config.check:
            run.reader = OutputTopicReadback(output_client, output_topic, output_start)
        if self.prefill_options is not None:
            if display is not None:
                display.line(f"prefill: {config.prefill:,} events into {via.topic}…")
            _prefill(spark, config, via, self.prefill_options, workdir, run.stop)
        watch, outcome, error, started_us = self._load(run, sink_options, input_start)
        batches = pipeline_batches(watch.progress + ([json.loads(p.json) for p in watch.pipeline.recentProgress]
                                                     if watch.pipeline is not None else []))
        assign_lag(batches, [(watch.pipeline_started_us + round(s * 1e6), lag) for s, lag in watch.lag_samples])
        via_info = {"input": f"kafka://{via.bootstrap}/{via.topic}", "trigger": self.trigger.text,
                    "decode": config.decode, "outputMode": self.mode_note or run.mode,
                    "rowsRead": sum(b.rows for b in batches), "pipelineBatches": len(batches),
                    "prefill": watch.drain_info(), "lagSamples": watch.lag_samples[-2000:], "outputTopic": output_topic}
        output = (output_client, output_topic, output_start, self.output_kind) if output_topic else None
        figures = _pipeline_figures(batches, via_info, watch.collector, run.event_time_column or "timestamp",
                                    config.sink, output, metrics_path)
        return ViaExecution(watch.collector, outcome, error, watch.pipeline, started_us, via_info,
                            batches, figures, input_start)

    def _load(self, run: Run, sink_options: Mapping[str, str], input_start: Mapping[int, int]) -> tuple[Watch, str, str | None, int]:
        """The producer and the pipeline started (the pipeline later for ``availableNow``), watched to the run's end
        and stopped: the `Watch`, the run's outcome and error, and when the load started (epoch µs)."""
        config, spark, via, workdir = run.config, run.spark, self.via, run.workdir
        prefilled = committed_ends(via.client_config, via.topic)
        producer_metrics = os.path.join(workdir, "producer-metrics.jsonl")

        def start_producer():
            writer = (producer_frame(spark, config, self.producer_options).writeStream.format("kafka-sink")
                      .options(**via.producer_options(), metricsPath=producer_metrics)
                      .option("checkpointLocation", os.path.join(workdir, "producer"))
                      .queryName(f"impulse-load-producer-{os.getpid()}-{int(time.time() * 1000)}")
                      .trigger(processingTime=f"{round(config.trigger_s * 1000)} milliseconds"))
            return writer.start()

        def start_pipeline():
            frame = pipeline_source(spark, via, input_start, self._decode_schema(run))
            if run.query is not None:
                frame = run.query(frame)
            stream = _output_frame(frame, config.sink).writeStream
            stream = (stream.foreachBatch(self.writer) if self.writer is not None
                      else stream.format(config.sink).options(**sink_options))
            writer = (stream.outputMode(run.mode)
                      .option("checkpointLocation", os.path.join(workdir, "pipeline"))
                      .queryName(f"impulse-load-pipeline-{os.getpid()}-{int(time.time() * 1000)}"))
            return self.trigger.apply(writer).start()

        queries: list = []
        try:
            started_us = now_us()
            pipeline = None
            if self.trigger.kind != "availableNow":
                try:
                    pipeline = start_pipeline()
                except Exception as exc:  # noqa: BLE001 - Spark refused the query (analysis): before any load
                    if isinstance(exc, LoadError):
                        raise
                    target = (f"--foreach-batch {config.foreach_batch}" if self.writer is not None
                              else f"--sink {config.sink}")
                    raise LoadError(f"the pipeline ({target}, trigger {self.trigger.text}, output mode "
                                    f"{run.mode}): {exception_text(exc)}") from None
                queries.append(pipeline)
            producer = start_producer()
            queries.append(producer)
            collector = Collector(producer, total_events=config.total_events, partitions=config.partitions,
                                  payload_bytes=config.payload_bytes, metrics_path=producer_metrics,
                                  commit_id=str(producer.id), stages=config.stages)
            watch = Watch(config, via, self.trigger, collector, producer, pipeline, run.display, run.stop, prefilled,
                          started_us, config.prefill)
            if run.exporter is not None:  # --metrics-port: the producer's series and the pipeline's lag
                run.exporter.attach(collector, config, run_id=str((pipeline or producer).id),
                                    pipeline_lag=watch.last_lag)
            outcome, error = watch.run(start_pipeline, queries)
            with _quiet_jvm_logs(spark, outcome == "completed"):
                for query in reversed(queries):
                    _stop_quietly(query)
            collector.poll(final=True)
            return watch, outcome, error, started_us
        finally:
            for query in queries:
                _stop_quietly(query)

    def result(self, run: Run, execution: ViaExecution, common: dict) -> ViaResult:
        return ViaResult(**common, via=execution.via_info, producer_options=self.producer_options,
                         prefill_options=self.prefill_options, pipeline_batches=execution.pipeline_batches,
                         **execution.figures)

    def check(self, run: Run, execution: ViaExecution):
        prefill = self.prefill_options
        runs = ([(prefill, epoch_us(prefill["startTime"]))] if prefill is not None else []) + [
            (self.producer_options, execution.collector.schedule_start_us)]
        check = run_via_check(run.spark, self.via, run.query, run.expected, run.reader, run.check_mode,
                              rule=run.final_rule,
                              watermark=last_watermark(execution.query) if execution.query is not None else None,
                              render=partial(_output_frame, sink=run.config.sink),
                              decode_schema=self._decode_schema(run), read_schema=run.schema, runs=runs,
                              input_start=execution.input_start, unique=columns(run.config.check_unique))
        if run.config.sink == "kafka":
            check = replace(check, basis=check.basis + "; the record values of the output topic")
        return check


def run_via_kafka(config: LoadConfig, *, transform: Transform | None = None, output_mode: str | None = None,
                  event_time_column: str | None = None, spark=None, display=None, stop: Any = None,
                  label: str | None = None, receiver=None, exporter: Any = None) -> ViaResult:
    """Run the topology of the module docstring (`ThroughKafka` in `impulse.loadtest.load.orchestrate.orchestrate`);
    raises `LoadError` before any load for a bad value, a missing topic or an unreachable cluster.

    The topology's settings come from `config`: ``via``, ``via_options``, ``decode``, ``pipeline_trigger``
    (default: ``trigger``), ``prefill``; the pipeline writes to ``sink`` with ``options``.
    `transform`: the user's function, DataFrame → DataFrame (default: the config's ``--transform`` / ``--sql``,
    `impulse.loadtest.query.transform`; without one the input as it is); it receives the Kafka source's DataFrame, or
    with ``decode`` the events. `output_mode`: ``append``, ``update`` or ``complete`` (default: the config's, else
    append). `event_time_column`: the output's field that carries the scheduled time (default: the config's
    ``--event-time-column``, else ``timestamp``). `spark`: a
    session with Spark's Kafka connector (`connectors.session.spark_kafka_session`; default: one is made).
    `stop`: as for `impulse.loadtest.load.run.run_load`. The result keeps the impulse options of the events written
    (`ViaResult.producer_options`, `ViaResult.prefill_options`) and the output topic (``via["outputTopic"]``,
    read back with `impulse.loadtest.via.output_latency.read_output`): what an exact check of the output needs.
    With ``config.check`` the result's ``check`` is that check (`impulse.loadtest.via.check`); `receiver`: the
    embedded receiver a webhook-sink without url writes to (recording requests), read back by the check. `exporter`:
    a `impulse.loadtest.reports.prometheus.Exporter` serving the producer's live metrics and the pipeline's lag."""
    return orchestrate(config, ThroughKafka(), spark=spark, display=display, stop=stop, receiver=receiver,
                       label=label, exporter=exporter, query=transform, output_mode=output_mode, event_time_column=event_time_column)


def _prefill_options(config: LoadConfig) -> dict[str, str]:
    """The prefill's impulse options: its events as fast as the producer writes them (no ``rateStages`` nor rate curve); with
    ``--check`` pinned to now, so that the check can read them again."""
    paced = {"ratestages", *(o.lower() for o in CURVE_OPTIONS)}
    flat = {k: v for k, v in config.source_options.items() if k.lower() not in paced}
    options = impulse_options(replace(config, rate=_PREFILL_RATE, duration_s=config.prefill / _PREFILL_RATE,
                                      source_options=flat))
    options["limit"] = str(config.prefill)
    if config.check:
        options["startTime"] = iso_us(now_us())
    return options


def _input_slots(via: Via, config: LoadConfig) -> int:
    """The task slots real-time mode needs: one per input partition (queried from the topic) and per producer
    partition."""
    return len(end_offsets(via.client_config, via.topic)) + config.partitions


def _check_slots(spark, via: Via, config: LoadConfig) -> None:
    """Real-time mode runs one task per input partition for the whole of each batch: with the producer's tasks
    beside them, a session with fewer task slots than both would stall. `LoadError` saying what to change."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return  # a Connect client cannot see the server's slots

    needed = _input_slots(via, config)
    slots = spark.sparkContext.defaultParallelism
    if slots < needed:
        raise LoadError(f"--pipeline-trigger realTime: real-time mode keeps a task running per input partition for "
                        f"the whole batch; with the producer's {config.partitions} partitions that needs {needed} task "
                        f"slots and the session has {slots}: run with --master local[{needed}] (slots may exceed "
                        "the cores) or fewer partitions")


def _prefill(spark, config: LoadConfig, via: Via, options: Mapping[str, str], workdir: str, stop: Any) -> None:
    """Write the prefill's events into the input topic and wait until they are committed."""
    query = (producer_frame(spark, config, options).writeStream.format("kafka-sink")
             .options(**via.producer_options())
             .option("checkpointLocation", os.path.join(workdir, "prefill")).trigger(availableNow=True).start())
    try:
        while query.isActive:
            if stop is not None and stop.is_set():
                raise LoadError("stopped during the prefill")
            time.sleep(_POLL_S)
        exc = query.exception()
        if exc is not None:
            raise LoadError(f"prefill: {exception_text(exc)}")
    finally:
        _stop_quietly(query)


def _producer_commits(collector: Collector) -> dict[int, tuple[Any, Any]]:
    """Per impulse partition: the end counters (ascending) of the producer's batches and their commit times (µs)."""
    ends: dict[int, list[tuple[int, int]]] = {}
    for batch in collector.batches:
        for partition, counter in enumerate(batch.end_counters):
            ends.setdefault(partition, []).append((counter, batch.ack_us))
    out = {}
    for partition, pairs in ends.items():
        pairs.sort()
        out[partition] = (np.array([c for c, _ in pairs], dtype=np.int64),
                          np.array([a for _, a in pairs], dtype=np.int64))
    return out


def _pipeline_figures(batches: list[PipelineBatch], via_info: dict, collector: Collector, column: str, sink: str,
                      output: tuple | None, metrics_path: str | None) -> dict:
    """The pipeline's latency (`ViaResult`'s fields: the run's latency and its definition, the latency through Kafka
    beside it), its output rows and latency source into `via_info`, and each of `batches` its output's latency.

    `output`: (client, topic, offsets before the run, timestamp type) of a Kafka sink's output topic, read back: the
    run's latency is the pipeline's own part (input committed → output appended) where the records carry the
    event's ``subtask_index`` and ``counter``, else `column` → output appended; `metrics_path`: a project sink's
    metrics file (its rows' ``timestamp`` → its acknowledgement, per batch)."""
    event_time = "via-event-time" if column != "timestamp" else "via-end-to-end"
    if output is not None:
        client, topic, start, kind = output
        records = read_output(client, topic, start)
        start_us = collector.schedule_start_us
        # the values carry milliseconds (to_json): the first event's time, truncated, is the run's start
        from_us = None if start_us is None else start_us - start_us % 1000
        measured: OutputLatency = output_latency(records, column, from_us)
        index, values = pipeline_part_values(records, _producer_commits(collector), from_us, column)
        figures = {"pipeline_latency": measured.histogram, "latency_definition": event_time}
        if len(index):
            part = LatencyHistogram()
            part.record(values)
            figures = {"pipeline_latency": part, "latency_definition": "pipeline", "via_latency": measured.histogram,
                       "via_latency_definition": event_time}
            via_info["pipelinePartMs"] = percentiles_ms(part)
        else:
            index, values = output_latency_values(records, column, from_us)
        attribute_latency(batches, records.times_ms[index] * 1000, values)
        count_output(batches, records.times_ms * 1000)
        via_info.update(outputRows=len(records), latencySource=(
            f"output topic's {measured.clock} − the value's '{column}' field"), outputLatency=measured.to_dict())
        if kind != LOG_APPEND_TIME:
            via_info["latencyNote"] = (f"topic '{topic}' has message.timestamp.type={kind}: the broker time is the "
                                       "writer's CreateTime")
        return figures
    if metrics_path is not None:
        latency, out_rows = _metrics_latency(metrics_path, {b.batch_id: b for b in batches})
        via_info.update(outputRows=out_rows, latencySource=f"{sink}'s acknowledgement − the rows' 'timestamp'")
        return {"pipeline_latency": latency, "latency_definition": "end-to-end"}
    via_info.update(outputRows=None, latencySource="none: the sink cannot be read back")
    return {"pipeline_latency": LatencyHistogram(), "latency_definition": event_time}


def _metrics_latency(path: str, batches: Mapping[int, PipelineBatch]) -> tuple[LatencyHistogram, int]:
    """The merged latency histogram and row count of a project sink's metrics file; each of `batches` (by id) gets
    its line's latency and rows."""
    histogram, rows = LatencyHistogram(), 0
    if os.path.exists(path):
        with open(path, "rb") as source:
            for line in source:
                if line.strip():
                    record = json.loads(line)
                    one = LatencyHistogram.from_dict(record.get("latency"))
                    histogram.merge(one)
                    rows += int(record.get("rows", 0))
                    batch = batches.get(int(record.get("batchId", -1)))
                    if batch is not None:
                        batch.output_rows = int(record.get("rows", 0))
                        batch.latency_data = one.to_dict() if one.count else None
    return histogram, rows
