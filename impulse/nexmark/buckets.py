"""Nexmark's hand-kept state (q4, q6, q15, q16) with one Python call per bucket of keys, not one per key.

``transformWithStateInPandas`` costs a Python call, and a few round trips to the state server, per grouping key
with rows in a micro-batch: with one key per auction (q4, q6), seller (q6) or (channel, day) (q16) that cost, not
the work, sets the rate. These processors group by a bucket, ``pmod(hash(key), BUCKETS)``, keep every key of
their bucket in one value (columns as numpy arrays in binary fields) and update it for the whole micro-batch in
vectorised numpy: a few dozen calls a micro-batch whatever the number of keys. Their answers are those of the
per-key processors of `impulse.nexmark.stateful`, row for row:

- `BucketWinningBids` (auction buckets, event time): the open auctions with the best counted price so far, and
  bids whose auction was not seen yet. One event-time timer per bucket, at the earliest ``expires`` of its open
  auctions (or, with none open, at its newest waiting bid); when it fires, every auction of the bucket whose
  ``expires`` the watermark reached closes (one row if a bid counted) and waiting bids the watermark passed are
  forgotten.
- `BucketLastWinners` (seller buckets): each seller's last `LAST_WINNERS` winners, the running average per new
  winner.
- `BucketDailyStatistics` (buckets of day, or channel and day): per key, bid counts and the distinct bidders and
  auctions with the ranks each was seen in, as (key, id)-sorted arrays; one row per key that got bids.

`BUCKETS` is part of the state's layout: a checkpoint written with one count cannot be read with another.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

__all__ = ["BUCKETS", "bucket", "BucketWinningBids", "BucketLastWinners", "BucketDailyStatistics", "rolling_last",
           "merge_pairs"]

BUCKETS = 16  # calls per micro-batch at most; a few per core keeps every core busy and each state value small
LAST_WINNERS = 10
_RANK_BOUNDS = np.array([10_000, 1_000_000])
_RANKS = len(_RANK_BOUNDS) + 1
_NO_PRICE = np.iinfo(np.int64).min


def bucket(*keys: str) -> Column:
    """The bucket column of `keys`: ``pmod(hash(keys…), BUCKETS)``, named ``bucket``."""
    return F.pmod(F.hash(*keys), F.lit(BUCKETS)).alias("bucket")


def _concat(frames: Iterator[pd.DataFrame]) -> pd.DataFrame:
    frames = list(frames)
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _arrays(values: tuple, names: tuple[str, ...], dtype=np.int64) -> dict[str, np.ndarray]:
    return {n: np.frombuffer(v, dtype=dtype).copy() for n, v in zip(names, values)}


def _blobs(columns: dict[str, np.ndarray], names: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(np.ascontiguousarray(columns[n]).tobytes() for n in names)


def _set_timer(handle: StatefulProcessorHandle, at: int | None) -> None:
    """Make `at` the only timer of the current key (none when `at` is None)."""
    timers = list(handle.listTimers())
    for t in timers:
        if t != at:
            handle.deleteTimer(t)
    if at is not None and at not in timers:
        handle.registerTimer(at)


_OPEN = ("auction", "start", "expires", "category", "seller", "best")
_WAITING = ("w_auction", "w_time", "w_price")
_WINNERS_SCHEMA = ", ".join(f"{n} BINARY" for n in (*_OPEN, *_WAITING))


class BucketWinningBids(StatefulProcessor):
    """Per bucket of auctions: each auction's winning (highest) bid price once the watermark passes its ``expires``.

    Input as `impulse.nexmark.stateful.WinningBids` (plus ``bucket``, the key). A bid counts when its time is
    in ``[auction.dateTime, auction.expires]``; the first auction row of an id is the one kept. Output: one row
    (``auction, category, seller, expires_ms, price``) per auction with a counted bid, in the timer call after
    the watermark reached its ``expires``; the auction then leaves the state.
    """

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("bucket", _WINNERS_SCHEMA)

    def _load(self) -> tuple[dict, dict]:
        if not self.state.exists():
            empty = np.empty(0, dtype=np.int64)
            return {n: empty for n in _OPEN}, {n: empty for n in _WAITING}
        values = self.state.get()
        return _arrays(values[:len(_OPEN)], _OPEN), _arrays(values[len(_OPEN):], _WAITING)

    def _store(self, open_: dict, waiting: dict) -> None:
        if not len(open_["auction"]) and not len(waiting["w_auction"]):
            self.state.clear()
            _set_timer(self.handle, None)
            return
        self.state.update(_blobs(open_, _OPEN) + _blobs(waiting, _WAITING))
        at = open_["expires"].min() if len(open_["auction"]) else waiting["w_time"].max()
        _set_timer(self.handle, int(at))

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        frame = _concat(rows)
        open_, waiting = self._load()
        kinds = frame["kind"].to_numpy()
        auctions = frame[kinds == 1]
        if len(auctions):
            ids = auctions["auction"].to_numpy(np.int64)
            ids, first = np.unique(ids, return_index=True)
            new = ~np.isin(ids, open_["auction"])
            pick = first[new]
            added = {"auction": ids[new], "start": auctions["time_ms"].to_numpy(np.int64)[pick],
                     "expires": auctions["expires_ms"].to_numpy(np.int64)[pick],
                     "category": auctions["category"].to_numpy(np.int64)[pick],
                     "seller": auctions["seller"].to_numpy(np.int64)[pick],
                     "best": np.full(int(new.sum()), _NO_PRICE, dtype=np.int64)}
            open_ = {n: np.concatenate([open_[n], added[n]]) for n in _OPEN}
        bids = frame[kinds == 2]
        b_auction = np.concatenate([waiting["w_auction"], bids["auction"].to_numpy(np.int64)])
        b_time = np.concatenate([waiting["w_time"], bids["time_ms"].to_numpy(np.int64)])
        b_price = np.concatenate([waiting["w_price"], bids["price"].to_numpy(np.int64)])
        order = np.argsort(open_["auction"], kind="stable")
        sorted_ids = open_["auction"][order]
        at = np.searchsorted(sorted_ids, b_auction)
        known = at < len(sorted_ids)
        known[known] = sorted_ids[at[known]] == b_auction[known]
        row = order[at[known]]
        times, prices = b_time[known], b_price[known]
        counted = (times >= open_["start"][row]) & (times <= open_["expires"][row])
        best = open_["best"].copy()
        np.maximum.at(best, row[counted], prices[counted])
        open_["best"] = best
        watermark = timerValues.getCurrentWatermarkInMs()
        keep = ~known & (b_time > watermark) if len(waiting["w_auction"]) else ~known
        waiting = {"w_auction": b_auction[keep], "w_time": b_time[keep], "w_price": b_price[keep]}
        self._store(open_, waiting)
        return iter([])

    def handleExpiredTimer(self, key, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
                           ) -> Iterator[pd.DataFrame]:
        watermark = timerValues.getCurrentWatermarkInMs()
        open_, waiting = self._load()
        closed = open_["expires"] <= watermark
        won = closed & (open_["best"] != _NO_PRICE)
        out = pd.DataFrame({"auction": open_["auction"][won], "category": open_["category"][won],
                            "seller": open_["seller"][won], "expires_ms": open_["expires"][won],
                            "price": open_["best"][won]})
        open_ = {n: v[~closed] for n, v in open_.items()}
        late = waiting["w_time"] <= watermark
        waiting = {n: v[~late] for n, v in waiting.items()}
        self._store(open_, waiting)
        return iter([out] if len(out) else [])

    def close(self) -> None:
        pass


def rolling_last(groups: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For rows sorted by `groups`: the sum of each row's `values` and those of up to ``n - 1`` rows before it in
    its group, and how many rows that sum holds (exact int64)."""
    index = np.arange(len(values))
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]]) if len(values) else index
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(values)]))
    first = np.maximum(index - (n - 1), group_start)
    sums = np.cumsum(values)
    before = np.where(first > 0, sums[first - 1], 0) if len(values) else sums
    return sums - before, index - first + 1


_LAST = ("seller", "expires_ms", "auction", "price")


class BucketLastWinners(StatefulProcessor):
    """Per bucket of sellers: each seller's average winning price over its last `LAST_WINNERS` winners, by
    (``expires``, auction id).

    Input: `BucketWinningBids`' rows (plus ``bucket``). Output: one row per new winner (``seller, avg_price,
    expires_ms, auction``) with the average over the seller's last 10 winners up to and including it (a sum of
    integer prices divided once, as SQL's ``avg``). State: every seller's last 10.
    """

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("last", ", ".join(f"{n} BINARY" for n in _LAST))

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        new = _concat(rows)
        columns = {n: new[n].to_numpy(np.int64) for n in _LAST}
        fresh = np.ones(len(new), dtype=bool)
        if self.state.exists():
            kept = _arrays(self.state.get(), _LAST)
            columns = {n: np.concatenate([kept[n], columns[n]]) for n in _LAST}
            fresh = np.concatenate([np.zeros(len(kept["seller"]), dtype=bool), fresh])
        order = np.lexsort((columns["auction"], columns["expires_ms"], columns["seller"]))
        columns = {n: v[order] for n, v in columns.items()}
        fresh = fresh[order]
        sums, counts = rolling_last(columns["seller"], columns["price"], LAST_WINNERS)
        self.state.update(_blobs({n: v[_keep_last(columns["seller"])] for n, v in columns.items()}, _LAST))
        yield pd.DataFrame({"seller": columns["seller"][fresh], "avg_price": sums[fresh] / counts[fresh],
                            "expires_ms": columns["expires_ms"][fresh], "auction": columns["auction"][fresh]})

    def close(self) -> None:
        pass


def _keep_last(groups: np.ndarray, n: int = LAST_WINNERS) -> np.ndarray:
    """For rows sorted by `groups`: True for the last `n` rows of each group."""
    if not len(groups):
        return np.zeros(0, dtype=bool)
    ends = np.flatnonzero(np.r_[groups[1:] != groups[:-1], True])
    group_end = np.repeat(ends, np.diff(np.r_[-1, ends]))
    return group_end - np.arange(len(groups)) < n


def merge_pairs(keys: np.ndarray, ids: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (`keys`, `ids`) pairs, sorted, with the OR of their `masks` (bit r: seen at price rank r)."""
    if not len(ids):
        return keys, ids, masks
    order = np.lexsort((ids, keys))
    keys, ids, masks = keys[order], ids[order], masks[order]
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]) | (ids[1:] != ids[:-1])])
    return keys[starts], ids[starts], np.bitwise_or.reduceat(masks, starts)


_SEP = "\x00"  # between the strings of a key column in the state: none of Nexmark's channels or days holds it


def _joined(strings: np.ndarray) -> bytes:
    return "".join(_SEP + s for s in strings).encode()


def _strings(blob: bytes) -> np.ndarray:
    return np.array(blob.decode().split(_SEP)[1:], dtype=object)


_STATS = ("bids", "bidder_key", "bidders", "bidder_ranks", "auction_key", "auctions", "auction_ranks")


class BucketDailyStatistics(StatefulProcessor):
    """Per bucket of days (q15) or (channel, day) keys (q16): each key's bid counts and exact distinct bidders and
    auctions, overall and per price rank.

    Input: bids with ``bucket``, the key columns, ``price``, ``bidder``, ``auction`` and ``minute`` (``HH:mm``,
    kept as its maximum for q16). State: the bucket's keys in the order first seen (their index is stable), their
    counts and latest minute, and the distinct (key index, id) pairs of bidders and of auctions, sorted, with the
    ranks each was seen in. Output: one row per key with bids in the micro-batch, its whole row (an update
    stream: the last row of a key is its answer).
    """

    def __init__(self, with_minute: bool) -> None:
        self.with_minute = with_minute

    @property
    def key_names(self) -> tuple[str, ...]:
        return ("channel", "day") if self.with_minute else ("day",)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState(
            "stats", ", ".join(f"{n} BINARY" for n in (*self.key_names, "minutes", *_STATS)))

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        frame = _concat(rows)
        names = list(self.key_names)
        if self.state.exists():
            values = self.state.get()
            known = pd.DataFrame({n: _strings(v) for n, v in zip(names, values)})
            minutes, blobs = _strings(values[len(names)]), values[len(names) + 1:]
            stats = {n: np.frombuffer(b, np.uint8 if n.endswith("ranks") else
                                      np.int32 if n.endswith("key") else np.int64).copy()
                     for n, b in zip(_STATS, blobs)}
            stats["bids"] = stats["bids"].reshape(-1, _RANKS)
        else:
            known = pd.DataFrame({n: pd.Series(dtype=object) for n in names})
            minutes = np.empty(0, dtype=object)
            stats = {n: np.empty(0, np.uint8 if n.endswith("ranks") else np.int32 if n.endswith("key") else np.int64)
                     for n in _STATS}
            stats["bids"] = stats["bids"].reshape(0, _RANKS)
        # each row's key index: known keys keep theirs, new ones are appended in order of first sight
        batch_keys = frame[names].drop_duplicates(ignore_index=True)
        index = pd.MultiIndex.from_frame(known[names]) if len(names) > 1 else pd.Index(known[names[0]])
        batch_index = (pd.MultiIndex.from_frame(batch_keys) if len(names) > 1 else pd.Index(batch_keys[names[0]]))
        found = index.get_indexer(batch_index)
        new = found < 0
        found[new] = len(known) + np.arange(int(new.sum()))
        known = pd.concat([known, batch_keys[new]], ignore_index=True)
        rows_index = batch_index.get_indexer(pd.MultiIndex.from_frame(frame[names]) if len(names) > 1
                                             else pd.Index(frame[names[0]]))
        row_key = found[rows_index].astype(np.int32)
        size = len(known)
        ranks = np.searchsorted(_RANK_BOUNDS, frame["price"].to_numpy(), side="right")
        bids = np.zeros((size, _RANKS), dtype=np.int64)
        bids[:len(stats["bids"])] = stats["bids"]
        np.add.at(bids, (row_key, ranks), 1)
        minutes = np.concatenate([minutes, np.full(size - len(minutes), "", dtype=object)])
        if self.with_minute:
            names_seen, rank = np.unique(frame["minute"].to_numpy(dtype=object), return_inverse=True)  # sorted
            latest = np.full(size, -1)
            np.maximum.at(latest, row_key, rank)
            idx = np.flatnonzero(latest >= 0)
            old, now = minutes[idx], names_seen[latest[idx]]
            minutes[idx] = np.where(now > old, now, old)
        bits = np.left_shift(np.uint8(1), ranks.astype(np.uint8))
        counts = {}
        for what in ("bidder", "auction"):
            k, ids, masks = merge_pairs(np.concatenate([stats[f"{what}_key"], row_key]),
                                        np.concatenate([stats[f"{what}s"], frame[what].to_numpy(np.int64)]),
                                        np.concatenate([stats[f"{what}_ranks"], bits]))
            stats.update({f"{what}_key": k, f"{what}s": ids, f"{what}_ranks": masks})
            counts[f"total_{what}s"] = np.bincount(k, minlength=size)
            for r in range(_RANKS):
                counts[f"rank{r + 1}_{what}s"] = np.bincount(k, weights=(masks >> r) & 1, minlength=size
                                                             ).astype(np.int64)
        stats["bids"] = bids
        self.state.update((*(_joined(known[n].to_numpy()) for n in names), _joined(minutes),
                           *(np.ascontiguousarray(stats[n]).tobytes() for n in _STATS)))
        touched = np.unique(row_key)
        out = {n: known[n].to_numpy()[touched] for n in names}
        if self.with_minute:
            out["minute"] = minutes[touched]
        out["total_bids"] = bids[touched].sum(axis=1)
        out.update({f"rank{r + 1}_bids": bids[touched, r] for r in range(_RANKS)})
        for what in ("bidders", "auctions"):
            out[f"total_{what}"] = counts[f"total_{what}"][touched]
            out.update({f"rank{r + 1}_{what}": counts[f"rank{r + 1}_{what}"][touched] for r in range(_RANKS)})
        yield pd.DataFrame(out)

    def close(self) -> None:
        pass
