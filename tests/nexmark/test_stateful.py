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
import pandas as pd
import pytest
from pyspark.sql.streaming.tws_tester import TwsTester

from impulse.answer import last_watermark
from impulse.nexmark import cli
from impulse.nexmark.queries import query
from impulse.nexmark.stateful import STATE_STORE, DailyStatistics, LastWinners, WinningBids, _merge

EVENTS, RATE, PER_TRIGGER = 10_000, 500, 2_000  # 20 s of event time in 5 micro-batches


def test_merge_keeps_each_id_once_with_the_ranks_it_was_seen_in():
    ids, masks = _merge(np.array([7, 3, 7, 9, 3], dtype=np.int64), np.array([1, 2, 4, 1, 2], dtype=np.uint8))
    assert ids.tolist() == [3, 7, 9]
    assert masks.tolist() == [2, 5, 1]


def _events(*rows) -> pd.DataFrame:
    """WinningBids' input: (kind, time_ms, expires_ms, price) rows of auction 7 (category 3, seller 5)."""
    frame = pd.DataFrame(rows, columns=["kind", "time_ms", "expires_ms", "price"])
    return frame.assign(auction=7, category=3, seller=5)[["auction", "kind", "time_ms", "expires_ms", "category",
                                                          "seller", "price"]]


def test_winning_bids_counts_the_bids_in_the_auctions_window_and_emits_when_the_watermark_reaches_expires():
    tester = TwsTester(WinningBids(), timeMode="EventTime", eventTimeExtractor=lambda row: row["time_ms"])
    tester.setWatermark(1)
    early = tester.testInPandas(7, _events((2, 1_000, None, 900), (2, 900, None, 5_000)))  # before its auction
    assert early.empty
    tester.testInPandas(7, _events((1, 1_000, 3_000, None), (2, 2_999, None, 400), (2, 3_001, None, 9_000)))
    assert tester.setWatermark(2_999).empty
    won = tester.setWatermark(3_000)
    assert won.to_dict("records") == [{"auction": 7, "category": 3, "seller": 5, "expires_ms": 3_000, "price": 900}]
    assert tester.peekValueState("auction", 7) is None and tester.peekValueState("best", 7) is None


def test_winning_bids_emits_nothing_for_an_auction_without_a_bid_and_forgets_bids_of_no_auction():
    tester = TwsTester(WinningBids(), timeMode="EventTime", eventTimeExtractor=lambda row: row["time_ms"])
    tester.setWatermark(1)
    tester.testInPandas(7, _events((2, 500, None, 10), (2, 800, None, 20)))
    assert tester.peekListState("pending", 7) == [(500, 10), (800, 20)]
    assert tester.setWatermark(799).empty
    assert tester.peekListState("pending", 7) == [(500, 10), (800, 20)]  # kept until the newest is passed
    assert tester.setWatermark(800).empty
    assert tester.peekListState("pending", 7) == []
    tester.testInPandas(7, _events((1, 1_000, 2_000, None), (2, 2_500, None, 30)))
    assert tester.setWatermark(2_000).empty


def test_last_winners_averages_the_last_ten_in_expires_then_auction_order():
    tester = TwsTester(LastWinners())
    first = pd.DataFrame({"seller": 5, "expires_ms": [30, 10, 10], "auction": [3, 2, 1], "price": [300, 20, 10]})
    assert tester.testInPandas(5, first).to_dict("list") == {
        "seller": [5, 5, 5], "avg_price": [10.0, 15.0, 110.0], "expires_ms": [10, 10, 30], "auction": [1, 2, 3]}
    later = pd.DataFrame({"seller": 5, "expires_ms": range(40, 130, 10), "auction": range(4, 13),
                          "price": [1_000] * 9})
    out = tester.testInPandas(5, later)
    assert out["auction"].tolist() == list(range(4, 13))
    assert out["avg_price"].iloc[-1] == (9 * 1_000 + 300) / 10  # auctions 1 and 2 left the last ten
    assert out["avg_price"].iloc[-2] == (8 * 1_000 + 300 + 20) / 10


def test_daily_statistics_counts_each_bidder_and_auction_once_per_rank_across_batches():
    tester = TwsTester(DailyStatistics(with_minute=False))
    bids = pd.DataFrame({"day": "2026-01-01", "minute": "00:00", "price": [5, 50_000, 5], "bidder": [1, 1, 2],
                         "auction": [9, 9, 9]})
    tester.testInPandas("2026-01-01", bids)
    more = pd.DataFrame({"day": "2026-01-01", "minute": "00:01", "price": [2_000_000, 7], "bidder": [2, 3],
                         "auction": [8, 9]})
    row = tester.testInPandas("2026-01-01", more).iloc[0].to_dict()
    assert row == {"day": "2026-01-01", "total_bids": 5, "rank1_bids": 3, "rank2_bids": 1, "rank3_bids": 1,
                   "total_bidders": 3, "rank1_bidders": 3, "rank2_bidders": 1, "rank3_bidders": 1,
                   "total_auctions": 2, "rank1_auctions": 1, "rank2_auctions": 1, "rank3_auctions": 1}


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
        watermark = last_watermark(stream) or "1970-01-01 00:00:00"
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
