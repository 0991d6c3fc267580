"""Nested and Faker columns through Spark: the README's order block as written, stream == batch read across
micro-batches and another Spark application, errors by path as the user sees them, and the load harness's
``--schema`` / ``--source-option`` with nested columns."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.impulse.helpers import committed_batches, poll_query
from tests.impulse.test_generated import start_failure
from tests.readme import DOCS, python_block

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Nested events and realistic text"
PAGE = DOCS / "how-to" / "realistic-events.md"
PINNED = (".option('startTime', '2026-01-01T00:00:00Z').option('numPartitions', 2).option('limit', 3000)"
          ".option('maxEventsPerTrigger', 700)")


def the_order_block() -> str:
    return python_block(HEADING, page=PAGE)


def as_json(frame) -> list[str]:
    """Every row as JSON text, sorted: maps cannot be compared by Spark's set operations (exceptAll)."""
    return sorted(r[0] for r in frame.selectExpr("to_json(struct(*))").collect())


def test_the_readme_order_block_runs_and_its_stream_equals_the_batch_read(spark, tmp_path):
    """Nested Realistic events, the README's order block: it defines `orders` and `revenue` with the README's
    `spark`; pinned and bounded, the stream (700 rows a micro-batch, a restart) equals the batch read and another
    Spark application's batch read; the values are of their kind."""
    namespace: dict = {}
    register = python_block("## Register the formats", page=DOCS / "how-to" / "install.md")
    exec(compile(register, "README.md", "exec"), namespace)  # noqa: S102
    block = the_order_block()
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    assert namespace["spark"] is spark and namespace["orders"].isStreaming
    query = (namespace["revenue"].writeStream.format("noop").outputMode("complete")
             .option("checkpointLocation", str(tmp_path / "revenue")).trigger(processingTime="0 seconds").start())
    try:
        poll_query(query, lambda: any(p["numInputRows"] for p in query.recentProgress), what="rows in `revenue`")
    finally:
        query.stop()

    pinned = block.replace("          .load())", f"          {PINNED}.load())", 1)
    assert pinned != block
    exec(compile(pinned, "README.md", "exec"), namespace)  # noqa: S102
    out, checkpoint = tmp_path / "out", tmp_path / "ck"

    def run(**trigger):
        return (namespace["orders"].writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())

    query = run(processingTime="0 seconds")
    try:
        poll_query(query, lambda: len(committed_batches(checkpoint)) >= 1, what="a committed batch")
    finally:
        query.stop()
    query = run(availableNow=True)
    assert query.awaitTermination(180) and query.exception() is None

    exec(compile(pinned.replace("spark.readStream", "spark.read"), "README.md", "exec"), namespace)  # noqa: S102
    batch = namespace["orders"]
    expected = as_json(batch)
    assert len(expected) == 3000
    assert as_json(spark.read.parquet(str(out)).select(*batch.columns)) == expected

    other = tmp_path / "other"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", _OTHER_SESSION, json.dumps([pinned, str(other)])],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert as_json(spark.read.parquet(str(other)).select(*batch.columns)) == expected

    rows = [json.loads(r) for r in expected]
    assert all(re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]{2,}", r["customer"]["email"]) for r in rows)
    assert all(1 <= len(r["items"]) <= 5 for r in rows) and {len(r["items"]) for r in rows} == {1, 2, 3, 4, 5}
    assert all(re.fullmatch(r"SKU-\d{5}", i["sku"]) and 1 <= i["quantity"] <= 3 for r in rows for i in r["items"])
    assert all(set(r["attributes"]) <= {"channel", "device", "coupon", "gift_wrap"} for r in rows)  # JSON: distinct
    assert sum(r.get("shipping") is None for r in rows) > 0 and len({r["customer"]["name"] for r in rows}) > 1000
    assert batch.selectExpr("explode(items)").count() == sum(len(r["items"]) for r in rows)


_OTHER_SESSION = """
import json, sys
from connectors.session import local_session
block, out = json.loads(sys.argv[1])
spark = local_session("local[1]", "impulse-other-session")
namespace = {"spark": spark}
exec(compile(block.replace("spark.readStream", "spark.read"), "README.md", "exec"), namespace)
namespace["orders"].write.parquet(out)
spark.stop()
"""


def test_nested_option_errors_reach_the_user_intact(spark):
    schema = "items ARRAY<STRUCT<sku: STRING, price: DOUBLE>>"
    message = start_failure(spark, schema, {"eventsPerSecond": "10", "fields.items.element.price.kind": "zipf",
                                            "fields.items.element.price.cardinality": "9"})
    assert ("invalid value 'zipf' for option 'fields.items.element.price.kind': expected a kind for a DOUBLE "
            "column") in message, message[-3000:]
    assert "UnboundLocalError" not in message
    message = start_failure(spark, "attrs MAP<STRING, INT>", {
        "eventsPerSecond": "10", "fields.attrs.key.kind": "values", "fields.attrs.key.values": "a,b",
        "fields.attrs.minLength": "3"})
    assert "'fields.attrs.minLength': expected at most 2: a map's keys are distinct" in message, message[-3000:]


def test_the_load_harness_takes_nested_ddl_and_nested_source_options(spark):
    from impulse.loadtest.load.run import impulse_schema_for, run_load
    from impulse.loadtest.scenario import plan_from_args
    from impulse.loadtest.settings.config import LoadError

    ddl = "order_id BIGINT, items ARRAY<STRUCT<sku: STRING, price: DOUBLE>>, attrs MAP<STRING, INT>"
    argv = ["--sink", "noop", "--rate", "2000", "--duration", "2s", "--partitions", "2", "--no-warmup",
            "--schema", ddl, "--source-option", "fields.items.element.price.kind=normal",
            "--source-option", "fields.items.element.price.mean=20", "--source-option", "fields.items.length=2",
            "--source-option", "fields.attrs.key.kind=values", "--source-option", "fields.attrs.key.values=a,b,c"]
    config = plan_from_args(argv).scenarios[0].config
    assert config.source_options["fields.items.element.price.mean"] == "20"
    schema = impulse_schema_for(spark, config)
    assert schema["items"].dataType.simpleString() == "array<struct<sku:string,price:double>>"
    result = run_load(config, spark=spark)
    assert result.outcome == "completed" and result.events == 4000
    bad = plan_from_args([*argv, "--source-option", "fields.items.element.prise.kind=normal"]).scenarios[0].config
    with pytest.raises(LoadError, match=r"impulse: .*'fields.items.element.prise.kind': expected a path into column"):
        impulse_schema_for(spark, bad)
