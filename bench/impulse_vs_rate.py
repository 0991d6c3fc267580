"""Throughput of the impulse source against Spark's JVM ``rate-micro-batch``, same rows per micro-batch.

Both run in one Spark session (``local[2]`` by default), with the same number of partitions and rows per
micro-batch, into the ``noop`` sink, as fast as the trigger allows. Each round runs one query per
source (alternating which goes first, to spread the noise of a shared machine), skips the warm-up
micro-batches (the first one of a Python source starts its workers) and measures the next ones:

    rows/s = rows of the measured micro-batches / wall time from the start of the first to the end of the last

The impulse query backfills from the epoch (``startTime=0``, ``delay=1us``) with
``maxEventsPerTrigger`` = rows per micro-batch, so every micro-batch has exactly that many rows, with
per-event timestamps (as rate-micro-batch has). Also printed: the mean per-micro-batch phases of
Spark's progress (``durationMs``: addBatch, latestOffset, queryPlanning, walCommit, commitOffsets ...).

Example::

    python bench/impulse_vs_rate.py --rows-per-batch 2000000 --batches 8 --rounds 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

from connectors.session import local_session

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rows-per-batch", type=int, default=2_000_000, help="rows per micro-batch (rows), both sources")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of both sources")
    parser.add_argument("--warmup-batches", type=int, default=3, help="micro-batches skipped at the start of each query")
    parser.add_argument("--batches", type=int, default=8, help="measured micro-batches per query")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs one query per source")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory (bytes with a unit)")
    parser.add_argument("--timeout-s", type=float, default=600, help="give up on one query after this many seconds")
    parser.add_argument("--impulse-option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra impulse option, e.g. payloadBytes=16 or interval=1ms (repeatable)")
    parser.add_argument("--only", choices=["impulse", "rate"], help="run one source only")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    return parser.parse_args(argv)


def make_session(args):
    return local_session(args.master, "impulse-vs-rate", **{
        "spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": args.partitions,
        "spark.executorEnv.PYTHONPATH": ROOT})


def source_frame(spark, name: str, args, fmt: str = "impulse"):
    """The stream of source `name` ("rate" or "impulse"); `fmt` is the format of impulse (variants in profiling)."""
    rows, parts = args.rows_per_batch, args.partitions
    if name == "rate":
        return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows)
                .option("numPartitions", parts).load())
    options = {"delay": "1us", "startTime": "0", "numPartitions": str(parts), "maxEventsPerTrigger": str(rows)}
    options.update(kv.split("=", 1) for kv in args.impulse_option)
    return spark.readStream.format(fmt).options(**options).load()


def tree_cpu_s(root_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the Spark JVM and its descendants (Linux /proc).

    Split into the JVM's task threads (``Executor task launch worker``: reading the source, converting
    rows, the sink), its other threads (driver, planning, GC, JIT) and the Python processes it started
    (Python workers, the streaming source runner). CPU time per row is far less sensitive than wall
    time to other load on a shared machine.
    """
    ticks = os.sysconf("SC_CLK_TCK")

    def stat(path: str) -> list[str]:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()

    parents, times = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = stat(f"/proc/{entry}/stat")
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
            times[int(entry)] = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    tasks = 0
    for tid in os.listdir(f"/proc/{root_pid}/task"):
        try:
            with open(f"/proc/{root_pid}/task/{tid}/comm") as f:
                if f.read().startswith("Executor task"):
                    tasks += sum(int(x) for x in stat(f"/proc/{root_pid}/task/{tid}/stat")[11:13])
        except OSError:
            continue
    python, todo = 0, [child for child, parent in parents.items() if parent == root_pid]
    while todo:
        pid = todo.pop()
        python += times.get(pid, 0)
        todo += [child for child, parent in parents.items() if parent == pid]
    jvm = times.get(root_pid, 0)
    return {"jvm_tasks": tasks / ticks, "jvm_other": (jvm - tasks) / ticks, "python": python / ticks}


def run_query(spark, name: str, args, label: str, fmt: str = "impulse", frame=None) -> dict:
    """One query into the noop sink; returns rows/s and mean phases over the measured micro-batches.

    The stream is `frame` when given (a streaming DataFrame of ``args.rows_per_batch`` rows per
    micro-batch), else `source_frame` of `name`."""
    last_batch = args.warmup_batches + args.batches - 1
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    cpu = {}
    frame = source_frame(spark, name, args, fmt) if frame is None else frame
    query = frame.writeStream.format("noop").queryName(f"bench_{name}").start()
    started = time.monotonic()
    next_report = started + 1.0
    try:
        while True:
            if not query.isActive:
                raise RuntimeError(f"{name} query stopped: {query.exception()}")
            progress = query.lastProgress
            done = progress["batchId"] if progress else -1
            for mark in (args.warmup_batches - 1, last_batch):  # CPU when the measured batches begin and end
                if done >= mark and mark not in cpu:
                    cpu[mark] = (done, tree_cpu_s(jvm_pid))
            now = time.monotonic()
            if now >= next_report:  # a progress line once a second
                rate = progress["processedRowsPerSecond"] if progress else 0.0
                print(f"[{label}] {name}: batch {done + 1}/{last_batch + 1}, last {rate / 1e6:.2f} M rows/s",
                      file=sys.stderr, flush=True)
                next_report += 1.0
            if done >= last_batch:
                break
            if now - started > args.timeout_s:
                raise TimeoutError(f"{name}: {done + 1} micro-batches after {args.timeout_s} s")
            time.sleep(0.2)  # each poll asks the JVM for the progress: keep it cheap
    finally:
        query.stop()
    measured = [p for p in query.recentProgress if args.warmup_batches <= p.batchId <= last_batch]
    measured.sort(key=lambda p: p.batchId)
    rows = sum(p.numInputRows for p in measured)
    assert all(p.numInputRows == args.rows_per_batch for p in measured), [p.numInputRows for p in measured]
    first = _epoch_s(measured[0].timestamp)
    end = _epoch_s(measured[-1].timestamp) + measured[-1].durationMs["triggerExecution"] / 1000
    phases = {key: statistics.mean(p.durationMs.get(key, 0) for p in measured)
              for key in sorted({k for p in measured for k in p.durationMs})}
    (begin_batch, cpu_begin), (end_batch, cpu_end) = cpu[args.warmup_batches - 1], cpu[last_batch]
    cpu_rows = (end_batch - begin_batch) * args.rows_per_batch  # polling may see a batch late: count what ran
    cpu_parts = {k: (cpu_end[k] - cpu_begin[k]) / cpu_rows * 1e6 if cpu_rows else None for k in cpu_end}
    return {"rows": rows, "seconds": end - first, "rows_per_s": rows / (end - first), "phases_ms": phases,
            "cpu_s_per_million_rows": sum(cpu_parts.values()) if cpu_rows else None,
            "cpu_s_per_million_rows_by_part": cpu_parts}



def alternating_rounds(spark, args, frames: dict, names: list[str], unit: str = "rows") -> tuple[dict[str, list[dict]], int]:
    """Run each of `names` (``frames[name]()`` builds its frame) once per round, for ``args.rounds`` rounds, the
    order reversed every other round; returns each name's results and how many runs failed (reported, not raised)."""
    results: dict[str, list[dict]] = {n: [] for n in names}
    errors = 0
    for round_ in range(args.rounds):
        for name in (names if round_ % 2 == 0 else names[::-1]):
            label = f"round {round_ + 1}/{args.rounds}"
            try:
                result = run_query(spark, name, args, label, frame=frames[name]())
            except Exception as exc:  # noqa: BLE001 - reported in the summary, exit code 1
                errors += 1
                print(f"[{label}] {name} failed: {exc}", file=sys.stderr)
                continue
            results[name].append(result)
            print(f"[{label}] {name}: {result['rows_per_s'] / 1e6:.2f} M {unit}/s", file=sys.stderr, flush=True)
    return results, errors

def _epoch_s(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def main(argv=None) -> int:
    args = parse_args(argv)
    sources = [args.only] if args.only else ["impulse", "rate"]
    results: dict[str, list[dict]] = {s: [] for s in sources}
    errors = 0
    spark = make_session(args)
    try:
        for round_ in range(args.rounds):
            order = sources if round_ % 2 == 0 else sources[::-1]
            for name in order:
                try:
                    result = run_query(spark, name, args, f"round {round_ + 1}/{args.rounds}")
                except Exception as exc:  # noqa: BLE001 - reported in the summary, exit code 1
                    errors += 1
                    print(f"[round {round_ + 1}] {name} failed: {exc}", file=sys.stderr)
                    continue
                results[name].append(result)
                print(f"[round {round_ + 1}] {name}: {result['rows_per_s'] / 1e6:.2f} M rows/s "
                      f"({result['rows']:,} rows in {result['seconds']:.2f} s)", file=sys.stderr, flush=True)
    finally:
        summary = _summary(args, results, errors)
        spark.stop()
        if args.json:
            print(json.dumps(summary, indent=2))
        else:
            _print_summary(summary)
    return 1 if errors else 0


def _summary(args, results: dict[str, list[dict]], errors: int) -> dict:
    out = {"rows_per_batch": args.rows_per_batch, "partitions": args.partitions, "warmup_batches": args.warmup_batches,
           "batches": args.batches, "rounds": args.rounds, "master": args.master,
           "impulse_options": args.impulse_option, "errors": errors, "sources": {}}
    for name, runs in results.items():
        if not runs:
            continue
        rates = [r["rows_per_s"] for r in runs]
        phases = {k: statistics.mean(r["phases_ms"].get(k, 0) for r in runs) for k in runs[0]["phases_ms"]}
        cpu = [r["cpu_s_per_million_rows"] for r in runs if r["cpu_s_per_million_rows"]]
        by_part = {k: statistics.median(r["cpu_s_per_million_rows_by_part"][k] for r in runs if r["cpu_s_per_million_rows"])
                   for k in runs[0]["cpu_s_per_million_rows_by_part"]} if cpu else {}
        out["sources"][name] = {"rows_per_s_median": statistics.median(rates), "rows_per_s": rates,
                                "cpu_s_per_million_rows_median": statistics.median(cpu) if cpu else None,
                                "cpu_s_per_million_rows_by_part_median": by_part,
                                "phases_ms_mean": phases}
    if {"impulse", "rate"} <= out["sources"].keys():
        impulse, rate = out["sources"]["impulse"], out["sources"]["rate"]
        out["ratio_impulse_to_rate"] = impulse["rows_per_s_median"] / rate["rows_per_s_median"]
        if impulse["cpu_s_per_million_rows_median"] and rate["cpu_s_per_million_rows_median"]:
            out["cpu_ratio_rate_to_impulse"] = (rate["cpu_s_per_million_rows_median"]
                                                / impulse["cpu_s_per_million_rows_median"])
    return out


def _print_summary(summary: dict) -> None:
    print(f"{summary['rows_per_batch']:,} rows per micro-batch, {summary['partitions']} partitions, "
          f"{summary['batches']} measured micro-batches x {summary['rounds']} rounds, noop sink, {summary['master']}")
    for name, s in summary["sources"].items():
        runs = ", ".join(f"{r / 1e6:.2f}" for r in s["rows_per_s"])
        phases = ", ".join(f"{k} {v:.0f}" for k, v in s["phases_ms_mean"].items())
        cpu = s["cpu_s_per_million_rows_median"]
        print(f"  {name:8s} median {s['rows_per_s_median'] / 1e6:6.2f} M rows/s  (runs: {runs}); "
              f"CPU {cpu * 1000 if cpu else float('nan'):.0f} ms per million rows (JVM + Python workers)")
        parts = ", ".join(f"{k} {v * 1000:.0f}" for k, v in s["cpu_s_per_million_rows_by_part_median"].items())
        print(f"  {'':8s} CPU ms per million rows by part: {parts}")
        print(f"  {'':8s} mean ms per micro-batch: {phases}")
    if "ratio_impulse_to_rate" in summary:
        print(f"  impulse / rate-micro-batch = {summary['ratio_impulse_to_rate']:.2f} (rows/s)")
    if "cpu_ratio_rate_to_impulse" in summary:
        print(f"  CPU per row, rate-micro-batch / impulse = {summary['cpu_ratio_rate_to_impulse']:.2f} "
              "(> 1: impulse needs less CPU per row)")
    if summary["errors"]:
        print(f"  {summary['errors']} run(s) failed")


if __name__ == "__main__":
    sys.exit(main())
