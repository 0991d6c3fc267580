"""The README's customers-and-orders join: every order joins its customer exactly once, streaming and batch."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import functions as F

from tests.readme import DOCS, python_block

pytestmark = pytest.mark.integration


# IMPULSE_FULL=1: the full size, 1M orders (and the 20,000 customers 200 s of them refer to); CI runs the
# README's 10,000 as written
ORDERS, CUSTOMERS = (1_000_000, 20_000) if os.environ.get("IMPULSE_FULL") == "1" else (10_000, 1_000)


def readme_block() -> str:
    block = python_block("## References between streams", page=DOCS / "how-to" / "related-streams.md")
    assert block.count('"limit", 1_000)') == block.count('"limit", 10_000)') == 1, "the README's limits moved"
    return block.replace('"limit", 1_000)', f'"limit", {CUSTOMERS})').replace('"limit", 10_000)', f'"limit", {ORDERS})')


def test_every_order_joins_its_customer_exactly_once_in_the_stream_and_the_batch_read(spark, tmp_path):
    streaming = {"spark": spark, "F": F}
    exec(compile(readme_block(), "README.md", "exec"), streaming)  # noqa: S102 - the README's own example
    query = (streaming["joined"].select("o.order_id", "c.id").writeStream.format("memory").queryName("joined_refs")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert query.awaitTermination(300) and query.exception() is None
    got = spark.table("joined_refs")
    assert got.count() == ORDERS == got.select("order_id").distinct().count()

    batch = {"spark": spark, "F": F}  # the same block on spark.read: withWatermark does nothing on a batch
    exec(compile(readme_block().replace("spark.readStream", "spark.read"), "README.md", "exec"), batch)  # noqa: S102
    rows = batch["joined"].select("o.order_id", "o.customer_id", "c.id").collect()
    assert len(rows) == ORDERS == len({r[0] for r in rows})
    assert sorted(r[0] for r in rows) == list(range(ORDERS))
    assert all(r[1] == r[2] for r in rows)
    assert sorted((r[0], r[2]) for r in rows) == sorted(tuple(r) for r in got.collect())  # the same pairs
