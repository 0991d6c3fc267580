"""Nexmark's per-query table in one command: steady rate per core, sustainable rate by search, latency at 50 and 90 %.

For each query of ``--queries`` (default: every query that streams), in one Spark session:

1. **Steady events/s per core**: the query over ``--events`` events (`impulse.nexmark.cli.run_query`,
   ``Trigger.AvailableNow`` into ``noop``): the micro-batches after the first two, events over their durations.
2. **Sustainable rate**: ``impulse-load --source nexmark --transform nexmark:Q --sink noop --ramp search:LO:HI``
   (a bisection within ``--precision``, its rate confirmed by a run twice as long; a step is sustained when it
   completed, achieved ≥ 95 % of its target and its p99 latency stayed ≤ ``--max-latency``). The bracket is
   LO = the steady rate of the whole machine × ``--lo-factor``, HI = × ``--hi-factor``; when LO itself is not
   sustained, the search runs again between LO × ``--lo-factor`` and LO (twice at most).
3. **Latency at 50 % and 90 %** of the sustainable rate: an ``impulse-load`` run of ``--latency-duration`` at each,
   its event-time latency p50 and p99 (a Nexmark query's output keeps no event time, so per micro-batch: the
   newest input event's schedule → the batch's commit).

It prints the markdown table (Flink's published per-core figure beside ours, `flink_nexmark`) with the machine,
PySpark's version, the date and the load average, and with ``--json`` the raw figures. Each ``impulse-load`` run's
report is kept in ``--output`` (one folder per query and run).

Example (the whole table: ~2 h on 2 cores)::

    python bench/nexmark_table.py --output nexmark-table
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import impulse_vs_rate as bench  # noqa: E402  (a sibling script: its folder is on sys.path; sets PYSPARK_PYTHON)
import pyspark
from flink_nexmark import FLINK_PER_CORE, SOURCE

from impulse.loadtest import cli as load_cli
from impulse.nexmark.cli import parse_count, run_query, source_options
from impulse.nexmark.queries import QUERIES, query
from impulse.nexmark.stateful import STATE_STORE

STREAMING = [q.name for q in QUERIES if q.runs]
#: a search whose LO was not sustained is run again below it (LO × --lo-factor to LO), at most this many times: a
#: steady rate measured in large micro-batches can overstate what a query keeps up with at 1 s triggers
_SEARCHES_BELOW = 2


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--queries", nargs="+", default=STREAMING, help="the queries, each a row")
    parser.add_argument("--rows", type=parse_count, default=2_000_000, help="events of the steady-rate run")
    parser.add_argument("--per-trigger", type=parse_count, default=200_000, help="its events per micro-batch")
    parser.add_argument("--partitions", type=int, default=2, help="source partitions of every run")
    parser.add_argument("--lo-factor", type=float, default=0.5, help="the search's LO: × the steady rate")
    parser.add_argument("--hi-factor", type=float, default=3.0, help="the search's HI: × the steady rate")
    parser.add_argument("--precision", default="5%", help="--ramp-precision of the search")
    parser.add_argument("--step-duration", default="15s", help="each probe's duration (confirming runs: twice)")
    parser.add_argument("--max-latency", default="5s", help="the p99 a sustained step stays within")
    parser.add_argument("--latency-duration", default="30s", help="each latency run's duration")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory (join and top-N state)")
    parser.add_argument("--output", default=None, help="keep every impulse-load report here (default: discarded)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    return parser.parse_args(argv)


def load_report(argv: list[str], out: Path) -> dict:
    """Run ``impulse-load ARGV --output OUT`` in this process (it keeps the active session) and return its
    report.json; its console display goes to stderr."""
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        code = load_cli.main([*argv, "--output", str(out)])
    print(shown.getvalue(), file=sys.stderr, end="")
    if code not in (0, 99) or not (out / "report.json").exists():
        raise RuntimeError(f"impulse-load {' '.join(argv)} exited {code}")
    return json.loads((out / "report.json").read_text())


def query_row(spark, name: str, args, cores: int, out: Path) -> dict:
    """One query's figures: steady per core, the search's sustainable rate and its probes, latency at 50/90 %."""
    result = run_query(spark, query(name), source_options(args.rows, args.partitions, 10_000, args.per_trigger, 0),
                       cores)
    # a run too short to settle has no steady micro-batches: its whole-run rate stands in, and the table says so
    steady = result.steady / cores if result.steady else result.events_per_second / cores
    whole = steady * cores
    common = ["--source", "nexmark", "--transform", f"nexmark:{name}", "--sink", "noop",
              "--partitions", str(args.partitions), "--max-latency", args.max_latency]
    lo, hi = max(100, round(whole * args.lo_factor, -2)), max(200, round(whole * args.hi_factor, -2))
    searches, steps = [], []
    for attempt in range(1 + _SEARCHES_BELOW):
        ramp = load_report([*common, "--ramp", f"search:{lo:.0f}:{hi:.0f}", "--ramp-precision", args.precision,
                            "--step-duration", args.step_duration], out / name / f"search-{attempt}")
        searches.append(f"{lo:.0f}:{hi:.0f}")
        steps += ramp["steps"]
        sustainable = ramp["highestSustainedRate"]
        if sustainable is not None or lo <= 100:
            break
        lo, hi = max(100, round(lo * args.lo_factor, -2)), lo  # LO itself was not sustained: search below it
    row = {"steady_per_core": steady, "steady_is_whole_run": not result.steady, "search": " then ".join(searches),
           "sustainable": sustainable, "at_hi": sustainable is not None and sustainable >= hi,
           "probes": [(s["summary"]["targetRate"], s["summary"]["achievedRate"], s["summary"].get("latencyP99Ms"),
                       s["summary"]["sustained"], s.get("role")) for s in steps],
           "latency": {}, "steady_per_core_vs_flink": steady / FLINK_PER_CORE[name]}
    if sustainable:
        row["sustainable_per_core_vs_flink"] = sustainable / cores / FLINK_PER_CORE[name]
    for share in (0.5, 0.9):
        if sustainable:
            summary = load_report([*common, "--rate", f"{sustainable * share:.0f}", "--duration",
                                   args.latency_duration], out / name / f"at-{share:.0%}")["summary"]
            row["latency"][f"{share:.0%}"] = {"p50": summary.get("latencyP50Ms"), "p99": summary.get("latencyP99Ms"),
                                              "achieved": summary["achievedRate"]}
    return row


def main(argv=None) -> int:
    args = parse_args(argv)
    unknown = sorted(set(args.queries) - set(STREAMING))
    if unknown:
        print(f"--queries: {unknown} are not streaming Nexmark queries; choose from {STREAMING}", file=sys.stderr)
        return 2
    spark = bench.make_session(args)
    cores = spark.sparkContext.defaultParallelism
    rows, errors, load = {}, 0, [os.getloadavg()[0]]
    with contextlib.ExitStack() as stack:
        out = Path(args.output) if args.output else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        try:
            for name in args.queries:
                # each row with the state store its query chooses, not the one a query before it set in the session
                spark.conf.unset(STATE_STORE[0])
                try:
                    rows[name] = query_row(spark, name, args, cores, out)
                except Exception as exc:  # noqa: BLE001 - one failed query is reported, the others still run
                    errors += 1
                    print(f"{name} failed: {str(exc).splitlines()[0]}", file=sys.stderr)
                load.append(os.getloadavg()[0])
                print(f"{name} done, load average {load[-1]:.1f}", file=sys.stderr, flush=True)
        finally:
            spark.stop()
    summary = {"rows": args.rows, "date": datetime.date.today().isoformat(), "machine": f"{os.cpu_count()} cores, {platform.machine()}",
               "pyspark": pyspark.__version__, "python": platform.python_version(), "cores": cores,
               "load_average": {"min": min(load), "max": max(load)}, "errors": errors, "queries": rows,
               "flink_per_core_not_measured_here": {n: FLINK_PER_CORE[n] for n in rows}, "flink_source": SOURCE}
    print(json.dumps(summary, indent=2) if args.json else table(summary))
    return 1 if errors else 0


def table(summary: dict) -> str:
    """The markdown table of `summary`, with the run's circumstances below it."""
    cores = summary["cores"]
    lines = ["| query | steady per core | sustainable (search) | sustainable per core | Flink per core | "
             "p50 / p99 ms at 50 % | p50 / p99 ms at 90 % |", "|---|---:|---:|---:|---:|---:|---:|"]

    def ms(row, share):
        at = row["latency"].get(share)
        return f"{at['p50']:,.0f} / {at['p99']:,.0f}" if at and at["p50"] is not None else "—"

    for name, row in summary["queries"].items():
        rate = row["sustainable"]
        found = "none" if rate is None else ("≥ " if row["at_hi"] else "") + f"{rate:,.0f}"
        per_core = "—" if rate is None else f"{rate / cores:,.0f}"
        whole_run = " ¹" if row["steady_is_whole_run"] else ""
        lines.append(f"| {name} | {row['steady_per_core']:,.0f}{whole_run} | {found} | {per_core} | "
                     f"{FLINK_PER_CORE[name]:,} | {ms(row, '50%')} | {ms(row, '90%')} |")
    if any(row["steady_is_whole_run"] for row in summary["queries"].values()):
        lines.append("¹ the whole run's rate: the run had no steady micro-batches (give more --rows)")
    lines.append(f"{summary['date']}, {summary['machine']}, {cores} Spark cores, PySpark {summary['pyspark']}, "
                 f"Python {summary['python']}, load average {summary['load_average']['min']:.1f}–"
                 f"{summary['load_average']['max']:.1f}; Flink: {summary['flink_source']} (not measured here)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
