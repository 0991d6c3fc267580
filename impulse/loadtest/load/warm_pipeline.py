"""The warm pipeline: the user's own query run on a short slice of events before the measured run.

The first micro-batch of a new query pays for what the load should not be charged with: Python UDF workers start,
the plan's generated code is compiled, the state stores open (with a Python UDF, 6–15 s on a busy 2-core machine
against ~0.3 s for a warm batch). The session's warm-up (`impulse.loadtest.load.warmup.warm_up`) starts the source's and
the sink's Python workers, but only the query itself warms what the query needs. So before each measured run (each
ramp step too) `warm_pipeline` runs the run's own pipeline — the same source options and schema, the same
transform and output mode — over `WARM_EVENTS` events already due (its ``startTime`` is that many events' worth
of the run's rate in the past), in a few micro-batches (``availableNow``), into Spark's ``noop`` sink, which keeps
nothing. Spark reuses idle Python workers and caches generated classes by their code across the queries of a
session, so the measured query's first micro-batch starts warm; its time is still reported on its own
(``summary.firstBatchMs``).

A pipeline that fails on the slice fails here, before any event reaches the sink: a `LoadError` quoting Spark's
or Python's reason (the CLI exits 2).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from typing import Callable, Mapping

from impulse.loadtest.query.transform import exception_text, start
from impulse.loadtest.settings.curve import CURVE_OPTIONS
from impulse.loadtest.settings.units import LoadError, iso_us

__all__ = ["warm_pipeline", "warm_options", "WARM_EVENTS", "WARM_BATCHES"]

WARM_EVENTS = 20_000    # events of the slice (fewer when the run has fewer)
WARM_BATCHES = 3        # micro-batches it is read in: the first compiles, the next ones run warm (state included)
_TIMEOUT_S = 300.0

# the options that pace or bound a run: the slice sets its own
_PACING = ("eventspersecond", "delay", "ratestages", "limit", "limitperpartition", "starttime", "alignment",
           "maxeventspertrigger", "rampuptime", "downtime", *(o.lower() for o in CURVE_OPTIONS))


def warm_options(source_options: Mapping[str, str], rate: float, events: int, now_us: int | None = None) -> dict:
    """The slice's source options: the run's, with `events` events at `rate` events/s that are all due at `now_us`
    (their schedule ends then), read in `WARM_BATCHES` micro-batches."""
    now_us = time.time_ns() // 1000 if now_us is None else now_us
    start = iso_us(now_us - int(events / rate * 1e6) - 1_000_000)
    options = {k: v for k, v in source_options.items() if k.lower() not in _PACING}
    options.update(eventsPerSecond=repr(float(rate)), limit=str(events), startTime=start,
                   maxEventsPerTrigger=str(max(1, -(-events // WARM_BATCHES))))
    return options


def _positional_warm_options(source_options: Mapping[str, str], rate: float, events: int) -> dict:
    """A replay's slice: its first `events` positions, all due at once (a replay starts when read, with no
    ``startTime``), in `WARM_BATCHES` micro-batches."""
    options = {k: v for k, v in source_options.items() if k.lower() not in _PACING}
    options.update(eventsPerSecond="1e15", limit=str(events), maxEventsPerTrigger=str(max(1, -(-events // WARM_BATCHES))))
    return options


def warm_pipeline(spark, source: str, source_options: Mapping[str, str], rate: float, total_events: int,
                  build: Callable, mode: str, schema=None, transform=None) -> float:
    """Run `build` (events DataFrame → the DataFrame the run writes) over a slice of the run's events into ``noop``
    in output `mode`; returns the seconds it took. `LoadError` when Spark refuses it (as
    `impulse.loadtest.query.transform.start` says) or it fails on the slice. `transform`: the run's, for messages."""
    label = transform.label if transform is not None else "the query"
    events = min(WARM_EVENTS, max(1, total_events))
    slice_options = (_positional_warm_options if source == "replay" else warm_options)(source_options, rate, events)
    reader = spark.readStream.format(source).options(**slice_options)
    if schema is not None:
        reader = reader.schema(schema)
    frame = build(reader.load())
    checkpoint = tempfile.mkdtemp(prefix="impulse-load-warm-")
    started = time.monotonic()
    try:
        writer = (frame.writeStream.format("noop").option("checkpointLocation", checkpoint)
                  .queryName(f"impulse-load-warm-{int(time.time() * 1000)}").trigger(availableNow=True))
        query = start(writer, mode, transform)
        try:
            finished = query.awaitTermination(_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - the pipeline failed on the slice: the user's code or Spark's
            raise LoadError(f"{label} failed on a warm-up slice of {events:,} events, before any load: "
                            f"{exception_text(exc)}") from None
        if not finished:
            query.stop()
            raise LoadError(f"{label}: its warm-up slice of {events:,} events did not finish in {_TIMEOUT_S:g}s")
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    return time.monotonic() - started

