"""SCD2 history without Spark: the versions equal a history computed in the test by replaying the changelog (the
same options' changelog rows, in counter order per key), whatever the batch boundaries; bad options refused."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType, StructField, StructType, TimestampType

from connectors.errors import OptionError
from impulse.events import EventLayout, event_batches
from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from impulse.schema import row_spec

IMAGE = [StructField("id", LongType()), StructField("balance", DoubleType())]
HISTORY = StructType([*IMAGE, StructField("valid_from", TimestampType(), False), StructField("valid_to", TimestampType()),
                      StructField("is_current", BooleanType(), False)])
CHANGES = StructType([*IMAGE, StructField("op", StringType()), StructField("timestamp", TimestampType())])
BASE = {"eventsPerSecond": "1000", "changelog.key": "id", "changelog.liveKeys": "6", "changelog.weights": "1,3,1",
        "fields.balance.kind": "normal", "fields.balance.mean": "100", "numPartitions": "2"}
PER_PARTITION = 500


def rows(schema: StructType, options: dict, batch: int = 131_072) -> list[dict]:
    opts = ImpulseOptions.from_options({**BASE, **options})
    spec = row_spec(schema, opts.fields, seed=opts.seed, payload_bytes=0, changelog=opts.changelog, scd2=opts.scd2)
    layout = EventLayout(0, Schedule(0, opts.delay_us), 0, None, 0, spec, 2)
    return pa.Table.from_batches([b for p in range(2) for b in event_batches(p, 0, PER_PARTITION, layout, batch)]).to_pylist()


def expected_history(changes: list[dict]) -> list[dict]:
    """Replay: each insert or update opens a version, the key's next change closes it."""
    versions: list[dict] = []
    open_: dict[int, dict] = {}
    for change in sorted(changes, key=lambda c: (c["timestamp"], c["id"])):
        previous = open_.pop(change["id"], None)
        if previous is not None:
            previous["valid_to"], previous["is_current"] = change["timestamp"], False
        if change["op"] != "delete":
            version = {"id": change["id"], "balance": change["balance"], "valid_from": change["timestamp"],
                       "valid_to": None, "is_current": True}
            versions.append(version)
            open_[change["id"]] = version
    return versions


@pytest.mark.parametrize("batch", [7, 131_072])
def test_versions_equal_the_replayed_changelog(batch):
    history = rows(HISTORY, {"changelog.history": "scd2"}, batch)
    changes = rows(CHANGES, {})
    key = lambda v: (v["id"], v["valid_from"])  # noqa: E731 - a sort key
    assert sorted(history, key=key) == sorted(expected_history(changes), key=key)
    assert any(not v["is_current"] for v in history) and any(v["is_current"] for v in history)
    assert all(v["valid_to"] is None or v["valid_to"] > v["valid_from"] for v in history)
    assert isinstance(history[0]["valid_from"], dt.datetime)


@pytest.mark.parametrize("options, option", [
    ({"changelog.history": "scd2", "changelog.envelope": "debezium"}, "changelog.history"),
    ({"changelog.history": "scd3"}, "changelog.history"),
    ({"changelog.image": "id BIGINT"}, "changelog.image"),
])
def test_bad_history_options_are_refused(options, option):
    with pytest.raises(OptionError, match=rf"option '{option}'"):
        ImpulseOptions.from_options({**BASE, **options})


def test_a_schema_that_is_not_the_history_is_refused():
    with pytest.raises(OptionError, match=r"option 'changelog.history'"):
        rows(CHANGES, {"changelog.history": "scd2"})
