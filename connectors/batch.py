"""Batch writes (``df.write.format(<sink>).mode("append").save()``, SQL ``INSERT INTO``) through the commit protocol.

A batch write is one "micro-batch" of the protocol in `connectors.protocol`, with the same hooks,
options and guarantee; only the identity comes from elsewhere:

- **commit id**: the ``commitId`` option when given, else ``batch-<uuid4>`` drawn once on the driver
  when Spark asks for the writer (`batch_writer`). The writer is pickled to every task, so all tasks
  of the job, their retries and speculative copies share it; a *re-run* of the job without
  ``commitId`` draws a new id and is a new write (its rows land again). With ``commitId`` a re-run
  finds the target's commit records and writes nothing twice: give each distinct write its own
  ``commitId`` (the same id means "the same write, with the same input and partitioning").
- **batch id**: always `BATCH_ID` (0). A streaming query and a batch write must therefore not share a
  ``commitId`` (the batch write would find the query's batch 0 committed, and skip).
- **partition**: the Spark partition of the written DataFrame, as for a micro-batch.

Fault injection (``faultInjection``) works as for streaming, with ``batch=0``.

From SQL, a sink is a temporary view with a column list (`no_schema`): ``CREATE TEMPORARY VIEW v
(c1 T1, …) USING `redis-sink` OPTIONS (…)`` then ``INSERT INTO v SELECT …`` (README, "SQL").

Only ``mode("append")`` (SQL ``INSERT INTO``) is accepted. Spark itself refuses ``errorifexists``
(the default of ``df.write``) and ``ignore`` for every Python data source, before any code of ours
runs, with ``[UNSUPPORTED_DATA_SOURCE_SAVE_MODE]``; ``overwrite`` (and ``INSERT OVERWRITE``) reaches
`batch_writer` as ``overwrite=True`` and fails with an `OptionError` naming the mode.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Callable, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter

from connectors.errors import OptionError, SinkError
from connectors.options import CATALOG_TABLE_OPTIONS, OptionReader
from connectors.protocol import CommitMessage, ProtocolWriter, Sink, stream_writer

__all__ = ["BATCH_ID", "BatchWriter", "batch_writer", "new_commit_id", "no_schema"]

#: the protocol's batch id of every batch write
BATCH_ID = 0
#: the save modes a batch write accepts, as Spark names them
MODES = ("append",)


def new_commit_id() -> str:
    """A job-unique commit id for a batch write without ``commitId`` (``batch-`` + 32 hex digits)."""
    return f"batch-{uuid.uuid4().hex}"


class BatchWriter(DataSourceArrowWriter):
    """The batch writer of every sink: the protocol's writer with its identity fixed on the driver."""

    def __init__(self, protocol: ProtocolWriter) -> None:
        self.protocol = protocol

    @property
    def commit_id(self) -> str:
        return self.protocol.options.commit_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CommitMessage:
        """Executor: one partition, as `ProtocolWriter.write` (skipped if its commit record says done)."""
        return self.protocol.write(iterator)

    def commit(self, messages: Sequence[CommitMessage | None]) -> None:
        """Driver: `ProtocolWriter.commit` of batch `BATCH_ID`."""
        self.protocol.commit(messages, BATCH_ID)

    def abort(self, messages: Sequence[CommitMessage | None]) -> None:
        """Driver: `ProtocolWriter.abort` of batch `BATCH_ID`."""
        self.protocol.abort(messages, BATCH_ID)


def batch_writer(options: Mapping[str, object], overwrite: bool, *, name: str,
                 build: Callable[[OptionReader], Sink]) -> BatchWriter:
    """Parse a sink's options, check the target, fix the write's identity (runs on the driver).

    The sink's ``writer(schema, overwrite)``; `OptionError` for ``overwrite`` and for any option
    `stream_writer` rejects.
    """
    if not options:
        raise OptionError("OPTIONS", "(none)", f"the {name}'s options; an INSERT INTO a table gets none when {CATALOG_TABLE_OPTIONS}")
    if overwrite:
        raise OptionError("mode", "overwrite", f"one of {', '.join(MODES)}: the {name} only adds to its target, it "
                          "cannot replace what is there; use .mode(\"append\") (SQL: INSERT INTO, not INSERT OVERWRITE)")
    protocol = stream_writer(options, name=name, build=build)
    if protocol.refused is not None:  # a batch write's commit and abort reuse this writer: no later check to spare
        raise protocol.refused
    identity = replace(protocol.options, commit_id=protocol.options.commit_id or new_commit_id())
    return BatchWriter(ProtocolWriter(protocol.sink, identity, batch_id=BATCH_ID))


def no_schema(name: str) -> None:
    """A sink's ``DataSource.schema()``: always raises `SinkError` saying how to declare a SQL view of the sink.

    Spark asks for it when a view is created without columns (``CREATE TEMPORARY VIEW v USING `<sink>```)
    and on ``spark.read.format(<sink>)``; a write never asks for it.
    """
    raise SinkError(f"{name} is write-only and has no columns of its own: read with its target's client; to write "
                    f"from SQL give the view the columns you insert: CREATE TEMPORARY VIEW <view> (<column> <type>, …) "
                    f"USING `{name}` OPTIONS (…), then INSERT INTO <view> SELECT …")
