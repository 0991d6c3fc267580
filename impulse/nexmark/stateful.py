"""Nexmark's stateful queries that Spark's SQL cannot stream (q4, q6, q15, q16), on ``transformWithStateInPandas``.

Three processors keep the state by hand (``transformWithStateInPandas`` needs pandas and protobuf, and the
RocksDB state store: `use_rocksdb`):

- `WinningBids`, keyed by auction id, over the auctions and bids of the combined stream: it keeps the
  auction (once seen) and the highest price of its bids whose ``dateTime`` lies in ``[dateTime, expires]``
  (bids seen before their auction wait in a list), and registers an event-time timer at ``expires``. When
  the watermark passes ``expires`` the timer emits the auction's winning bid (none when no bid counted)
  and clears the key: one row per closed auction, never revised.
- `DailyStatistics`, keyed by day (q15) or by channel and day (q16), over the bids: it keeps the bid
  counts and the sets of bidders and auctions seen (each with the price ranks it was seen in) as sorted
  arrays, merged with numpy, and emits the key's updated row after every micro-batch that brought bids.
- `LastWinners`, keyed by seller, over `WinningBids`' rows (q6): the seller's last 10 winners by
  (``expires``, auction id), emitting the new average with each one.

q4 averages the winners per category with Spark's own aggregation (update mode).

These are the per-key processors: the plans here run q4, q6 and q16 on `impulse.nexmark.buckets`' processors
per bucket of keys (the same rows, a Python call per bucket instead of per key) unless ``per_key`` is asked for;
q15, one key a day, runs `DailyStatistics`.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from impulse.nexmark.buckets import BucketDailyStatistics, BucketLastWinners, BucketWinningBids, bucket

__all__ = ["winning_bids", "last_winners_average", "daily_statistics", "use_rocksdb", "WinningBids", "LastWinners",
           "DailyStatistics", "WINNERS_SCHEMA", "RANKS", "LAST_WINNERS", "STATE_STORE"]

LAST_WINNERS = 10  # q6: the seller's last 10 closed auctions with a winning bid
# q15/q16's price ranks, as Flink nexmark's FILTER clauses: price < 10,000; < 1,000,000; the rest
RANKS = ("price < 10000", "price >= 10000 AND price < 1000000", "price >= 1000000")
_RANK_BOUNDS = np.array([10_000, 1_000_000])

WINNERS_SCHEMA = "auction BIGINT, category BIGINT, seller BIGINT, expires TIMESTAMP, price BIGINT"
_WINNERS_MS = "auction BIGINT, category BIGINT, seller BIGINT, expires_ms BIGINT, price BIGINT"
_AUCTION_STATE = "time_ms BIGINT, expires_ms BIGINT, category BIGINT, seller BIGINT"


class WinningBids(StatefulProcessor):
    """Per auction: its winning (highest) bid price once the watermark passes its ``expires``.

    Input: ``auction`` (the key), ``kind`` (1 an auction, 2 a bid), ``time_ms`` (``dateTime``, epoch ms),
    ``expires_ms``, ``category``, ``seller`` (null for a bid) and ``price`` (null for an auction). A bid
    counts when its time is in ``[auction.dateTime, auction.expires]``. Output (`_WINNERS_MS`): one row per
    auction with at least one counted bid, when its event-time timer at ``expires`` fires (the watermark
    reached it); the key's state is then cleared. Bids of an auction not seen yet wait in a list until the
    watermark passes the newest of them: an auction arriving after that is late (Spark drops late rows in
    ``EventTime`` mode before this processor sees them).
    """

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.auction = handle.getValueState("auction", _AUCTION_STATE)
        self.best = handle.getValueState("best", "price BIGINT")
        self.pending = handle.getListState("pending", "time_ms BIGINT, price BIGINT")

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        frame = pd.concat(list(rows), ignore_index=True)
        kinds = frame["kind"].to_numpy()
        times, prices = frame["time_ms"].to_numpy(np.int64)[kinds == 2], frame["price"].to_numpy()[kinds == 2]
        if (kinds == 1).any() and not self.auction.exists():
            a = frame[kinds == 1].iloc[0]
            self.auction.update((int(a["time_ms"]), int(a["expires_ms"]), int(a["category"]), int(a["seller"])))
            if self.pending.exists():
                waiting = np.array(list(self.pending.get()), dtype=np.int64).reshape(-1, 2)
                times, prices = np.concatenate([times, waiting[:, 0]]), np.concatenate([prices, waiting[:, 1]])
                self.pending.clear()
                for timer in list(self.handle.listTimers()):
                    self.handle.deleteTimer(timer)
            self.handle.registerTimer(int(a["expires_ms"]))
        if not len(times):
            return iter([])
        if not self.auction.exists():
            self.pending.appendList([(int(t), int(p)) for t, p in zip(times, prices)])
            self.handle.registerTimer(int(times.max()))
            return iter([])
        start, expires, _, _ = self.auction.get()
        counted = prices[(times >= start) & (times <= expires)]
        if len(counted):
            best = int(counted.max())
            if self.best.exists():
                best = max(best, self.best.get()[0])
            self.best.update((best,))
        return iter([])

    def handleExpiredTimer(self, key, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
                           ) -> Iterator[pd.DataFrame]:
        if not self.auction.exists():  # a timer of waiting bids: forget those the watermark passed
            watermark = timerValues.getCurrentWatermarkInMs()
            waiting = [(t, p) for t, p in self.pending.get() if t > watermark] if self.pending.exists() else []
            self.pending.clear()
            if waiting:
                self.pending.put(waiting)
            return iter([])
        _, expires, category, seller = self.auction.get()
        out = []
        if self.best.exists():
            out.append(pd.DataFrame({"auction": [key[0]], "category": [category], "seller": [seller],
                                     "expires_ms": [expires], "price": [self.best.get()[0]]}))
        self.auction.clear()
        self.best.clear()
        return iter(out)

    def close(self) -> None:
        pass


class LastWinners(StatefulProcessor):
    """Per seller: the average winning price of its last `LAST_WINNERS` closed auctions, by (``expires``, id).

    Input: `WinningBids`' rows. Output (`_LAST_WINNERS_MS`): one row per winner, in (``expires``, auction)
    order, with the average price over the seller's last 10 winners up to and including it (DOUBLE: a sum
    of at most 10 integer prices below 2^53, divided once, exact as SQL's ``avg``). State: those 10.
    """

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.last = handle.getValueState("last", "expires_ms ARRAY<BIGINT>, auction ARRAY<BIGINT>, price ARRAY<BIGINT>")

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        new = pd.concat(list(rows), ignore_index=True)
        columns = [new[c].to_numpy(np.int64) for c in ("expires_ms", "auction", "price")]
        fresh = np.ones(len(new), dtype=bool)
        if self.last.exists():
            kept = [np.asarray(v, dtype=np.int64) for v in self.last.get()]
            columns = [np.concatenate([k, c]) for k, c in zip(kept, columns)]
            fresh = np.concatenate([np.zeros(len(kept[0]), dtype=bool), fresh])
        order = np.lexsort((columns[1], columns[0]))
        expires, auction, price = (c[order] for c in columns)
        fresh = fresh[order]
        sums = np.cumsum(price)
        sums[LAST_WINNERS:] -= sums[:-LAST_WINNERS]
        averages = sums / np.minimum(np.arange(1, len(price) + 1), LAST_WINNERS)
        self.last.update(tuple([int(v) for v in c[-LAST_WINNERS:]] for c in (expires, auction, price)))
        yield pd.DataFrame({"seller": key[0], "avg_price": averages[fresh], "expires_ms": expires[fresh],
                            "auction": auction[fresh]})

    def close(self) -> None:
        pass


_LAST_WINNERS_MS = "seller BIGINT, avg_price DOUBLE, expires_ms BIGINT, auction BIGINT"


def _bits(ranks: np.ndarray) -> np.ndarray:
    return np.left_shift(np.uint8(1), ranks.astype(np.uint8))


def _merge(ids: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct `ids` (sorted) with the OR of their `masks` (bit r: seen at price rank r)."""
    distinct, where = np.unique(ids, return_inverse=True)
    merged = np.zeros(len(distinct), dtype=np.uint8)
    np.bitwise_or.at(merged, where, masks)
    return distinct, merged


class DailyStatistics(StatefulProcessor):
    """Per day (q15) or channel and day (q16): bid counts and exact distinct bidders and auctions, overall and
    per price rank (`RANKS`).

    Input: bids with ``price``, ``bidder``, ``auction`` and ``minute`` (``HH:mm``, kept as its maximum for
    q16). State: the counts, and the distinct bidders and auctions as sorted int64 arrays with a bit mask of
    the ranks each was seen in (bytes in one value). Output: the key's whole row, after every micro-batch
    that brought it bids (an update stream: the last row of a key is its answer; ``total_bids`` grows).
    """

    def __init__(self, with_minute: bool) -> None:
        self.with_minute = with_minute

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("stats", "minute STRING, bids ARRAY<BIGINT>, bidders BINARY, "
                                          "bidder_ranks BINARY, auctions BINARY, auction_ranks BINARY")

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        frame = pd.concat(list(rows), ignore_index=True)
        ranks = np.searchsorted(_RANK_BOUNDS, frame["price"].to_numpy(), side="right")
        bids = np.bincount(ranks, minlength=len(RANKS)).astype(np.int64)
        bits = _bits(ranks)
        bidders, auctions = frame["bidder"].to_numpy(np.int64), frame["auction"].to_numpy(np.int64)
        minute = frame["minute"].max() if self.with_minute else ""
        if self.state.exists():
            old_minute, old_bids, b, br, a, ar = self.state.get()
            minute = max(minute, old_minute)
            bids += np.asarray(old_bids, dtype=np.int64)
            bidders, bidder_bits = np.concatenate([np.frombuffer(b, np.int64), bidders]), \
                np.concatenate([np.frombuffer(br, np.uint8), bits])
            auctions, auction_bits = np.concatenate([np.frombuffer(a, np.int64), auctions]), \
                np.concatenate([np.frombuffer(ar, np.uint8), bits])
        else:
            bidder_bits = auction_bits = bits
        bidders, bidder_bits = _merge(bidders, bidder_bits)
        auctions, auction_bits = _merge(auctions, auction_bits)
        self.state.update((minute, [int(n) for n in bids], bidders.tobytes(), bidder_bits.tobytes(),
                           auctions.tobytes(), auction_bits.tobytes()))
        row = dict(zip(self.key_names, key))
        if self.with_minute:
            row["minute"] = minute
        row["total_bids"] = int(bids.sum())
        row.update({f"rank{r}_bids": int(bids[r - 1]) for r in range(1, len(RANKS) + 1)})
        for what, masks in (("bidders", bidder_bits), ("auctions", auction_bits)):
            row[f"total_{what}"] = len(masks)
            row.update({f"rank{r}_{what}": int(np.count_nonzero(masks & (1 << (r - 1))))
                        for r in range(1, len(RANKS) + 1)})
        yield pd.DataFrame([row])

    def close(self) -> None:
        pass

    @property
    def key_names(self) -> tuple[str, ...]:
        return ("channel", "day") if self.with_minute else ("day",)


STATE_STORE = ("spark.sql.streaming.stateStore.providerClass",
               "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")


def use_rocksdb(spark: SparkSession) -> None:
    """Make `spark`'s new streaming queries keep state in RocksDB, which ``transformWithState`` requires.

    A session setting (queries already started keep the provider their checkpoint names); a no-op when set.
    """
    key, value = STATE_STORE
    if spark.conf.get(key, None) != value:
        spark.conf.set(key, value)


def _winners_ms(events: DataFrame, watermark_delay: str, per_key: bool = False) -> DataFrame:
    flat = (events.withWatermark("dateTime", watermark_delay).where(F.col("event_type").isin(1, 2))
            .select(F.coalesce("auction.id", "bid.auction").alias("auction"), F.col("event_type").alias("kind"),
                    F.unix_millis("dateTime").alias("time_ms"), F.unix_millis("auction.expires").alias("expires_ms"),
                    F.col("auction.category").alias("category"), F.col("auction.seller").alias("seller"),
                    F.col("bid.price").alias("price")))
    if per_key:
        return flat.groupBy("auction").transformWithStateInPandas(WinningBids(), _WINNERS_MS, "append", "EventTime")
    return flat.select(bucket("auction"), "*").groupBy("bucket").transformWithStateInPandas(
        BucketWinningBids(), _WINNERS_MS, "append", "EventTime")


def winning_bids(events: DataFrame, watermark_delay: str, per_key: bool = False) -> DataFrame:
    """The winning bids over the combined stream: one row per closed auction with a winner (`WINNERS_SCHEMA`),
    appended when the watermark (``dateTime`` − `watermark_delay`) reaches its ``expires``. By
    `impulse.nexmark.buckets.BucketWinningBids`, or with `per_key` (the same answer, slower) `WinningBids`."""
    return _winners_ms(events, watermark_delay, per_key).select(
        "auction", "category", "seller", F.timestamp_millis("expires_ms").alias("expires"), "price")


def last_winners_average(events: DataFrame, watermark_delay: str, per_key: bool = False) -> DataFrame:
    """q6: the last winners' average over the winning bids: per seller, a row per winner (``seller``,
    ``avg_price``, ``expires``, ``auction``) with the average of the seller's last 10 winners up to it. By
    `impulse.nexmark.buckets`' processors, or with `per_key` `WinningBids` and `LastWinners`."""
    winners = _winners_ms(events, watermark_delay, per_key)
    if per_key:
        averaged = winners.groupBy("seller").transformWithStateInPandas(
            LastWinners(), _LAST_WINNERS_MS, "append", "None")
    else:
        averaged = winners.select(bucket("seller"), "*").groupBy("bucket").transformWithStateInPandas(
            BucketLastWinners(), _LAST_WINNERS_MS, "append", "None")
    return averaged.select("seller", "avg_price", F.timestamp_millis("expires_ms").alias("expires"), "auction")


def daily_statistics(bids: DataFrame, per_channel: bool, per_key: bool | None = None) -> DataFrame:
    """The daily statistics over the ``bid`` view: q15's columns (`per_channel` False) or q16's. By
    `DailyStatistics` per key (`per_key`; by default for q15, whose one key a day is already one call a
    micro-batch) or `impulse.nexmark.buckets.BucketDailyStatistics` per bucket of keys (by default for q16's
    (channel, day) keys); the same answer."""
    per_key = not per_channel if per_key is None else per_key
    keys = ("channel", "day") if per_channel else ("day",)
    counts = ["total_bids", *(f"rank{r}_bids" for r in range(1, len(RANKS) + 1))]
    for what in ("bidders", "auctions"):
        counts += [f"total_{what}", *(f"rank{r}_{what}" for r in range(1, len(RANKS) + 1))]
    schema = ", ".join([*(f"{k} STRING" for k in keys), *(["minute STRING"] if per_channel else []),
                        *(f"{c} BIGINT" for c in counts)])
    prepared = bids.select(*([F.col("channel")] if per_channel else []),
                           F.date_format("dateTime", "yyyy-MM-dd").alias("day"),
                           F.date_format("dateTime", "HH:mm").alias("minute"), "price", "bidder", "auction")
    if per_key:
        return prepared.groupBy(*keys).transformWithStateInPandas(DailyStatistics(per_channel), schema, "update",
                                                                  "None")
    return prepared.select(bucket(*keys), "*").groupBy("bucket").transformWithStateInPandas(
        BucketDailyStatistics(per_channel), schema, "update", "None")
