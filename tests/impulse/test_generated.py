"""Generated columns through Spark: errors as the user sees them, stream == batch read across restarts and
sessions, an exact watermark computation, and a join of two impulse streams on seeded keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql.functions import window

from tests.impulse.helpers import checkpoint_offsets, committed_batches, poll_query, uncommit_last_batch
from tests.readme import DOCS, python_block, section

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ("event_id BIGINT, user_id BIGINT, amount DOUBLE, country STRING, device STRING, session STRING, "
          "is_promo BOOLEAN, coupon STRING, price DECIMAL(10,2), day DATE, label STRING, "
          "counter BIGINT, subtask_index BIGINT, timestamp TIMESTAMP")
OPTIONS = {
    "eventsPerSecond": "1000000", "numPartitions": "2", "startTime": "2020-01-01T00:00:00Z", "limit": "6000",
    "seed": "42", "outOfOrderness": "5s", "lateRate": "0.01", "lateBy": "1m",
    "fields.event_id.kind": "sequence",
    "fields.user_id.kind": "zipf", "fields.user_id.cardinality": "1000000", "fields.user_id.exponent": "1.1",
    "fields.amount.kind": "normal", "fields.amount.mean": "50", "fields.amount.stddev": "15", "fields.amount.min": "0",
    "fields.country.kind": "values", "fields.country.values": "US,DE,FR,IN,BR", "fields.country.weights": "40,15,15,20,10",
    "fields.device.kind": "values", "fields.device.values": "ios,android,web",
    "fields.session.kind": "uuid", "fields.is_promo.probability": "0.1",
    "fields.coupon.length": "8", "fields.coupon.nullRate": "0.9",
    "fields.label.kind": "zipf", "fields.label.cardinality": "100", "fields.label.format": "user-{:06d}",
}


def stream(spark, schema: str = SCHEMA, **options):
    return spark.readStream.format("impulse").schema(schema).options(**{**OPTIONS, **options}).load()


def batch(spark, schema: str = SCHEMA, **options):
    return spark.read.format("impulse").schema(schema).options(**{**OPTIONS, **options}).load()


def start_failure(spark, schema: str, options: dict) -> str:
    """The text of the error a user gets from defining or running the stream (it must fail)."""
    query = None
    try:
        query = (spark.readStream.format("impulse").schema(schema).options(**options).load()
                 .writeStream.format("noop").start())
        query.awaitTermination(120)
        error = query.exception()
    except Exception as exc:  # noqa: BLE001 - the user-visible error, whatever Spark wraps it in
        error = exc
    finally:
        if query is not None:
            query.stop()
    assert error is not None, f"the query with {options} did not fail"
    return str(error)


def test_schema_errors_reach_the_user_intact_through_read_stream(spark):
    message = start_failure(spark, SCHEMA, {**OPTIONS, "fields.is_promo.kind": "zipf"})
    assert ("OptionError: invalid value 'zipf' for option 'fields.is_promo.kind': expected a kind for a BOOLEAN "
            "column: one of random, values") in message, message[-3000:]
    assert "UnboundLocalError" not in message
    message = start_failure(spark, "a BIGINT, tags ARRAY<INTERVAL DAY TO SECOND>", {"eventsPerSecond": "10"})
    assert "option 'schema, column 'tags.element'': expected a type impulse can generate" in message, message[-3000:]


def test_option_errors_reach_the_user_intact_with_a_user_schema(spark):
    message = start_failure(spark, SCHEMA, {**OPTIONS, "fields.amount.kindd": "normal"})
    assert "OptionError: invalid value 'normal' for option 'fields.amount.kindd'" in message, message[-3000:]
    with pytest.raises(Exception) as err:
        batch(spark, **{"fields.user_id.cardinality": "0"}).count()
    assert "invalid value '0' for option 'fields.user_id.cardinality'" in str(err.value)
    options = {k: v for k, v in OPTIONS.items() if k != "eventsPerSecond"}
    message = start_failure(spark, SCHEMA, {**options, "eventsPerSecnd": "10"})
    # Spark hands a Python data source its option keys lower-cased: the typo is named as Spark passed it
    assert "unknown option 'eventspersecnd' (did you mean 'eventspersecond'?" in message.lower(), message[-3000:]


def test_stream_equals_batch_read_across_restarts_and_sessions(spark, tmp_path):
    """maxEventsPerTrigger and a replayed batch do not change a row; another Spark application reads the same."""
    out, checkpoint = tmp_path / "out", tmp_path / "ck"

    def run(**trigger):
        query = (stream(spark, maxEventsPerTrigger="700").writeStream.format("parquet").option("path", str(out))
                 .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())
        return query

    query = run(processingTime="0 seconds")
    try:
        poll_query(query, lambda: len(committed_batches(checkpoint)) >= 3, what="3 committed batches")
    finally:
        query.stop()
    uncommit_last_batch(checkpoint)  # the restart replays it
    query = run(availableNow=True)
    assert query.awaitTermination(180) and query.exception() is None
    assert max(checkpoint_offsets(checkpoint)) >= 8  # 6000 events, 700 a batch

    other = tmp_path / "other"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", _OTHER_SESSION, json.dumps([SCHEMA, OPTIONS, str(other)])],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    expected = batch(spark)
    for got in (spark.read.parquet(str(out)), spark.read.parquet(str(other))):
        got = got.select(*expected.columns)
        assert got.count() == 6000 == got.select("subtask_index", "counter").distinct().count()
        assert got.exceptAll(expected).count() == 0 and expected.exceptAll(got).count() == 0
    assert expected.where("coupon IS NULL").count() > 4000  # the nulls are there, and compared


_OTHER_SESSION = """
import json, sys
from connectors.session import local_session
schema, options, out = json.loads(sys.argv[1])
spark = local_session("local[1]", "impulse-other-session")
spark.read.format("impulse").schema(schema).options(**options).load().write.parquet(out)
spark.stop()
"""


def test_watermark_drops_exactly_the_late_events_the_options_make_late(spark, tmp_path):
    """1 s windows, a 2 s watermark: out-of-order events (≤ 500 ms) always count, late ones (5 s) are dropped
    exactly when Spark's watermark rule says so, computed here from each event's timestamp and its batch."""
    options = dict(eventsPerSecond="1000", numPartitions="2", startTime="2020-01-01T00:00:00Z", limit="20000",
                   maxEventsPerTrigger="2000", outOfOrderness="500ms", lateRate="0.05", lateBy="5s", seed="9")
    frame = spark.readStream.format("impulse").options(**options).load()
    emitted: list[tuple[int, int, int]] = []

    def collect(df, batch_id):
        emitted.extend((batch_id, r[0], r[1]) for r in df.selectExpr("unix_micros(window.start)", "n").collect())

    query = (frame.withWatermark("timestamp", "2 seconds").groupBy(window("timestamp", "1 second"))
             .count().withColumnRenamed("count", "n")
             .writeStream.outputMode("update").foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert query.awaitTermination(300) and query.exception() is None

    # every event's timestamp (the batch read: same options, same rows) and the batch that read it
    events = spark.read.format("impulse").options(**options).load() \
        .selectExpr("subtask_index", "counter", "unix_micros(timestamp)").collect()
    offsets = checkpoint_offsets(tmp_path / "ck")
    bounds = sorted((batch_id, end["counters"]) for batch_id, end in offsets.items())
    def batch_of(subtask: int, counter: int) -> int:
        return next(b for b, ends in bounds if counter < ends[subtask])
    by_batch: dict[int, list[tuple[int, int]]] = {}
    for subtask, counter, ts in events:
        by_batch.setdefault(batch_of(subtask, counter), []).append((counter, ts))

    start_us = 1_577_836_800_000_000  # startTime; each partition's events are 2 ms apart (1000/s over 2)
    # Spark (3.4+) drops an input row when its window ends at or before the watermark *for late events*: the
    # watermark of the previous batch, itself max(event time in ms so far) - 2 s, never going back
    expected: dict[int, int] = {}
    watermark_ms, late_ms, max_ms, dropped = 0, 0, None, 0
    for b in sorted(by_batch):
        for counter, ts in by_batch[b]:
            start = ts - ts % 1_000_000
            if start + 1_000_000 <= late_ms * 1000:
                dropped += 1
                assert start_us + 2000 * counter - ts >= 5_000_000, "an event only out of order was dropped"
            else:
                expected[start] = expected.get(start, 0) + 1
        batch_max = max(ts // 1000 for _, ts in by_batch[b])
        max_ms = batch_max if max_ms is None else max(max_ms, batch_max)
        late_ms, watermark_ms = watermark_ms, max(watermark_ms, max_ms - 2000)
    final: dict[int, tuple[int, int]] = {}
    for batch_id, start, n in emitted:
        if start not in final or batch_id >= final[start][0]:
            final[start] = (batch_id, n)
    assert {s: n for s, (_, n) in final.items()} == expected
    assert dropped > 50, dropped  # the late share (5 %) of 20,000 mostly falls behind the 2 s watermark
    assert sum(expected.values()) + dropped == 20_000


def test_two_streams_join_on_seeded_keys(spark):
    """orders.customer_id zipf over 1,000 keys joins customers.id sequence 0..999: every order finds one customer."""
    customers = (spark.read.format("impulse").schema("id BIGINT, tier STRING")
                 .options(delay="1ms", numPartitions="3", limit="1000", **{
                     "fields.id.kind": "sequence", "fields.tier.kind": "values", "fields.tier.values": "gold,silver"})
                 .load())
    orders = (spark.readStream.format("impulse").schema("order_id BIGINT, customer_id BIGINT, timestamp TIMESTAMP")
              .options(eventsPerSecond="1000000", numPartitions="2", startTime="0", limit="5000", seed="5", **{
                  "fields.order_id.kind": "sequence", "fields.customer_id.kind": "zipf",
                  "fields.customer_id.cardinality": "1000", "fields.customer_id.exponent": "1.2"}).load())
    assert sorted(r[0] for r in customers.select("id").collect()) == list(range(1000))
    name = "joined_orders"
    query = (orders.join(customers, orders.customer_id == customers.id).writeStream.format("memory").queryName(name)
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180) and query.exception() is None
    joined = spark.table(name)
    assert joined.count() == 5000 == joined.select("order_id").distinct().count()
    hot = joined.groupBy("customer_id").count().orderBy("count", ascending=False).first()
    assert hot["customer_id"] == 0  # rank 0 is the hot key


def test_the_readme_cookbook_runs(spark, tmp_path):
    """Every Python block of the README's cookbook section defines its frames with what the README's first block
    (its `spark`) and its own imports give, each stream starts cleanly, and the figure stated for the orders holds."""
    realistic = DOCS / "how-to" / "realistic-events.md"
    blocks = [b.split("```", 1)[0] for b in section("## Typed columns", realistic).split("```python\n")[1:]]
    assert len(blocks) == 3
    def first_block(heading: str, page) -> str:
        return section(heading, page).split("```python\n")[1].split("```", 1)[0]

    namespace: dict = {}
    # the first makes `spark` (this session); "The impulse source" and "Nexmark" open with frames defined likewise
    for block in [python_block("## Register the formats", page=DOCS / "how-to" / "install.md"),
                  first_block("## A stream at a fixed rate", DOCS / "how-to" / "impulse-source.md"),
                  first_block("## Read the events", DOCS / "how-to" / "nexmark.md"), *blocks]:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own examples
    assert namespace["spark"] is spark
    frames = {k: v for k, v in namespace.items() if isinstance(v, DataFrame)}
    assert {"events", "bids", "orders", "readings", "per_minute", "users", "clicks", "by_plan"} <= frames.keys()
    assert frames["events"].isStreaming and not frames["bids"].isStreaming
    assert namespace["users"].count() == 1000

    # "customer_id 0 gets 1/H(1000, 1.1) ≈ 17.9 % of the orders": a batch read of the same options, as it says
    text = section("### Cookbook", realistic)
    share = float(text.split("1/H(1000, 1.1) ≈ ")[1].split(" %")[0]) / 100
    h = sum(k ** -1.1 for k in range(1, 1001))
    assert abs(share - 1 / h) < 0.0005, (share, 1 / h)
    assert f"≈ {h:.3f}" in text
    rows = 20_000
    read = blocks[0].replace("spark.readStream", "spark.read").replace(".load())", f".option('limit', {rows}).load())")
    exec(compile(read, "README.md", "exec"), namespace)  # noqa: S102
    observed = namespace["orders"].filter("customer_id = 0").count() / rows
    assert abs(observed - 1 / h) < 4 * (1 / h * (1 - 1 / h) / rows) ** 0.5, (observed, 1 / h)
    for name in ("orders", "per_minute", "by_plan"):
        mode = {"orders": "append", "per_minute": "update", "by_plan": "complete"}[name]
        query = (frames[name].writeStream.format("noop").outputMode(mode)
                 .option("checkpointLocation", str(tmp_path / name)).trigger(availableNow=True).start())
        assert query.awaitTermination(180) and query.exception() is None, name
        assert sum(p["numInputRows"] for p in query.recentProgress) > 0, name
