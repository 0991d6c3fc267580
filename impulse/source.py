"""The impulse data source: synthetic events at a fixed rate, for Spark Structured Streaming.

Offsets (stored by Spark in ``<checkpoint>/offsets``) are JSON dicts::

    {"startTime": µs, "anchorTime": µs, "delayUs": float, "rampUs": int,
     "anchorCounters": [per partition], "counters": [per partition]}

and with ``rateStages`` ``"stages": [[duration µs, target events/s of one partition], …]``, with
``arrival=poisson`` ``"poissonSeed": seed``.

``counters[i]`` is the next counter of partition i; a micro-batch covers ``[start.counters[i],
end.counters[i])`` of every partition, so a restart from the checkpoint resumes with no gap and no
duplicate, and a replayed batch (same offsets) yields identical rows. The rows are a pure function
of the offsets and the options (`impulse.events`); the reader keeps no state that `read()` needs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from connectors.errors import OptionError
from connectors.worker import freeze_gc_once
from impulse.debezium import envelope_ddl
from impulse.events import Disorder, EventLayout, event_batches
from impulse.history import history_ddl
from impulse.options import DOWNTIME_SKIP, ImpulseOptions
from impulse.schedule import Schedule
from impulse.schema import RowSpec, default_rows, row_spec, spark_schema

__all__ = ["ImpulseDataSource", "ImpulseStreamReader", "ImpulseBatchReader", "ImpulsePartition"]


class ImpulseDataSource(DataSource):
    """Synthetic events at a configured rate, deterministic and resumable.

    Name: ``impulse``

    Schema: ``counter`` BIGINT (per partition, from 0), ``subtask_index`` BIGINT (0..numPartitions-1,
    constant per partition), ``timestamp`` TIMESTAMP (event time, UTC, µs), and with
    ``payloadBytes`` > 0 a ``payload`` BINARY of that many bytes; every column is NOT NULL.
    ``(subtask_index, counter)`` is the unique key of an event. A user schema (``.schema("…")``) keeps
    those columns' meaning and generates every other column from its ``fields.<column>.*`` options
    (`impulse.fields`, `impulse.schema`); each value is a pure function of (``seed``, the column, its
    options, ``subtask_index``, ``counter``).

    Parameters (option names are case-insensitive)
    ----------
    eventsPerSecond : float > 0
        Total rate over all partitions, events/s. Each partition runs at eventsPerSecond /
        numPartitions (a float: no rate is lost to rounding). Exactly one of this and ``delay``.
    delay : duration, e.g. ``250ms``, ``1s``, ``500us``
        Time between two events of one partition (total rate numPartitions / delay).
    rateStages : ``duration:target,…``, e.g. ``30s:1000,1m:1000,30s:5000``
        A rate that changes (k6's stages): from 0, a linear ramp from the previous target to each
        target (events/s over all partitions) over its duration; the stream ends after the last
        stage. Instead of ``eventsPerSecond``/``delay``; not with ``rampUpTime`` or ``interval``.
        Event k of a partition is due at the exact inverse of the cumulative rate
        (`impulse.schedule.RateStages`); a re-anchored schedule resumes the profile where it stopped.
    rateCurve : ``daily:min=RATE,max=RATE,peak=HH:MM``, e.g. ``daily:min=2000,max=20000,peak=14:00``
        A periodic rate (events/s over all partitions): a cosine over a day from ``min`` (≥ 0) to ``max``
        at ``peak``, the stream's first event at 00:00, sampled every 15 minutes of the day and joined by
        straight lines; it repeats without end. Instead of ``eventsPerSecond``/``delay``/``rateStages``;
        not with ``rampUpTime`` or ``interval``. A function of the counter, as ``rateStages`` is
        (`impulse.curve`, `impulse.schedule.PeriodicRate`).
    rateCurve.period : duration, default 24h
        The length of ``rateCurve``'s day: ``10m`` compresses 24 h into 10 minutes.
    bursts.every, bursts.factor, bursts.duration : duration, number > 0, duration; all three or none
        The last ``bursts.duration`` of every ``bursts.every`` runs at ``bursts.factor`` × the rate (of
        ``rateCurve``, else of ``eventsPerSecond``/``delay``), with 1 µs edges; ``bursts.duration`` <
        ``bursts.every``, which divides ``rateCurve.period``. Not with ``rateStages``.
    numPartitions : int ≥ 1, optional
        Default: the CPU count of the driver (the default parallelism of ``local[*]``).
    limit : int ≥ 0, optional
        Total events over all partitions; partition i gets limit // n, plus one if i < limit % n.
    limitPerPartition : int ≥ 0, optional
        Events per partition (Arroyo's ``message_count``). At most one of the two limits. When every
        partition reached its limit the stream has no more data; ``Trigger.AvailableNow`` then ends.
    interval : duration, optional
        Event time = startTime + interval × counter (independent of the wall clock). Without it,
        event time is the event's scheduled emission time (see *Notes*).
    startTime : ISO-8601 or epoch milliseconds, optional
        Default: when the query first starts. Kept in the offsets: a restart keeps the original.
        A start in the past makes the events between it and now due at once (a backfill).
    alignment : duration, optional
        Round the start time down to a multiple of it since the epoch (``1m``: a whole minute).
    maxEventsPerTrigger : int ≥ 1, optional
        Admission control: at most this many events per micro-batch, shared fairly by partitions.
    rampUpTime : duration, optional
        Grow the rate linearly from 0 to the full rate over this time from the start, and again
        from a restart that re-anchors the schedule (``downtime=skip``, or changed rate options).
    payloadBytes : int ≥ 0, default 0
        Size of a deterministic ``payload`` column (counter and subtask index, then filler).
    seed : int, default 0
        The seed of every generated column and of the event-time disorder.
    outOfOrderness : duration, default 0
        Each ``timestamp`` is its scheduled time minus a delay drawn uniformly in [0, outOfOrderness] µs.
    lateRate, lateBy : fraction 0..1 and duration, both or neither
        That share of events is delayed by a further ``lateBy``. Pacing is unchanged.
    arrival : ``uniform`` (default) | ``poisson``
        ``poisson``: each partition's events arrive as a Poisson process of the configured mean
        rate (exponential gaps, drawn per partition from the seed), cut in blocks of 1024 events
        that each take exactly their 1024 event times, so the rate holds over longer stretches and
        a restart, replay or batch read gives the same times; ramp-up and ``rateStages`` shape it
        as they shape the uniform schedule. Refused with ``interval`` (evenly spaced event times).
    duplicateRate, duplicateDelay : fraction 0..1 and duration, both or neither
        Redelivered duplicates, as an at-least-once producer's retries: that share of events is
        delivered twice, the copy the same row (every column, ``counter``, ``subtask_index``,
        ``payload`` and event time included) arriving 1 to ``duplicateDelay / delay`` events
        later in its partition (at most ``duplicateDelay`` later at the full rate); see
        `impulse.duplicates`. The stream equals the batch read, copies included; a restart keeps
        them. ``duplicateDelay`` must be within the run (``limit`` events per partition).
    fields.<path>.<property> : see `impulse.fields` (and `impulse.nested`: ARRAY, MAP, STRUCT columns by path,
        e.g. ``fields.items.element.price.mean``; `impulse.faker_pool`: ``kind=faker`` text)
        ``kind=ref`` refers to the entities of another impulse stream that exist at each event's
        scheduled time; it needs ``refStartTime``, or ``startTime`` (the referenced stream's) without
        ``downtime=skip``.
    refStartTime : ISO-8601 or epoch milliseconds, optional
        The ``startTime`` of the streams the ``kind=ref`` columns refer to, when this stream's own start is
        another (e.g. when it runs now, under ``impulse-load``): an event scheduled at t picks among the
        entities created by t on that timeline, whatever this stream's start. Default: ``startTime``.
    changelog.key, changelog.weights, changelog.liveKeys : see `impulse.changelog`
        The stream becomes the change log of the entities keyed by a BIGINT column, with an ``op``
        STRING column (insert, update, delete, and read with ``changelog.snapshot``).
    changelog.snapshot : bool, default false
        Each partition's first ``changelog.liveKeys`` events read the keys live at the start (a
        snapshot: ``op`` is ``read``, Debezium's ``r``) instead of inserting them; the changes follow.
    changelog.envelope : ``none`` (default) | ``debezium``
        ``debezium``: every change as a Debezium change event, columns ``key`` (STRUCT of the key
        column), ``before`` and ``after`` (STRUCTs of the row image: the key's previous state, null
        for ``c`` and ``r``; its new state, null for ``d``), ``op`` (``c``, ``u``, ``d``, ``r``),
        ``ts_ms`` (the event time, ms) and ``source`` (STRUCT ``connector``, ``name``, ``table``,
        ``snapshot``, ``pos``: ``counter × numPartitions + subtask_index``, increasing along each
        key's changes); see `impulse.debezium`. Every value is a pure function of the seed and the
        event. Write it with kafka-sink's ``value.format=debezium-json`` or ``debezium-avro``.
    changelog.image : DDL, required by ``changelog.envelope=debezium`` or ``changelog.history=scd2`` without ``.schema(...)``
        The row image's columns, e.g. ``id BIGINT, name STRING, balance DOUBLE``: the key column
        (BIGINT) and columns generated as ``fields.<column>.*`` say. With ``.schema(...)`` the
        schema must be the envelope's (`impulse.debezium.envelope_ddl` writes it) and ``after``
        declares the row image.
    changelog.name, changelog.table : str, default ``impulse`` and ``events``
        ``source.name`` and ``source.table`` of the Debezium envelope.
    changelog.history : ``none`` (default) | ``scd2``
        A batch read of the changelog's SCD2 history: each version (every change but a delete) of
        events ``[0, limit)``, the row image (``changelog.image``, or a schema of the image then
        ``valid_from TIMESTAMP, valid_to TIMESTAMP, is_current BOOLEAN``) with ``valid_from`` its
        event time, ``valid_to`` the key's next change's (null without one) and ``is_current``;
        see `impulse.history`. A stream of it is refused.
    downtime : ``skip`` | ``catchup``; default ``catchup`` with ``startTime`` or ``interval``, else ``skip``
        What a query restarted from its checkpoint does with the time it was down. ``skip`` (like
        Arroyo): the schedule restarts at the restart time; counters continue with no gap and the
        missed time gets no events. ``catchup`` (like Spark's ``rate``): every missed event is due at
        once, bounded per micro-batch by ``maxEventsPerTrigger`` when set; their timestamps are their
        original scheduled times. ``startTime`` or ``interval`` *pins* the timeline, so the default is
        then ``catchup``: a restart keeps every event's timestamp, what was due stays due, and the
        stream equals the bounded batch read. An explicit ``skip`` with them is honoured (the pacing,
        and without ``interval`` the timestamps, re-anchor at the restart).

    Notes
    -----
    Event k of a partition is due at ``anchor + k × delay`` (ramp-up bends the start of that line;
    see `impulse.schedule`). The anchor is the start time, moved to the restart time on a restart
    with ``downtime=skip`` or with changed rate options (``eventsPerSecond``, ``delay``,
    ``rampUpTime``). A restart with another ``numPartitions`` than the checkpoint's fails with an
    `OptionError`: use a new checkpoint to rescale. Options that shape rows (``interval``,
    ``payloadBytes``) must stay the same across restarts for replays to be identical.

    Examples
    --------
    >>> spark.readStream.format("impulse").option("eventsPerSecond", 50_000) \\
    ...     .option("numPartitions", 4).load()                                  # doctest: +SKIP
    >>> spark.read.format("impulse").option("delay", "10ms").option("limit", 1000).load()  # doctest: +SKIP
    """

    def __init__(self, options) -> None:
        super().__init__(options)
        # Parsed when the DataFrame is defined: an error raised here reaches the user intact, with or
        # without a user schema (DESIGN.md section 5).
        self.parsed = ImpulseOptions.from_options(options)

    @classmethod
    def name(cls) -> str:
        return "impulse"

    def schema(self) -> str:
        """The default columns (called by Spark only without a user schema; checks no ``fields.*`` is set)."""
        opts = self.parsed
        if opts.scd2:
            if opts.changelog_image is None:
                raise OptionError("changelog.image", None, "the row image's columns as DDL, e.g. "
                                  f"'{opts.changelog.key_column} BIGINT, name STRING' (changelog.history=scd2 "
                                  "without .schema(...): the source makes the history's schema from it)")
            return history_ddl(opts.changelog_image)
        if opts.debezium is not None:
            if opts.debezium.image is None:
                raise OptionError("changelog.image", None, "the row image's columns as DDL, e.g. "
                                  f"'{opts.changelog.key_column} BIGINT, name STRING' (changelog.envelope=debezium "
                                  "without .schema(...): the source makes the envelope's schema from it)")
            return envelope_ddl(opts.changelog.key_column, opts.debezium.image)
        self._rows(None)
        return spark_schema(opts.payload_bytes)

    def streamReader(self, schema) -> "DataSourceStreamReader":
        if self.parsed.scd2:
            return _Refused(OptionError("changelog.history", "scd2", "a batch read (spark.read with a limit): the "
                                        "history of versions is a table, not a stream; stream the changelog itself"))
        try:
            return ImpulseStreamReader(self.parsed, self._rows(schema))
        except OptionError as error:
            return _Refused(error)

    def reader(self, schema) -> "ImpulseBatchReader":
        return ImpulseBatchReader(self.parsed, self._rows(schema))

    def _rows(self, schema) -> RowSpec:
        opts = self.parsed
        return row_spec(schema, opts.fields, seed=opts.seed, payload_bytes=opts.payload_bytes, changelog=opts.changelog,
                        debezium=opts.debezium, scd2=opts.scd2)


@dataclass
class ImpulsePartition(InputPartition):
    """Counters ``[first, end)`` of partition `subtask_index`, with what shapes their rows."""

    subtask_index: int
    first: int
    end: int
    layout: EventLayout


def _read(partition: ImpulsePartition) -> Iterator[pa.RecordBatch]:
    freeze_gc_once()
    return event_batches(partition.subtask_index, partition.first, partition.end, partition.layout)


def now_us() -> int:
    """Wall clock, epoch microseconds."""
    return time.time_ns() // 1_000


class ImpulseStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side plans offsets from the wall clock; `read()` (executors) depends on the partition only."""

    def __init__(self, options: ImpulseOptions, rows: RowSpec | None = None) -> None:
        self.options = options
        self.rows = rows or default_rows(options.payload_bytes)
        self._initial: dict | None = None  # what initialOffset() returned in this process, if it ran
        self._resume_checked = False
        self._available_now_us: int | None = None
        self._last_start: dict | None = None

    def initialOffset(self) -> dict:
        opts = self.options
        start = opts.aligned_start(now_us())
        zeros = [0] * opts.num_partitions
        self._initial = {"startTime": start, "anchorTime": start, **self._rate(), "anchorCounters": zeros,
                         "counters": zeros}
        if self._available_now_us is not None:
            # Spark prepares AvailableNow before asking a new query for its initial offset: "now" is
            # then at least the start, so the events due at the start are read.
            self._available_now_us = max(self._available_now_us, start)
        return dict(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_events_per_trigger:
            return ReadMaxRows(self.options.max_events_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_us = now_us()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._check_partitions(start)
        now = self._available_now_us or now_us()
        start = self._resume(start, now)
        self._last_start = start
        ends = self._available(start, now)
        if isinstance(limit, ReadMaxRows):
            ends = _admit(start["counters"], ends, limit.max_rows)
        return {**start, "counters": ends}

    def reportLatestOffset(self) -> dict | None:
        """What is due now, ignoring admission control: Spark shows it as the source's latestOffset (lag)."""
        if self._last_start is None:
            return None
        return {**self._last_start, "counters": self._available(self._last_start, now_us())}

    def partitions(self, start: dict, end: dict) -> Sequence[ImpulsePartition]:
        schedule = Schedule.of_offset(end)
        return [
            ImpulsePartition(i, first, last, _layout(self.options, self.rows, end["startTime"], schedule, base))
            for i, (first, last, base) in enumerate(zip(start["counters"], end["counters"], end["anchorCounters"]))
            if last > first
        ]

    def read(self, partition: ImpulsePartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: events are generated, not buffered."""

    def _available(self, start: dict, now: int) -> list[int]:
        schedule = Schedule.of_offset(start)
        limits = self.options.limits or [None] * len(start["counters"])
        dues = (schedule.next_counter(now, base, i) for i, base in enumerate(start["anchorCounters"]))
        return [max(counter, due if cap is None else min(due, cap))
                for counter, due, cap in zip(start["counters"], dues, limits)]

    def _rate(self) -> dict:
        """The offset's fields that say the rate: ``delayUs``, ``rampUs``, and ``stages`` with `rateStages`."""
        opts = self.options
        rate = {"delayUs": opts.delay_us, "rampUs": opts.ramp_up_us}
        if opts.rate_stages is not None:
            rate["stages"] = opts.rate_stages.to_json()
        if opts.poisson:
            rate["poissonSeed"] = opts.seed
        return rate

    def _check_partitions(self, start: dict) -> None:
        stored = len(start["counters"])
        if stored != self.options.num_partitions:
            raise OptionError("numPartitions", self.options.num_partitions,
                              f"{stored}, the number of partitions in this query's checkpoint; to change it, "
                              "start the query with a new checkpointLocation")

    def _resume(self, start: dict, now: int) -> dict:
        """On the first plan after a restart, re-anchor the schedule if the rate changed or time is skipped.

        A new query plans its first batch from the offset `initialOffset()` just made. A restart plans
        from the checkpoint's last offset, even when Spark also called `initialOffset()` (it does so
        to re-run an uncommitted batch 0), so that call alone does not mean "new query".
        """
        if self._resume_checked:
            return start
        self._resume_checked = True
        if start == self._initial:
            return start
        rate = self._rate()
        keys = ("delayUs", "rampUs", "stages", "poissonSeed")
        rate_changed = {key: start.get(key) for key in keys} != {"stages": None, "poissonSeed": None, **rate}
        behind = self._available(start, now) != start["counters"]
        if rate_changed or (self.options.downtime == DOWNTIME_SKIP and behind):
            start = {key: value for key, value in start.items() if key not in ("stages", "poissonSeed")}
            return {**start, "anchorTime": now, **rate, "anchorCounters": list(start["counters"])}
        return start


class ImpulseBatchReader(DataSourceReader):
    """A bounded read of the first `limit` events; needs ``limit`` or ``limitPerPartition``."""

    def __init__(self, options: ImpulseOptions, rows: RowSpec | None = None) -> None:
        if options.limits is None:
            raise OptionError("limit", None, "a limit ('limit' or 'limitPerPartition') for a batch read "
                                             "(spark.read): without one the impulse source is unbounded")
        self.options = options
        self.rows = rows or default_rows(options.payload_bytes)
        self.start_us = options.aligned_start(now_us())

    def partitions(self) -> Sequence[ImpulsePartition]:
        opts = self.options
        schedule = Schedule(self.start_us, opts.delay_us, opts.ramp_up_us, opts.rate_stages,
                            opts.seed if opts.poisson else None)
        layout = _layout(opts, self.rows, self.start_us, schedule, 0)
        return [ImpulsePartition(i, 0, cap, layout) for i, cap in enumerate(opts.limits) if cap > 0] or \
            [ImpulsePartition(0, 0, 0, layout)]

    def read(self, partition: ImpulsePartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class _Refused(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """What `streamReader` returns when the options do not fit the schema: it raises the `OptionError` on
    the query's first call. Raised in ``streamReader()`` itself, PySpark 4.3 would replace it by its own
    ``UnboundLocalError: cannot access local variable 'reader'`` (DESIGN.md section 5)."""

    def __init__(self, error: OptionError) -> None:
        self.error = error

    def _raise(self, *args, **kwargs):
        raise self.error

    initialOffset = latestOffset = getDefaultReadLimit = prepareForTriggerAvailableNow = partitions = _raise
    read = commit = reportLatestOffset = _raise


def _layout(opts: ImpulseOptions, rows: RowSpec, start_us: int, schedule: Schedule, base: int) -> EventLayout:
    disorder = Disorder(opts.out_of_orderness_us, opts.late_rate, opts.late_by_us, opts.seed) if opts.disordered else None
    return EventLayout(start_us, schedule, base, opts.interval_us, opts.payload_bytes, rows, opts.num_partitions,
                       disorder, opts.duplicates, opts.ref_start_time_us)


def _admit(counters: list[int], ends: list[int], max_rows: int) -> list[int]:
    """Cap the events of a micro-batch at `max_rows`, shared evenly among partitions that have events.

    Water-filling: each partition gets an equal share (never more than it has due); the few rows
    left over go one each to the partitions furthest behind (most events due, then lowest counter,
    then lowest index). Over successive micro-batches no partition starves and the counters stay
    within one of each other, even when `max_rows` is smaller than the number of partitions.
    """
    want = [end - counter for counter, end in zip(counters, ends)]
    if sum(want) <= max_rows:
        return list(ends)
    grant = [0] * len(want)
    remaining = max_rows
    active = sorted((i for i, w in enumerate(want) if w > 0), key=lambda i: want[i])
    for position, i in enumerate(active):  # fewest wanted first: they may leave part of their share
        share = remaining // (len(active) - position)
        if want[i] > share:  # this one and all after it want more than an equal share
            for j in active[position:]:
                grant[j] = share
            remaining -= share * (len(active) - position)
            break
        grant[i] = want[i]
        remaining -= want[i]
    behind = sorted((i for i in active if grant[i] < want[i]), key=lambda i: (grant[i] - want[i], counters[i], i))
    for i in behind[:remaining]:
        grant[i] += 1
    return [counter + g for counter, g in zip(counters, grant)]
