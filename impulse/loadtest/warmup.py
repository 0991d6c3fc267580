"""The warm-up sink: a Python streaming sink that writes nothing and imports what the sink under test needs.

Spark starts a Python worker daemon per kind of Python work the first time it is needed (reading a
Python source, planning a Python sink, writing, committing), and a forked worker imports the
sink's module and client library on its first task. Under load that first micro-batch took 10–20 s
here, all of it start-up: a load run would report it as the sink's latency. `warm_up` runs a few
impulse events into this sink before the measured query, so those processes already exist and
have the modules named in its ``modules`` option imported. Nothing reaches the target.
"""

from __future__ import annotations

import importlib
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

__all__ = ["WarmupSinkDataSource", "NAME"]

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


class WarmupSinkDataSource(DataSource):
    """Name: ``impulse-load-warmup``. Option ``modules``: comma-separated modules to import where it runs."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def streamWriter(self, schema, overwrite: bool) -> _Writer:
        modules = self.options.get("modules", "")
        _import_all(modules)
        return _Writer(modules)
