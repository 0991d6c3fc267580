"""The Spark session of a load run, and its warm-up.

`make_session` builds what the CLI runs on: `connectors.session.local_session` (``local[*]`` by
default, every project data source registered) keeping 1 000 progress updates for the report.

`warm_up` runs, once per Spark application and sink, a tiny impulse → `impulse.loadtest.warmup` query:
the first micro-batch of a session starts Spark's Python worker daemons and imports the sink's
modules (10–20 s on a busy 2-core machine), which would otherwise be measured as the sink's latency.
Nothing is written to the sink under test.
"""

from __future__ import annotations

import shutil
import tempfile

__all__ = ["make_session", "warm_up", "preload_modules"]

_warmed: set[tuple[str, str]] = set()


def preload_modules(sink: str) -> str:
    """What a writer of `sink` imports on the executors (the registry's row; nothing for other formats)."""
    from connectors.registry import connectors

    rows = [row for row in connectors() if row.name == sink]
    return ",".join(rows[0].executor_modules()) if rows else ""


def make_session(master: str = "local[*]", app_name: str = "impulse-load"):
    """A Spark session for the harness (the active one if there is one: its settings then stay)."""
    from connectors.session import local_session

    return local_session(master, app_name, **{"spark.sql.shuffle.partitions": 2,
                                              "spark.sql.streaming.numRecentProgressUpdates": 1000})


def warm_up(spark, partitions: int = 2, sink: str = "noop") -> None:
    """Run 1 000 impulse events through the warm-up sink, once per Spark application and sink."""
    from impulse.loadtest.warmup import NAME, WarmupSinkDataSource

    key = (spark.sparkContext.applicationId, sink)
    if key in _warmed:
        return
    spark.dataSource.register(WarmupSinkDataSource)
    checkpoint = tempfile.mkdtemp(prefix="impulse-load-warmup-")
    try:
        query = (
            spark.readStream.format("impulse")
            .option("eventsPerSecond", 1000).option("numPartitions", partitions).option("limit", 1000)
            .option("startTime", 0)  # the epoch: every event is due at once
            .load()
            .writeStream.format(NAME).option("modules", preload_modules(sink))
            .option("checkpointLocation", checkpoint)
            .queryName("impulse-load-warmup").trigger(availableNow=True).start()
        )
        query.awaitTermination()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    _warmed.add(key)
