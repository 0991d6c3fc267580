"""The run's events: the options of its source (``impulse`` or ``nexmark``) and the ``--schema`` of impulse's.

Both are checked the way the source will check them, before any load: a problem is one `LoadError`.
"""

from __future__ import annotations

from pyspark.sql.types import StructType

from connectors.errors import ConnectorError
from impulse.loadtest.query.transform import exception_text
from impulse.loadtest.settings.config import LoadConfig, LoadError
from impulse.nexmark.source import NexmarkOptions
from impulse.options import ImpulseOptions
from impulse.schema import default_schema, row_spec

__all__ = ["impulse_options", "impulse_schema_for"]

# impulse options the harness sets from its own flags; --source-option may not override them
_HARNESS_SOURCE_OPTIONS = {"eventspersecond": "--rate", "delay": "--rate", "numpartitions": "--partitions",
                           "payloadbytes": "--payload-bytes", "limit": "--rate × --duration",
                           "limitperpartition": "--rate × --duration", "maxeventspertrigger": "--max-events-per-trigger",
                           "starttime": "the run's start (latency counts from each event's schedule)"}
# each source's option reader, which validates them; nexmark's events have no payload column
_READERS = {"impulse": ImpulseOptions, "nexmark": NexmarkOptions}


def impulse_options(config: LoadConfig) -> dict[str, str]:
    """The options of the run's source, ``impulse`` or ``nexmark`` (validated like the source will): the
    ``--source-option`` settings with the run's pace (``eventsPerSecond``, ``limit`` = rate × duration,
    ``numPartitions``, ``maxEventsPerTrigger``; with ``rateStages`` or ``rateCurve`` their own rate) and impulse's
    ``payloadBytes``; with ``--checkpoint`` ``downtime=catchup`` unless given (a query resumed from the checkpoint
    keeps the schedule its offsets hold: every event keeps its scheduled time, those due while it was down come at
    once)."""
    for key in config.source_options:
        if key.lower() in _HARNESS_SOURCE_OPTIONS:
            raise LoadError(f"--source-option {key}: set by the harness from {_HARNESS_SOURCE_OPTIONS[key.lower()]}")
    options = {**config.source_options, "numPartitions": str(config.partitions)}
    if config.source == "impulse":
        options["payloadBytes"] = str(config.payload_bytes)
    options["limit"] = str(config.total_events)
    if config.stages is None:  # with rateStages or rateCurve the source takes its rate from them (passed as is)
        options["eventsPerSecond"] = repr(float(config.rate))
    if config.max_events_per_trigger:
        options["maxEventsPerTrigger"] = str(config.max_events_per_trigger)
    if config.checkpoint_dir is not None and not any(k.lower() == "downtime" for k in options):
        options["downtime"] = "catchup"   # a rerun on the checkpoint keeps the schedule its offsets hold
    try:
        _READERS[config.source].from_options(options)
    except ConnectorError as exc:
        raise LoadError(f"{config.source}: {exc}") from exc
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
