"""The README's customers-and-orders join: every order joins its customer exactly once, streaming and batch."""

from __future__ import annotations

import pytest

from tests.readme import python_block

pytestmark = pytest.mark.integration


def readme_block() -> str:
    return python_block("### References between streams")


def test_every_order_joins_its_customer_exactly_once_in_the_stream_and_the_batch_read(spark, tmp_path):
    from pyspark.sql import functions as F

    streaming = {"spark": spark, "F": F}
    exec(compile(readme_block(), "README.md", "exec"), streaming)  # noqa: S102 - the README's own example
    query = (streaming["joined"].select("o.order_id", "c.id").writeStream.format("memory").queryName("joined_refs")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert query.awaitTermination(300) and query.exception() is None
    got = spark.table("joined_refs")
    assert got.count() == 10_000 == got.select("order_id").distinct().count()

    batch = {"spark": spark, "F": F}  # the same block on spark.read: withWatermark does nothing on a batch
    exec(compile(readme_block().replace("spark.readStream", "spark.read"), "README.md", "exec"), batch)  # noqa: S102
    rows = batch["joined"].select("o.order_id", "o.customer_id", "c.id").collect()
    assert len(rows) == 10_000 == len({r[0] for r in rows})
    assert sorted(r[0] for r in rows) == list(range(10_000))
    assert all(r[1] == r[2] for r in rows)
    assert sorted((r[0], r[2]) for r in rows) == sorted(tuple(r) for r in got.collect())  # the same pairs
