"""The Nexmark generator and the source's batches in pure numpy/pyarrow (no Spark): the mix, ids, leads, hot keys,
sizes, and that a value depends on the event number alone."""

from __future__ import annotations

import math
import re
from datetime import datetime

import numpy as np
import pyarrow as pa
import pytest

from connectors.errors import OptionError
from impulse.nexmark import generator as nx
from impulse.nexmark.source import NexmarkBatchReader, NexmarkOptions, arrow_schema, event_batches
from impulse.schedule import RateStages
from tests.impulse.test_stages import integral

START = "2026-01-01T00:00:00Z"


def read(limit: int, partitions: int = 2, rows_per_batch: int = 131_072, **options) -> pa.Table:
    """What a bounded read of the source returns, every partition's batches concatenated."""
    parsed = NexmarkOptions.from_options({"limit": str(limit), "numPartitions": str(partitions), "startTime": START,
                                          **{k: str(v) for k, v in options.items()}})
    batches = [b for p in NexmarkBatchReader(parsed).partitions() for b in event_batches(p, rows_per_batch)]
    return pa.Table.from_batches(batches, schema=arrow_schema(parsed.table))


def of_type(events: pa.Table, kind: int, name: str) -> pa.StructArray:
    """The `name` structs of the events of type `kind`, in stream order."""
    return events.filter(pa.compute.equal(events.column("event_type"), kind)).column(name).combine_chunks()


@pytest.fixture(scope="module")
def events() -> pa.Table:
    return read(20_000, partitions=3)


@pytest.fixture(scope="module")
def bids() -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Ids and columns of the bids among events 0..199,999 (generator functions directly)."""
    ids = np.arange(200_000, dtype=np.int64)
    ids = ids[nx.event_types(ids) == nx.BID]
    columns = nx.Generator().bids(ids, np.zeros(len(ids), dtype=np.int64))
    return ids, {name: c.to_numpy(zero_copy_only=False) for (name, _), c in zip(nx.TABLES["bid"], columns)}


def test_the_mix_is_1_3_46_by_event_number_exactly(events):
    for limit in (1, 4, 50, 20_000, 123_457):
        full, rest = divmod(limit, 50)
        expected = [full * p + min(max(rest - sum(nx.PROPORTIONS[:k]), 0), p) for k, p in enumerate(nx.PROPORTIONS)]
        assert np.bincount(nx.event_types(np.arange(limit)), minlength=3).tolist() == expected
    types = events.column("event_type").to_numpy()
    assert np.bincount(types).tolist() == [400, 1200, 18400]
    for kind, name in enumerate(("person", "auction", "bid")):  # the struct of the event's type, the others null
        assert events.column(name).is_valid().to_numpy(zero_copy_only=False).tolist() == (types == kind).tolist()


def test_person_and_auction_ids_are_consecutive_in_event_order(events):
    persons = of_type(events, 0, "person").field("id")
    auctions = of_type(events, 1, "auction").field("id")
    assert sorted(persons.to_pylist()) == list(range(1000, 1400))
    assert sorted(auctions.to_pylist()) == list(range(1000, 2200))


def test_bids_name_auctions_and_bidders_in_flight_or_up_to_the_lead_ahead(bids):
    ids, c = bids
    newest_auction = nx.last_auction_id(ids) + nx.FIRST_AUCTION_ID
    newest_person = nx.last_person_id(ids) + nx.FIRST_PERSON_ID
    assert (c["auction"] >= np.maximum(newest_auction - 100, nx.FIRST_AUCTION_ID)).all()
    assert (c["auction"] <= newest_auction + nx.ID_LEAD).all()
    assert (c["auction"] > newest_auction).any()  # leads happen: a bid before its auction's event
    assert (c["bidder"] >= np.maximum(newest_person - 1000 + 1, nx.FIRST_PERSON_ID)).all()
    assert (c["bidder"] <= newest_person + nx.ID_LEAD).all()
    assert (c["bidder"] > newest_person).any()


def within(observed: int, n: int, p: float) -> bool:
    """Within 5 standard deviations of a binomial(n, p)."""
    return abs(observed - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1


def test_hot_auctions_and_bidders_take_their_share(bids):
    ids, c = bids
    late = ids >= 100_000  # past the warm-up: 111 auctions and 1010 persons to pick from
    hot_auction = nx.last_auction_id(ids) // 100 * 100 + nx.FIRST_AUCTION_ID
    hot_bidder = nx.last_person_id(ids) // 100 * 100 + 1 + nx.FIRST_PERSON_ID
    n = int(late.sum())
    assert within(int((c["auction"] == hot_auction)[late].sum()), n, 1 / 2 + 1 / 2 / 111)
    assert within(int((c["bidder"] == hot_bidder)[late].sum()), n, 3 / 4 + 1 / 4 / 1010)
    assert within(int(np.isin(c["channel"], nx.HOT_CHANNELS).sum()), len(ids), 1 / 2)


def test_hot_sellers_take_their_share():
    ids = np.arange(200_000, 400_000, dtype=np.int64)
    ids = ids[nx.event_types(ids) == nx.AUCTION]
    columns = nx.Generator().auctions(ids, np.zeros(len(ids), dtype=np.int64), np.full(len(ids), 1000))
    seller = columns[7].to_numpy()
    hot = nx.last_person_id(ids) // 100 * 100 + nx.FIRST_PERSON_ID
    assert within(int((seller == hot).sum()), len(ids), 3 / 4 + 1 / 4 / 1010)


def test_values_have_the_reference_shapes(events):
    person = of_type(events, 0, "person")
    auction = of_type(events, 1, "auction")
    bid = of_type(events, 2, "bid")
    assert all(re.fullmatch(r"[a-z][a-z ]{0,4}[a-z]?@[a-z][a-z ]{0,2}[a-z]?\.com", e) or re.fullmatch(r"[a-z]+@[a-z]+\.com", e)
               for e in person.field("emailAddress").to_pylist())
    assert all(re.fullmatch(r"\d{4} \d{4} \d{4} \d{4}", card) for card in person.field("creditCard").to_pylist())
    assert set(person.field("state").to_pylist()) == {"AZ", "CA", "ID", "OR", "WA", "WY"}
    assert all(len(name.split(" ")) == 2 for name in person.field("name").to_pylist())
    assert set(auction.field("category").to_pylist()) == {10, 11, 12, 13, 14}
    for field in ("initialBid",):
        values = auction.field(field).to_numpy()
        assert values.min() >= 100 and values.max() <= 100_000_000
    assert (auction.field("reserve").to_numpy() > auction.field("initialBid").to_numpy()).all()
    assert (pa.compute.subtract(auction.field("expires"), auction.field("dateTime")).cast(pa.int64()).to_numpy() >= 1000).all()
    prices = bid.field("price").to_numpy()
    assert prices.min() >= 100 and prices.max() <= 100_000_000
    # log-uniform: a sixth of the prices in each decade from 1.00 to 1,000,000.00
    assert within(int((prices < 1000).sum()), len(prices), 1 / 6)
    urls = bid.field("url").to_pylist()
    assert all(re.fullmatch(r"https://www\.nexmark\.com/[a-z_]{3,4}/[a-z_]{3,4}/[a-z_]{3,4}/item\.htm\?query=1"
                            r"(&channel_id=\d+)?", url) for url in urls)
    length = lambda table, field: pa.compute.binary_length(table.field(field)).to_numpy().astype(np.int64)  # noqa: E731
    sizes = {  # the reference generator's size of an event: 8 bytes a number or time (not all counted), text's bytes
        "person": (200, 8 + sum(length(person, f) for f in ("name", "emailAddress", "creditCard", "city", "state", "extra"))),
        "auction": (500, 48 + sum(length(auction, f) for f in ("itemName", "description", "extra"))),
        "bid": (100, 32 + length(bid, "extra"))}
    for name, (average, size) in sizes.items():
        assert abs(np.mean(size) - average) < 0.02 * average, (name, np.mean(size))


def test_a_value_depends_on_the_event_number_only():
    """Other partitions or batch sizes give the same events; only event time follows the partitioning."""
    def by_number(table: pa.Table) -> dict:
        bid = table.column("bid").combine_chunks()
        rows = [(a, b, p, u, e) for a, b, p, u, e in zip(*(bid.field(f).to_pylist() for f in
                                                           ("auction", "bidder", "price", "url", "extra"))) if a]
        return sorted(rows)
    one = read(5_000, partitions=1)
    assert by_number(one) == by_number(read(5_000, partitions=3, rows_per_batch=77))
    assert read(5_000, partitions=2).equals(read(5_000, partitions=2, rows_per_batch=100))
    assert not by_number(one) == by_number(read(5_000, partitions=1, seed=7))


def test_table_bid_is_the_bids_of_the_combined_stream_in_order(events):
    bids = read(20_000, partitions=3, table="bid")
    combined = of_type(events, 2, "bid")
    assert bids.num_rows == 18_400
    assert pa.Table.from_arrays(combined.flatten(), schema=bids.schema).equals(bids)
    persons = read(20_000, partitions=3, table="person")
    assert persons.column("id").to_pylist() == \
        of_type(events, 0, "person").field("id").to_pylist()


def test_out_of_order_groups_permute_ids_and_event_time_follows_them():
    ordered = read(1_000, partitions=1, eventsPerSecond=100)
    shuffled = read(1_000, partitions=1, eventsPerSecond=100, outOfOrderGroupSize=10)
    ids = nx.adjusted(np.arange(1_000), 10)
    assert sorted(ids.tolist()) == list(range(1_000)) and ids.tolist() != list(range(1_000))
    # the same events, emitted in another order
    assert sorted(map(str, shuffled.to_pylist())) == sorted(map(str, ordered.to_pylist()))
    times = shuffled.column("dateTime").cast(pa.int64()).to_numpy()
    assert (np.diff(times) < 0).any()


@pytest.mark.parametrize("options, option", [
    ({"table": "bids"}, "table"), ({"hotAuctionRatio": "0"}, "hotAuctionRatio"), ({"payloadBytes": "8"}, "payloadBytes"),
    ({"fields.x.kind": "uuid"}, "fields.x.kind"), ({"hotAuctionRatoi": "2"}, "hotAuctionRatoi"),
    ({"outOfOrderness": "1s"}, "outOfOrderness"), ({"avgBidByteSize": str(1 << 30)}, "avgBidByteSize"),
    ({"duplicateRate": "0.1"}, "duplicateRate")])
def test_wrong_options_name_the_option(options, option):
    with pytest.raises(OptionError) as error:
        NexmarkOptions.from_options(options)
    assert error.value.option == option
    if option == "hotAuctionRatoi":
        assert "hotAuctionRatio" in str(error.value) and "eventsPerSecond" in str(error.value)


def test_the_default_rate_is_the_reference_generators():
    assert NexmarkOptions.from_options({}).impulse.events_per_second == 10_000


def test_rate_stages_shape_the_event_times_as_the_impulse_source_does():
    """``rateStages`` plans Nexmark events like impulse events: per second of event time, the count is the
    stages' integral within one per partition, the stream ends after the last stage, and an auction's
    ``expires`` is still at or after its own ``dateTime``."""
    text, partitions = "3s:4000,2s:4000,1s:12000,2s:0,1s:3000", 3
    stages = RateStages.parse(text, partitions)
    events = read(10_000_000, partitions=partitions, rateStages=text)  # the stages end the stream first
    assert len(events) == stages.total * partitions
    start_ms = nx_ms(START)
    seconds = (events.column("dateTime").cast(pa.int64()).to_numpy() // 1000 - start_ms) // 1000
    per_second = np.bincount(seconds, minlength=stages.duration_us // 1_000_000)
    for second, count in enumerate(per_second):
        exact = partitions * (integral(stages, (second + 1) * 1_000_000) - integral(stages, second * 1_000_000))
        assert abs(count - exact) <= partitions, (second, count, exact)
    auctions = of_type(events, nx.AUCTION, "auction")
    expires, created = (auctions.field(n).cast(pa.int64()).to_numpy() for n in ("expires", "dateTime"))
    assert (expires >= created).all()


def nx_ms(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 UTC instant."""
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
