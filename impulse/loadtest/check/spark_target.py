"""``--check``'s readers of a Spark-readable target (`SparkReadable`): the target as a DataFrame on the session.

- `SparkTarget`: what one of Spark's file sinks or a table format (Delta) wrote, read back with Spark;
- `CheckRead`: ``--check-read MODULE:FUNCTION``, the user's ``FUNCTION(spark)`` returning the target as a DataFrame
  (the target of a ``--foreach-batch`` function), its columns those of the query's output (extra ones ignored).

`SparkTarget` reads ``spark.read.format(F).options(…).schema(S).load(path)``: the sink's format `F`, its writer
options (the same ``header``, ``sep``, … it wrote with; ``path`` and ``checkpointLocation`` aside) and the expected
answer's schema `S`. Spark's file sink commits each micro-batch's files in ``path/_spark_metadata`` and a read of
``path`` lists only those, so the target read back is what the committed batches wrote, exactly once. The directory
must hold no files before the run (`SparkTarget.prepare`): a new or empty one each run. A table format (``delta``)
keeps its own schema, so it is read without `S` and the expected answer's columns selected and cast, as a table's
(``-o table=NAME``, read with ``spark.table``); its log holds the committed versions only, so it too is read once.
"""

from __future__ import annotations

import os
from typing import Mapping
from urllib.parse import urlparse

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from connectors.readback import TargetReader
from impulse.loadtest.query.transform import function_of, load, reason
from impulse.loadtest.settings.target import FILE_SINKS, TABLE_OPTION, sink_option, table_name
from impulse.loadtest.settings.units import LoadError

__all__ = ["SparkReadable", "SparkTarget", "CheckRead"]

_NOT_READ_OPTIONS = ("path", "checkpointlocation", TABLE_OPTION)


class SparkReadable(TargetReader):
    """A target read as a DataFrame on the session (`frame`), which ``--check`` compares as it is."""

    def frame(self, spark, schema: StructType):
        """The target's rows as a DataFrame with `schema`'s columns."""
        raise NotImplementedError

    def values(self) -> list[bytes]:
        """Every row as JSON bytes, read on the active session (`frame` is what ``--check`` compares)."""
        spark = SparkSession.getActiveSession()
        return [row.encode() for row in self.frame(spark, None).toJSON().collect()]


class SparkTarget(SparkReadable):
    """The files a Spark file sink wrote to ``path``, or the table ``-o table=NAME``, read back with Spark (`frame`)."""

    def __init__(self, sink: str, options: Mapping[str, str]) -> None:
        self.sink = sink
        self.path = sink_option(options, "path") or ""
        self.table = table_name(options)
        self.options = {k: v for k, v in options.items() if k.lower() not in _NOT_READ_OPTIONS}

    def describe(self) -> str:
        return f"the table {self.table}" if self.table else f"the {self.sink} files under {self.path}"

    def prepare(self) -> None:
        """Refuse a table that exists, or a local ``path`` that already holds files (a previous run's rows would be
        read back too)."""
        if self.table is not None:
            spark = SparkSession.getActiveSession()
            if spark is not None and spark.catalog.tableExists(self.table):
                raise LoadError(f"--check: -o {TABLE_OPTION}={self.table} exists already; --check reads back every "
                                "row of it, so give a new table's name")
        url = urlparse(self.path)
        local = url.path if url.scheme == "file" else self.path if not url.scheme else None
        if local is not None and os.path.isdir(local) and os.listdir(local):
            raise LoadError(f"--check: -o path={self.path} already holds files; --check reads back every row there, "
                            "so give a new or empty directory")

    def frame(self, spark, schema: StructType | None):
        """The target as a DataFrame of `schema` (its columns nullable: a file holds no NOT NULL; None: the files')."""
        if self.table is not None or self.sink not in FILE_SINKS:
            target = (spark.table(self.table) if self.table is not None
                      else spark.read.format(self.sink).options(**self.options).load(self.path))
            return target if schema is None else target.select(
                *[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema.fields])
        reader = spark.read.format(self.sink).options(**self.options)
        if schema is not None:
            reader = reader.schema(StructType([StructField(f.name, f.dataType, True) for f in schema.fields]))
        return reader.load(self.path)


class CheckRead(SparkReadable):
    """``--check-read MODULE:FUNCTION``: the user's ``FUNCTION(spark)`` returns the target as a DataFrame. `key`:
    ``--check-key``'s columns, the target keeping one row per key (its final state)."""

    def __init__(self, text: str, key: tuple[str, ...] = ()) -> None:
        self.transform = function_of(text, "--check-read", "my_sink:read_target")
        self.key = tuple(key)
        self.keeps_state = bool(key)

    def describe(self) -> str:
        per_key = f", one row per {', '.join(self.key)}" if self.key else ""
        return f"the target --check-read {self.transform.text} returns{per_key}"

    def frame(self, spark, schema: StructType | None):
        """The user's DataFrame, `schema`'s columns selected; `LoadError` naming the flag if it is not a batch
        DataFrame holding them."""
        label = f"--check-read {self.transform.text}"
        function = load(spark, self.transform).function
        try:
            target = function(spark)
        except Exception as exc:  # noqa: BLE001 - the user's function: its error quoted, naming the flag
            raise LoadError(f"{label}: it raised {reason(exc)}") from None
        if not hasattr(target, "schema") or not hasattr(target, "isStreaming"):
            raise LoadError(f"{label}: it returned a {type(target).__name__}, not a DataFrame")
        if target.isStreaming:
            raise LoadError(f"{label}: it returned a streaming DataFrame; read the target with spark.read")
        if schema is None:
            return target
        missing = [name for name in schema.names if name not in target.columns]
        if missing:
            raise LoadError(f"{label}: the target lacks the output's columns {', '.join(missing)} (it has "
                            f"{', '.join(target.columns)})")
        return target.select(*[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema.fields])
