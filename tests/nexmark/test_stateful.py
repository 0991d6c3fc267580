"""q4, q6, q15 and q16 (``transformWithStateInPandas``) stream the answer their definition gives in batch SQL, also
when the stream stops in the middle and restarts from its checkpoint.

Each stream runs into ``foreachBatch`` (rows kept by batch id, so a batch replayed after the stop replaces its
first delivery) until two micro-batches are done, stops, and restarts from the checkpoint to the end of its
10,000 events. The final state per key is compared with SQL written here from Nexmark's definitions over
``spark.read.format("nexmark")`` of the same events.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from impulse.nexmark import cli
from impulse.nexmark.queries import query
from impulse.nexmark.stateful import STATE_STORE, _merge

EVENTS, RATE, PER_TRIGGER = 10_000, 500, 2_000  # 20 s of event time in 5 micro-batches


def test_merge_keeps_each_id_once_with_the_ranks_it_was_seen_in():
    ids, masks = _merge(np.array([7, 3, 7, 9, 3], dtype=np.int64), np.array([1, 2, 4, 1, 2], dtype=np.uint8))
    assert ids.tolist() == [3, 7, 9]
    assert masks.tolist() == [2, 5, 1]


@pytest.fixture(scope="module")
def events(spark):
    """The batch read of the streamed events, as the view ``ev``; the session's state store restored after."""
    provider = spark.conf.get(STATE_STORE[0], None)
    spark.read.format("nexmark").options(**cli.source_options(EVENTS, 2, RATE, PER_TRIGGER, 0)).load() \
        .createOrReplaceTempView("ev")
    yield "ev"
    if provider is None:
        spark.conf.unset(STATE_STORE[0])
    else:
        spark.conf.set(STATE_STORE[0], provider)


def _stream_with_restart(spark, name: str, checkpoint: str) -> tuple[dict, str]:
    """Run query `name` over the events into foreachBatch, stopping after 2 micro-batches with input, then
    from the checkpoint to the end: (batch id → its rows as dicts, the last watermark)."""
    batches: dict[int, list[dict]] = {}

    def keep(frame, batch_id):
        batches[batch_id] = [row.asDict() for row in frame.collect()]

    q = query(name)
    options = cli.source_options(EVENTS, 2, RATE, PER_TRIGGER, 0)
    inputs = []
    for trigger in ({"processingTime": "0 seconds"}, {"availableNow": True}):
        frame = q.build(spark.readStream.format("nexmark").options(**options).load(), spark)
        stream = (frame.writeStream.foreachBatch(keep).outputMode(q.mode).option("checkpointLocation", checkpoint)
                  .trigger(**trigger).start())
        if "processingTime" in trigger:
            deadline = time.monotonic() + 300
            while sum(1 for p in stream.recentProgress if p["numInputRows"]) < 2:
                assert stream.exception() is None, stream.exception()
                assert time.monotonic() < deadline, "no two micro-batches in 300 s"
                time.sleep(0.2)
            stream.stop()
        else:
            stream.awaitTermination()
            assert stream.exception() is None
        inputs.append(sum(p["numInputRows"] for p in stream.recentProgress))
        watermark = cli._watermark(stream)
    assert 0 < inputs[0] < EVENTS and inputs[1] > 0, inputs  # stopped in the middle, resumed from there
    return batches, watermark


def _final(batches: dict, key: tuple[str, ...], order: tuple[str, ...] = ()) -> dict:
    """The last row per key: by batch id, then by `order` within a batch."""
    state = {}
    for batch_id in sorted(batches):
        for row in sorted(batches[batch_id], key=lambda r: tuple(r[c] for c in order)):
            state[tuple(row[k] for k in key)] = row
    return state


_WINNERS = """
WITH auction AS (SELECT auction.* FROM ev WHERE event_type = 1),
     bid AS (SELECT bid.* FROM ev WHERE event_type = 2)
SELECT a.id, a.category, a.seller, a.expires, max(b.price) AS price
FROM auction a JOIN bid b ON b.auction = a.id AND b.dateTime >= a.dateTime AND b.dateTime <= a.expires
WHERE a.expires <= TIMESTAMP '{watermark}'
GROUP BY a.id, a.category, a.seller, a.expires
"""


@pytest.mark.integration
def test_q4_average_winning_price_per_category(spark, events, tmp_path):
    batches, watermark = _stream_with_restart(spark, "q4", str(tmp_path / "q4"))
    streamed = {k: row["avg_final"] for k, row in _final(batches, ("category",)).items()}
    expected = {(r.category,): r.avg for r in spark.sql(
        f"SELECT category, sum(price) / count(*) AS avg FROM ({_WINNERS.format(watermark=watermark)}) "
        "GROUP BY category").collect()}
    assert len(expected) == 5
    assert streamed == expected


@pytest.mark.integration
def test_q6_average_of_each_sellers_last_10_winners(spark, events, tmp_path):
    batches, watermark = _stream_with_restart(spark, "q6", str(tmp_path / "q6"))
    final = _final(batches, ("seller",), ("expires", "auction"))
    streamed = {k: (row["avg_price"], row["expires"], row["auction"]) for k, row in final.items()}
    rows = spark.sql(f"""
        SELECT seller, sum(IF(n <= 10, price, 0)) / least(count(*), 10) AS avg,
               max(IF(n = 1, expires, NULL)) AS expires, max(IF(n = 1, id, NULL)) AS id
        FROM (SELECT *, row_number() OVER (PARTITION BY seller ORDER BY expires DESC, id DESC) AS n
              FROM ({_WINNERS.format(watermark=watermark)}))
        GROUP BY seller""").collect()
    expected = {(r.seller,): (r.avg, r.expires, r.id) for r in rows}
    assert any(n > 10 for n in spark.sql(
        f"SELECT count(*) AS n FROM ({_WINNERS.format(watermark=watermark)}) GROUP BY seller").toPandas()["n"])
    assert streamed == expected


def _statistics_sql(keys: str, minute: bool) -> str:
    ranks = ("price < 10000", "price >= 10000 AND price < 1000000", "price >= 1000000")
    columns = ["count(*) AS total_bids", *(f"sum(IF({r}, 1, 0)) AS rank{i}_bids" for i, r in enumerate(ranks, 1))]
    for what in ("bidder", "auction"):
        columns.append(f"count(DISTINCT {what}) AS total_{what}s")
        columns += [f"count(DISTINCT CASE WHEN {r} THEN {what} END) AS rank{i}_{what}s" for i, r in enumerate(ranks, 1)]
    if minute:
        columns.insert(0, "max(date_format(dateTime, 'HH:mm')) AS minute")
    return (f"SELECT {keys}, {', '.join(columns)} FROM (SELECT bid.*, date_format(dateTime, 'yyyy-MM-dd') AS day "
            f"FROM ev WHERE event_type = 2) GROUP BY {keys}")


@pytest.mark.integration
@pytest.mark.parametrize("name, keys", [("q15", ("day",)), ("q16", ("channel", "day"))])
def test_daily_statistics_count_distinct_bidders_and_auctions_exactly(spark, events, tmp_path, name, keys):
    batches, _ = _stream_with_restart(spark, name, str(tmp_path / name))
    streamed = {k: row for k, row in _final(batches, keys).items()}
    expected = {tuple(r[k] for k in keys): r.asDict() for r in
                spark.sql(_statistics_sql(", ".join(keys), name == "q16")).collect()}
    assert len(expected) >= (1 if name == "q15" else 1000)
    assert streamed == expected
