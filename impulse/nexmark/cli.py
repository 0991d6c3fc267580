"""``impulse-nexmark``: run Nexmark queries on Spark over N generated events and report their throughput.

    impulse-nexmark q0 q5 q7 --events 10M [--master URL | --remote sc://HOST:PORT] [--check]

Each query reads the ``nexmark`` source bounded to ``--events`` events (a backfill: ``startTime`` in the
past, so every event is due at once, in micro-batches of ``--per-trigger`` events) with
``Trigger.AvailableNow`` into the ``noop`` sink, and prints, like the Nexmark benchmark, events,
seconds, events/s and events/s per core. ``--check`` streams into the memory sink instead and compares
the result with the same query over a bounded batch read of the same events, or with its batch
`Query.answer` (`impulse.nexmark.queries` says which rows are final in a stream, and for an update stream
compares its final row per key); any difference exits with status 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Sequence, TextIO

from impulse.answer import compare, final_rows, last_watermark, latest
from impulse.nexmark.queries import QUERIES, Query, query
from impulse.session import deployment, make_session

__all__ = ["main", "Result", "run_query", "check_query", "source_options", "latest"]

START_TIME = "2026-01-01T00:00:00Z"  # pinned: the events, their times and every answer are reproducible
_SUFFIXES = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}


def parse_count(text: str) -> int:
    """``10M`` → 10,000,000; ``250k``, ``1_000`` and plain integers too."""
    text = text.strip().lower().replace("_", "").replace(",", "")
    factor = _SUFFIXES.get(text[-1:], 1)
    try:
        value = int(float(text[:-1] if factor > 1 else text) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count such as 1000, 250k or 10M") from None
    if value < 1:
        raise argparse.ArgumentTypeError("a count ≥ 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="impulse-nexmark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("queries", nargs="+", metavar="QUERY",
                        help="q0 … q22, or 'all' (every query Spark can stream)")
    parser.add_argument("--events", type=parse_count, default=1_000_000, help="events per query (default 1M)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    where.add_argument("--remote", default=None, metavar="sc://HOST:PORT", help="a Spark Connect server instead")
    parser.add_argument("--check", action="store_true",
                        help="compare each streaming result with the batch result; exit 1 on a difference")
    parser.add_argument("--rate", type=parse_count, default=10_000,
                        help="event-time rate, events/s (default 10k, the reference generator's): how many "
                             "events a window holds, not how fast they are read")
    parser.add_argument("--partitions", type=int, default=None, help="source partitions (default: the cores)")
    parser.add_argument("--per-trigger", type=parse_count, default=None,
                        help="events per micro-batch (default: events / 10, at most 1M)")
    parser.add_argument("--cores", type=int, default=None,
                        help="cores for events/s per core (default: Spark's default parallelism; give it with --remote)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-warmup", action="store_true", help="skip the small untimed run before the first query")
    return parser


@dataclass(frozen=True)
class Result:
    """One query's run: `seconds` from start to end of the stream; `check` None when not checked; `steady` the events
    per second of its micro-batches after the first `STEADY_AFTER` (`steady_rate`), None when it had no more."""

    query: str
    events: int
    seconds: float
    cores: int
    check: str | None = None
    ok: bool = True
    steady: float | None = None

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


#: micro-batches of a run that `steady_rate` leaves out: the first plans and compiles the query, the second still
#: warms the Python workers and the state store
STEADY_AFTER = 2


def steady_rate(progress: Sequence[dict], skip: int = STEADY_AFTER) -> float | None:
    """Events per second of a query's micro-batches after the first `skip` (`progress`: its ``recentProgress``, as
    dicts): the events its first source read in them over the sum of their ``triggerExecution`` times. Events count
    once though a join reads the stream twice. None when there are no such batches with events."""
    batches = [p for p in progress if p["sources"] and p["sources"][0]["numInputRows"]][skip:]
    millis = sum(p["durationMs"]["triggerExecution"] for p in batches)
    return sum(p["sources"][0]["numInputRows"] for p in batches) * 1000 / millis if batches and millis else None


def source_options(events: int, partitions: int, rate: int, per_trigger: int, seed: int) -> dict[str, str]:
    """The ``nexmark`` options of a run: `events` events from a pinned start time."""
    return {"limit": str(events), "numPartitions": str(partitions), "eventsPerSecond": str(rate),
            "startTime": START_TIME, "maxEventsPerTrigger": str(per_trigger), "seed": str(seed)}


def _progress_events(stream) -> int:
    """Events read so far: the sum of the source's partition counters in the last batch's end offset (a
    join reads the stream twice; this counts each event once)."""
    progress = stream.lastProgress
    for source in (progress or {}).get("sources") or []:
        offset = source.get("endOffset")
        offset = json.loads(offset) if isinstance(offset, str) else offset
        if isinstance(offset, dict) and "counters" in offset:
            return sum(offset["counters"])
    return 0


def _await(stream, name: str, events: int, out: TextIO, every: float = 2.0) -> None:
    started = time.monotonic()
    last = started
    while not stream.awaitTermination(0.2):
        now = time.monotonic()
        if now - last >= every:
            last = now
            done = _progress_events(stream)
            print(f"  {name}: {done:,} / {events:,} events ({100 * done / events:.0f} %), {now - started:.0f} s",
                  file=out, flush=True)
    if stream.exception() is not None:
        raise stream.exception()


def _stream(spark, q: Query, options: dict[str, str], out: TextIO, sink: str, mode: str, name: str | None = None):
    """Run `q` over the bounded stream into `sink` until it ends: (seconds from start to end, the query)."""
    events = spark.readStream.format("nexmark").options(**options).load()
    writer = q.build(events, spark).writeStream.format(sink).outputMode(mode).trigger(availableNow=True)
    if name:
        writer = writer.queryName(name)
    started = time.monotonic()
    stream = writer.start()
    _await(stream, q.name, int(options["limit"]), out)
    return time.monotonic() - started, stream


def run_query(spark, q: Query, options: dict[str, str], cores: int, out: TextIO = sys.stderr) -> Result:
    """Run `q` over the bounded stream into ``noop`` in its output mode, timed (`Result.steady` too)."""
    seconds, stream = _stream(spark, q, options, out, "noop", q.mode)
    return Result(q.name, int(options["limit"]), seconds, cores, steady=steady_rate(stream.recentProgress))


def check_query(spark, q: Query, options: dict[str, str], cores: int, out: TextIO = sys.stderr) -> Result:
    """Run `q` as a stream into the memory sink (timed) and compare with its batch answer over the same events."""
    name = f"nexmark_{q.name}_{uuid.uuid4().hex[:8]}"
    seconds, stream = _stream(spark, q, options, out, "memory", q.check_mode, name)
    result = Result(q.name, int(options["limit"]), seconds, cores)
    if q.unchecked:
        return dataclasses.replace(result, check=f"not checked: {q.unchecked}")

    streamed = spark.table(name)
    events = spark.read.format("nexmark").options(**options).load()
    watermark = last_watermark(stream) or "1970-01-01 00:00:00"
    batch = q.answer(events, spark, watermark) if q.answer else q.build(events, spark)
    note = ""
    if q.latest_by:
        streamed = latest(streamed, q.key, q.latest_by)
        note = f", the final row per {', '.join(q.key)}"
    if q.answer and not q.latest_by and q.final_after is None:
        note = f", by the watermark {watermark}"
    if q.final_after:
        streamed, batch = final_rows(streamed, q.final_after, watermark), final_rows(batch, q.final_after, watermark)
        note = f", final by the watermark {watermark}"
    checked = compare(batch.select(*streamed.columns), streamed)
    if not checked.passed:
        return dataclasses.replace(result, ok=False, check=f"DIFFERENT: {checked.lost} rows of the batch answer "
                                                           f"missing, {checked.duplicated + checked.unexpected} rows "
                                                           f"not in it{note}")
    return dataclasses.replace(result, check=f"ok ({checked.delivered:,} rows{note})")


def _table(results: Sequence[Result]) -> str:
    lines = [f"{'Query':<6} {'Events':>13} {'Seconds':>8} {'Events/s':>11} {'Events/s/core':>14}  Check"]
    for r in results:
        lines.append(f"{r.query:<6} {r.events:>13,} {r.seconds:>8.1f} {r.events_per_second:>11,.0f} "
                     f"{r.events_per_second / r.cores:>14,.0f}  {r.check or ''}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = [q.name for q in QUERIES if q.runs] if args.queries == ["all"] else args.queries
    try:
        chosen = [query(n) for n in names]
    except KeyError as error:
        print(f"impulse-nexmark: {error.args[0]}", file=sys.stderr)
        return 2

    print(f"starting Spark ({args.remote or args.master})…", file=sys.stderr, flush=True)
    spark = make_session(args.master, app_name="impulse-nexmark", remote=args.remote)
    cores = args.cores or deployment(spark, args.remote)["cores"] or 1
    partitions = args.partitions or cores
    per_trigger = args.per_trigger or max(1, min(args.events // 10, 1_000_000))
    options = source_options(args.events, partitions, args.rate, per_trigger, args.seed)
    if not args.no_warmup:
        print("warming up (50,000 events of q0, not timed)…", file=sys.stderr, flush=True)
        try:
            run_query(spark, query("q0"), source_options(50_000, partitions, args.rate, 10_000, args.seed), cores)
        except Exception as error:  # the queries still run; the first one then pays the start-up
            print(f"warm-up failed: {str(error).splitlines()[0]}", file=sys.stderr, flush=True)
    results, status = [], 0
    for q in chosen:
        if not q.runs:
            print(f"{q.name}: not run: Spark cannot stream it: {q.unsupported}", file=sys.stderr, flush=True)
            continue
        print(f"{q.name} ({q.title}): {args.events:,} events…", file=sys.stderr, flush=True)
        try:
            result = (check_query if args.check else run_query)(spark, q, options, cores)
        except Exception as error:  # a failed query is reported and the others still run
            print(f"{q.name}: FAILED: {str(error).splitlines()[0] if str(error) else type(error).__name__}",
                  file=sys.stderr, flush=True)
            status = 1
            continue
        if not result.ok:
            status = 1
        results.append(result)
        print(_table([result]).splitlines()[1], file=sys.stderr, flush=True)
    print(_table(results))
    print(f"{cores} cores, {partitions} source partitions, {per_trigger:,} events per micro-batch, "
          f"event time at {args.rate:,} events/s")
    return status


if __name__ == "__main__":
    sys.exit(main())
