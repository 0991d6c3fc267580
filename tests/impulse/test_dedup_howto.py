"""The how-to "Test a dedup stage" (docs/how-to/dedup-stage.md) as written: its dedup stage leaves each event once,
while the batch read of the same options holds the copies it removed."""

from __future__ import annotations

import pytest

from tests.readme import DOCS, python_block

pytestmark = pytest.mark.integration

PAGE = DOCS / "how-to" / "dedup-stage.md"


def test_the_dedup_howto_block_leaves_each_event_once(spark, tmp_path):
    block = python_block("## A dedup stage, checked", page=PAGE).replace("/tmp/ck-dedup", str(tmp_path / "ck"))
    exec(compile(block, str(PAGE), "exec"), {"spark": spark})  # noqa: S102 - the page's own example (asserts its count)
    kept = spark.table("deduped")
    assert kept.dropDuplicates(["subtask_index", "counter"]).count() == kept.count() == 6000
    options = {"eventsPerSecond": "2000", "numPartitions": "2", "startTime": "2026-01-01T00:00:00Z", "limit": "6000",
               "duplicateRate": "0.05", "duplicateDelay": "500ms"}
    raw = spark.read.format("impulse").options(**options).load().count()
    assert 6000 + 150 < raw < 6000 + 450  # the copies the stage removed: 5 % of 6000, within 5σ (σ ≈ 17)
