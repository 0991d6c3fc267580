"""The Nexmark source, ``format("nexmark")``: the reference generator's events on the impulse machinery.

Offsets, partitions, pacing, restarts, ``limit``, ``maxEventsPerTrigger``, ``Trigger.AvailableNow`` and the
bounded ``spark.read`` are the impulse source's (`impulse.source`): the readers here subclass impulse's and
only turn each planned partition's counters into Nexmark events. Partition ``i``'s counter ``k`` is event
number ``g = k·numPartitions + i``, so with ``limit`` L the events are exactly numbers 0 … L−1; the event's
content is `impulse.nexmark.generator`'s function of (seed, options, g) and its time is the impulse
schedule's time of that number (floored to milliseconds, as Nexmark's times are).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader

from connectors.errors import OptionError
from connectors.options import OptionReader
from connectors.worker import freeze_gc_once
from impulse.events import ROWS_PER_BATCH, EventLayout
from impulse.nexmark.generator import (
    AUCTION,
    BID,
    MAX_AVERAGE_BYTES,
    PERSON,
    TABLES,
    Generator,
    adjusted,
    event_types,
    events_for_in_flight,
)
from impulse.options import ImpulseOptions
from impulse.source import ImpulseBatchReader, ImpulsePartition, ImpulseStreamReader

__all__ = ["NexmarkDataSource", "NexmarkOptions", "NexmarkPartition", "spark_schema", "arrow_schema", "event_batches",
           "TABLE_NAMES", "DEFAULT_EVENTS_PER_SECOND"]

TABLE_NAMES = ("event", "person", "auction", "bid")
DEFAULT_EVENTS_PER_SECOND = 10_000  # the reference generator's default first-event rate
_KINDS = ("person", "auction", "bid")  # by event_type
# options of the generator: option name -> (Generator field, minimum)
_GENERATOR_OPTIONS = {
    "hotAuctionRatio": ("hot_auction_ratio", 1), "hotSellersRatio": ("hot_sellers_ratio", 1),
    "hotBiddersRatio": ("hot_bidders_ratio", 1), "numInFlightAuctions": ("num_in_flight_auctions", 1),
    "numActivePeople": ("num_active_people", 1), "outOfOrderGroupSize": ("out_of_order_group_size", 1),
    "avgPersonByteSize": ("avg_person_bytes", 0), "avgAuctionByteSize": ("avg_auction_bytes", 0),
    "avgBidByteSize": ("avg_bid_bytes", 0),
}
# impulse options that shape impulse's own rows, not Nexmark events
_REFUSED = {"payloadBytes": "Nexmark events have no payload column (avgBidByteSize and friends size 'extra')",
            "outOfOrderness": "Nexmark's disorder is outOfOrderGroupSize",
            "lateRate": "Nexmark's disorder is outOfOrderGroupSize", "lateBy": "Nexmark's disorder is outOfOrderGroupSize",
            "duplicateRate": "Nexmark's events are each delivered once (its queries' answers count them)",
            "duplicateDelay": "Nexmark's events are each delivered once (its queries' answers count them)"}


def _ddl_type(arrow: pa.DataType) -> str:
    return {pa.int64(): "BIGINT", pa.string(): "STRING"}.get(arrow, "TIMESTAMP")


def spark_schema(table: str) -> str:
    """The Spark DDL of `table`: flat NOT NULL columns, or for ``event`` the combined stream of Flink's nexmark."""
    if table != "event":
        return ", ".join(f"{name} {_ddl_type(t)} NOT NULL" for name, t in TABLES[table])
    structs = ", ".join(f"{kind} STRUCT<" + ", ".join(f"{name}: {_ddl_type(t)} NOT NULL" for name, t in TABLES[kind])
                        + ">" for kind in _KINDS)
    return f"event_type INT NOT NULL, {structs}, dateTime TIMESTAMP NOT NULL"


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of `table`'s record batches (equal to `spark_schema`)."""
    if table != "event":
        return pa.schema([pa.field(name, t, nullable=False) for name, t in TABLES[table]])
    structs = [pa.field(kind, pa.struct([pa.field(n, t, nullable=False) for n, t in TABLES[kind]])) for kind in _KINDS]
    return pa.schema([pa.field("event_type", pa.int32(), nullable=False), *structs,
                      pa.field("dateTime", pa.timestamp("us", tz="UTC"), nullable=False)])


@dataclass(frozen=True)
class NexmarkOptions:
    """The impulse options that plan events, the table, and the generator's parameters (with the seed)."""

    impulse: ImpulseOptions
    table: str
    generator: Generator

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> "NexmarkOptions":
        """Parse and validate; raises `OptionError` naming the option, the value and what is allowed.

        The generator's options are taken here, every other one is the impulse source's. Without
        ``eventsPerSecond`` or ``delay`` the rate is the reference generator's 10,000 events/s.
        """
        own = {name.lower() for name in (*_GENERATOR_OPTIONS, "table")}
        reader = OptionReader({k: v for k, v in options.items() if str(k).lower() in own}, name="nexmark source")
        table = reader.choice("table", TABLE_NAMES, "event")
        defaults = Generator()  # the reference generator's defaults, named so that the option tables show them
        params = {field: reader.integer(name, getattr(defaults, field), minimum=minimum,
                                        maximum=MAX_AVERAGE_BYTES if "Byte" in name else None)
                  for name, (field, minimum) in _GENERATOR_OPTIONS.items()}
        rest = {k: v for k, v in options.items() if str(k).lower() not in own}
        lowered = {str(k).lower(): k for k in rest}
        for name, why in _REFUSED.items():
            if name.lower() in lowered:
                raise OptionError(lowered[name.lower()], rest[lowered[name.lower()]], f"no such option: {why}")
        if any(k.startswith("fields.") for k in lowered):
            key = next(k for k in lowered if k.startswith("fields."))
            raise OptionError(lowered[key], rest[lowered[key]], "no fields.* options: Nexmark's columns are fixed")
        if not {"eventspersecond", "delay", "ratestages"} & lowered.keys():
            rest["eventsPerSecond"] = str(DEFAULT_EVENTS_PER_SECOND)
        try:
            impulse = ImpulseOptions.from_options(rest)
        except OptionError as error:
            if error.expected.startswith("a known option"):
                known = ", ".join(sorted((*_GENERATOR_OPTIONS, "table"), key=str.lower))
                raise OptionError(error.option, error.value, f"a known option of the nexmark source: {known}, or "
                                  f"one of the impulse source's ({error.expected.split('(known: ')[-1]}") from None
            raise
        generator = Generator(seed=impulse.seed, **params)
        return cls(impulse, table, generator)


@dataclass
class NexmarkPartition(ImpulsePartition):
    """An impulse partition, with what turns its counters into Nexmark events."""

    bases: tuple[int, ...]  # every partition's counter at the schedule's anchor (the event time of any number)
    table: str
    generator: Generator


def event_times_ms(numbers: np.ndarray, layout: EventLayout, bases: Sequence[int]) -> np.ndarray:
    """The event time of each event number, epoch ms: the impulse schedule's time of (partition, counter)."""
    partitions = layout.partitions
    counters, subtasks = np.divmod(numbers, partitions)
    out = np.empty(len(numbers), dtype=np.int64)
    for subtask in np.unique(subtasks):
        mine = subtasks == subtask
        base = bases[int(subtask)]
        own = layout if base == layout.base_counter else dataclasses.replace(layout, base_counter=base)
        out[mine] = own.timestamps_us(counters[mine], int(subtask))
    return out // 1000


def event_batches(partition: NexmarkPartition, rows_per_batch: int = ROWS_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """The events of `partition` (its counters ``[first, end)``), `partition.table`'s rows of them, in batches."""
    schema = arrow_schema(partition.table)
    generator, layout = partition.generator, partition.layout
    ahead = events_for_in_flight(generator.num_in_flight_auctions)
    for lo in range(partition.first, partition.end, rows_per_batch):
        numbers = np.arange(lo, min(lo + rows_per_batch, partition.end), dtype=np.int64)
        numbers *= layout.partitions
        numbers += partition.subtask_index
        ids = adjusted(numbers, generator.out_of_order_group_size)
        types = event_types(ids)
        if partition.table != "event":
            kind = _KINDS.index(partition.table)
            ids = ids[types == kind]
            yield pa.RecordBatch.from_arrays(_columns(generator, kind, ids, layout, partition.bases, ahead), schema=schema)
            continue
        when = event_times_ms(ids, layout, partition.bases)
        columns = [pa.array(types)]
        for kind in (PERSON, AUCTION, BID):
            rows = np.flatnonzero(types == kind)
            fields = _columns(generator, kind, ids[rows], layout, partition.bases, ahead, when[rows])
            columns.append(_spread(fields, rows, len(ids), schema.field(_KINDS[kind]).type))
        columns.append(pa.array(when * 1000, type=pa.timestamp("us", tz="UTC")))
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _columns(generator: Generator, kind: int, ids: np.ndarray, layout: EventLayout, bases: Sequence[int], ahead: int,
             when: np.ndarray | None = None) -> list[pa.Array]:
    if when is None:
        when = event_times_ms(ids, layout, bases)
    horizon = None
    if kind == AUCTION:
        horizon = event_times_ms(ids + ahead, layout, bases) - when
    return generator.table(_KINDS[kind], ids, when, horizon)


def _spread(fields: list[pa.Array], rows: np.ndarray, length: int, struct: pa.StructType) -> pa.StructArray:
    """A struct array of `length` rows: `fields` at `rows` (ascending), null elsewhere."""
    valid = np.zeros(length, dtype=bool)
    valid[rows] = True
    children = [_scatter(field, rows, length) for field in fields]
    return pa.StructArray.from_arrays(children, fields=list(struct), mask=pa.array(~valid))


def _scatter(values: pa.Array, rows: np.ndarray, length: int) -> pa.Array:
    """`values` placed at `rows` (ascending) of `length` rows, empty or zero elsewhere: strings keep their data
    buffer (only the offsets are rebuilt, the rows in between empty), numbers are scattered by numpy."""
    if pa.types.is_string(values.type):
        offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=len(values) + 1, offset=4 * values.offset)
        ends = np.zeros(length + 1, dtype=np.int32)
        ends[rows + 1] = np.diff(offsets)
        np.cumsum(ends, out=ends)
        ends += offsets[0]
        return pa.Array.from_buffers(pa.string(), length, [None, pa.py_buffer(ends), values.buffers()[2]])
    full = np.zeros(length, dtype=np.int64)
    full[rows] = values.cast(pa.int64()).to_numpy()
    return pa.array(full, type=values.type)


def _read(partition: NexmarkPartition) -> Iterator[pa.RecordBatch]:
    freeze_gc_once()
    return event_batches(partition)


class NexmarkStreamReader(ImpulseStreamReader):
    """impulse's stream reader (offsets, pacing, restarts, admission control) reading Nexmark events."""

    def __init__(self, options: NexmarkOptions) -> None:
        super().__init__(options.impulse)
        self.nexmark = options

    def partitions(self, start: dict, end: dict) -> Sequence[NexmarkPartition]:
        return _nexmark(super().partitions(start, end), tuple(end["anchorCounters"]), self.nexmark)

    def read(self, partition: NexmarkPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class NexmarkBatchReader(ImpulseBatchReader):
    """impulse's bounded read (needs ``limit``) of Nexmark events."""

    def __init__(self, options: NexmarkOptions) -> None:
        super().__init__(options.impulse)
        self.nexmark = options

    def partitions(self) -> Sequence[NexmarkPartition]:
        return _nexmark(super().partitions(), (0,) * self.options.num_partitions, self.nexmark)

    def read(self, partition: NexmarkPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


def _nexmark(partitions: Sequence[ImpulsePartition], bases: tuple[int, ...], options: NexmarkOptions
             ) -> list[NexmarkPartition]:
    return [NexmarkPartition(p.subtask_index, p.first, p.end, p.layout, bases, options.table, options.generator)
            for p in partitions]


class NexmarkDataSource(DataSource):
    """Nexmark's persons, auctions and bids, deterministic and resumable (see the README's Nexmark section).

    Name: ``nexmark``

    Schema by ``table``: ``event`` (default), Flink nexmark's combined stream: ``event_type`` INT (0 person,
    1 auction, 2 bid), ``person``, ``auction``, ``bid`` STRUCTs (the one of the event's type set, the
    others null) and ``dateTime`` TIMESTAMP (the event's); ``person``, ``auction`` or ``bid``: that table
    alone, flat, exactly the rows of that type of the combined stream with the same options.

    Parameters (option names are case-insensitive)
    ----------
    table : event | person | auction | bid, default event
    seed : int, default 0
        Every event is a pure function of (seed, the options below, its event number).
    hotAuctionRatio, hotSellersRatio, hotBiddersRatio : int ≥ 1, default 2, 4, 4
        1 − 1/ratio of bids go to a hot auction, are by a hot bidder; of auctions are by a hot seller.
    numInFlightAuctions, numActivePeople : int ≥ 1, default 100, 1000
        The window of auctions a bid picks from, of persons a seller or bidder is picked from.
    outOfOrderGroupSize : int ≥ 1, default 1
        Events are emitted permuted within groups of this many event numbers (event time follows the id).
    avgPersonByteSize, avgAuctionByteSize, avgBidByteSize : int ≥ 0, default 200, 500, 100
        ``extra`` pads each event to this size on average.
    eventsPerSecond, delay, numPartitions, limit, limitPerPartition, startTime, alignment, interval,
    maxEventsPerTrigger, rampUpTime, downtime : the impulse source's (`impulse.source`), counting events
        of all three types; without a rate, ``eventsPerSecond`` is 10,000.
    """

    def __init__(self, options) -> None:
        super().__init__(options)
        self.parsed = NexmarkOptions.from_options(options)  # errors here reach the user intact

    @classmethod
    def name(cls) -> str:
        return "nexmark"

    def schema(self) -> str:
        return spark_schema(self.parsed.table)

    def streamReader(self, schema) -> DataSourceStreamReader:
        return NexmarkStreamReader(self.parsed)

    def reader(self, schema) -> DataSourceReader:
        return NexmarkBatchReader(self.parsed)
