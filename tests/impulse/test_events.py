"""`impulse.events`: vectorised Arrow record batches, a pure function of (partition, counters, layout) (no Spark)."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, LongType, StructField, StructType, TimestampType

from impulse.events import ROWS_PER_BATCH, EventLayout, arrow_schema, event_batches, spark_schema
from impulse.schedule import Schedule

START = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z, µs


def layout(*, interval_us=None, payload_bytes=0, delay_us=1000.0, ramp_us=0, anchor_us=START, base=0) -> EventLayout:
    return EventLayout(START, Schedule(anchor_us, delay_us, ramp_us), base, interval_us, payload_bytes)


def table(subtask, first, end, lay, **kw) -> pa.Table:
    batches = list(event_batches(subtask, first, end, lay, **kw))
    return pa.Table.from_batches(batches, schema=arrow_schema(lay.payload_bytes))


def expected_payload(counter: int, subtask: int, size: int) -> bytes:
    head = counter.to_bytes(8, "big", signed=True) + subtask.to_bytes(8, "big", signed=True)
    filler = b"impulse." * (size // 8 + 1)
    return (head + filler)[:size]


def test_schema_matches_what_spark_requires():
    """The Arrow schema must equal `to_arrow_schema` of the declared Spark schema, nullability included."""
    from pyspark.sql.pandas.types import to_arrow_schema

    declared = StructType([StructField("counter", LongType(), False), StructField("subtask_index", LongType(), False),
                           StructField("timestamp", TimestampType(), False)])  # = spark_schema(0), parsed
    assert to_arrow_schema(declared, timezone="UTC").equals(arrow_schema(0))
    declared = declared.add(StructField("payload", BinaryType(), False))
    assert to_arrow_schema(declared, timezone="UTC").equals(arrow_schema(8))
    assert arrow_schema(0).names == ["counter", "subtask_index", "timestamp"]
    assert arrow_schema(0).field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert arrow_schema(8).field("payload").type == pa.binary()
    assert not any(f.nullable for f in arrow_schema(8))  # no event has a null field
    assert spark_schema(0) == "counter BIGINT NOT NULL, subtask_index BIGINT NOT NULL, timestamp TIMESTAMP NOT NULL"
    assert spark_schema(1) == spark_schema(0) + ", payload BINARY NOT NULL"


@pytest.mark.parametrize("payload_bytes", [0, 24])
def test_batches_are_record_batches_of_the_declared_schema(payload_bytes):
    batches = list(event_batches(1, 0, 300_000, layout(payload_bytes=payload_bytes)))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    assert all(b.schema == arrow_schema(payload_bytes) for b in batches)
    assert all(0 < b.num_rows <= ROWS_PER_BATCH for b in batches)
    assert sum(b.num_rows for b in batches) == 300_000


def test_counters_are_the_range_and_subtask_index_is_constant():
    t = table(3, 17, 17 + 1000, layout(), rows_per_batch=64)
    assert t.column("counter").to_pylist() == list(range(17, 1017))
    assert set(t.column("subtask_index").to_pylist()) == {3}
    assert t.column("counter").null_count == 0 and t.column("timestamp").null_count == 0


def test_empty_range_yields_nothing():
    assert list(event_batches(0, 5, 5, layout())) == []


def test_interval_timestamp_is_start_plus_interval_times_counter():
    interval = 10_000
    t = table(2, 0, 5000, layout(interval_us=interval, delay_us=1.0))
    counters = np.asarray(t.column("counter"))
    micros = t.column("timestamp").cast(pa.int64()).to_numpy()
    assert np.array_equal(micros, START + interval * counters)


def test_interval_timestamps_do_not_depend_on_the_schedule():
    a = table(0, 100, 200, layout(interval_us=1000, delay_us=5.0, ramp_us=77, anchor_us=START + 12345, base=50))
    b = table(0, 100, 200, layout(interval_us=1000))
    assert a.equals(b)


@pytest.mark.parametrize("ramp_us, base, anchor", [(0, 0, START), (2_000_000, 0, START), (0, 500, START + 999_999), (1_000_000, 250, START + 5)])
def test_scheduled_timestamp_is_anchor_plus_offset_since_the_anchor(ramp_us, base, anchor):
    lay = layout(delay_us=3 * 1e6 / 7, ramp_us=ramp_us, anchor_us=anchor, base=base)
    t = table(1, base, base + 2000, lay)
    counters = np.asarray(t.column("counter"))
    micros = t.column("timestamp").cast(pa.int64()).to_numpy()
    assert np.array_equal(micros, anchor + lay.schedule.offsets_us(counters - base))
    assert micros[0] == anchor
    assert (np.diff(micros) >= 0).all()


@pytest.mark.parametrize("size", [1, 7, 8, 15, 16, 17, 24, 100, 1000])
def test_payload_has_the_exact_size_and_deterministic_content(size):
    t = table(5, 250, 400, layout(payload_bytes=size), rows_per_batch=64)
    payloads = t.column("payload").to_pylist()
    assert all(len(p) == size for p in payloads)
    assert payloads == [expected_payload(c, 5, size) for c in range(250, 400)]


def test_payloads_are_unique_per_event_when_they_hold_the_key():
    a = table(0, 0, 1000, layout(payload_bytes=16)).column("payload").to_pylist()
    b = table(1, 0, 1000, layout(payload_bytes=16)).column("payload").to_pylist()
    assert len(set(a) | set(b)) == 2000


def test_large_payloads_cap_the_rows_per_batch():
    size = 1024 * 1024
    batches = list(event_batches(0, 0, 130, layout(payload_bytes=size)))
    assert max(b.num_rows for b in batches) == 64  # 64 MiB per batch at most
    assert sum(b.num_rows for b in batches) == 130
    assert all(len(p) == size for b in batches for p in b.column(3).to_pylist()[:2])


@pytest.mark.parametrize("rows_per_batch", [1, 7, 1000, ROWS_PER_BATCH])
def test_same_rows_whatever_the_batching_and_on_replay(rows_per_batch):
    lay = layout(payload_bytes=20, ramp_us=100_000, delay_us=0.7)
    reference = table(4, 10, 3000, lay, rows_per_batch=3000)
    assert table(4, 10, 3000, lay, rows_per_batch=rows_per_batch).equals(reference)
    assert table(4, 10, 3000, lay, rows_per_batch=rows_per_batch).equals(reference)  # replay


def test_split_ranges_concatenate_to_the_whole():
    lay = layout(payload_bytes=9, delay_us=2.5)
    whole = table(0, 0, 1000, lay)
    parts = pa.concat_tables([table(0, 0, 333, lay), table(0, 333, 334, lay), table(0, 334, 1000, lay)])
    assert parts.equals(whole)


def test_layout_is_picklable():
    lay = layout(payload_bytes=3, interval_us=5)
    assert pickle.loads(pickle.dumps(lay)) == lay
