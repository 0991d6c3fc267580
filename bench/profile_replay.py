"""impulse-profile and format("replay"): profiling time for a table of N rows × 20 columns, then the generation rate
of the profiled spec and the replay rate of the table against the spec's own prebuilt-batch ceiling.

1. A parquet table of ``--rows`` rows × 20 columns (integers of three widths, doubles, a DECIMAL, a BOOLEAN, a
   DATE, categories, free text, a UUID-like key, nulls, an ARRAY of STRUCT, a MAP, and ``timestamp``), written
   with numpy (seed 1);
2. ``profile`` on all of it (`impulse.profile.run`: Spark aggregates per leaf, the spec, then the fidelity report
   against as many generated rows): wall seconds, and the worst KS / TV;
3. three streaming contenders into ``noop``, ``--rows-per-batch`` rows per micro-batch, alternating by round
   (`impulse_vs_rate.run_query` measures; medians over rounds):

   - ``profiled``: impulse with the spec's schema and ``[source]``;
   - ``prebuilt_profiled``: one prebuilt Arrow batch of the same rows re-sent by the same Python source
     (`profile_impulse.variant_class`): the spec's ceiling, generation for free;
   - ``replay``: the table itself through ``format("replay")`` (``loop``, a rate no trigger reaches).

Goal: profiled ≥ 0.8× prebuilt_profiled. Example::

    python bench/profile_replay.py --rows 1000000 --rows-per-batch 500000 --batches 4 --rounds 2 --json

``--spec FILE`` reuses a load file profiled before (the same ``--rows``) and ``--contenders replay,prebuilt_profiled``
runs only those: replay before/after a change, without profiling again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import impulse_vs_rate as bench  # noqa: E402  (a sibling script: its folder is on sys.path; sets PYSPARK_PYTHON)
import numpy as np
import profile_impulse
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import cloudpickle

from impulse.profile.run import Settings, profile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

CONTENDERS = ("profiled", "prebuilt_profiled", "replay")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the table profiled (all sampled)")
    parser.add_argument("--rows-per-batch", type=int, default=500_000, help="rows per micro-batch (rows)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of every contender")
    parser.add_argument("--warmup-batches", type=int, default=2, help="micro-batches skipped per query")
    parser.add_argument("--batches", type=int, default=4, help="measured micro-batches per query")
    parser.add_argument("--rounds", type=int, default=2, help="rounds; each runs one query per contender")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory")
    parser.add_argument("--timeout-s", type=float, default=900, help="give up on one query after this many seconds")
    parser.add_argument("--sample", type=int, help="rows profiled (default: all of them)")
    parser.add_argument("--spec", type=Path, help="a load file profiled before (same --rows): skips the profiling")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help="the contenders run, comma-separated")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    args = parser.parse_args(argv)
    unknown = set(args.contenders.split(",")) - set(CONTENDERS)
    if unknown:
        parser.error(f"--contenders: {', '.join(sorted(unknown))} unknown; choose from {', '.join(CONTENDERS)}")
    return args


def table(rows: int) -> pa.Table:
    """The 20-column table (module docstring), vectorised."""
    rng = np.random.default_rng(1)
    start = 1_767_225_600_000_000  # 2026-01-01, µs
    gaps = rng.exponential(1_000, rows).astype(np.int64)  # ~1,000 events/s
    sizes = rng.integers(0, 4, rows)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    items = pa.StructArray.from_arrays([pa.array(rng.integers(0, 500, offsets[-1])),
                                        pa.array(np.round(rng.gamma(2, 20, offsets[-1]), 2))], names=["sku", "price"])
    attr_sizes = rng.integers(0, 3, rows)
    attr_offsets = np.concatenate([[0], np.cumsum(attr_sizes)]).astype(np.int32)
    keys = np.array(["color", "size", "fit"])[np.concatenate([np.arange(k) for k in attr_sizes]).astype(np.int64)]
    values = np.array(["red", "blue", "S", "M", "L"])[rng.integers(0, 5, attr_offsets[-1])]
    words = np.array(["ok", "late", "missing item", "great", "refund please", "n/a"])
    return pa.table({
        "order_id": pa.array(np.arange(rows, dtype=np.int64) + 10_000),
        "timestamp": pa.array(start + np.cumsum(gaps), pa.timestamp("us", tz="UTC")),
        "customer_id": pa.array(rng.zipf(1.3, rows).clip(max=1_000_000).astype(np.int64)),
        "store": pa.array(rng.integers(0, 40, rows).astype(np.int16)),
        "quantity": pa.array(rng.integers(1, 9, rows).astype(np.int8)),
        "amount": pa.array(np.round(rng.lognormal(3, 1, rows), 2)),
        "discount": pa.array(rng.beta(1, 8, rows)),
        "tax": pa.array(rng.integers(0, 2_000, rows).astype(np.int32)).cast(pa.decimal128(10, 0)).cast(pa.decimal128(12, 2)),
        "is_member": pa.array(rng.random(rows) < 0.3),
        "ship_date": pa.array((np.datetime64("2026-01-01") + rng.integers(0, 90, rows)).astype("datetime64[D]")),
        "status": pa.array(rng.choice(["new", "paid", "shipped", "returned"], rows, p=[.2, .5, .25, .05])),
        "channel": pa.array(rng.choice(["web", "app", "store"], rows)),
        "country": pa.array(rng.choice(["US", "DE", "FR", "IN", "BR", "JP"], rows)),
        "currency": pa.array(rng.choice(["USD", "EUR", "JPY"], rows)),
        "comment": pa.array(words[rng.integers(0, 6, rows)], mask=rng.random(rows) < 0.7),
        "session": pa.array([f"s{x:016x}" for x in rng.integers(0, 2 ** 62, rows)]),
        "weight_kg": pa.array(rng.normal(2, 0.5, rows), mask=rng.random(rows) < 0.1),
        "rating": pa.array(rng.integers(1, 6, rows).astype(np.int32), mask=rng.random(rows) < 0.6),
        "items": pa.ListArray.from_arrays(pa.array(offsets), items),
        "attrs": pa.MapArray.from_arrays(pa.array(attr_offsets), pa.array(keys), pa.array(values)),
    })


def main(argv=None) -> int:
    args = parse_args(argv)
    spark = bench.make_session(args)
    folder = Path(tempfile.mkdtemp(prefix="profile-bench-"))
    pq.write_table(table(args.rows), folder / "orders.parquet")
    if args.spec is None:
        started = time.monotonic()
        sample = args.sample or args.rows
        result = profile(spark.read.parquet(str(folder / "orders.parquet")),
                         Settings(name="orders", output=folder / "profile", sample=sample))
        profile_s = time.monotonic() - started
        worst = {m: max((r.distance for r in result.report if r.metric == m), default=0.0) for m in ("KS", "LEN", "TV")}
        print(f"profiled {sample} rows x 20 columns in {profile_s:.1f} s (spec: {result.spec_path}); worst {worst}",
              file=sys.stderr, flush=True)
        spec = tomllib.loads(result.spec)
    else:
        profile_s, worst, spec = None, None, tomllib.loads(args.spec.read_text())
    impulse = {"delay": "1us", "startTime": "0", "numPartitions": str(args.partitions),
               "maxEventsPerTrigger": str(args.rows_per_batch)}

    def prebuilt():
        cloudpickle.register_pickle_by_value(profile_impulse)  # executors import bench/ modules by value
        spark.dataSource.register(profile_impulse.variant_class("prebuilt", prebuilt=True))
        return spark.readStream.format("prebuilt").schema(spec["schema"]).options(**impulse, **spec["source"]).load()

    frames = {
        "profiled": lambda: spark.readStream.format("impulse").schema(spec["schema"])
        .options(**impulse, **spec["source"]).load(),
        "prebuilt_profiled": prebuilt,
        "replay": lambda: spark.readStream.format("replay").option("timeColumn", "timestamp")
        .option("eventsPerSecond", 1e12).option("loop", True).option("numPartitions", args.partitions)
        .option("maxEventsPerTrigger", args.rows_per_batch).load(str(folder / "orders.parquet")),
    }
    results, errors = bench.alternating_rounds(spark, args, frames, args.contenders.split(","))
    medians = {n: statistics.median(r["rows_per_s"] for r in rs) for n, rs in results.items() if rs}
    summary = {"rows": args.rows, "profile_s": profile_s and round(profile_s, 1), "worst": worst,
               "rows_per_s": {n: round(v) for n, v in medians.items()},
               "rounds_rows_per_s": {n: [round(r["rows_per_s"]) for r in rs] for n, rs in results.items()},
               # CPU of the JVM and its Python workers per 1M rows: far less sensitive to a shared machine's load
               "cpu_s_per_million_rows": {n: round(statistics.median(r["cpu_s_per_million_rows"] for r in rs), 2)
                                          for n, rs in results.items() if rs},
               "ratios": {f"{n}/prebuilt_profiled": round(medians[n] / medians["prebuilt_profiled"], 3)
                          for n in ("profiled", "replay") if n in medians and "prebuilt_profiled" in medians},
               "errors": errors}
    print(json.dumps(summary) if args.json else json.dumps(summary, indent=2))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
