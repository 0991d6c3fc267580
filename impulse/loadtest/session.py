"""The warm-up of a load run's Spark session (which `impulse.session.make_session` makes).

`warm_up` runs, once per Spark application and sink, a tiny `impulse.loadtest.warmup` query (its own
source and sink): the first micro-batch of a session starts Spark's Python worker daemons and imports
the impulse source's and the sink's modules (10–20 s on a busy 2-core machine), which would otherwise
be measured as the sink's latency. Nothing is written to the sink under test.
"""

from __future__ import annotations

import shutil
import tempfile

from impulse.session import is_remote

__all__ = ["warm_up", "preload_modules"]

_warmed: set[tuple[str, str]] = set()


def preload_modules(sink: str) -> str:
    """What a writer of `sink` imports on the executors (the registry's row; nothing for other formats)."""
    from connectors.registry import connectors

    rows = [row for row in connectors() if row.name == sink]
    return ",".join(rows[0].executor_modules()) if rows else ""


WARMUP_EVENTS = 100_000   # impulse events the warm-up runs through the warm-up sink
WARMUP_BATCH = 10_000     # … per micro-batch


def warm_up(spark, partitions: int = 2, sink: str = "noop") -> None:
    """Warm Spark's Python workers and JVM for a run into `sink`, once per Spark application and sink.

    Two tiny queries into the warm-up sink: one row per partition from the warm-up source (every Python
    worker, reader or writer, imports the impulse source's and the sink's modules), then `WARMUP_EVENTS`
    impulse events in micro-batches of `WARMUP_BATCH` (the JVM's per-batch and per-row paths of a
    Python source and a Python sink get compiled before the measured query's first micro-batches).
    Nothing reaches the sink under test.

    Over Spark Connect only the first query runs: there the events query lengthened a run without
    shortening its first micro-batch (figures: bench/README.md, "Figures behind the code").
    """
    from impulse.loadtest.warmup import NAME, WarmupDataSource

    key = (spark.session_id if is_remote(spark) else spark.sparkContext.applicationId, sink)
    if key in _warmed:
        return
    spark.dataSource.register(WarmupDataSource)
    modules = ",".join(filter(None, ("impulse.source", preload_modules(sink))))
    imports = spark.readStream.format(NAME).option("modules", modules).option("partitions", partitions).load()
    events = (spark.readStream.format("impulse").option("eventsPerSecond", 1e9).option("startTime", 0)
              .option("numPartitions", partitions).option("limit", WARMUP_EVENTS)
              .option("maxEventsPerTrigger", WARMUP_BATCH).load())
    for frame in (imports,) if is_remote(spark) else (imports, events):
        checkpoint = tempfile.mkdtemp(prefix="impulse-load-warmup-")
        try:
            query = (frame.writeStream.format(NAME).option("modules", modules)
                     .option("checkpointLocation", checkpoint)
                     .queryName("impulse-load-warmup").trigger(availableNow=True).start())
            query.awaitTermination()
        finally:
            shutil.rmtree(checkpoint, ignore_errors=True)
    _warmed.add(key)
