"""Changelog streams without Spark: every key's history is valid on over a million events in several
partitions, the mix follows the weights, values do not depend on batch boundaries, bad options are refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType

from connectors.errors import OptionError
from impulse.changelog import DELETE, INSERT, UPDATE, Changelog
from impulse.events import EventLayout, event_batches
from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from impulse.schema import row_spec

SCHEMA = StructType([StructField("id", LongType()), StructField("op", StringType()), StructField("balance", DoubleType())])


def history(changelog: Changelog, partitions: int, per_partition: int, batch: int = 131_072):
    """(keys, ops, partitions, counters) of every event, each partition read in batches of `batch`."""
    keys, ops, subtasks, counters = [], [], [], []
    for subtask in range(partitions):
        for first in range(0, per_partition, batch):
            count = min(batch, per_partition - first)
            k, o = changelog.changes_of(subtask, first, count, partitions)
            keys.append(k), ops.append(o)
            subtasks.append(np.full(count, subtask)), counters.append(np.arange(first, first + count))
    return tuple(np.concatenate(x) for x in (keys, ops, subtasks, counters))


def assert_valid(keys, ops, subtasks, counters, partitions: int) -> None:
    """Per key, in counter order: one partition (key mod partitions), an insert first, then updates, and a
    delete only as the last change."""
    order = np.lexsort((counters, keys))
    keys, ops, subtasks, counters = keys[order], ops[order], subtasks[order], counters[order]
    assert (keys % partitions == subtasks).all()
    starts = np.ones(len(keys), dtype=bool)
    starts[1:] = keys[1:] != keys[:-1]
    assert (ops[starts] == INSERT).all() and (ops[~starts] != INSERT).all()
    ends = np.ones(len(keys), dtype=bool)
    ends[:-1] = starts[1:]
    assert (ops[~ends] != DELETE).all()  # nothing after a delete
    same = ~starts[1:]
    assert (counters[1:][same] > counters[:-1][same]).all()


@pytest.mark.parametrize("weights, live, per_partition", [
    ("20,70,10", 1000, 262_500), ("1,8,1", 1024, 50_000), ("1,1,0", 7, 50_000), ("1,0,1", 1, 50_000), ("2,1,1", 64, 50_000)])
def test_every_keys_history_is_valid_on_over_a_million_events(weights, live, per_partition):
    changelog = Changelog.parse("id", weights, live, seed=3)
    events = history(changelog, 4, per_partition)
    assert len(events[0]) >= 1_000_000 or per_partition < 262_500
    assert_valid(*events, partitions=4)


def test_the_mix_follows_the_weights():
    changelog = Changelog.parse("id", "20,70,10", 1000, seed=1)
    ops = history(changelog, 3, 400_000)[1]  # 400 whole blocks of 1000 keys × 5 changes per partition
    shares = np.bincount(ops, minlength=3) / len(ops)
    assert shares[INSERT] == pytest.approx(0.2, abs=1e-12)  # one insert per key, exactly
    assert shares[DELETE] == pytest.approx(0.1, abs=4 * np.sqrt(0.5 * 0.5 / 240_000) * 0.2)
    assert shares[UPDATE] == pytest.approx(1 - shares[INSERT] - shares[DELETE])


def test_changes_do_not_depend_on_batch_boundaries_and_depend_on_the_seed():
    changelog = Changelog.parse("id", "20,70,10", 100, seed=9)
    whole = changelog.changes_of(2, 0, 10_000, 3)
    for size in (1, 7, 99, 100, 101, 4096):
        parts = [changelog.changes_of(2, lo, min(size, 10_000 - lo), 3) for lo in range(0, 10_000, size)]
        assert all(np.array_equal(np.concatenate([p[i] for p in parts]), whole[i]) for i in (0, 1)), size
    other = Changelog.parse("id", "20,70,10", 100, seed=10).changes_of(2, 0, 10_000, 3)
    assert not np.array_equal(other[0], whole[0]) and not np.array_equal(other[1], whole[1])


def test_rows_hold_the_key_and_op_and_other_columns_are_generated():
    opts = ImpulseOptions.from_options({"delay": "1ms", "numPartitions": "2", "changelog.key": "ID",
                                        "changelog.weights": "1,2,1", "changelog.liveKeys": "3"})
    rows = row_spec(SCHEMA, {"balance": {"kind": "normal", "mean": "100"}}, seed=0, payload_bytes=0,
                    changelog=opts.changelog)
    layout = EventLayout(0, Schedule(0, 1000.0), 0, None, 0, rows, 2)
    table = pa.Table.from_batches(list(event_batches(1, 0, 12, layout)))
    keys, ops = opts.changelog.changes_of(1, 0, 12, 2)
    assert table.column("id").to_pylist() == keys.tolist()
    assert table.column("op").to_pylist() == [("insert", "update", "delete")[o] for o in ops]
    assert table.column("op").to_pylist()[:3] == ["insert"] * 3 and table.schema.field("op").type == pa.string()
    assert 50 < np.mean(table.column("balance").to_numpy()) < 150


@pytest.mark.parametrize("options, option, words", [
    ({"changelog.key": "id", "changelog.weights": "1,8"}, "changelog.weights", "three numbers"),
    ({"changelog.key": "id", "changelog.weights": "0,8,1"}, "changelog.weights", "I > 0"),
    ({"changelog.key": "id", "changelog.weights": "1,1,2"}, "changelog.weights", "D ≤ I"),
    ({"changelog.key": "id", "changelog.weights": "3,5,2"}, "changelog.weights", "(I+U+D)/I = 3.33333"),
    ({"changelog.key": "id", "changelog.weights": "1,0,0"}, "changelog.weights", "whole number ≥ 2"),
    ({"changelog.key": "id", "changelog.liveKeys": "0"}, "changelog.liveKeys", "an integer from 1"),
    ({"changelog.weights": "1,8,1"}, "changelog.weights", "without 'changelog.key'"),
])
def test_bad_changelog_options_are_refused(options, option, words):
    with pytest.raises(OptionError) as err:
        ImpulseOptions.from_options({"delay": "1ms", **options})
    assert err.value.option == option and words in str(err.value), str(err.value)


@pytest.mark.parametrize("schema, fields, words", [
    (StructType([StructField("id", IntegerType()), StructField("op", StringType())]), {}, "a BIGINT column of the schema"),
    (StructType([StructField("key", LongType()), StructField("op", StringType())]), {}, "a BIGINT column of the schema"),
    (StructType([StructField("id", LongType()), StructField("kind", StringType())]), {}, "an 'op STRING' column"),
    (SCHEMA, {"id": {"kind": "sequence"}}, "the changelog fills it"),
])
def test_the_schema_must_hold_the_key_and_op(schema, fields, words):
    changelog = Changelog.parse("id", None, 8, 0)
    with pytest.raises(OptionError, match=words.replace("(", r"\(")):
        row_spec(schema, fields, seed=0, payload_bytes=0, changelog=changelog)
