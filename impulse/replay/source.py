"""The replay data source: a recording streamed in time order, exactly once across restarts.

The offset is ``{"position": p, "startTime": µs}``: p rows of the ordered recording were planned, and the replay's
pace is measured from ``startTime`` (the wall clock when the query first started, kept in the checkpoint). A
micro-batch is the positions ``[start.position, end.position)``, split into contiguous ranges, one per partition;
its rows are a function of the positions and the recording alone, so a restart resumes at the checkpoint's
position with no gap and no duplicate, and a re-run batch yields the same rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from impulse.events import ROWS_PER_BATCH
from impulse.replay.options import ReplayOptions
from impulse.replay.recording import due, load, rows_at

__all__ = ["ReplayDataSource", "ReplayStreamReader", "ReplayBatchReader", "ReplayPartition"]


class ReplayDataSource(DataSource):
    """A recorded table, streamed in its own time order at its own pace × speed, or at a fixed rate.

    Name: ``replay``

    Schema: the recording's own columns and types (a batch read is the whole recording, its values unchanged,
    ordered by ``timeColumn``; with ``limit``, its first positions).

    Parameters (option names are case-insensitive)
    ----------
    path : the recording, ``.load(PATH)``: a file or a folder of files
        Read with pyarrow on the driver and the executors (they must see the same path). ``table`` is refused:
        a Python data source has no catalog; replay a table by its location.
    sourceFormat : parquet, csv, json, orc, arrow, feather (default parquet)
        The recording's file format (json: one object a line).
    timeColumn : a TIMESTAMP column, optional
        Orders the recording (rows with equal times keep their file order) and paces it: the row whose time is
        t after the first is due ``t / speed`` after the query started. Required unless ``eventsPerSecond``.
    speed : float > 0 (default 1)
        A multiple of the recording's own pace: 2 replays an hour in 30 minutes.
    eventsPerSecond : float > 0, optional
        A fixed rate instead of the recording's pace (rows in time order, or in file order without
        ``timeColumn``). At most one of this and ``speed``.
    loop : bool (default false)
        After the last row, start again: lap k's ``timeColumn`` is shifted by k × the recording's span (last time
        minus first), so the timeline continues. Without it the stream ends with the recording.
    numPartitions : int ≥ 1 (default: the driver's CPU count)
        Each micro-batch's positions are split into this many contiguous ranges.
    maxEventsPerTrigger : int ≥ 1, optional
        At most this many rows per micro-batch (the rest follow in the next ones).
    limit : int ≥ 0, optional
        At most this many rows in all (the first ones; with ``loop``, laps included): the stream then ends, and a
        batch read holds them.

    Notes
    -----
    The offset is the position in the ordered recording (`impulse.replay.source`): a restart from a checkpoint
    resumes after the last committed row, with no gap and no duplicate; the pace keeps the first start's clock,
    so rows that fell due while the query was down come at once.
    """

    def __init__(self, options) -> None:
        super().__init__(options)
        self.parsed = ReplayOptions.from_options(options)

    @classmethod
    def name(cls) -> str:
        return "replay"

    def schema(self):
        opts = self.parsed
        return from_arrow_schema(load(opts.path, opts.source_format, opts.time_column).table.schema)

    def streamReader(self, schema) -> "ReplayStreamReader":
        return ReplayStreamReader(self.parsed)

    def reader(self, schema) -> "ReplayBatchReader":
        return ReplayBatchReader(self.parsed)


@dataclass
class ReplayPartition(InputPartition):
    """Positions ``[first, end)`` of the replay."""

    first: int
    end: int


def _split(first: int, end: int, parts: int) -> list[ReplayPartition]:
    """``[first, end)`` as at most `parts` contiguous, non-empty ranges (the first ones one longer)."""
    count = end - first
    size, extra = divmod(count, parts)
    out, at = [], first
    for i in range(parts):
        length = size + (i < extra)
        if length:
            out.append(ReplayPartition(at, at + length))
            at += length
    return out


def _read(options: ReplayOptions, partition: ReplayPartition) -> Iterator[pa.RecordBatch]:
    recording = load(options.path, options.source_format, options.time_column)
    # zero-copy slices of the ordered recording, re-chunked to the record batch size the JVM reads fastest
    yield from rows_at(recording, partition.first, partition.end).to_batches(max_chunksize=ROWS_PER_BATCH)


def _now_us() -> int:
    return time.time_ns() // 1_000


class ReplayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side plans positions from the wall clock; `read()` (executors) depends on the partition only."""

    def __init__(self, options: ReplayOptions) -> None:
        self.options = options
        self._available_now_us: int | None = None

    def _due(self, start: dict, now: int) -> int:
        opts = self.options
        recording = load(opts.path, opts.source_format, opts.time_column)
        end = due(recording, now - start["startTime"], opts.speed, opts.events_per_second, opts.loop)
        if opts.limit is not None:
            end = min(end, opts.limit)
        return max(start["position"], end)

    def initialOffset(self) -> dict:
        start = _now_us()
        if self._available_now_us is not None:
            # Spark prepares AvailableNow before asking a new query for its initial offset: "now" is then at least
            # the start, so the rows due at the start are read
            self._available_now_us = max(self._available_now_us, start)
        return {"position": 0, "startTime": start}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_events_per_trigger:
            return ReadMaxRows(self.options.max_events_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_us = _now_us()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        end = self._due(start, self._available_now_us or _now_us())
        if isinstance(limit, ReadMaxRows):
            end = min(end, start["position"] + limit.max_rows)
        return {**start, "position": end}

    def partitions(self, start: dict, end: dict) -> Sequence[ReplayPartition]:
        return _split(start["position"], end["position"], self.options.num_partitions)

    def read(self, partition: ReplayPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: the recording is read again by position."""


class ReplayBatchReader(DataSourceReader):
    """The whole recording, in time order (its first ``limit`` positions with ``limit``)."""

    def __init__(self, options: ReplayOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[ReplayPartition]:
        opts = self.options
        rows = load(opts.path, opts.source_format, opts.time_column).rows
        if opts.limit is not None:
            rows = opts.limit if opts.loop else min(rows, opts.limit)
        return _split(0, rows, opts.num_partitions) or [ReplayPartition(0, 0)]

    def read(self, partition: ReplayPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)
