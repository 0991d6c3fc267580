"""The bucketed processors (`impulse.nexmark.buckets`) give the per-key processors' rows, key by key, on the same
input; their vectorised helpers on small cases. No Spark: `TwsTester` runs a processor in this process (the
streams with a restart, against batch SQL, are in test_stateful.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.streaming.tws_tester import TwsTester

from impulse.nexmark.buckets import (
    BucketDailyStatistics,
    BucketLastWinners,
    BucketWinningBids,
    _keep_last,
    merge_pairs,
    rolling_last,
)
from impulse.nexmark.stateful import DailyStatistics, LastWinners


def test_rolling_last_sums_up_to_n_rows_of_each_group():
    sums, counts = rolling_last(np.array([1, 1, 1, 2, 2]), np.array([1, 2, 4, 8, 16]), 2)
    assert sums.tolist() == [1, 3, 6, 8, 24]
    assert counts.tolist() == [1, 2, 2, 1, 2]


def test_keep_last_marks_the_last_n_rows_of_each_group():
    assert _keep_last(np.array([1, 1, 1, 2, 3, 3]), 2).tolist() == [False, True, True, True, True, True]


def test_merge_pairs_keeps_each_key_and_id_once_with_the_ranks_it_was_seen_in():
    keys, ids, masks = merge_pairs(np.array([0, 1, 0, 0], dtype=np.int32), np.array([7, 7, 7, 3]),
                                   np.array([1, 2, 4, 1], dtype=np.uint8))
    assert list(zip(keys.tolist(), ids.tolist(), masks.tolist())) == [(0, 3, 1), (0, 7, 5), (1, 7, 2)]


def _bids(rng, n: int, with_channel: bool) -> pd.DataFrame:
    frame = pd.DataFrame({"channel": rng.choice(["Apple", "Baidu", "channel-17", "Google"], n),
                          "day": rng.choice(["2026-01-01", "2026-01-02"], n),
                          "minute": rng.choice(["00:01", "00:05", "12:00"], n),
                          "price": rng.choice([5, 9_999, 10_000, 999_999, 1_000_000, 3_000_000], n),
                          "bidder": rng.integers(0, 300, n), "auction": rng.integers(0, 100, n)})
    return frame if with_channel else frame.drop(columns="channel")


@pytest.mark.parametrize("with_channel", [False, True], ids=["q15", "q16"])
def test_bucket_daily_statistics_gives_the_per_key_rows_across_batches(with_channel):
    keys = ["channel", "day"] if with_channel else ["day"]
    bucketed, per_key = TwsTester(BucketDailyStatistics(with_channel)), TwsTester(DailyStatistics(with_channel))
    rng = np.random.default_rng(7)
    for size in (2_000, 1, 500):
        bids = _bids(rng, size, with_channel)
        got = bucketed.testInPandas(3, bids.assign(bucket=3)).sort_values(keys, ignore_index=True)
        expected = []
        for key, group in bids.groupby(keys if with_channel else "day"):
            row = per_key.testInPandas(key, group)  # the tester wraps the key in a tuple: a (channel, day) arrives whole
            if with_channel:
                row = row.assign(channel=key[0], day=key[1])
            expected.append(row)
        expected = pd.concat(expected).sort_values(keys, ignore_index=True)
        assert len(got) == bids[keys].drop_duplicates().shape[0]
        pd.testing.assert_frame_equal(got[expected.columns], expected, check_dtype=False)


def test_bucket_last_winners_gives_the_per_seller_rows():
    bucketed, per_key = TwsTester(BucketLastWinners()), TwsTester(LastWinners())
    rng = np.random.default_rng(7)
    for batch in range(3):
        winners = pd.DataFrame({"seller": rng.integers(0, 20, 300), "expires_ms": rng.integers(0, 50, 300) + 50 * batch,
                                "auction": rng.permutation(300) + 300 * batch, "price": rng.integers(0, 10**6, 300)})
        order = ["seller", "expires_ms", "auction"]
        got = bucketed.testInPandas(0, winners.assign(bucket=0)).sort_values(order, ignore_index=True)
        expected = pd.concat([per_key.testInPandas(s, g) for s, g in winners.groupby("seller")]
                             ).sort_values(order, ignore_index=True)
        pd.testing.assert_frame_equal(got, expected, check_dtype=False)


def _events(*rows) -> pd.DataFrame:
    """BucketWinningBids' input: (auction, kind, time_ms, expires_ms, price) rows, category 3, seller 5."""
    frame = pd.DataFrame(rows, columns=["auction", "kind", "time_ms", "expires_ms", "price"])
    return frame.assign(bucket=0, category=3, seller=5)[["bucket", "auction", "kind", "time_ms", "expires_ms",
                                                         "category", "seller", "price"]]


def _won(frame: pd.DataFrame) -> list[tuple[int, int]]:
    return sorted(zip(frame["auction"].tolist(), frame["price"].tolist())) if len(frame) else []


def test_bucket_winning_bids_closes_each_auction_of_the_bucket_when_the_watermark_reaches_its_expires():
    tester = TwsTester(BucketWinningBids(), timeMode="EventTime", eventTimeExtractor=lambda row: row["time_ms"])
    tester.setWatermark(1)
    early = tester.testInPandas(0, _events((7, 2, 1_000, None, 900), (7, 2, 900, None, 5_000)))  # before auction 7
    assert early.empty
    tester.testInPandas(0, _events((7, 1, 1_000, 3_000, None), (8, 1, 1_000, 5_000, None), (9, 1, 1_000, 3_000, None),
                                   (7, 2, 2_999, None, 400), (7, 2, 3_001, None, 9_000), (8, 2, 4_000, None, 70),
                                   (8, 2, 4_500, None, 60)))
    assert tester.setWatermark(2_999).empty
    won = tester.setWatermark(3_000)  # 7 wins with the waiting bid at 1,000; 9 had no bid
    assert won.to_dict("records") == [{"auction": 7, "category": 3, "seller": 5, "expires_ms": 3_000, "price": 900}]
    tester.testInPandas(0, _events((8, 2, 4_900, None, 80), (8, 2, 5_001, None, 10_000)))
    assert _won(tester.setWatermark(6_000)) == [(8, 80)]
    assert tester.peekValueState("bucket", 0) is None  # nothing open, nothing waiting: the state is gone


def test_bucket_winning_bids_forgets_waiting_bids_the_watermark_passed():
    tester = TwsTester(BucketWinningBids(), timeMode="EventTime", eventTimeExtractor=lambda row: row["time_ms"])
    tester.setWatermark(1)
    tester.testInPandas(0, _events((7, 2, 500, None, 10), (7, 2, 800, None, 20)))
    assert tester.setWatermark(799).empty
    assert tester.peekValueState("bucket", 0) is not None  # kept until the newest is passed
    assert tester.setWatermark(800).empty
    assert tester.peekValueState("bucket", 0) is None
    tester.testInPandas(0, _events((7, 1, 1_000, 2_000, None), (7, 2, 2_500, None, 30)))
    assert tester.setWatermark(2_000).empty
