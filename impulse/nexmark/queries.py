"""Nexmark q0–q22 for Spark Structured Streaming, translated from the nexmark project's Flink SQL.

Each query is a function of the combined ``nexmark`` stream (``table=event``, or a bounded batch read of
it: but for the four below, the same function gives the batch answer the runner's ``--check`` compares with). Like Flink's
nexmark, the ``person``, ``auction`` and ``bid`` views select one type from it, with a watermark of
``dateTime`` − 4 s. q4, q6, q15 and q16, whose faithful SQL Spark refuses to stream (an aggregation over
a join's aggregation, ``ROW_NUMBER`` windows, distinct counts), keep their state by hand with
``transformWithStateInPandas`` (`impulse.nexmark.stateful`); their `Query.answer` is the plain batch SQL.
Those four and q3, q17, q18, q19 and q20, whose state no watermark ends, keep it in RocksDB (a session setting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from impulse.nexmark.stateful import (
    LAST_WINNERS,
    RANKS,
    daily_statistics,
    last_winners_average,
    use_rocksdb,
    winning_bids,
)

__all__ = ["Query", "QUERIES", "query", "views", "WATERMARK_DELAY"]

WATERMARK_DELAY = "4 seconds"  # Flink nexmark's WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
_FIELDS = {  # by event_type: 0 person, 1 auction, 2 bid
    "person": ("id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"),
    "auction": ("id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category",
                "extra"),
    "bid": ("auction", "bidder", "price", "channel", "url", "dateTime", "extra"),
}


def views(events: DataFrame) -> dict[str, DataFrame]:
    """Flink nexmark's views over the combined stream: ``person``, ``auction``, ``bid``, event time ``dateTime``."""
    timed = events.withWatermark("dateTime", WATERMARK_DELAY)
    return {kind: timed.where(F.col("event_type") == i)
            .select(*(F.col("dateTime") if f == "dateTime" else F.col(f"{kind}.{f}").alias(f) for f in fields))
            for i, (kind, fields) in enumerate(_FIELDS.items())}


@dataclass(frozen=True)
class Query:
    """One Nexmark query.

    `mode` is the output mode the runner uses; `check_mode` the one ``--check`` streams into the memory
    sink with (``complete``: the whole result; ``append``: rows as they become final). With `final_after`
    (a SQL expression over the result), an appended row is final once the watermark passed that time: the
    check compares, on both sides, the rows whose `final_after` is at most the stream's last watermark.
    `unchecked` says why a query that runs is not checked; `unsupported` is Spark's error for one that
    cannot run as a stream.

    `answer`, when set, is the batch answer the check compares with instead of `build` over the batch
    read: a function of (the bounded events, the session, the stream's last watermark as
    ``yyyy-MM-dd HH:mm:ss[.SSS]`` UTC) for a query whose stream is not a Spark SQL plan a batch can run
    (q4, q6, q15, q16: `impulse.nexmark.stateful`). With `latest_by` (a SQL expression over the result), the
    query is an update stream checked by its final state: of the streamed rows, per `key`, the one with
    the greatest `latest_by`.
    """

    name: str
    title: str
    build: Callable[[DataFrame, SparkSession], DataFrame]
    mode: str = "append"
    check_mode: str = "append"
    final_after: str | None = None
    unchecked: str | None = None
    unsupported: str | None = None
    answer: Callable[[DataFrame, SparkSession, str], DataFrame] | None = None
    key: tuple[str, ...] = ()
    latest_by: str | None = None

    @property
    def runs(self) -> bool:
        return self.unsupported is None


def _q0(e, spark):
    return views(e)["bid"].select("auction", "bidder", "price", "dateTime", "extra")


def _q1(e, spark):
    return views(e)["bid"].selectExpr("auction", "bidder", "CAST(0.908 * price AS DECIMAL(23, 3)) AS price",
                                      "dateTime", "extra")


def _q2(e, spark):
    return views(e)["bid"].where("auction % 123 = 0").select("auction", "price")


def _q3(e, spark):
    v = views(e)
    a, p = v["auction"].alias("A"), v["person"].alias("P")
    return (a.join(p, F.col("A.seller") == F.col("P.id"))
            .where("A.category = 10 AND P.state IN ('OR', 'ID', 'CA')")
            .select("P.name", "P.city", "P.state", "A.id"))


def _q4(e, spark):
    winners = winning_bids(e, WATERMARK_DELAY)
    return winners.groupBy("category").agg(F.avg("price").alias("avg_final"))


def _closed_winners(e, watermark: str) -> DataFrame:
    """Batch: the winning price of each auction the watermark closed (``expires`` at most `watermark`)."""
    v = views(e)
    a, b = v["auction"].alias("A"), v["bid"].alias("B")
    return (a.join(b, F.expr("A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires"))
            .where(F.col("A.expires") <= F.lit(watermark).cast("timestamp"))
            .groupBy("A.id", "A.category", "A.seller", "A.expires").agg(F.max("B.price").alias("final")))


def _q4_answer(e, spark, watermark):
    return _closed_winners(e, watermark).groupBy("category").agg(F.avg("final").alias("avg_final"))


def _q5(e, spark):
    counts = (views(e)["bid"].groupBy(F.window("dateTime", "10 seconds", "2 seconds"), "auction")
              .agg(F.count("*").alias("num")))
    # one group per hopping window: the 2 s tumbling window holding its last instant
    per_window = (counts.groupBy(F.window(F.window_time("window"), "2 seconds").alias("slot"))
                  .agg(F.max("num").alias("maxn"), F.collect_list(F.struct("auction", "num")).alias("bids")))
    hot = per_window.select(F.col("slot.end").alias("endtime"),
                            F.explode(F.filter("bids", lambda b: b["num"] >= F.col("maxn"))).alias("b"))
    return hot.select("b.auction", "b.num", "endtime")


def _q6(e, spark):
    return last_winners_average(e, WATERMARK_DELAY)


def _q6_answer(e, spark, watermark):
    last = Window.partitionBy("seller").orderBy(F.desc("expires"), F.desc("id"))
    ranked = _closed_winners(e, watermark).withColumn("n", F.row_number().over(last)).where(f"n <= {LAST_WINNERS}")
    return ranked.groupBy("seller").agg(F.avg("final").alias("avg_price"),
                                        F.min_by(F.struct("expires", "id"), "n").alias("latest")) \
        .select("seller", "avg_price", "latest.expires", F.col("latest.id").alias("auction"))


def _q7(e, spark):
    bid = views(e)["bid"]
    highest = (bid.groupBy(F.window("dateTime", "10 seconds")).agg(F.max("price").alias("maxprice"))
               .select("maxprice", F.window_time("window").alias("windowTime")))  # window end − 1 µs
    b = bid.alias("B")
    joined = b.join(highest, F.expr("B.price = maxprice AND B.dateTime BETWEEN windowTime + INTERVAL 1 MICROSECOND "
                                    "- INTERVAL 10 SECONDS AND windowTime + INTERVAL 1 MICROSECOND"))
    return joined.select("B.auction", "B.price", "B.bidder", "B.dateTime", "B.extra")


def _q8(e, spark):
    v = views(e)
    p = (v["person"].groupBy("id", "name", F.window("dateTime", "10 seconds"))
         .agg(F.lit(1).alias("_")).select("id", "name", F.col("window").alias("pw")))
    a = (v["auction"].groupBy("seller", F.window("dateTime", "10 seconds"))
         .agg(F.lit(1).alias("_")).select("seller", F.col("window").alias("aw")))
    return p.join(a, F.expr("id = seller AND pw = aw")).select("id", "name", F.col("pw.start").alias("stime"))


def _q9(e, spark):
    # Flink's top-1 (ROW_NUMBER over each auction's bids) is a window function Spark does not stream; the same
    # answer as an aggregation: the highest bid (then the earliest, then by bidder) of each auction, grouped by
    # the auction and its `expires`, which carries the auctions' watermark. Every bid of an auction is at or
    # before its `expires`, so its row is final, and appended once, when the watermark passes `expires`.
    auction = (e.where(F.col("event_type") == list(_FIELDS).index("auction"))
               .select(*(F.col(f"auction.{f}").alias(f) for f in _FIELDS["auction"]))
               .withWatermark("expires", WATERMARK_DELAY).alias("A"))
    b = views(e)["bid"].alias("B")
    joined = auction.join(b, F.expr("A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires"))
    best = F.max(F.struct(F.col("B.price").alias("price"), (-F.unix_micros("B.dateTime")).alias("earliest"),
                          F.col("B.bidder").alias("bidder"), F.col("B.dateTime").alias("bid_dateTime"),
                          F.col("B.extra").alias("bid_extra"), F.col("B.auction").alias("auction")))
    rest = [f for f in _FIELDS["auction"] if f not in ("id", "expires")]
    won = joined.groupBy("A.id", "A.expires").agg(*(F.first(f"A.{f}").alias(f) for f in rest), best.alias("w"))
    return won.select(*_FIELDS["auction"], "w.auction", "w.bidder", "w.price", "w.bid_dateTime", "w.bid_extra")


def _q10(e, spark):
    return views(e)["bid"].select("auction", "bidder", "price", "dateTime", "extra",
                                  F.date_format("dateTime", "yyyy-MM-dd").alias("dt"),
                                  F.date_format("dateTime", "HH:mm").alias("hm"))


def _q11(e, spark):
    return (views(e)["bid"].groupBy("bidder", F.session_window("dateTime", "10 seconds").alias("s"))
            .agg(F.count("*").alias("bid_count"))
            .select("bidder", "bid_count", F.col("s.start").alias("starttime"), F.col("s.end").alias("endtime")))


def _q12(e, spark):
    return (views(e)["bid"].withColumn("p_time", F.current_timestamp())
            .groupBy("bidder", F.window("p_time", "10 seconds")).agg(F.count("*").alias("bid_count"))
            .select("bidder", "bid_count", F.col("window.start").alias("starttime"), F.col("window.end").alias("endtime")))


SIDE_INPUT_ROWS = 10_000  # the nexmark project's side input: keys 0..9999, each with its decimal text


def _q13(e, spark):
    side = spark.range(SIDE_INPUT_ROWS).select(F.col("id").alias("key"), F.col("id").cast("string").alias("value"))
    bid = views(e)["bid"]
    return (bid.join(F.broadcast(side), bid["auction"] % SIDE_INPUT_ROWS == side["key"])
            .select("auction", "bidder", "price", "dateTime", "value"))


def _q14(e, spark):
    return views(e)["bid"].selectExpr(
        "auction", "bidder", "CAST(0.908 * price AS DECIMAL(23, 3)) AS price",
        "CASE WHEN hour(dateTime) >= 8 AND hour(dateTime) <= 18 THEN 'dayTime' "
        "WHEN hour(dateTime) <= 6 OR hour(dateTime) >= 20 THEN 'nightTime' ELSE 'otherTime' END AS bidTimeType",
        "dateTime", "extra", "CAST(length(extra) - length(replace(extra, 'c', '')) AS BIGINT) AS c_counts",
    ).where("0.908 * price > 1000000 AND 0.908 * price < 50000000")


def _statistics(keys: tuple[str, ...], distinct: bool):
    def build(e, spark, watermark=None):  # as `Query.answer` too: every row of a day's statistics is final
        bid = views(e)["bid"].withColumn("day", F.date_format("dateTime", "yyyy-MM-dd"))
        aggs = [F.expr("count(*)").alias("total_bids")]
        aggs += [F.expr(f"count(*) FILTER (WHERE {r})").alias(f"rank{i}_bids") for i, r in enumerate(RANKS, 1)]
        if distinct:
            for what in ("bidder", "auction"):
                aggs.append(F.expr(f"count(DISTINCT {what})").alias(f"total_{what}s"))
                aggs += [F.expr(f"count(DISTINCT {what}) FILTER (WHERE {r})").alias(f"rank{i}_{what}s")
                         for i, r in enumerate(RANKS, 1)]
        else:
            aggs += [F.min("price").alias("min_price"), F.max("price").alias("max_price"),
                     F.avg("price").alias("avg_price"), F.sum("price").alias("sum_price")]
        if "channel" in keys:
            aggs.insert(0, F.max(F.date_format("dateTime", "HH:mm")).alias("minute"))
        return bid.groupBy(*keys).agg(*aggs)
    return build


def _daily(per_channel: bool):
    def build(e, spark):
        return daily_statistics(views(e)["bid"], per_channel)
    return build


def _in_rocksdb(build):
    """`build` with its state in RocksDB: for a query whose stateful processor needs it (q4, q6, q15, q16), or whose
    state no watermark ends (a key per auction, per bidder and auction, a join keeping every row of both sides),
    which on the JVM heap grows until a long run spends its time collecting garbage; RocksDB keeps it on disk, as
    the Flink runs of the nexmark project do."""
    def on_rocksdb(e, spark):
        use_rocksdb(spark)
        return build(e, spark)
    return on_rocksdb


def _q18(e, spark):
    last = F.max(F.struct("dateTime", "price", "channel", "url", "extra")).alias("last")  # ties broken by the rest
    return (views(e)["bid"].groupBy("bidder", "auction").agg(last)
            .select("auction", "bidder", "last.price", "last.channel", "last.url", "last.dateTime", "last.extra"))


def _q19(e, spark):
    bid = views(e)["bid"]
    order = F.struct("price", "dateTime", "bidder", "channel", "url", "extra")  # price first; the rest break ties
    top = bid.groupBy("auction").agg(F.max_by(F.struct(*_FIELDS["bid"]), order, 10).alias("top"))
    ranked = top.select(F.posexplode("top").alias("pos", "b"))
    return ranked.select(*(F.col(f"b.{f}").alias(f) for f in _FIELDS["bid"]), (F.col("pos") + 1).alias("rank_number"))


def _q20(e, spark):
    v = views(e)
    b, a = v["bid"].alias("B"), v["auction"].alias("A")
    return (b.join(a, F.col("B.auction") == F.col("A.id")).where("A.category = 10")
            .select("B.auction", "B.bidder", "B.price", "B.channel", "B.url", F.col("B.dateTime").alias("bid_dateTime"),
                    F.col("B.extra").alias("bid_extra"), "A.itemName", "A.description", "A.initialBid", "A.reserve",
                    F.col("A.dateTime").alias("auction_dateTime"), "A.expires", "A.seller", "A.category",
                    F.col("A.extra").alias("auction_extra")))


_CHANNEL_ID = "(&|^)channel_id=([^&]*)"


def _q21(e, spark):
    return views(e)["bid"].selectExpr(
        "auction", "bidder", "price", "channel",
        "CASE WHEN lower(channel) = 'apple' THEN '0' WHEN lower(channel) = 'google' THEN '1' "
        "WHEN lower(channel) = 'facebook' THEN '2' WHEN lower(channel) = 'baidu' THEN '3' "
        f"WHEN url RLIKE '{_CHANNEL_ID}' THEN regexp_extract(url, '{_CHANNEL_ID}', 2) END AS channel_id",
    ).where("channel_id IS NOT NULL")


def _q22(e, spark):
    return views(e)["bid"].selectExpr(
        "auction", "bidder", "price", "channel", "try_element_at(split(url, '/'), 4) AS dir1",
        "try_element_at(split(url, '/'), 5) AS dir2", "try_element_at(split(url, '/'), 6) AS dir3")


QUERIES: tuple[Query, ...] = (
    Query("q0", "pass through", _q0),
    Query("q1", "currency conversion", _q1),
    Query("q2", "selection", _q2),
    Query("q3", "local item suggestion", _in_rocksdb(_q3)),
    Query("q4", "average price for a category", _in_rocksdb(_q4), mode="update", check_mode="complete",
          answer=_q4_answer),
    Query("q5", "hot items", _q5, final_after="endtime"),
    Query("q6", "average selling price by seller", _in_rocksdb(_q6), answer=_q6_answer, key=("seller",),
          latest_by="struct(expires, auction)"),
    Query("q7", "highest bid", _q7, final_after="dateTime + INTERVAL 10 SECONDS"),
    Query("q8", "monitor new users", _q8, final_after="stime + INTERVAL 10 SECONDS"),
    Query("q9", "winning bids", _q9, final_after="expires + INTERVAL 4 SECONDS"),
    Query("q10", "log to file system", _q10),
    Query("q11", "user sessions", _q11, check_mode="complete"),
    Query("q12", "processing-time windows", _q12, mode="update", check_mode="complete",
          unchecked="its windows are of processing time: the answer depends on when each micro-batch runs"),
    Query("q13", "bounded side input join", _q13),
    Query("q14", "calculation", _q14),
    Query("q15", "bidding statistics report", _in_rocksdb(_daily(False)), mode="update", check_mode="update",
          answer=_statistics(("day",), True), key=("day",), latest_by="total_bids"),
    Query("q16", "channel statistics report", _in_rocksdb(_daily(True)), mode="update", check_mode="update",
          answer=_statistics(("channel", "day"), True), key=("channel", "day"), latest_by="total_bids"),
    Query("q17", "auction statistics report", _in_rocksdb(_statistics(("auction", "day"), False)), mode="update",
          check_mode="complete"),
    Query("q18", "find last bid", _in_rocksdb(_q18), mode="update", check_mode="complete"),
    Query("q19", "auction top-10 price", _in_rocksdb(_q19), mode="update", check_mode="complete"),
    Query("q20", "expand bid with auction", _in_rocksdb(_q20)),
    Query("q21", "add channel id", _q21),
    Query("q22", "get URL directories", _q22),
)


def query(name: str) -> Query:
    """The query named `name` (``q0`` … ``q22``); `KeyError` lists them."""
    for q in QUERIES:
        if q.name == name.lower():
            return q
    raise KeyError(f"no Nexmark query {name!r}: known are {', '.join(q.name for q in QUERIES)}")
