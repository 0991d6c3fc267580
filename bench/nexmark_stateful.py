"""Nexmark's hand-kept-state queries (q4, q6, q15, q16): each design's steady events/s per core, in one session.

Each query of ``--queries`` runs in each variant of ``--variants`` over the same ``--rows`` events
(`impulse.nexmark.cli.run_query`: ``Trigger.AvailableNow`` into ``noop``, micro-batches of ``--per-trigger``),
variants alternating order round by round; the figure is the steady rate per core (the micro-batches after the
first two, `impulse.nexmark.cli.steady_rate`), and each variant's ratio to the first one of the run:

- ``bucket``: the processors of `impulse.nexmark.buckets`, one Python call per bucket of keys (what q4, q6 and
  q16 run; q15, one key a day, runs its per-key processor).
- ``per_key``: the per-key processors of `impulse.nexmark.stateful` (one call per auction, seller, (channel, day)).
- ``ceiling``: the bucket plan with every processor replaced by one that reads its rows and keeps and emits
  nothing: the same query shape doing no work of its own, what Spark's ``transformWithStateInPandas`` path allows.
- ``spark_ops``: Spark's own operators chained in append mode, doing part of the work only, so an upper bound on
  that design's rate. q15, q16: a deduplication of (key, day window, bidder) then a windowed count of the distinct
  bidders (one of the query's eight distinct counts; its rows come when the day closes). q4, q6: the winning bids
  as q9 finds them (a stream-stream join of auctions and bids, then the highest price per auction and ``expires``,
  appended when the watermark passes it); the average over them, per category or over a seller's last 10, is an
  aggregation Spark cannot chain after these in append mode, and is left out.

Example::

    python bench/nexmark_stateful.py --rows 800k --per-trigger 100k --queries q4 q6 q15 q16 --rounds 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys

import impulse_vs_rate as bench  # noqa: E402  (a sibling script: its folder is on sys.path; sets PYSPARK_PYTHON)
from flink_nexmark import FLINK_PER_CORE
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from impulse.nexmark import stateful
from impulse.nexmark.cli import parse_count, run_query, source_options
from impulse.nexmark.queries import WATERMARK_DELAY, Query, query, views

VARIANTS = ("bucket", "per_key", "ceiling", "spark_ops")


class Drain(StatefulProcessor):
    """Reads its rows, keeps and emits nothing."""

    def init(self, handle) -> None:
        pass

    def handleInputRows(self, key, rows, timerValues):
        for _ in rows:
            pass
        return iter([])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        return iter([])

    def close(self) -> None:
        pass


@contextlib.contextmanager
def draining():
    """Build plans whose bucket processors are `Drain` (the ``ceiling`` variant)."""
    names = ("BucketWinningBids", "BucketLastWinners", "BucketDailyStatistics")
    saved = {n: getattr(stateful, n) for n in names}
    try:
        for n in names:
            setattr(stateful, n, lambda *args, **kwargs: Drain())
        yield
    finally:
        for n, v in saved.items():
            setattr(stateful, n, v)


def _distinct_bidders(per_channel: bool):
    def build(e, spark):
        keys = ["channel"] if per_channel else []
        bids = views(e)["bid"].select(*keys, F.window("dateTime", "1 day").alias("day"), "bidder")
        return (bids.dropDuplicates([*keys, "day", "bidder"]).groupBy(*keys, "day")
                .agg(F.count("*").alias("total_bidders")))
    return build


def _joined_winners(e, spark):
    auction = (e.where(F.col("event_type") == 1).select("auction.id", "auction.dateTime", "auction.expires",
                                                        "auction.category", "auction.seller")
               .withWatermark("expires", WATERMARK_DELAY).alias("A"))
    b = views(e)["bid"].alias("B")
    joined = auction.join(b, F.expr("A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires"))
    return joined.groupBy("A.id", "A.expires").agg(F.first("A.category").alias("category"),
                                                  F.first("A.seller").alias("seller"), F.max("B.price").alias("price"))


def build(name: str, variant: str) -> Query | None:
    """Query `name` as `variant` builds it (None: the variant does not apply to it)."""
    q = query(name)
    if variant == "spark_ops":
        if name in ("q4", "q6"):
            return Query(name, q.title, _joined_winners)
        return Query(name, q.title, _distinct_bidders(name == "q16")) if name in ("q15", "q16") else None
    per_key = variant == "per_key"  # bucket and ceiling: the bucket processors, q15's too

    def plan(e, spark):
        stateful.use_rocksdb(spark)
        if name == "q4":
            return stateful.winning_bids(e, WATERMARK_DELAY, per_key).groupBy("category").agg(
                F.avg("price").alias("avg_final"))
        if name == "q6":
            return stateful.last_winners_average(e, WATERMARK_DELAY, per_key)
        return stateful.daily_statistics(views(e)["bid"], name == "q16", per_key)

    if variant == "ceiling":
        def drained(e, spark):
            with draining():
                return plan(e, spark)
        return Query(name, q.title, drained, mode=q.mode)
    return Query(name, q.title, plan, mode=q.mode) if variant in ("per_key", "bucket") else None


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--queries", nargs="+", default=["q4", "q6", "q15", "q16"], help="queries to time")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS[:3]), choices=VARIANTS,
                        help="designs to time; ratios are to the first")
    parser.add_argument("--rows", type=parse_count, default=800_000, help="events per run (a count: 800k)")
    parser.add_argument("--per-trigger", type=parse_count, default=200_000, help="events per micro-batch")
    parser.add_argument("--rounds", type=int, default=1, help="rounds; each runs every variant")
    parser.add_argument("--partitions", type=int, default=2, help="source and shuffle partitions")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory (bytes with a unit)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    spark = bench.make_session(args)
    cores = spark.sparkContext.defaultParallelism
    options = source_options(args.rows, args.partitions, 10_000, args.per_trigger, 0)
    rates: dict[str, dict[str, list[float]]] = {}
    errors = 0
    try:
        run_query(spark, query("q0"), source_options(50_000, args.partitions, 10_000, 10_000, 0), cores)  # warm-up
        for r in range(args.rounds):
            for name in args.queries:
                order = args.variants if r % 2 == 0 else args.variants[::-1]
                for variant in order:
                    q = build(name, variant)
                    if q is None:
                        continue
                    try:
                        result = run_query(spark, q, options, cores)
                    except Exception as exc:  # noqa: BLE001 - a failed variant is reported, the others still run
                        errors += 1
                        print(f"{name} {variant} failed: {str(exc).splitlines()[0]}", file=sys.stderr)
                        continue
                    steady = result.steady / cores if result.steady else None
                    print(f"{name} {variant}: {steady or 0:,.0f} events/s per core (steady), load average "
                          f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
                    if steady:
                        rates.setdefault(name, {}).setdefault(variant, []).append(steady)
    finally:
        spark.stop()
    medians = {n: {v: statistics.median(x) for v, x in by.items()} for n, by in rates.items()}
    first = args.variants[0]
    summary = {"rows": args.rows, "per_trigger": args.per_trigger, "rounds": args.rounds, "cores": cores,
               "errors": errors, "steady_per_core_median": medians,
               "ratio_to_first": {n: {v: r / by[first] for v, r in by.items() if v != first}
                                  for n, by in medians.items() if first in by},
               "load_average": os.getloadavg(), "flink_per_core_not_measured_here": FLINK_PER_CORE}
    print(json.dumps(summary, indent=2) if args.json else report(summary, args.variants))
    return 1 if errors else 0


def report(summary: dict, variants: list[str]) -> str:
    lines = ["| query | " + " | ".join(variants) + " | Flink per core |", "|---|" + "---:|" * (len(variants) + 1)]
    for name, by in summary["steady_per_core_median"].items():
        base = by.get(variants[0])
        cells = [f"{by[v]:,.0f}" + (f" ({by[v] / base:.2f}×)" if base and v != variants[0] else "")
                 if v in by else "—" for v in variants]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {FLINK_PER_CORE.get(name, 0):,} |")
    lines.append(f"steady events/s per core, {summary['rows']:,} events in micro-batches of "
                 f"{summary['per_trigger']:,}, {summary['cores']} cores, median of {summary['rounds']} round(s)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
