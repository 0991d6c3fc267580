"""``--check``'s reader of a Spark-readable target: what one of Spark's file sinks wrote, read back with Spark.

`SparkTarget` reads ``spark.read.format(F).options(…).schema(S).load(path)``: the sink's format `F`, its writer
options (the same ``header``, ``sep``, … it wrote with; ``path`` and ``checkpointLocation`` aside) and the expected
answer's schema `S`. Spark's file sink commits each micro-batch's files in ``path/_spark_metadata`` and a read of
``path`` lists only those, so the target read back is what the committed batches wrote, exactly once. The directory
must hold no files before the run (`SparkTarget.prepare`): a new or empty one each run.
"""

from __future__ import annotations

import os
from typing import Mapping
from urllib.parse import urlparse

from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType

from connectors.readback import TargetReader
from impulse.loadtest.settings.target import sink_option
from impulse.loadtest.settings.units import LoadError

__all__ = ["SparkTarget"]

_NOT_READ_OPTIONS = ("path", "checkpointlocation")


class SparkTarget(TargetReader):
    """The files a Spark file sink wrote to ``path``, read back with Spark (`frame`)."""

    def __init__(self, sink: str, options: Mapping[str, str]) -> None:
        self.sink = sink
        self.path = sink_option(options, "path") or ""
        self.options = {k: v for k, v in options.items() if k.lower() not in _NOT_READ_OPTIONS}

    def describe(self) -> str:
        return f"the {self.sink} files under {self.path}"

    def prepare(self) -> None:
        """Refuse a local ``path`` that already holds files (a previous run's rows would be read back too)."""
        url = urlparse(self.path)
        local = url.path if url.scheme == "file" else self.path if not url.scheme else None
        if local is not None and os.path.isdir(local) and os.listdir(local):
            raise LoadError(f"--check: -o path={self.path} already holds files; --check reads back every row there, "
                            "so give a new or empty directory")

    def frame(self, spark, schema: StructType):
        """The target as a DataFrame of `schema` (its columns nullable: a file holds no NOT NULL)."""
        loose = StructType([StructField(f.name, f.dataType, True) for f in schema.fields])
        return spark.read.format(self.sink).options(**self.options).schema(loose).load(self.path)

    def values(self) -> list[bytes]:
        """Every row as JSON bytes, read on the active session (`frame` is what ``--check`` compares)."""
        frame = SparkSession.getActiveSession().read.format(self.sink).options(**self.options).load(self.path)
        return [row.encode() for row in frame.toJSON().collect()]
