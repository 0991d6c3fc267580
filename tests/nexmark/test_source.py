"""The nexmark source in Spark: a stream started by one Spark application and finished by another, after a
simulated crash, equals the bounded batch read; table=bid equals the combined stream's bids; option errors
reach the user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.impulse.helpers import committed_batches, uncommit_last_batch

pytestmark = pytest.mark.integration

OPTIONS = {"numPartitions": "2", "startTime": "2026-01-01T00:00:00Z", "maxEventsPerTrigger": "2000", "seed": "3"}

FIRST_APPLICATION = textwrap.dedent('''
    import json, sys
    from connectors.session import local_session

    options, out, checkpoint, limit = json.loads(sys.argv[1])
    spark = local_session("local[2]", "nexmark-first-application", **{"spark.sql.shuffle.partitions": 2})
    query = (spark.readStream.format("nexmark").options(**options).option("limit", str(limit)).load()
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None, query.exception()
    spark.stop()
''')


def batch(spark, limit: int, **options):
    return spark.read.format("nexmark").options(**OPTIONS, **options).option("limit", str(limit)).load()


def test_a_stream_continued_by_a_second_application_after_a_crash_equals_the_batch_read(spark, tmp_path):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", FIRST_APPLICATION, json.dumps([OPTIONS, out, checkpoint, 6_000])],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]
    assert len(committed_batches(checkpoint)) == 3
    uncommit_last_batch(checkpoint)  # as if the first application died before committing its last batch

    query = (spark.readStream.format("nexmark").options(**OPTIONS).option("limit", "10000").load()
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180), "Trigger.AvailableNow did not end the query"
    assert query.exception() is None

    expected = batch(spark, 10_000)
    streamed = spark.read.parquet(out).select(*expected.columns)
    assert streamed.count() == 10_000
    assert streamed.exceptAll(expected).count() == 0 and expected.exceptAll(streamed).count() == 0
    counts = dict(streamed.groupBy("event_type").count().collect())
    assert counts == {0: 200, 1: 600, 2: 9_200}

    bids = batch(spark, 10_000, table="bid")
    assert bids.count() == 9_200
    assert bids.exceptAll(expected.where("event_type = 2").select("bid.*")).count() == 0


def test_an_option_error_reaches_the_user(spark):
    for reader in (spark.read, spark.readStream):
        with pytest.raises(Exception, match="hotAuctionRatio"):
            reader.format("nexmark").option("hotAuctionRatio", "0").load()
