"""The Spark session of a load run, and its warm-up.

`make_session` builds what the CLI runs on: `connectors.session.local_session` (``local[*]`` by
default, every project data source registered) keeping 1 000 progress updates for the report, or
with `remote` a Spark Connect client session (the server runs the queries and the data sources).
`deployment` names where a session runs, for the report.

`warm_up` runs, once per Spark application and sink, a tiny `impulse.loadtest.warmup` query (its own
source and sink): the first micro-batch of a session starts Spark's Python worker daemons and imports
the impulse source's and the sink's modules (10–20 s on a busy 2-core machine), which would otherwise
be measured as the sink's latency. Nothing is written to the sink under test.
"""

from __future__ import annotations

import shutil
import tempfile

__all__ = ["deployment", "describe", "make_session", "warm_up", "preload_modules"]

_warmed: set[tuple[str, str]] = set()


def preload_modules(sink: str) -> str:
    """What a writer of `sink` imports on the executors (the registry's row; nothing for other formats)."""
    from connectors.registry import connectors

    rows = [row for row in connectors() if row.name == sink]
    return ",".join(rows[0].executor_modules()) if rows else ""


def make_session(master: str = "local[*]", app_name: str = "impulse-load", remote: str | None = None,
                 kafka: bool = False):
    """A Spark session for the harness (the active one if there is one: its settings then stay).

    With `kafka` (local sessions only) Spark's own Kafka connector is on its class path
    (`connectors.session.spark_kafka_session`): the production topology's pipeline reads Kafka with it.

    With `remote` (``sc://host:port``) a Spark Connect client session instead, `master` unused: the server
    must have this package where its Python workers run; the data sources are registered from here too.
    """
    conf = {"spark.sql.shuffle.partitions": 2, "spark.sql.streaming.numRecentProgressUpdates": 1000}
    if remote is None:
        from connectors.session import local_session, spark_kafka_session

        if kafka:
            return spark_kafka_session(master, app_name, **conf)[0]
        return local_session(master, app_name, **conf)
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    from connectors import register_all

    spark = RemoteSparkSession.builder.remote(remote).create()
    for key, value in conf.items():  # session-level settings: a Connect client cannot change static ones
        spark.conf.set(key, str(value))
    register_all(spark)
    return spark


def _is_remote(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def deployment(spark, remote: str | None = None) -> dict:
    """Where `spark` runs its queries: ``{"master", "remote", "executors", "cores"}``.

    Classic: the master URL, the executors besides the driver (0 on ``local[...]``) and the default
    parallelism. Spark Connect: `remote` (the URL the session was made with; its ``;token=…`` parameters
    left out) and the server's master; executors and cores are ``None``: a Connect client has no
    SparkContext to ask.
    """
    if _is_remote(spark):
        return {"remote": remote.split(";")[0] if remote else None, "master": spark.conf.get("spark.master", None),
                "executors": None, "cores": None}
    context = spark.sparkContext
    return {"remote": None, "master": context.master, "executors": context._jsc.sc().getExecutorIds().size(),
            "cores": context.defaultParallelism}


def describe(where: dict) -> str:
    """One line for the report, e.g. ``master spark://127.0.0.1:7077, 2 executors, 2 cores``."""
    if where.get("remote"):
        return f"Spark Connect {where['remote']} (server master {where.get('master') or 'unknown'})"
    executors = where.get("executors")
    return (f"master {where.get('master')}, "
            + (f"{executors} executors" if executors else "driver only") + f", {where.get('cores')} cores")


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

    key = (spark.session_id if _is_remote(spark) else spark.sparkContext.applicationId, sink)
    if key in _warmed:
        return
    spark.dataSource.register(WarmupDataSource)
    modules = ",".join(filter(None, ("impulse.source", preload_modules(sink))))
    imports = spark.readStream.format(NAME).option("modules", modules).option("partitions", partitions).load()
    events = (spark.readStream.format("impulse").option("eventsPerSecond", 1e9).option("startTime", 0)
              .option("numPartitions", partitions).option("limit", WARMUP_EVENTS)
              .option("maxEventsPerTrigger", WARMUP_BATCH).load())
    for frame in (imports,) if _is_remote(spark) else (imports, events):
        checkpoint = tempfile.mkdtemp(prefix="impulse-load-warmup-")
        try:
            query = (frame.writeStream.format(NAME).option("modules", modules)
                     .option("checkpointLocation", checkpoint)
                     .queryName("impulse-load-warmup").trigger(availableNow=True).start())
            query.awaitTermination()
        finally:
            shutil.rmtree(checkpoint, ignore_errors=True)
    _warmed.add(key)
