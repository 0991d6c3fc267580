"""SCD2 history through Spark: the batch read (schema from changelog.image) equals the history the test replays
from the same options' changelog read; a stream of it is refused naming changelog.history."""

from __future__ import annotations

import pytest

from tests.impulse.test_history import expected_history

pytestmark = pytest.mark.integration

OPTIONS = {"eventsPerSecond": "1000", "startTime": "0", "numPartitions": "2", "limit": "2010", "changelog.key": "id",
           "changelog.liveKeys": "10", "changelog.weights": "2,5,1", "fields.balance.kind": "normal",
           "fields.balance.mean": "100"}


def test_the_history_read_equals_the_replayed_changelog(spark):
    history = spark.read.format("impulse").options(**OPTIONS).option("changelog.history", "scd2") \
        .option("changelog.image", "id BIGINT, balance DOUBLE").load()
    assert history.columns == ["id", "balance", "valid_from", "valid_to", "is_current"]
    changes = spark.read.format("impulse").schema("id BIGINT, balance DOUBLE, op STRING, timestamp TIMESTAMP") \
        .options(**OPTIONS).load()
    key = lambda v: (v["id"], v["valid_from"])  # noqa: E731 - a sort key
    got = sorted((r.asDict() for r in history.collect()), key=key)
    assert got == sorted(expected_history([r.asDict() for r in changes.collect()]), key=key)
    assert history.where("is_current").count() == history.where("valid_to IS NULL").count() > 0


def test_a_stream_of_the_history_is_refused(spark, tmp_path):
    stream = spark.readStream.format("impulse").options(**OPTIONS).option("changelog.history", "scd2") \
        .option("changelog.image", "id BIGINT, balance DOUBLE").load()
    query = stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")).start()
    with pytest.raises(Exception, match="changelog.history"):
        query.awaitTermination(120)
