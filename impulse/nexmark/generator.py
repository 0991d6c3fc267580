"""The Nexmark generator's semantics as vectorised functions of the event number (numpy and pyarrow).

Event number ``g`` (0, 1, 2, … over the whole stream) becomes the event id ``a = adjusted(g)`` (equal to
``g`` unless `Generator.out_of_order_group_size` > 1), and everything about the event is a function of
``a`` and the seed:

- its type by ``a mod 50``: 0 a person, 1–3 an auction, 4–49 a bid (the 1:3:46 mix);
- ids: the person of event ``a`` is ``1000 + a // 50``; the auction ``1000 + 3·(a // 50) + (a mod 50) − 1``;
  a random person (a seller, a bidder) is one of the last `num_active_people` persons *or up to 10 beyond
  the newest* (the "lead": an auction may name a seller whose person event comes later); a random
  auction one of the last `num_in_flight_auctions` auctions or up to 10 beyond the newest;
- hot keys: with probability 1 − 1/`hot_sellers_ratio` an auction's seller is the first person of the
  current block of 100 persons, with 1 − 1/`hot_bidders_ratio` a bid's bidder is the second person of
  that block, with 1 − 1/`hot_auction_ratio` a bid's auction the first auction of its block of 100;
- prices ``round(10^(6u) · 100)`` cents for u uniform in [0, 1); 5 categories from 10; expiry: an auction
  lasts 1 ms plus a uniform time below twice the time until `num_in_flight_auctions` more auctions are due;
- strings: names from 11 × 9 first and last names, e-mails ``<3-6 chars>@<3-4 chars>.com``, card numbers
  ``dddd dddd dddd dddd``, one of 10 cities and 6 states, item names of 3–19 and descriptions of 3–99
  characters (letters, 1 in 13 a space, trimmed); half the bids come from 4 hot channels, the others from
  ``channel-0`` … ``channel-9999``, each with a URL (nine in ten with ``&channel_id=``); ``extra`` pads an
  event to its average size (200, 500, 100 bytes, ±20 %).

Random choices draw from `impulse.draws.words_at` keyed by (seed, table), word ``j`` of the event's
fixed set; strings are slices of two 1 MiB pools drawn once per seed. So a value depends on nothing
but (seed, options, event number): not on partitions, batches, restarts or the machine. Timestamps are
the caller's (`impulse.nexmark.source`): event time is the impulse schedule's time of the event number.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from impulse import draws

__all__ = ["Generator", "TABLES", "PERSON", "AUCTION", "BID", "event_types", "adjusted", "last_person_id",
           "last_auction_id", "next_person_id", "next_auction_id", "prices", "FIRST_PERSON_ID", "FIRST_AUCTION_ID",
           "FIRST_CATEGORY_ID", "PROPORTIONS", "HOT_BLOCK", "ID_LEAD", "events_for_in_flight"]

PERSON, AUCTION, BID = 0, 1, 2
PROPORTIONS = (1, 3, 46)  # persons, auctions, bids per 50 events
_DENOMINATOR = sum(PROPORTIONS)
FIRST_PERSON_ID = FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID, NUM_CATEGORIES = 10, 5
ID_LEAD = 10       # how far past the newest person/auction a random id may reach
HOT_BLOCK = 100    # a hot person/auction is the first (second, for bidders) of its block of 100
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS = 10_000
_POOL = 1 << 20
MAX_AVERAGE_BYTES = _POOL // 4  # the largest average event size ('extra' is a slice of a pool of _POOL bytes)

# table -> its fields, in order: (name, Arrow type). The source's schemas (Spark DDL, Arrow) derive from it.
_TS = pa.timestamp("us", tz="UTC")
TABLES: dict[str, tuple[tuple[str, pa.DataType], ...]] = {
    "person": (("id", pa.int64()), ("name", pa.string()), ("emailAddress", pa.string()),
               ("creditCard", pa.string()), ("city", pa.string()), ("state", pa.string()), ("dateTime", _TS),
               ("extra", pa.string())),
    "auction": (("id", pa.int64()), ("itemName", pa.string()), ("description", pa.string()),
                ("initialBid", pa.int64()), ("reserve", pa.int64()), ("dateTime", _TS), ("expires", _TS),
                ("seller", pa.int64()), ("category", pa.int64()), ("extra", pa.string())),
    "bid": (("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()), ("channel", pa.string()),
            ("url", pa.string()), ("dateTime", _TS), ("extra", pa.string())),
}

_FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
_LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
_NAMES = tuple(f"{first} {last}" for first in _FIRST_NAMES for last in _LAST_NAMES)
_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent",
           "Cheyenne")
_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
_LN_10 = 2.302585092994046


# --- the arithmetic of ids ------------------------------------------------------------------------------------

def event_types(ids: np.ndarray) -> np.ndarray:
    """0 (person), 1 (auction) or 2 (bid) for each event id (int32)."""
    rem = ids % _DENOMINATOR
    out = np.full(len(ids), BID, dtype=np.int32)
    out[rem < PROPORTIONS[0] + PROPORTIONS[1]] = AUCTION
    out[rem < PROPORTIONS[0]] = PERSON
    return out


def adjusted(numbers: np.ndarray, group: int) -> np.ndarray:
    """The event id of each event number: numbers permuted within groups of `group` (``base + 953·g mod group``)."""
    if group == 1:
        return numbers
    return numbers // group * group + numbers * 953 % group


def last_person_id(ids: np.ndarray) -> np.ndarray:
    """The newest person id (base 0) at each event id: the event's own when it is a person."""
    epoch, offset = np.divmod(ids, _DENOMINATOR)
    return epoch * PROPORTIONS[0] + np.minimum(offset, PROPORTIONS[0] - 1)


def last_auction_id(ids: np.ndarray) -> np.ndarray:
    """The newest auction id (base 0) at each event id: the event's own when it is an auction."""
    epoch, offset = np.divmod(ids, _DENOMINATOR)
    persons, auctions = PROPORTIONS[0], PROPORTIONS[1]
    before = offset < persons  # a person event: the last auction was in the previous epoch
    epoch = epoch - before
    offset = np.where(before | (offset >= persons + auctions), auctions - 1, offset - persons)
    return epoch * auctions + offset


def _below(x: np.ndarray, n: np.ndarray | int) -> np.ndarray:
    """Integers uniform in [0, n) for words `x` (n ≥ 1, per element or one for all)."""
    out = np.floor(draws.uniform(x) * n).astype(np.int64)
    np.minimum(out, np.asarray(n) - 1, out=out)
    return out


def next_person_id(ids: np.ndarray, x: np.ndarray, active: int) -> np.ndarray:
    """A random person id (base 0): one of the last `active` persons or up to `ID_LEAD` beyond the newest."""
    count = last_person_id(ids) + 1
    window = np.minimum(count, active)
    return count - window + _below(x, window + ID_LEAD)


def next_auction_id(ids: np.ndarray, x: np.ndarray, in_flight: int) -> np.ndarray:
    """A random auction id (base 0): one of the last `in_flight` auctions or up to `ID_LEAD` beyond the newest."""
    newest = last_auction_id(ids)
    oldest = np.maximum(newest - in_flight, 0)
    return oldest + _below(x, newest - oldest + 1 + ID_LEAD)


def prices(x: np.ndarray) -> np.ndarray:
    """Prices in cents, ``round(10^(6u) · 100)``: log-uniform from 1.00 to 1,000,000.00."""
    value = draws.exp(draws.uniform(x) * (6.0 * _LN_10))
    value *= 100.0
    value += 0.5
    return np.floor(value).astype(np.int64)


def events_for_in_flight(in_flight: int) -> int:
    """How many events it takes for `in_flight` more auctions: the horizon of an auction's expiry."""
    return in_flight * _DENOMINATOR // PROPORTIONS[1]


# --- strings ---------------------------------------------------------------------------------------------------

@lru_cache(maxsize=8)
def _pools(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two 1 MiB byte pools: text (letters, 1 in 13 a space) and letters only."""
    key = draws.stream_key(seed, "nexmark", "pool")
    raw = draws.words(key, 0, 0, _POOL, 2)
    letters = (np.frombuffer(b"a", np.uint8)[0] + _below(raw[:, 0], 26)).astype(np.uint8)
    text = letters.copy()
    text[_below(raw[:, 1], 13) == 0] = ord(" ")
    return text, letters


def _slices(pool: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """The strings ``pool[start : start + length]``: one row copy per string, then the valid bytes."""
    count = len(lengths)
    width = int(lengths.max()) if count else 0
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    if width:
        windows = np.lib.stride_tricks.sliding_window_view(pool, width)[starts]
        data = windows[np.arange(width) < lengths[:, None]]
    else:
        data = np.empty(0, dtype=np.uint8)
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _text(pool: np.ndarray, x_length: np.ndarray, x_start: np.ndarray, longest: int) -> pa.Array:
    """Random text of 3 to `longest` − 1 characters, trimmed of spaces at either end."""
    lengths = 3 + _below(x_length, longest - 3)
    return pc.utf8_trim(_slices(pool, _below(x_start, _POOL - longest), lengths), " ")


def _extra(pool: np.ndarray, x_length: np.ndarray, x_start: np.ndarray, size: np.ndarray, average: int) -> pa.Array:
    """Letters that bring an event of `size` bytes to `average` on the whole: ±20 % around the gap, none past it."""
    gap = average - size
    delta = np.floor(gap * 0.2 + 0.5).astype(np.int64)
    lengths = gap - delta + _below(x_length, np.maximum(2 * delta, 1)) * (delta > 0)
    lengths[size > average] = 0
    np.maximum(lengths, 0, out=lengths)  # at most 1.2 × average + 1: every start leaves room for it
    return _slices(pool, _below(x_start, _POOL - 2 * average - 2), lengths)


def _lengths(array: pa.Array) -> np.ndarray:
    return pc.binary_length(array).to_numpy(zero_copy_only=False).astype(np.int64)


def _card_numbers(x: np.ndarray) -> pa.Array:
    """``dddd dddd dddd dddd`` from 4 words per row: 19 bytes each."""
    count = len(x)
    groups = _below(x, 10_000)  # (count, 4)
    data = np.full((count, 19), ord(" "), dtype=np.uint8)
    for g in range(4):
        for d, place in enumerate((1000, 100, 10, 1)):
            data[:, 5 * g + d] = ord("0") + groups[:, g] // place % 10
    offsets = np.arange(0, 19 * (count + 1), 19, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data.reshape(-1))])


def _channel_id(i: int) -> int:
    """|the 32 bits of i reversed, read as a signed int| (the reference generator's channel id)."""
    reversed_bits = int(f"{i:032b}"[::-1], 2)
    return abs(reversed_bits - (1 << 32) if reversed_bits >= 1 << 31 else reversed_bits)


@lru_cache(maxsize=8)
def _channels(seed: int) -> tuple[pa.Array, pa.Array]:
    """Channel names and URLs: the 4 hot channels first, then ``channel-0`` … ``channel-9999``."""
    key = draws.stream_key(seed, "nexmark", "channels")
    count = len(HOT_CHANNELS) + CHANNELS
    x = draws.words(key, 0, 0, count, 2 * 27 + 4)  # per URL: 3 parts × 9 letters, their '_' draws, lengths, id
    letters = (ord("a") + _below(x[:, :27], 26)).astype(np.uint8).reshape(count, 3, 9)
    letters[_below(x[:, 27:54], 13).reshape(count, 3, 9) == 0] = ord("_")
    lengths = 3 + _below(x[:, 54:57], 2)  # 3 or 4 characters per part
    with_id = _below(x[:, 57], 10) > 0
    urls = []
    for i in range(count):
        parts = "/".join(letters[i, p, :lengths[i, p]].tobytes().decode() for p in range(3))
        url = f"https://www.nexmark.com/{parts}/item.htm?query=1"
        j = i - len(HOT_CHANNELS)
        if j >= 0 and with_id[i]:
            url += f"&channel_id={_channel_id(j)}"
        urls.append(url)
    names = list(HOT_CHANNELS) + [f"channel-{j}" for j in range(CHANNELS)]
    return pa.array(names, pa.string()), pa.array(urls, pa.string())


# --- the generator ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Generator:
    """The parameters of the reference generator (its defaults); picklable, sent to executors.

    Each method takes event *ids* of its table (``event_types(ids)`` all that table) and their event time
    in epoch milliseconds, and returns the table's columns (`TABLES` order) as Arrow arrays.
    """

    seed: int = 0
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    num_in_flight_auctions: int = 100
    num_active_people: int = 1000
    out_of_order_group_size: int = 1
    avg_person_bytes: int = 200
    avg_auction_bytes: int = 500
    avg_bid_bytes: int = 100

    def _words(self, table: str, ids: np.ndarray, per_event: int) -> np.ndarray:
        return draws.words_at(draws.stream_key(self.seed, "nexmark", table), ids, per_event)

    def persons(self, ids: np.ndarray, date_ms: np.ndarray) -> list[pa.Array]:
        x = self._words("person", ids, 14)
        text, letters = _pools(self.seed)
        name = pa.array(_NAMES).take(pa.array(_below(x[:, 0], len(_NAMES))))
        email = pc.binary_join_element_wise(_text(text, x[:, 1], x[:, 2], 7), "@", _text(text, x[:, 3], x[:, 4], 5),
                                            ".com", "")
        card = _card_numbers(x[:, 5:9])
        city = pa.array(_CITIES).take(pa.array(_below(x[:, 9], len(_CITIES))))
        state = pa.array(_STATES).take(pa.array(_below(x[:, 10], len(_STATES))))
        size = 8 + _lengths(name) + _lengths(email) + 19 + _lengths(city) + _lengths(state)
        extra = _extra(letters, x[:, 11], x[:, 12], size, self.avg_person_bytes)
        return [pa.array(last_person_id(ids) + FIRST_PERSON_ID), name, email, card, city, state, _time(date_ms),
                extra]

    def auctions(self, ids: np.ndarray, date_ms: np.ndarray, horizon_ms: np.ndarray) -> list[pa.Array]:
        """`horizon_ms`: the time from each auction until event ``id + events_for_in_flight(…)`` is due."""
        x = self._words("auction", ids, 12)
        text, letters = _pools(self.seed)
        hot = _below(x[:, 0], self.hot_sellers_ratio) > 0
        seller = np.where(hot, last_person_id(ids) // HOT_BLOCK * HOT_BLOCK,
                          next_person_id(ids, x[:, 1], self.num_active_people)) + FIRST_PERSON_ID
        category = FIRST_CATEGORY_ID + _below(x[:, 2], NUM_CATEGORIES)
        initial = prices(x[:, 3])
        expires = date_ms + 1 + _below(x[:, 4], np.maximum(2 * horizon_ms, 1))
        item = _text(text, x[:, 5], x[:, 6], 20)
        description = _text(text, x[:, 7], x[:, 8], 100)
        reserve = initial + prices(x[:, 9])
        size = 8 + _lengths(item) + _lengths(description) + 40
        extra = _extra(letters, x[:, 10], x[:, 11], size, self.avg_auction_bytes)
        return [pa.array(last_auction_id(ids) + FIRST_AUCTION_ID), item, description, pa.array(initial),
                pa.array(reserve), _time(date_ms), _time(expires), pa.array(seller), pa.array(category), extra]

    def bids(self, ids: np.ndarray, date_ms: np.ndarray) -> list[pa.Array]:
        x = self._words("bid", ids, 10)
        _, letters = _pools(self.seed)
        hot_auction = _below(x[:, 0], self.hot_auction_ratio) > 0
        auction = np.where(hot_auction, last_auction_id(ids) // HOT_BLOCK * HOT_BLOCK,
                           next_auction_id(ids, x[:, 1], self.num_in_flight_auctions)) + FIRST_AUCTION_ID
        hot_bidder = _below(x[:, 2], self.hot_bidders_ratio) > 0
        bidder = np.where(hot_bidder, last_person_id(ids) // HOT_BLOCK * HOT_BLOCK + 1,
                          next_person_id(ids, x[:, 3], self.num_active_people)) + FIRST_PERSON_ID
        price = prices(x[:, 4])
        names, urls = _channels(self.seed)
        hot_channel = _below(x[:, 5], 2) > 0
        channel = np.where(hot_channel, _below(x[:, 6], len(HOT_CHANNELS)),
                           len(HOT_CHANNELS) + _below(x[:, 7], CHANNELS))
        channel = pa.array(channel)
        extra = _extra(letters, x[:, 8], x[:, 9], np.full(len(ids), 32, dtype=np.int64), self.avg_bid_bytes)
        return [pa.array(auction), pa.array(bidder), pa.array(price), names.take(channel), urls.take(channel),
                _time(date_ms), extra]

    def table(self, name: str, ids: np.ndarray, date_ms: np.ndarray, horizon_ms: np.ndarray | None = None
              ) -> list[pa.Array]:
        """The columns of table `name` (``person``, ``auction``, ``bid``) for `ids`, all of that table."""
        if name == "person":
            return self.persons(ids, date_ms)
        if name == "auction":
            return self.auctions(ids, date_ms, horizon_ms)
        return self.bids(ids, date_ms)


def _time(ms: np.ndarray) -> pa.Array:
    return pa.array(ms * 1000, type=_TS)
