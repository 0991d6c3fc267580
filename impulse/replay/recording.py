"""A recording in time order, and how many of its rows are due after some time (pure, vectorised).

`load` reads the recording with pyarrow (every executor reads the same files, so the rows are a function of the
path alone) and orders it by the time column, a stable sort: rows with equal times keep their file order. The
order is cached per process, keyed by (path, format, time column, the files' sizes and modification times).

Position p of the replay is row ``p mod N`` of the ordered recording (N rows); with ``loop`` its time column is
shifted by ``⌊p / N⌋ × span`` (span: the last time minus the first), so every lap continues the timeline.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.errors import OptionError

__all__ = ["Recording", "load", "due", "rows_at"]


@dataclass(frozen=True)
class Recording:
    """The ordered rows and, with a time column, its times (µs since the first, ascending) and span (µs)."""

    table: pa.Table
    offsets_us: np.ndarray | None
    span_us: int
    time_column: str | None

    @property
    def rows(self) -> int:
        return self.table.num_rows


def _files_key(path: str) -> tuple:
    """What identifies the recording's content on disk: each file's path, size and modification time."""
    paths = [path] if os.path.isfile(path) else sorted(
        os.path.join(root, f) for root, _, files in os.walk(path) for f in files if not f.startswith((".", "_")))
    return tuple((p, os.path.getsize(p), os.stat(p).st_mtime_ns) for p in paths)


def load(path: str, source_format: str, time_column: str | None) -> Recording:
    """The recording at `path`, ordered by `time_column` (raises `OptionError` naming the path or the column)."""
    if not os.path.exists(path):
        raise OptionError("path", path, "an existing file or folder to replay")
    return _load(path, source_format, time_column, _files_key(path))


@lru_cache(maxsize=4)
def _load(path: str, source_format: str, time_column: str | None, _key: tuple) -> Recording:
    # imported here: pyarrow.dataset imports pandas (~0.2 s), which Spark's driver-side processes that only import
    # this module (to plan the source) never use
    import pyarrow.dataset as ds  # noqa: PLC0415

    fmt = "ipc" if source_format in ("arrow", "feather") else source_format
    try:
        table = ds.dataset(path, format=fmt).to_table()
    except (pa.ArrowInvalid, OSError) as err:
        raise OptionError("path", path, f"a {source_format} recording pyarrow can read ({err})") from None
    table = _normalised(table)
    if time_column is None:
        return Recording(table, None, 0, None)
    if time_column not in table.column_names:
        raise OptionError("timeColumn", time_column, f"a column of the recording: {', '.join(table.column_names)}")
    times = table[time_column]
    if not pa.types.is_timestamp(times.type):
        raise OptionError("timeColumn", time_column, f"a TIMESTAMP column (it is {times.type})")
    table = table.sort_by([(time_column, "ascending")]).combine_chunks()
    micros = table[time_column].cast(pa.int64()).to_numpy(zero_copy_only=False)
    if pc.any(pc.is_null(table[time_column])).as_py():
        raise OptionError("timeColumn", time_column, "a column without nulls: every row needs its time to be paced")
    offsets = micros - micros[0] if len(micros) else micros
    return Recording(table, offsets, int(offsets[-1]) if len(offsets) else 0, time_column)


def _normalised(table: pa.Table) -> pa.Table:
    """Timestamps in µs (Spark's unit), those without a zone kept as such (TIMESTAMP_NTZ)."""
    fields = []
    for f in table.schema:
        if pa.types.is_timestamp(f.type) and f.type.unit != "us":
            f = f.with_type(pa.timestamp("us", tz=f.type.tz))
        fields.append(f)
    return table.cast(pa.schema(fields))


def due(recording: Recording, elapsed_us: int, speed: float, rate: float | None, loop: bool) -> int:
    """How many positions are due `elapsed_us` after the start: ``⌊elapsed × rate⌋`` with a fixed rate, else the
    rows whose time since the first is at most ``elapsed × speed`` (each lap after the previous). Without `loop`, at
    most N."""
    n = recording.rows
    if n == 0 or elapsed_us < 0:
        return 0
    if rate is not None:
        count = int(elapsed_us * rate // 1_000_000)
    else:
        scaled = elapsed_us * speed
        period = max(recording.span_us, 1)
        laps = int(scaled // period) if loop else 0
        within = scaled - laps * period
        count = laps * n + int(np.searchsorted(recording.offsets_us, within, side="right"))
    return count if loop else min(count, n)


#: above this many laps in one range, `rows_at` gathers (one vectorised take) instead of slicing lap by lap
SLICED_LAPS = 8


def rows_at(recording: Recording, first: int, end: int) -> pa.Table:
    """The rows of positions ``[first, end)`` (module docstring: modulo N, time shifted per lap).

    Within a lap the positions are contiguous rows of the ordered recording: zero-copy slices of it, one per lap
    (a range spanning more than `SLICED_LAPS` laps of a short recording is gathered at once instead)."""
    n = recording.rows
    if end <= first or n == 0:
        return recording.table.slice(0, 0)
    if (end - 1) // n - first // n > SLICED_LAPS:
        return _gathered(recording, first, end)
    pieces, at = [], first
    while at < end:
        lap, index = divmod(at, n)
        length = min(end - at, n - index)
        pieces.append(_shifted(recording, recording.table.slice(index, length), np.int64(lap)))
        at += length
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)


def _gathered(recording: Recording, first: int, end: int) -> pa.Table:
    positions = np.arange(first, end, dtype=np.int64)
    return _shifted(recording, recording.table.take(pa.array(positions % recording.rows)), positions // recording.rows)


def _shifted(recording: Recording, rows: pa.Table, laps: np.ndarray) -> pa.Table:
    """`rows` with the time column moved `laps` × the span later (a lap number, or one per row)."""
    if recording.time_column is None or not np.any(laps):
        return rows
    name = recording.time_column
    index = rows.schema.get_field_index(name)
    field = rows.schema.field(index)
    shifted = rows[name].cast(pa.int64()).to_numpy(zero_copy_only=False) + laps * recording.span_us
    return rows.set_column(index, field, pa.array(shifted).cast(field.type))
