"""What a load run is asked to do (`LoadConfig`, `RampConfig`).

`LoadConfig` is the flat form the flags, the TOML keys and the Python API give (and report.json's ``config``);
its parts, each validated where it is defined, are `SourceSettings` (the events), `PipelineSettings` (the
query), `SinkSettings` (the target and ``--check``), `ViaSettings` (the Kafka topology) and `ReportSettings`
(what the run is judged by); `LoadConfig.validate` checks every part, then the rules that join two of them.

Every rate is in events/s over all partitions, every duration in seconds (float); the text forms a
user writes are parsed by `impulse.loadtest.settings.units` (re-exported here for existing callers).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Mapping

from impulse.loadtest.settings.curve import curve_plan
from impulse.loadtest.settings.stages import STAGES_OPTION, StagePlan, parse_stages
from impulse.loadtest.settings.thresholds import Threshold, parse_threshold
from impulse.loadtest.settings.units import (
    LoadError,
    parse_columns,
    parse_option,
    parse_ramp,
    parse_rate,
    parse_seconds,
)
from impulse.loadtest.settings.via import parse_pipeline_trigger, parse_via

__all__ = ["LoadConfig", "SourceSettings", "PipelineSettings", "SinkSettings", "ViaSettings", "ReportSettings", "PARTS",
           "SOURCES", "OUTPUT_MODES", "FOREACH_BATCH", "RampConfig", "LoadError", "parse_rate", "parse_seconds",
           "parse_ramp", "parse_option",
           "DEFAULT_SINK", "DEFAULT_RATE", "DEFAULT_DURATION_S", "DEFAULT_PARTITIONS", "DEFAULT_PAYLOAD_BYTES",
           "DEFAULT_TRIGGER", "DEFAULT_MAX_LATENCY_S", "DEFAULT_STEP_DURATION_S", "DEFAULT_MASTER"]

SOURCES = ("impulse", "nexmark", "replay")
OUTPUT_MODES = ("append", "update", "complete")
FOREACH_BATCH = "foreachBatch"   # the sink of a run whose output goes to the user's --foreach-batch function


def _stages(source_options: Mapping[str, str], duration_s: float, partitions: int) -> StagePlan | None:
    """The run's changing rate: ``rateStages``, or a rate curve over `duration_s` (`settings.curve`); None."""
    text = next((v for k, v in source_options.items() if k.lower() == STAGES_OPTION.lower()), None)
    if text is None:
        return curve_plan(source_options, duration_s, partitions) if partitions >= 1 and duration_s > 0 else None
    return parse_stages(text, f"--source-option {STAGES_OPTION}")


@dataclass(frozen=True)
class SourceSettings:
    """The run's events: `source` (impulse, nexmark, or replay: a recording's rows at `rate`) at `rate` for `duration_s`
    over `partitions`, each with a
    payload of `payload_bytes` (impulse), at most `max_events_per_trigger` a micro-batch, impulse's user `schema`
    and more `source_options` (``rateStages`` among them: `impulse.loadtest.settings.stages`)."""

    source: str
    rate: float
    duration_s: float
    partitions: int
    payload_bytes: int
    max_events_per_trigger: int | None
    schema: str | None
    source_options: Mapping[str, str]

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise LoadError(f"--rate must be > 0 events/s, not {self.rate:g}")
        if not self.duration_s > 0:
            raise LoadError(f"--duration must be > 0, not {self.duration_s:g}s")
        if self.partitions < 1:
            raise LoadError(f"--partitions must be ≥ 1, not {self.partitions}")
        if self.source not in SOURCES:
            raise LoadError(f"--source {self.source!r}: the sources are {', '.join(SOURCES)}")
        if self.payload_bytes < 0:
            raise LoadError(f"--payload-bytes must be ≥ 0, not {self.payload_bytes}")
        if self.max_events_per_trigger is not None and self.max_events_per_trigger < 1:
            raise LoadError(f"--max-events-per-trigger must be ≥ 1, not {self.max_events_per_trigger}")
        self.stages  # noqa: B018 - parses, raises LoadError

    @property
    def stages(self) -> StagePlan | None:
        """The source option ``rateStages`` or ``rateCurve``, parsed (None without them)."""
        return _stages(self.source_options, self.duration_s, self.partitions)


@dataclass(frozen=True)
class PipelineSettings:
    """The streaming query: the user's `transform` or `sql` with its `output_mode` and `event_time_column`, its
    `trigger`, its checkpoint, the `warmup` before it, and the Spark it runs on (`master` or `remote`,
    with `spark_conf` and `packages`)."""

    transform: str | None
    sql: str | None
    output_mode: str | None
    event_time_column: str | None
    trigger: str
    checkpoint_dir: str | None
    warmup: bool
    master: str
    remote: str | None
    spark_conf: Mapping[str, str]
    packages: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.transform is not None and self.sql is not None:
            raise LoadError("--transform and --sql are two ways to say the same thing: give one of them")
        if self.output_mode is not None and self.output_mode not in OUTPUT_MODES:
            raise LoadError(f"--output-mode {self.output_mode!r}: Spark's output modes are {', '.join(OUTPUT_MODES)}")
        self.trigger_s  # noqa: B018 - parses, raises LoadError

    @property
    def trigger_s(self) -> float:
        return parse_seconds(self.trigger, "--trigger", allow_zero=True)


@dataclass(frozen=True)
class SinkSettings:
    """The target: the `sink` format with its `options`, a Kafka topic to create (`create_topic` partitions), and
    ``--check`` (`check`, with the user's own expected rows `expect` and the key columns `check_unique` each
    delivered once)."""

    sink: str
    options: Mapping[str, str]
    create_topic: int | None
    check: bool
    expect: str | None
    check_unique: str | None
    foreach_batch: str | None
    check_read: str | None
    check_key: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.create_topic is not None and self.create_topic < 1:
            raise LoadError(f"--create-topic must be ≥ 1 partitions, not {self.create_topic}")
        if self.expect is not None and not self.check:
            raise LoadError(f"--expect {self.expect} gives --check its expected rows: add --check")
        if self.check_unique is not None:
            parse_columns(self.check_unique, "--check-unique")
            if not self.check:
                raise LoadError(f"--check-unique {self.check_unique} adds to --check's comparison: add --check")
        for flag, given in (("--check-read", self.check_read), ("--check-key", self.check_key)):
            if given and not self.check:
                raise LoadError(f"{flag} tells --check how to read the target: add --check")
        if self.foreach_batch is not None:
            if self.sink != FOREACH_BATCH:
                raise LoadError(f"--foreach-batch {self.foreach_batch} writes the output itself, in place of a sink: "
                                f"leave out --sink {self.sink}")
            if self.options:
                raise LoadError(f"--foreach-batch {self.foreach_batch} writes the output itself: -o "
                                f"{', '.join(self.options)} would go to no writer (leave them out)")
            if self.check and self.check_read is None:
                raise LoadError(f"--check of --foreach-batch {self.foreach_batch}: give --check-read MODULE:FUNCTION, "
                                "your function(spark) returning the target as a DataFrame")
        elif self.sink == FOREACH_BATCH:
            raise LoadError(f"--sink {FOREACH_BATCH}: give your function with --foreach-batch MODULE:FUNCTION")


@dataclass(frozen=True)
class ViaSettings:
    """The production topology (`impulse.loadtest.via.kafka`): the input topic `via` with `via_options`, whether
    the pipeline sees the events `decode`-d, its own `pipeline_trigger`, and `prefill` events of backlog."""

    via: str | None
    via_options: Mapping[str, str]
    decode: bool
    pipeline_trigger: str | None
    prefill: int

    def __post_init__(self) -> None:
        if self.via is None:
            for name, given in (("--via-option", bool(self.via_options)), ("--decode", self.decode),
                                ("--pipeline-trigger", self.pipeline_trigger is not None), ("--prefill", self.prefill)):
                if given:
                    raise LoadError(f"{name} is for the Kafka topology: give --via kafka://HOST:PORT/TOPIC")
            return
        parse_via(self.via, self.via_options)
        if self.pipeline_trigger is not None:
            parse_pipeline_trigger(self.pipeline_trigger)
        if self.prefill < 0:
            raise LoadError(f"--prefill must be ≥ 0 events, not {self.prefill}")


@dataclass(frozen=True)
class ReportSettings:
    """How the run is judged: the p99 bound `max_latency_s` of a sustained rate, how long it may drain
    (`drain_timeout_s`), the ``--threshold`` checks and whether a failed one aborts the run (`abort_on_fail`)."""

    max_latency_s: float
    drain_timeout_s: float | None
    thresholds: tuple[str, ...]
    abort_on_fail: bool

    def __post_init__(self) -> None:
        if not self.max_latency_s > 0:
            raise LoadError(f"--max-latency must be > 0, not {self.max_latency_s:g}s")
        if self.drain_timeout_s is not None and self.drain_timeout_s < 0:
            raise LoadError(f"--drain-timeout must be ≥ 0, not {self.drain_timeout_s:g}s")
        for text in self.thresholds:
            parse_threshold(text)


#: The parts of a `LoadConfig`: every field of it belongs to exactly one.
PARTS = (SourceSettings, PipelineSettings, SinkSettings, ViaSettings, ReportSettings)


def _part(part: type, config: LoadConfig):
    """`config`'s values of `part`, validated by it."""
    return part(**{f.name: getattr(config, f.name) for f in fields(part)})


@dataclass(frozen=True)
class LoadConfig:
    """One load run: impulse events at `rate` for `duration_s` into `sink`.

    The run sends exactly ``round(rate × duration_s)`` events (impulse's ``limit``; with the source option
    ``rateStages``, the events its stages schedule, see `impulse.loadtest.settings.stages`): the stream runs
    dry when the duration is over, the harness waits until the sink has committed the last event
    (at most `drain_timeout_s`, default max(30 s, duration)), then stops the query between batches.
    """

    sink: str = "webhook-sink"
    options: Mapping[str, str] = field(default_factory=dict)   # passed to the sink as is
    rate: float = 20_000.0                # events/s over all partitions (impulse eventsPerSecond)
    duration_s: float = 30.0              # seconds of events (impulse limit = rate × duration)
    partitions: int = 2                   # impulse numPartitions = Spark tasks per batch
    payload_bytes: int = 64               # impulse payloadBytes
    trigger: str = "1s"                   # processing-time trigger interval ("0": back to back)
    max_events_per_trigger: int | None = None
    max_latency_s: float = 5.0            # the p99 bound of `impulse.loadtest.measure.bound.assess`
    drain_timeout_s: float | None = None
    checkpoint_dir: str | None = None     # kept, and resumed when it holds a checkpoint; default: a temporary one
    warmup: bool = True                   # warm Python workers, then the pipeline itself (`warm_pipeline`)
    master: str = "local[*]"              # used only when the harness makes the Spark session
    spark_conf: Mapping[str, str] = field(default_factory=dict)  # --conf: settings of the session the harness makes
    packages: tuple[str, ...] = ()        # --packages: Maven coordinates, joined into spark.jars.packages
    schema: str | None = None             # impulse's user schema (DDL): realistic events; None: the default columns
    source_options: Mapping[str, str] = field(default_factory=dict)  # more impulse options (fields.*, seed, …)
    thresholds: tuple[str, ...] = ()      # pass/fail checks, `impulse.loadtest.settings.thresholds` (e.g. "p99<1s")
    abort_on_fail: bool = False           # stop the run once a threshold has failed for good
    remote: str | None = None             # Spark Connect URL (sc://host:port): a client session instead of `master`
    create_topic: int | None = None       # kafka-sink: create the option topic with this many partitions if missing
    source: str = "impulse"               # the streaming source: impulse or nexmark (`query.transform`)
    transform: str | None = None          # MODULE:FUNCTION applied to the events before the sink (nexmark:qN built in)
    sql: str | None = None                # or a query over the temporary view `events`
    output_mode: str | None = None        # append | update | complete; None: append (a Nexmark query: its own mode)
    event_time_column: str | None = None  # the output's event time (e.g. window.end): latency from it to the ack
    check: bool = False                   # read the target back and compare with the expected answer (`check`)
    expect: str | None = None             # MODULE:FUNCTION: --check's expected rows, the user's own (`expect`)
    check_unique: str | None = None       # COLS: --check also requires each key once in the target (`check.unique`)
    foreach_batch: str | None = None      # MODULE:FUNCTION(batch_df, batch_id) in place of a sink (sink=foreachBatch)
    check_read: str | None = None         # MODULE:FUNCTION(spark) → the target as a DataFrame, for --check
    check_key: tuple[str, ...] = ()       # --check compares the final state per these columns (an upsert target)
    # -- the production topology (`impulse.loadtest.via.kafka`): impulse → a Kafka topic → the pipeline → the sink
    via: str | None = None                # kafka://HOST:PORT/TOPIC: the input topic; None: impulse feeds the sink
    via_options: Mapping[str, str] = field(default_factory=dict)  # kafka.* client settings, Kafka source options
    decode: bool = False                  # the pipeline sees the events parsed from the values, not Kafka's columns
    pipeline_trigger: str | None = None   # the pipeline's trigger (`via_kafka.parse_pipeline_trigger`); None: trigger
    prefill: int = 0                      # events written into the input topic before the pipeline starts

    def __post_init__(self) -> None:
        stages = self.stages
        if stages is not None:  # the stages set the run's rate (their mean) and duration (a curve's: --duration)
            object.__setattr__(self, "rate", stages.mean_rate)
            object.__setattr__(self, "duration_s", stages.duration_s)

    @property
    def stages(self) -> StagePlan | None:
        """The source option ``rateStages`` or ``rateCurve`` (over `duration_s`), parsed (None without them): the
        rate then changes within the run, `rate` is the stages' mean and `duration_s` their length."""
        return _stages(self.source_options, self.duration_s, self.partitions)

    @property
    def total_events(self) -> int:
        stages = self.stages
        if stages is not None:
            return stages.total_events(self.partitions)
        return max(1, round(self.rate * self.duration_s))

    @property
    def trigger_s(self) -> float:
        return parse_seconds(self.trigger, "--trigger", allow_zero=True)

    @property
    def drain_s(self) -> float:
        return self.drain_timeout_s if self.drain_timeout_s is not None else max(30.0, self.duration_s)

    @property
    def source_settings(self) -> SourceSettings:
        """The events: which source, how many, how fast (validated)."""
        return _part(SourceSettings, self)

    @property
    def pipeline_settings(self) -> PipelineSettings:
        """The user's query and the streaming query around it (validated)."""
        return _part(PipelineSettings, self)

    @property
    def sink_settings(self) -> SinkSettings:
        """Where the output goes and whether it is read back (validated)."""
        return _part(SinkSettings, self)

    @property
    def via_settings(self) -> ViaSettings:
        """The production topology through Kafka (validated)."""
        return _part(ViaSettings, self)

    @property
    def report_settings(self) -> ReportSettings:
        """What the run is judged by (validated)."""
        return _part(ReportSettings, self)

    def validate(self) -> None:
        """Raise `LoadError` for a value no run can use: each part validates its own values where it is defined
        (`PARTS`), then the rules that join two parts."""
        for part in PARTS:
            _part(part, self)
        if self.source != "impulse" and self.schema:
            raise LoadError(f"--schema shapes impulse events; {self.source} events have their own schema (leave "
                            f"--schema out with --source {self.source})")
        if self.via is None:
            return
        if self.abort_on_fail:
            raise LoadError("--abort-on-fail watches a direct run; with --via the thresholds are checked after the run")
        if self.checkpoint_dir is not None:
            raise LoadError(f"--checkpoint {self.checkpoint_dir} resumes a direct run; with --via the producer and the "
                            "pipeline are two queries, each on a new checkpoint: leave out --checkpoint")
        if self.source != "impulse":
            raise LoadError(f"--source {self.source} with --via: the producer writes impulse events into the topic; "
                            "run a Nexmark query without --via")
        if self.pipeline_trigger is not None and parse_pipeline_trigger(self.pipeline_trigger).kind == "realTime" \
                and self.sink != "kafka":
            raise LoadError(f"--pipeline-trigger {self.pipeline_trigger}: real-time mode writes to Spark's kafka format "
                            f"only (--sink kafka), not {self.sink}")

    def parsed_thresholds(self) -> list[Threshold]:
        """The `thresholds`, parsed; raises `LoadError` for a bad one."""
        return [parse_threshold(text) for text in self.thresholds]


@dataclass(frozen=True)
class RampConfig:
    """Step mode: rates ``start, start + step, …`` up to `maximum`, each for `step_duration_s`.

    With `search` (``--ramp search:LO:HI``): a search between `start` (LO) and `maximum` (HI) instead, to within
    `precision` (``--ramp-precision``, a share of the rate: 0.05 is 5 %; `impulse.loadtest.load.ramp`); `step`
    is then unused. `min_sustained` (events/s, ``--min-sustained``): the ramp fails as a gate when its highest sustained rate is
    lower (`impulse.loadtest.load.ramp.RampResult.failures`); it must be one a step can reach (≤ the last rate)."""

    start: float
    step: float
    maximum: float
    step_duration_s: float = 10.0
    min_sustained: float | None = None
    search: bool = False
    precision: float = 0.05

    def rates(self) -> list[float]:
        """The steps' rates; a search's two ends."""
        if self.search:
            return [self.start, self.maximum]
        out, rate = [], self.start
        while rate <= self.maximum * (1 + 1e-9):
            out.append(rate)
            rate += self.step
        return out

    def validate(self) -> None:
        if self.search and not (0 < self.start < self.maximum):
            raise LoadError(f"--ramp search:LO:HI needs 0 < LO < HI (events/s), not "
                            f"search:{self.start:g}:{self.maximum:g}")
        if self.search and not 0 < self.precision < 1:
            raise LoadError(f"--ramp-precision must be a share between 0 and 1 (e.g. 0.05 or 5%), not "
                            f"{self.precision:g}")
        if not self.search and not (self.start > 0 and self.step > 0 and self.maximum >= self.start):
            raise LoadError(f"--ramp needs start > 0, step > 0 and max ≥ start (events/s), not "
                            f"{self.start:g}:{self.step:g}:{self.maximum:g}")
        if not self.step_duration_s > 0:
            raise LoadError(f"--step-duration must be > 0, not {self.step_duration_s:g}s")
        if self.min_sustained is not None and not 0 < self.min_sustained <= self.rates()[-1]:
            raise LoadError(f"--min-sustained {self.min_sustained:,.0f} events/s: no step of --ramp "
                            f"{self.start:g}:{self.step:g}:{self.maximum:g} can sustain it (its steps go up to "
                            f"{self.rates()[-1]:,.0f} events/s); give a rate > 0 and ≤ the ramp's last step")


DEFAULT_SINK = LoadConfig.sink
DEFAULT_RATE = LoadConfig.rate
DEFAULT_DURATION_S = LoadConfig.duration_s
DEFAULT_PARTITIONS = LoadConfig.partitions
DEFAULT_PAYLOAD_BYTES = LoadConfig.payload_bytes
DEFAULT_TRIGGER = LoadConfig.trigger
DEFAULT_MAX_LATENCY_S = LoadConfig.max_latency_s
DEFAULT_STEP_DURATION_S = RampConfig.step_duration_s
DEFAULT_MASTER = LoadConfig.master
