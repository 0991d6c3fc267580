"""The warm-up of a load run's Spark session: a query from a Python streaming source of its own into a Python sink of
its own, both importing what the sink under test needs, run once per Spark application and sink (`warm_up`).

Spark starts a Python worker daemon per kind of Python work the first time it is needed (reading a
Python source, planning a Python sink, writing, committing), and a forked worker imports the
sink's module and client library on its first task: a load run would report that start-up as the
sink's latency (what it costs: bench/README.md, "Figures behind the code"). `warm_up` runs a few
rows from this source into this sink before the measured query, so those processes already exist
and have the modules named in the ``modules`` option imported. Nothing reaches the target.

Both ends import: a task reads in one pooled Python worker and writes in another, and a worker that
read in the warm-up may write in the measured query's first micro-batch. When only the writers
imported, half of the first batch's writers were cold and imported the client library (``import redis``)
inside the measured batch.

Nothing is written to the sink under test. The session itself is `impulse.session.make_session`'s (or the caller's).
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
from typing import Iterator

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

from connectors.registry import connectors
from impulse.session import is_remote

__all__ = ["warm_up", "preload_modules", "WarmupDataSource", "NAME", "WARMUP_EVENTS", "WARMUP_BATCH"]

NAME = "impulse-load-warmup"
WARMUP_EVENTS = 100_000   # impulse events the warm-up runs through the warm-up sink
WARMUP_BATCH = 10_000     # … per micro-batch

_warmed: set[tuple[str, str]] = set()


def _import_all(modules: str) -> None:
    for name in filter(None, (m.strip() for m in modules.split(","))):
        try:
            importlib.import_module(name)
        except ImportError:  # an optional client library that is not installed: the real run will say so
            pass


class _Writer(DataSourceStreamArrowWriter):
    def __init__(self, modules: str) -> None:
        self.modules = modules

    def write(self, iterator: Iterator) -> WriterCommitMessage:
        _import_all(self.modules)
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages, batchId) -> None:
        _import_all(self.modules)

    def abort(self, messages, batchId) -> None:
        pass


class _Reader(DataSourceStreamReader):
    """One offset step: `partitions` partitions of one row each; every read imports `modules`."""

    def __init__(self, partitions: int, modules: str) -> None:
        self.count = partitions
        self.modules = modules

    def initialOffset(self) -> dict:
        return {"step": 0}

    def latestOffset(self) -> dict:
        return {"step": 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.count if end["step"] > start["step"] else 0)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        _import_all(self.modules)
        yield (partition.value,)

    def commit(self, end: dict) -> None:
        pass


class WarmupDataSource(DataSource):
    """Name: ``impulse-load-warmup``, a stream source and a stream sink.

    Options: ``modules`` (comma-separated modules to import wherever it runs), ``partitions`` (the
    source's number of partitions, default 2; one row each).
    """

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return "n INT"

    def streamReader(self, schema) -> _Reader:
        modules = self.options.get("modules", "")
        _import_all(modules)
        return _Reader(int(self.options.get("partitions", 2)), modules)

    def streamWriter(self, schema, overwrite: bool) -> _Writer:
        modules = self.options.get("modules", "")
        _import_all(modules)
        return _Writer(modules)


def preload_modules(sink: str) -> str:
    """What a writer of `sink` imports on the executors (the registry's row; nothing for other formats)."""
    rows = [row for row in connectors() if row.name == sink]
    return ",".join(rows[0].executor_modules()) if rows else ""


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
