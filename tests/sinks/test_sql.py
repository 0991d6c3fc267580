"""The README's "Batch writes" and "SQL" sections run as written (addresses and names swapped for the test
servers'), and every SQL limitation they document fails with the error text they quote."""

from __future__ import annotations

import json
import uuid
from collections import Counter

import pytest

from tests.readme import DOCS
from tests.readme import section as page_section

pytestmark = [pytest.mark.integration, pytest.mark.redis]

ROWS = 1000  # the README examples' limit
#: the documentation's pages these sections are
PAGES = {"Batch writes": DOCS / "how-to" / "batch-writes.md", "SQL": DOCS / "how-to" / "sql.md"}


def section(title: str) -> str:
    return page_section(f"# {title}", PAGES[title])


def python_blocks(title: str) -> list[str]:
    return [b.split("```", 1)[0] for b in section(title).split("```python\n")[1:]]


def run_blocks(spark, title: str, replacements: dict[str, str]) -> None:
    for block in python_blocks(title):
        for old, new in replacements.items():
            block = block.replace(old, new)
        exec(compile(block, f"README.md ({title})", "exec"), {"spark": spark})  # noqa: S102 - the README's examples


def events(values: list[bytes]) -> Counter:
    return Counter((row["subtask_index"], row["counter"]) for row in map(json.loads, values))


def impulse_events(spark, rows: int = ROWS) -> Counter:
    frame = (spark.read.format("impulse").option("eventsPerSecond", 1000).option("limit", rows)
             .option("startTime", "2026-01-01T00:00:00Z").load())
    return Counter((r.subtask_index, r.counter) for r in frame.select("subtask_index", "counter").collect())


@pytest.mark.kafka
@pytest.mark.webhook
def test_readme_batch_writes_run_and_rerun_writes_nothing_twice(spark, redis_server, kafka_broker, http_receiver):
    name = f"backfill-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, partitions=2)
    http_receiver.reset()
    swap = {"redis://localhost:6379/0": redis_server.url, "localhost:9092": kafka_broker.bootstrap,
            "http://localhost:8080": http_receiver.url, '"backfill"': f'"{name}"', "/backfill": f"/{name}",
            "backfill-2026-01-01": f"{name}-2026-01-01"}
    expected = impulse_events(spark)
    assert sum(expected.values()) == ROWS and max(expected.values()) == 1
    redis = redis_server.client()

    def landed() -> tuple[Counter, Counter, Counter]:
        webhook = [json.dumps(row).encode() for body in http_receiver.accepted_json() for row in body]
        return (events(redis.lrange(name, 0, -1)), events([m.value() for m in kafka_broker.consume_all(name)]),
                events(webhook))

    run_blocks(spark, "Batch writes", swap)
    assert landed() == (expected, expected, expected)
    run_blocks(spark, "Batch writes", swap)  # the same commitId: nothing new lands anywhere
    assert landed() == (expected, expected, expected)
    assert len(http_receiver.requests) > len(http_receiver.accepted_requests), "the webhook re-run sent nothing"


def test_readme_sql_runs(spark, redis_server, tmp_path):
    name = f"sql-{uuid.uuid4().hex[:8]}"
    swap = {"redis://localhost:6379/0": redis_server.url, "'orders'": f"'{name}'", '"orders"': f'"{name}"',
            "/tmp/ck-live-orders": str(tmp_path / "ck")}
    run_blocks(spark, "SQL", swap)
    # the batch INSERT wrote the even counters, the stream the odd ones: every event once
    assert events(redis_server.client().lrange(name, 0, -1)) == impulse_events(spark)


LIMITATIONS = [
    # (statements before, the statement that fails, a fragment the README quotes and the error contains)
    ([], "CREATE TABLE t_impulse USING impulse OPTIONS (eventsPerSecond '1000')",
     "invalid value 'impulse' for option 'provider': expected no CREATE TABLE: Spark drops the OPTIONS of a table "
     "created with CREATE TABLE … USING a Python data source"),
    (["CREATE TABLE t_sink (c BIGINT) USING `redis-sink` OPTIONS (url '{url}')"], "INSERT INTO t_sink SELECT 1",
     "invalid value '(none)' for option 'OPTIONS': expected the redis sink's options; an INSERT INTO a table gets "
     "none when Spark drops the OPTIONS"),
    ([], "CREATE TEMPORARY VIEW v_sink USING `redis-sink` OPTIONS (url '{url}')",
     "redis-sink is write-only and has no columns of its own"),
    (["CREATE OR REPLACE TEMPORARY VIEW orders USING impulse OPTIONS (eventsPerSecond '1000', limit '10')"],
     "SELECT * FROM STREAM(orders)", "orders is not a temp view of streaming logical plan"),
    (["CREATE OR REPLACE TEMPORARY VIEW v_out (c BIGINT) USING `redis-sink` OPTIONS (url '{url}')"],
     "INSERT OVERWRITE v_out SELECT 1", "invalid value 'overwrite' for option 'mode': expected one of append"),
    ([], "CREATE TEMPORARY VIEW v_parse (c BIGINT) USING kafka-sink OPTIONS (topic 't')",
     "[INVALID_IDENTIFIER] The unquoted identifier kafka-sink is invalid and must be back quoted"),
]


@pytest.mark.parametrize("before, statement, fragment", LIMITATIONS, ids=[s for _, s, _ in LIMITATIONS])
def test_documented_sql_limitation(spark, redis_server, before, statement, fragment):
    assert fragment.replace("`", "") in section("SQL").replace("`", ""), "the README does not quote this error"
    for sql in before:
        spark.sql(sql.format(url=redis_server.url))
    with pytest.raises(Exception) as failure:
        spark.sql(statement.format(url=redis_server.url)).collect()
    assert fragment.replace("`", "") in str(failure.value).replace("`", "")


def test_stream_from_a_source_view_and_to_a_sink_view_fail_as_documented(spark, redis_server, tmp_path):
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW orders USING impulse OPTIONS (eventsPerSecond '1000', limit '10')")
    with pytest.raises(Exception, match="orders is not a temp view of streaming logical plan"):
        spark.readStream.table("orders")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders_out (c BIGINT) USING `redis-sink` "
              f"OPTIONS (url '{redis_server.url}')")
    stream = spark.readStream.format("impulse").option("eventsPerSecond", 10).load().selectExpr("counter AS c")
    with pytest.raises(Exception, match="Temporary view orders_out doesn't support streaming write"):
        stream.writeStream.option("checkpointLocation", str(tmp_path / "ck")).toTable("orders_out")
    assert "Temporary view orders_out doesn't support streaming write." in section("SQL")
