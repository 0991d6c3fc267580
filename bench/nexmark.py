"""Nexmark on Spark: the combined stream against its ceiling, and the queries' events/s per core.

1. The ``nexmark`` source (``table=event``, the combined stream) into ``noop`` against ``prebuilt``: a Python
   source with the same offsets and schema that re-sends one prebuilt Arrow batch of Nexmark events
   (built once per Python worker, no generation at all): what Spark's Python data source path allows
   for these rows. Same rows per micro-batch and partitions, alternating order round by round, medians
   (`impulse_vs_rate.run_query` measures). Goal: nexmark ≥ 0.8× prebuilt.
2. Each query of ``--queries`` over ``--events`` events (`impulse.nexmark.cli.run_query`, into ``noop``, in
   micro-batches of `per_trigger` events): events/s per core at steady state (the micro-batches after the first
   two, `impulse.nexmark.cli.steady_rate`: events over their summed durations) and over the whole run (start to
   end, start-up included), next to Flink's published per-core figures (`flink_nexmark`; not measured here, on other
   hardware).

Example::

    python bench/nexmark.py --rows-per-batch 500000 --batches 4 --rounds 3 --queries q0 q5 q7 --events 2M
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import impulse_vs_rate as bench  # noqa: E402  (a sibling script: its folder is on sys.path; sets PYSPARK_PYTHON)
from flink_nexmark import FLINK_PER_CORE

from impulse.nexmark.cli import parse_count, run_query, source_options
from impulse.nexmark.queries import query
from impulse.nexmark.source import NexmarkDataSource, NexmarkStreamReader, event_batches

GOAL = ("nexmark", "prebuilt", 0.8)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rows-per-batch", type=int, default=1_000_000, help="events per micro-batch, both sources")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of both sources")
    parser.add_argument("--warmup-batches", type=int, default=2, help="micro-batches skipped at the start of each query")
    parser.add_argument("--batches", type=int, default=5, help="measured micro-batches per query")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs both sources")
    parser.add_argument("--queries", nargs="*", default=["q0", "q5", "q7"], help="queries to time (none: skip)")
    parser.add_argument("--events", type=parse_count, default=2_000_000, help="events per query (a count: 2000000, 2M)")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory (bytes with a unit)")
    parser.add_argument("--timeout-s", type=float, default=900, help="give up on one query after this many seconds")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    return parser.parse_args(argv)


def per_trigger(events: int) -> int:
    """Events per micro-batch of a timed query: a tenth of `events`, at least 100,000 (a small run takes one
    micro-batch, not ten tiny ones) and at most 1M."""
    return min(max(events // 10, 100_000), 1_000_000)


def prebuilt_class():
    """The ``prebuilt`` source: the nexmark source's offsets and schema, one record batch re-sent."""
    cache = {}

    class Reader(NexmarkStreamReader):
        def read(self, partition):
            size = 131_072
            if partition.table not in cache:
                first = type(partition)(partition.subtask_index, 0, size, partition.layout, partition.bases,
                                        partition.table, partition.generator)
                cache[partition.table] = next(event_batches(first, size))
            batch = cache[partition.table]
            for lo in range(partition.first, partition.end, size):
                yield batch.slice(0, min(size, partition.end - lo))

    class Prebuilt(NexmarkDataSource):
        @classmethod
        def name(cls):
            return "prebuilt"

        def streamReader(self, schema):
            return Reader(self.parsed)

    return Prebuilt


def frames(spark, args) -> dict:
    options = {"delay": "1us", "startTime": "0", "numPartitions": str(args.partitions),
               "maxEventsPerTrigger": str(args.rows_per_batch)}
    spark.dataSource.register(prebuilt_class())
    return {name: (lambda fmt=name: spark.readStream.format(fmt).options(**options).load())
            for name in ("nexmark", "prebuilt")}


def main(argv=None) -> int:
    args = parse_args(argv)
    spark = bench.make_session(args)
    build = frames(spark, args)
    queries = {}
    try:
        results, errors = bench.alternating_rounds(spark, args, build, list(build), unit="events")
        if args.queries:
            options = source_options(args.events, args.partitions, 10_000, per_trigger(args.events), 0)
            cores = spark.sparkContext.defaultParallelism
            for name in args.queries:
                try:
                    result = run_query(spark, query(name), options, cores)
                    queries[name] = {"steady": result.steady / cores if result.steady else None,
                                     "whole_run": result.events_per_second / cores}
                except Exception as exc:  # noqa: BLE001
                    errors += 1
                    print(f"{name} failed: {exc}", file=sys.stderr)
    finally:
        spark.stop()
    medians = {n: statistics.median(r["rows_per_s"] for r in runs) for n, runs in results.items() if runs}
    summary = {"rows_per_batch": args.rows_per_batch, "partitions": args.partitions, "batches": args.batches,
               "rounds": args.rounds, "master": args.master, "events_per_query": args.events, "errors": errors,
               "events_per_s_median": medians,
               "ratio": medians["nexmark"] / medians["prebuilt"] if len(medians) == 2 else None,
               "query_events_per_s_per_core": queries, "flink_events_per_s_per_core_not_measured_here": FLINK_PER_CORE}
    print(json.dumps(summary, indent=2) if args.json else report(summary))
    return 1 if errors else 0


def report(summary: dict) -> str:
    lines = [f"{summary['rows_per_batch']:,} events per micro-batch, {summary['partitions']} partitions, "
             f"{summary['batches']} measured micro-batches x {summary['rounds']} rounds, noop sink, {summary['master']}"]
    for name, rate in summary["events_per_s_median"].items():
        lines.append(f"  {name:9s} {rate / 1e6:6.2f} M events/s")
    if summary["ratio"] is not None:
        source, ceiling, want = GOAL
        met = "met" if summary["ratio"] >= want else "NOT met"
        lines.append(f"  {source} / {ceiling} {summary['ratio']:.2f}  (goal >= {want}x: {met})")
    if summary["query_events_per_s_per_core"]:
        lines.append(f"queries over {summary['events_per_query']:,} events, events/s per core at steady state and "
                     "over the whole run (Flink's published figures for context, not measured here):")
        for name, per_core in summary["query_events_per_s_per_core"].items():
            flink = FLINK_PER_CORE.get(name)
            steady = f"{per_core['steady']:>10,.0f}" if per_core["steady"] else f"{'-':>10s}"
            lines.append(f"  {name:4s} {steady} {per_core['whole_run']:>10,.0f}" + (f"   Flink ~{flink:,}" if flink else ""))
    if summary["errors"]:
        lines.append(f"  {summary['errors']} run(s) failed")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
