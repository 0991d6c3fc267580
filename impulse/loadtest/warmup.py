"""The warm-up query: a Python streaming source and sink that import what the sink under test needs.

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
"""

from __future__ import annotations

import importlib
from typing import Iterator

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

__all__ = ["WarmupDataSource", "NAME"]

NAME = "impulse-load-warmup"


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
