"""The Spark session of a load run, and its warm-up.

`make_session` builds what the CLI runs on: ``local[*]`` by default, UI and console progress bar
off, log level ERROR, every project data source registered (`connectors.register_all`). Python
workers run this interpreter (``PYSPARK_PYTHON`` defaults to ``sys.executable``), which has the
project installed.

`warm_up` runs, once per Spark application and sink, a tiny impulse → `impulse.loadtest.warmup` query:
the first micro-batch of a session starts Spark's Python worker daemons and imports the sink's
modules (10–20 s on a busy 2-core machine), which would otherwise be measured as the sink's latency.
Nothing is written to the sink under test.
"""

from __future__ import annotations

import os
import sys
import tempfile
import shutil

__all__ = ["make_session", "warm_up"]

_warmed: set[tuple[str, str]] = set()

# What a writer of each sink imports on the executors (client libraries are imported lazily by the sinks).
_MODULES = {
    "redis-sink": "sinks.redis,redis,hiredis",
    "kafka-sink": "sinks.kafka,confluent_kafka",
    "webhook-sink": "sinks.webhook,requests",
}


def make_session(master: str = "local[*]", app_name: str = "impulse-load"):
    """A Spark session for the harness (the active one if there is one: its settings then stay)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from connectors import register_all

    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_all(spark)
    return spark


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
            .writeStream.format(NAME).option("modules", _MODULES.get(sink, ""))
            .option("checkpointLocation", checkpoint)
            .queryName("impulse-load-warmup").trigger(availableNow=True).start()
        )
        query.awaitTermination()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    _warmed.add(key)
