"""impulse.replay's pure parts: options, ordering, pacing, positions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from connectors.errors import OptionError
from impulse.events import ROWS_PER_BATCH
from impulse.replay.options import ReplayOptions
from impulse.replay.recording import due, load, rows_at
from impulse.replay.source import ReplayPartition, _read, _split

SECOND = 1_000_000


@pytest.fixture
def recording(tmp_path):
    """Five rows written out of time order, two with the same time: at 0, 1, 1, 3 and 4 s."""
    times = np.array([3, 1, 0, 4, 1], dtype=np.int64) * SECOND + 1_700_000_000 * SECOND
    table = pa.table({"id": [30, 10, 0, 40, 11], "ts": pa.array(times, pa.timestamp("us", tz="UTC"))})
    pq.write_table(table, tmp_path / "r.parquet")
    return load(str(tmp_path / "r.parquet"), "parquet", "ts")


def test_the_recording_is_ordered_by_time_ties_in_file_order(recording):
    assert recording.table["id"].to_pylist() == [0, 10, 11, 30, 40]
    assert recording.offsets_us.tolist() == [0, SECOND, SECOND, 3 * SECOND, 4 * SECOND]
    assert recording.span_us == 4 * SECOND


def test_rows_fall_due_at_their_pace_times_speed(recording):
    assert [due(recording, s * SECOND, 1.0, None, False) for s in (0, 1, 2, 3, 10)] == [1, 3, 3, 4, 5]
    assert due(recording, SECOND // 2, 2.0, None, False) == 3   # twice as fast
    assert due(recording, 2_500_000, 1.0, 2.0, False) == 5  # a fixed 2 events/s
    assert due(recording, 10 * SECOND, 1.0, None, True) == 2 * 5 + 3   # two laps of 4 s, then 2 s of the third


def test_looped_positions_continue_the_timeline(recording):
    rows = rows_at(recording, 3, 7)
    assert rows["id"].to_pylist() == [30, 40, 0, 10]
    micros = rows["ts"].cast(pa.int64()).to_pylist()
    assert micros[2] - micros[0] == (4 - 3) * SECOND       # lap 1's first row at the recording's span
    assert rows.schema == recording.table.schema


def test_a_batch_is_split_into_contiguous_ranges():
    assert [(p.first, p.end) for p in _split(10, 17, 3)] == [(10, 13), (13, 15), (15, 17)]
    assert _split(5, 5, 4) == [] and len(_split(0, 2, 4)) == 2


@pytest.mark.parametrize("options, option", [
    ({}, "path"),
    ({"path": "x"}, "timeColumn"),
    ({"path": "x", "timeColumn": "t", "speed": "2", "eventsPerSecond": "5"}, "speed/eventsPerSecond"),
    ({"path": "x", "timeColumn": "t", "sourceFormat": "avro"}, "sourceFormat"),
    ({"path": "x", "table": "t"}, "table"),
    ({"path": "x", "eventsPerSecond": "5", "speeed": "2"}, "speeed"),
])
def test_bad_options_are_named(options, option):
    with pytest.raises(OptionError) as err:
        ReplayOptions.from_options(options)
    assert err.value.option == option


def test_a_time_column_must_be_a_timestamp(tmp_path):
    pq.write_table(pa.table({"t": ["a"]}), tmp_path / "s.parquet")
    with pytest.raises(OptionError) as err:
        load(str(tmp_path / "s.parquet"), "parquet", "t")
    assert err.value.option == "timeColumn" and "TIMESTAMP" in str(err.value)


@pytest.mark.parametrize("first, end", [(0, 5), (1, 4), (3, 7), (4, 16), (2, 2 + 5 * 11), (0, 0)])
def test_rows_at_are_the_positions_rows_modulo_the_recording_each_lap_later(recording, first, end):
    """Sliced lap by lap (zero-copy) or gathered (more laps than `SLICED_LAPS`): the rows of ``p mod N``, their
    time ``⌊p / N⌋`` spans later, in one schema."""
    positions = np.arange(first, end)
    rows = rows_at(recording, first, end)
    assert rows.schema == recording.table.schema
    ids = np.array(recording.table["id"].to_pylist())
    assert rows["id"].to_pylist() == ids[positions % 5].tolist()
    micros = recording.table["ts"].cast(pa.int64()).to_numpy()
    expected = micros[positions % 5] + positions // 5 * recording.span_us
    assert rows["ts"].cast(pa.int64()).to_pylist() == expected.tolist()


def test_a_range_within_one_lap_is_a_zero_copy_slice(recording):
    rows = rows_at(recording, 1, 4)
    assert rows["id"].chunks[0].buffers()[1].address == recording.table["id"].chunks[0].buffers()[1].address


def test_a_partition_is_read_in_record_batches_of_at_most_impulses_size(tmp_path):
    """The JVM reads 64K–256K-row record batches fastest: a long range is re-chunked, its rows unchanged."""
    rows = 200_000
    times = pa.array(np.arange(rows, dtype=np.int64) * 1_000, pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table({"id": np.arange(rows), "ts": times}), tmp_path / "long.parquet")
    options = ReplayOptions.from_options({"path": str(tmp_path / "long.parquet"), "timeColumn": "ts", "loop": "true"})
    batches = list(_read(options, ReplayPartition(150_000, 450_000)))
    assert max(b.num_rows for b in batches) <= ROWS_PER_BATCH and sum(b.num_rows for b in batches) == 300_000
    ids = np.concatenate([b.column(0).to_numpy() for b in batches])
    assert (ids == np.arange(150_000, 450_000) % rows).all()
