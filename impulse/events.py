"""Building impulse events as Arrow record batches, vectorised (no Python loop per row).

An event is identified by ``(subtask_index, counter)``. Everything in its row is a pure function of
that identity and of `EventLayout`, so a replayed range yields byte-identical batches:

- ``counter`` BIGINT, ``subtask_index`` BIGINT;
- ``timestamp`` TIMESTAMP (UTC, µs): ``start + interval × counter`` when an interval is set, else the
  event's scheduled emission time ``anchor + offset(counter − base)`` (see `impulse.schedule`); with
  `Disorder`, minus the event's drawn delay;
- ``payload`` BINARY of exactly `payload_bytes` bytes (only when > 0): the counter (8 bytes, big
  endian), then the subtask index (8 bytes, big endian), then the filler ``b"impulse."`` repeated;
  truncated to the size when it is smaller than 16;
- every other column of a user schema: `impulse.fields`;
- with `Duplicates` (``duplicateRate``), a share of rows delivered again a few events later: `impulse.duplicates`;
- with a Debezium envelope (``changelog.envelope=debezium``) the envelope's columns instead: `impulse.debezium`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from impulse import draws
from impulse.changelog import ChangeColumn, Changelog
from impulse.duplicates import Duplicates
from impulse.schedule import Schedule
from impulse.schema import RowSpec, arrow_schema, default_rows, spark_schema

__all__ = ["Disorder", "EventLayout", "arrow_schema", "spark_schema", "event_batches", "ROWS_PER_BATCH"]

# 64K-256K rows per record batch were fastest through Spark's Python data source path.
ROWS_PER_BATCH = 131_072
_MAX_BATCH_BYTES = 64 * 1024 * 1024  # keeps payload offsets in int32 and a batch's memory bounded
_FILLER = np.frombuffer(b"impulse.", dtype=np.uint8)


@dataclass(frozen=True)
class Disorder:
    """Out-of-order and late event time: how far an event's ``timestamp`` lies before its schedule.

    Each event is delayed by an integer number of µs drawn uniformly in ``[0, max_delay_us]``; a
    `late_rate` share of events (drawn independently) by a further `late_by_us`. Arrival (pacing) is
    unchanged. Both draws are pure functions of (seed, subtask_index, counter): streams ``timestamp``/
    ``disorder`` and ``timestamp``/``late`` of `impulse.draws`.
    """

    max_delay_us: int
    late_rate: float
    late_by_us: int
    seed: int

    def delays_us(self, subtask: int, first: int, count: int) -> np.ndarray:
        delays = np.zeros(count, dtype=np.int64)
        if self.max_delay_us:
            key = draws.stream_key(self.seed, "timestamp", "disorder")
            delays += draws.integers(draws.words(key, subtask, first, count), 0, self.max_delay_us)
        if self.late_rate:
            key = draws.stream_key(self.seed, "timestamp", "late")
            late = draws.uniform(draws.words(key, subtask, first, count)) < self.late_rate
            delays[late] += self.late_by_us
        return delays


@dataclass(frozen=True)
class EventLayout:
    """What shapes a row besides its identity. Picklable; sent to executors inside the partitions."""

    start_us: int
    schedule: Schedule
    base_counter: int
    interval_us: int | None
    payload_bytes: int
    rows: RowSpec | None = None  # None: the default columns
    partitions: int = 1
    disorder: Disorder | None = None
    duplicates: Duplicates | None = None
    ref_start_us: int | None = None  # the timeline kind=ref columns refer on (``refStartTime``); None: start_us

    def __post_init__(self) -> None:
        if self.rows is None:
            object.__setattr__(self, "rows", default_rows(self.payload_bytes))

    def scheduled_us(self, counters: np.ndarray, subtask: int = 0) -> np.ndarray:
        """Each event's time before disorder: ``start + interval × counter``, or its scheduled time (in partition
        `subtask`: Poisson arrivals differ per partition)."""
        if self.interval_us is not None:
            timestamps = counters * self.interval_us
            timestamps += self.start_us
            return timestamps
        return self.schedule.times_us(counters, self.base_counter, subtask)

    @property
    def ref_origin_us(self) -> int:
        """Where the referenced streams start (``refStartTime``, else this stream's own start): a ``kind=ref``
        column is given each event's scheduled time minus it."""
        return self.start_us if self.ref_start_us is None else self.ref_start_us

    def timestamps_us(self, counters: np.ndarray, subtask: int = 0) -> np.ndarray:
        timestamps = self.scheduled_us(counters, subtask)
        if self.disorder is not None and len(counters):
            timestamps -= self.disorder.delays_us(subtask, int(counters[0]), len(counters))
        return timestamps


def event_batches(subtask_index: int, first: int, end: int, layout: EventLayout,
                  rows_per_batch: int = ROWS_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """Yield the events ``counter ∈ [first, end)`` of one partition in record batches of ≤ `rows_per_batch` rows
    (with `EventLayout.duplicates`, each batch also holds the copies arriving among its events)."""
    if layout.payload_bytes:
        rows_per_batch = max(1, min(rows_per_batch, _MAX_BATCH_BYTES // layout.payload_bytes))
    for lo in range(first, end, rows_per_batch):
        hi = min(lo + rows_per_batch, end)
        batch = _events(subtask_index, lo, hi - lo, layout, end)
        if layout.duplicates is not None:
            batch = _with_copies(batch, subtask_index, lo, hi, layout)
        yield batch


def _events(subtask_index: int, lo: int, count: int, layout: EventLayout, end: int) -> pa.RecordBatch:
    """The rows of events ``[lo, lo + count)`` of a partition whose events end at `end`, one each (an SCD2 history:
    one per version, `impulse.history`)."""
    counters = np.arange(lo, lo + count, dtype=np.int64)
    if layout.rows.history is not None:
        return layout.rows.history.batch(subtask_index, lo, count, layout.partitions, end, lambda first, n: layout.timestamps_us(
            np.arange(first, first + n, dtype=np.int64), subtask_index))
    if layout.rows.envelope is not None:  # a Debezium envelope: `impulse.debezium`
        return layout.rows.envelope.batch(subtask_index, lo, count, layout.partitions,
                                          layout.timestamps_us(counters, subtask_index))
    columns = []
    changes = None  # (keys, ops) of a changelog, made for the first of its columns
    for column in layout.rows.columns:
        if column == "counter":
            columns.append(pa.array(counters))
        elif column == "subtask_index":
            columns.append(pa.array(np.full(count, subtask_index, dtype=np.int64)))
        elif column == "timestamp":
            columns.append(pa.array(layout.timestamps_us(counters, subtask_index), type=pa.timestamp("us", tz="UTC")))
        elif column == "payload":
            columns.append(_payloads(counters, subtask_index, layout.payload_bytes))
        elif isinstance(column, ChangeColumn):
            if changes is None:
                changes = column.changelog.changes_of(subtask_index, lo, count, layout.partitions)
            columns.append(pa.array(changes[0]) if column.role == "key" else Changelog.op_array(changes[1]))
        elif column.refers:
            columns.append(column.array(subtask_index, lo, count, layout.partitions,
                                        layout.scheduled_us(counters, subtask_index) - layout.ref_origin_us))
        else:
            columns.append(column.array(subtask_index, lo, count, layout.partitions))
    return pa.RecordBatch.from_arrays(columns, schema=layout.rows.arrow)


def _with_copies(batch: pa.RecordBatch, subtask_index: int, lo: int, hi: int, layout: EventLayout) -> pa.RecordBatch:
    """`batch` (events ``[lo, hi)``) with the copies arriving among them, each right after the event it follows
    (`impulse.duplicates`): the copied rows are made again from their counters, so they equal the originals."""
    sources, arrivals = layout.duplicates.copies(subtask_index, lo, hi)
    if not len(sources):
        return batch
    start = int(sources[0]) if len(sources) == 1 else int(sources.min())
    made = _events(subtask_index, start, int(sources.max()) + 1 - start, layout, hi)
    copies = made.take(pa.array(sources - start))
    n, m = hi - lo, len(sources)
    order = np.empty(n + m, dtype=np.int64)  # each event, then the copies arriving right after it
    order[np.arange(n) + np.searchsorted(arrivals, np.arange(lo, hi), side="left")] = np.arange(n)
    order[arrivals - lo + 1 + np.arange(m)] = np.arange(n, n + m)
    return pa.RecordBatch.from_arrays([_merged(batch.column(i), copies.column(i), order)
                                       for i in range(batch.num_columns)], schema=batch.schema)


def _merged(events: pa.Array, copies: pa.Array, order: np.ndarray) -> pa.Array:
    """``concat(events, copies)[order]``: numpy's take for fixed-width columns without nulls (Arrow's costs ~10× more
    there), Arrow's for the others."""
    if pa.types.is_primitive(events.type) and not events.null_count and not copies.null_count:
        values = np.concatenate([events.to_numpy(zero_copy_only=False), copies.to_numpy(zero_copy_only=False)])
        return pa.array(values[order], type=events.type)
    return pa.concat_arrays([events, copies]).take(pa.array(order))


def _payloads(counters: np.ndarray, subtask_index: int, size: int) -> pa.Array:
    rows = len(counters)
    data = np.empty((rows, max(size, 16)), dtype=np.uint8)
    data[:, :8] = counters.astype(">i8").view(np.uint8).reshape(rows, 8)
    data[:, 8:16] = np.frombuffer(int(subtask_index).to_bytes(8, "big"), dtype=np.uint8)
    if size > 16:
        data[:, 16:] = np.resize(_FILLER, size - 16)
    data = np.ascontiguousarray(data[:, :size])
    offsets = np.arange(0, (rows + 1) * size, size, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
