"""Debezium envelopes without Spark: each key's events chain (every ``before`` is the previous ``after``), ops and
nulls follow Debezium's rules, values do not depend on batch boundaries, a snapshot reads first, bad options and
schemas are refused naming the option."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from connectors.errors import OptionError
from impulse.changelog import READ, Changelog
from impulse.debezium import SOURCE_FIELDS, envelope_ddl
from impulse.events import EventLayout, event_batches
from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from impulse.schema import row_spec

IMAGE = StructType([StructField("id", LongType()), StructField("name", StringType()), StructField("balance", DoubleType())])
SOURCE = StructType([StructField(n, LongType() if t == "BIGINT" else StringType(), False) for n, t in SOURCE_FIELDS])
SCHEMA = StructType([StructField("key", StructType([StructField("id", LongType(), False)]), False),
                     StructField("before", IMAGE), StructField("after", IMAGE), StructField("op", StringType(), False),
                     StructField("ts_ms", LongType(), False), StructField("source", SOURCE, False)])
BASE = {"eventsPerSecond": "1000", "changelog.key": "id", "changelog.envelope": "debezium"}


def rows_of(options: dict, schema: StructType = SCHEMA, partitions: int = 3, per_partition: int = 600,
            batch: int = 131_072) -> list[dict]:
    """Every event of each partition as a Python dict, read in batches of `batch` rows."""
    opts = ImpulseOptions.from_options({**BASE, "numPartitions": str(partitions), **options})
    rows = row_spec(schema, opts.fields, seed=opts.seed, payload_bytes=0, changelog=opts.changelog,
                    debezium=opts.debezium)
    layout = EventLayout(1_000_000, Schedule(1_000_000, opts.delay_us, 0, None), 0, None, 0, rows, partitions)
    return [row for p in range(partitions) for b in event_batches(p, 0, per_partition, layout, batch)
            for row in b.to_pylist()]


@pytest.mark.parametrize("live, weights", [(1, "1,8,1"), (7, "1,3,1"), (12, "2,5,1"), (64, "1,1,0")])
def test_previous_counter_is_the_keys_last_change(live, weights):
    changelog = Changelog.parse("id", weights, live, seed=11)
    keys, _ = changelog.changes_of(2, 0, live * 30, 3)
    expected, last = np.full(len(keys), -1), {}
    for i, key in enumerate(keys.tolist()):
        expected[i] = last.get(key, -1)
        last[key] = i
    assert (changelog.previous_counters(2, 0, len(keys)) == expected).all()
    first = live * 3 + 1  # any range: the same values
    assert (changelog.previous_counters(2, first, live * 5) == expected[first:first + live * 5]).all()


def test_snapshot_reads_the_first_round():
    changelog = Changelog.parse("id", "1,8,1", 16, seed=3, snapshot=True)
    _, ops = changelog.changes_of(0, 0, 200, 2)
    assert (ops[:16] == READ).all() and (ops[16:] != READ).all()
    assert Changelog.op_array(ops[14:18]).to_pylist() == ["read", "read", "update", "update"]


@pytest.mark.parametrize("snapshot", [False, True])
def test_each_keys_events_chain(snapshot):
    rows = rows_of({"changelog.liveKeys": "5", "changelog.weights": "1,3,1", "changelog.snapshot": str(snapshot).lower()})
    by_key: dict[int, list[dict]] = {}
    for row in sorted(rows, key=lambda r: r["source"]["pos"]):
        by_key.setdefault(row["key"]["id"], []).append(row)
    deletes = 0
    for key, events in by_key.items():
        assert events[0]["op"] in ("r", "c") and events[0]["before"] is None
        assert (events[0]["op"] == "r") == (snapshot and events[0]["source"]["pos"] < 5 * 3)
        for earlier, later in zip(events, events[1:]):
            assert later["op"] in ("u", "d") and later["before"] == earlier["after"]
        for event in events:
            assert event["source"]["snapshot"] == ("true" if event["op"] == "r" else "false")
            for image in (event["before"], event["after"]):
                assert image is None or image["id"] == key
        deletes += events[-1]["op"] == "d"
        assert all(e["after"] is not None for e in events if e["op"] != "d")
        assert events[-1]["after"] is None or events[-1]["op"] != "d"
    assert deletes > 0
    assert sorted(r["source"]["pos"] for r in rows) == list(range(len(rows)))  # counter × partitions + subtask
    assert {r["source"]["connector"] for r in rows} == {"impulse"}


def test_values_do_not_depend_on_batches():
    options = {"changelog.liveKeys": "9", "seed": "4", "fields.balance.kind": "normal", "fields.balance.mean": "5"}
    assert rows_of(options, batch=7) == rows_of(options)


def test_ts_ms_is_the_event_time():
    rows = rows_of({}, partitions=1, per_partition=20)
    assert [r["ts_ms"] for r in rows] == [1000 + i for i in range(20)]  # 1000 events/s from 1 s


def test_envelope_ddl_names_every_column():
    ddl = envelope_ddl("id", "id BIGINT, name STRING")
    assert ddl.startswith("key STRUCT<id: BIGINT NOT NULL> NOT NULL, before STRUCT<id BIGINT, name STRING>")
    assert all(name in ddl for name, _ in SOURCE_FIELDS)


@pytest.mark.parametrize("schema, options, option", [
    (StructType([StructField("id", LongType()), StructField("op", StringType())]), {}, "changelog.envelope"),
    (SCHEMA, {"changelog.key": "name"}, "changelog.envelope"),
    (SCHEMA, {"fields.id.kind": "random"}, "fields.id.kind"),
    (SCHEMA, {"fields.nope.kind": "random"}, "fields.nope.kind"),
])
def test_a_schema_that_is_not_the_envelope_is_refused(schema, options, option):
    with pytest.raises(OptionError, match=option.replace(".", r"\.")):
        rows_of(options, schema=schema, per_partition=1)


@pytest.mark.parametrize("options, option", [
    ({"changelog.key": None, "changelog.envelope": "debezium"}, "changelog.envelope"),
    ({"changelog.envelope": "none", "changelog.table": "t"}, "changelog.table"),
    ({"changelog.envelope": "maxwell"}, "changelog.envelope"),
    ({"changelog.snapshot": "maybe"}, "changelog.snapshot"),
])
def test_bad_envelope_options_are_refused(options, option):
    given = {k: v for k, v in {**BASE, **options}.items() if v is not None}
    with pytest.raises(OptionError, match=option.replace(".", r"\.")):
        ImpulseOptions.from_options(given)


def test_arrow_schema_matches_the_batches():
    opts = ImpulseOptions.from_options({**BASE, "numPartitions": "1"})
    rows = row_spec(SCHEMA, {}, seed=0, payload_bytes=0, changelog=opts.changelog, debezium=opts.debezium)
    assert rows.arrow.field("before").type == rows.arrow.field("after").type == pa.struct(
        [pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("balance", pa.float64())])
