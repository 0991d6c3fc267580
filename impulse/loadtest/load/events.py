"""The run's events: the options of its source (``impulse``, ``nexmark`` or ``replay``) and the ``--schema`` of
impulse's.

``replay`` replays the recording of ``--source-option path=…`` (with ``sourceFormat``, ``timeColumn``, ``loop``:
`impulse.replay`) at the run's ``--rate``, its first rate × duration positions (fewer when the recording, without
``loop``, has fewer rows): the harness sets its ``eventsPerSecond`` and ``limit``, so a recording's own pace
(``speed``) is not one of a run's.

Both are checked the way the source will check them, before any load: a problem is one `LoadError`.
"""

from __future__ import annotations

from pyspark.sql.types import StructType

from connectors.errors import ConnectorError
from impulse.loadtest.query.transform import exception_text
from impulse.loadtest.settings.config import LoadConfig, LoadError
from impulse.nexmark.source import NexmarkOptions
from impulse.options import ImpulseOptions
from impulse.replay.options import ReplayOptions
from impulse.schema import default_schema, row_spec

__all__ = ["impulse_options", "impulse_schema_for"]

# impulse options the harness sets from its own flags; --source-option may not override them
_HARNESS_SOURCE_OPTIONS = {"eventspersecond": "--rate", "delay": "--rate", "numpartitions": "--partitions",
                           "payloadbytes": "--payload-bytes", "limit": "--rate × --duration",
                           "limitperpartition": "--rate × --duration", "maxeventspertrigger": "--max-events-per-trigger",
                           "starttime": "the run's start (latency counts from each event's schedule)"}
#: replay's options the harness sets (its pace and bound, as impulse's above)
_HARNESS_REPLAY_OPTIONS = {"speed": "--rate (a load test replays at a fixed rate)"}
# each source's option reader, which validates them; nexmark's and replay's events have no payload column
_READERS = {"impulse": ImpulseOptions, "nexmark": NexmarkOptions, "replay": ReplayOptions}


def impulse_options(config: LoadConfig) -> dict[str, str]:
    """The options of the run's source, ``impulse``, ``nexmark`` or ``replay`` (validated like the source will): the
    ``--source-option`` settings with the run's pace (``eventsPerSecond``, ``limit`` = rate × duration,
    ``numPartitions``, ``maxEventsPerTrigger``; with ``rateStages`` or ``rateCurve`` their own rate) and impulse's
    ``payloadBytes``; with ``--checkpoint`` (impulse and nexmark) ``downtime=catchup`` unless given (a query resumed
    from the checkpoint keeps the schedule its offsets hold: every event keeps its scheduled time, those due while it
    was down come at once; a replay resumes at its position)."""
    owned = {**_HARNESS_SOURCE_OPTIONS, **(_HARNESS_REPLAY_OPTIONS if config.source == "replay" else {})}
    for key in config.source_options:
        if key.lower() in owned:
            raise LoadError(f"--source-option {key}: set by the harness from {owned[key.lower()]}")
    options = {**config.source_options, "numPartitions": str(config.partitions)}
    if config.source == "impulse":
        options["payloadBytes"] = str(config.payload_bytes)
    options["limit"] = str(config.total_events)
    if config.stages is None:  # with rateStages or rateCurve the source takes its rate from them (passed as is)
        options["eventsPerSecond"] = repr(float(config.rate))
    if config.max_events_per_trigger:
        options["maxEventsPerTrigger"] = str(config.max_events_per_trigger)
    if (config.checkpoint_dir is not None and config.source != "replay"
            and not any(k.lower() == "downtime" for k in options)):
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
