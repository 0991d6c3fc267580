"""Where the time of the impulse source goes: Python generation, Arrow transfer, JVM conversion, fixed cost.

Parts (``--part``, repeatable; default ``python`` and ``variants``):

- ``python``: ``read()`` alone in this process, 1M rows consumed batch by batch as Spark does, and
  what Spark's Python worker adds per batch (wrap in a struct, write the Arrow IPC stream);
- ``variants``: throughput and CPU per row (as `impulse_vs_rate.py` measures them) of variants that
  change one thing each: record-batch size (``rb_*``), more InputPartitions than ``numPartitions``
  (``split_*``), a source re-sending one prebuilt record batch (``prebuilt``: no generation at all,
  the ceiling of Spark's Python path), nullable columns (``nullable``: the schema before it was
  declared NOT NULL), and ``timed``, which logs per ``read()`` the worker's CPU inside the read and
  between two reads to ``$TMPDIR/impulse_read_timing.jsonl``;
- ``jfr``: one query under Java Flight Recorder (1 ms sampling); prints the hottest frames of the JVM's
  task threads. The JVM is started by this script, so run this part alone: ``--part jfr --variant X``.

Examples::

    python bench/profile_impulse.py --part python
    python bench/profile_impulse.py --part variants --variant impulse --variant nullable --variant rate --rounds 3
    python bench/profile_impulse.py --part jfr --variant impulse
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import impulse_vs_rate as bench  # noqa: E402  (a sibling script: its folder is on sys.path; sets PYSPARK_PYTHON)

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from connectors.worker import freeze_gc_once  # noqa: E402
from impulse.events import EventLayout, event_batches  # noqa: E402
from impulse.schedule import Schedule  # noqa: E402
from impulse.source import ImpulseDataSource, ImpulsePartition, ImpulseStreamReader  # noqa: E402


# --- part "python" ------------------------------------------------------------------------------------

def best_ms(fn, repeat: int = 7) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def profile_python(rows: int = 1_000_000) -> dict:
    first = 1_795_000_000_000_000  # counters of a backfill from the epoch at 1 event/µs
    layouts = {
        "scheduled timestamps (default)": EventLayout(0, Schedule(0, 1.0), 0, None, 0),
        "interval timestamps": EventLayout(0, Schedule(0, 1.0), 0, 1000, 0),
        "ramp-up timestamps": EventLayout(0, Schedule(0, 1.0, 10**16), 0, None, 0),
        "payloadBytes=16": EventLayout(0, Schedule(0, 1.0), 0, None, 16),
    }
    out = {}
    for name, layout in layouts.items():
        batches = list(event_batches(0, first, first + rows, layout))

        def transfer():
            # what the Python worker does with each batch: wrap it in a struct, write Arrow IPC to the socket
            sink = pa.BufferOutputStream()
            writer = None
            for b in batches:
                wrapped = pa.RecordBatch.from_arrays([pa.StructArray.from_arrays(b.columns, fields=list(b.schema))], ["_0"])
                writer = writer or pa.ipc.new_stream(sink, wrapped.schema)
                writer.write_batch(wrapped)
            writer.close()

        def generate():
            for _ in event_batches(0, first, first + rows, layout):  # one batch alive at a time, as in Spark
                pass

        out[name] = {"generate_ms": best_ms(generate),
                     "wrap_and_ipc_write_ms": best_ms(transfer),
                     "bytes": sum(b.nbytes for b in batches)}
    return out


# --- part "variants" ------------------------------------------------------------------------------------

TIMING_LOG = Path(tempfile.gettempdir()) / "impulse_read_timing.jsonl"


def _timed(batches):
    """Wrap read()'s iterator: time spent generating vs. in Spark's Python worker (serialise + send to the JVM)."""
    generate = outside = 0.0
    rows = 0
    cpu_start = time.process_time()
    started = mark = time.perf_counter()
    for batch in batches:
        now = time.perf_counter()
        generate += now - mark
        rows += batch.num_rows
        yield batch
        mark = time.perf_counter()
        outside += mark - now
    cpu = time.process_time()
    with open(TIMING_LOG, "a") as log:
        log.write(json.dumps({"pid": os.getpid(), "rows": rows, "end_epoch_s": time.time(),
                              "wall_s": time.perf_counter() - started,
                              "generate_s": generate, "send_s": outside, "read_cpu_s": cpu - cpu_start,
                              "process_cpu_s": cpu}) + "\n")


def _nullable(batches):
    """The same batches under a schema whose fields are nullable (the JVM then checks every value for null)."""
    for batch in batches:
        schema = pa.schema([f.with_nullable(True) for f in batch.schema])
        yield pa.RecordBatch.from_arrays(batch.columns, schema=schema)


def variant_class(name: str, *, rows_per_batch: int | None = None, split: int = 1, prebuilt: bool = False,
                  timed: bool = False, nullable: bool = False):
    """An impulse data source registered as `name` that changes one thing."""

    class Reader(ImpulseStreamReader):
        def partitions(self, start, end):
            parts = super().partitions(start, end)
            if split == 1:
                return parts
            out = []
            for p in parts:
                bounds = np.linspace(p.first, p.end, split + 1).astype(np.int64)
                out += [ImpulsePartition(p.subtask_index, int(a), int(b), p.layout) for a, b in zip(bounds, bounds[1:]) if b > a]
            return out

        def read(self, partition):
            freeze_gc_once()  # as the real read() does
            if prebuilt:
                batches = _prebuilt(partition, rows_per_batch or 131_072)
            else:
                batches = event_batches(partition.subtask_index, partition.first, partition.end, partition.layout,
                                        rows_per_batch or 131_072)
            if nullable:
                batches = _nullable(batches)
            return _timed(batches) if timed else batches

    class Source(ImpulseDataSource):
        @classmethod
        def name(cls):
            return name

        def schema(self):
            ddl = super().schema()
            return ddl.replace(" NOT NULL", "") if nullable else ddl

        def streamReader(self, schema):
            return Reader(self.parsed, self._rows(schema))  # a user schema and its fields.* options too

    Source.__name__ = Reader.__name__ = name
    return Source


_CACHE: dict = {}


def _prebuilt(partition: ImpulsePartition, rows_per_batch: int):
    """Re-send slices of one record batch of the partition's columns, built once per Python worker."""
    key = (partition.layout.rows.arrow, rows_per_batch)
    if key not in _CACHE:
        _CACHE[key] = next(event_batches(partition.subtask_index, 0, rows_per_batch, partition.layout, rows_per_batch))
    batch = _CACHE[key]
    rows = partition.end - partition.first
    for lo in range(0, rows, rows_per_batch):
        yield batch.slice(0, min(rows_per_batch, rows - lo))


VARIANTS = {
    "impulse": {},
    "rb_32k": {"rows_per_batch": 32_768},
    "rb_512k": {"rows_per_batch": 524_288},
    "rb_1m": {"rows_per_batch": 1_048_576},
    "split_2": {"split": 2},
    "split_4": {"split": 4},
    "prebuilt": {"prebuilt": True},
    "timed": {"timed": True},
    "nullable": {"nullable": True},
}


def profile_variants(spark, args) -> dict:
    for name, kw in VARIANTS.items():
        if name != "impulse":
            spark.dataSource.register(variant_class(name, **kw))
    results: dict[str, list[float]] = collections.defaultdict(list)
    cpu: dict[str, list[float]] = collections.defaultdict(list)
    phases: dict[str, dict] = {}
    names = args.variant or list(VARIANTS) + ["rate"]
    for round_ in range(args.rounds):
        for name in (names if round_ % 2 == 0 else names[::-1]):
            kind = "rate" if name == "rate" else "impulse"
            r = bench.run_query(spark, kind, args, f"round {round_ + 1}", fmt=name)
            results[name].append(r["rows_per_s"])
            cpu[name].append(r["cpu_s_per_million_rows"])
            phases[name] = r["phases_ms"]
            parts = ", ".join(f"{k} {v * 1000:.0f}" for k, v in r["cpu_s_per_million_rows_by_part"].items())
            print(f"[round {round_ + 1}] {name}: {r['rows_per_s'] / 1e6:.2f} M rows/s, addBatch {r['phases_ms']['addBatch']:.0f} ms, "
                  f"CPU {r['cpu_s_per_million_rows'] * 1000:.0f} ms per million rows ({parts})", file=sys.stderr, flush=True)
    return {n: {"rows_per_s": v, "median": float(np.median(v)), "cpu_s_per_million_rows": cpu[n],
                "cpu_median": float(np.median(cpu[n])), "phases_ms": phases[n]} for n, v in results.items()}


# --- part "jfr" -------------------------------------------------------------------------------------------

def profile_jfr(args) -> dict:
    """Run one query with Java Flight Recorder on (1 ms sampling); summarise the task threads' samples."""
    workdir = Path(tempfile.mkdtemp())
    recording, settings = workdir / "impulse.jfr", workdir / "fast.jfc"
    java_home = Path(subprocess.run(["java", "-XshowSettings:properties", "-version"], capture_output=True, text=True)
                     .stderr.split("java.home = ")[1].split()[0])
    profile = (java_home / "lib" / "jfr" / "profile.jfc").read_text()
    settings.write_text(profile.replace(">10 ms</setting>", ">1 ms</setting>"))
    os.environ["PYSPARK_SUBMIT_ARGS"] = (f'--conf "spark.driver.extraJavaOptions=-XX:StartFlightRecording='
                                         f'filename={recording},settings={settings}" pyspark-shell')
    spark = bench.make_session(args)
    try:
        fmt = args.variant[0] if args.variant else "impulse"
        if fmt in VARIANTS and fmt != "impulse":
            spark.dataSource.register(variant_class(fmt, **VARIANTS[fmt]))
        kind = "rate" if fmt == "rate" else "impulse"
        result = bench.run_query(spark, kind, args, "jfr", fmt=fmt)
        # the JVM outlives spark.stop(): dump the recording now
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        subprocess.run(["jcmd", str(pid), "JFR.dump", "name=1", f"filename={recording}"], check=True, capture_output=True)
    finally:
        spark.stop()
    text = subprocess.run(["jfr", "print", "--stack-depth", "12", "--events", "jdk.ExecutionSample", str(recording)],
                          capture_output=True, text=True).stdout
    leaf, pairs = collections.Counter(), collections.Counter()
    for sample in text.split("jdk.ExecutionSample")[1:]:
        if "Executor task launch" not in sample:
            continue
        frames = [_short(line) for line in sample.splitlines() if "line:" in line]
        if frames:
            leaf[frames[0]] += 1
            pairs[" < ".join(frames[:3])] += 1
    total = sum(leaf.values())
    return {"format": fmt, "rows_per_s": result["rows_per_s"], "task_thread_samples": total,
            "leaf_frames_pct": {f: round(100 * n / total, 1) for f, n in leaf.most_common(20)},
            "stacks_pct": {f: round(100 * n / total, 1) for f, n in pairs.most_common(25)}}


def _short(line: str) -> str:
    """'org.apache.arrow.vector.BaseFixedWidthVector.isNull(int) line: 12' -> 'BaseFixedWidthVector.isNull'."""
    qualified = line.strip().split("(")[0]
    return ".".join(qualified.split(".")[-2:])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", action="append", choices=["python", "variants", "jfr"], help="what to profile (repeatable)")
    parser.add_argument("--variant", action="append", choices=list(VARIANTS) + ["rate"], help="variants to run (default all)")
    parser.add_argument("--rows-per-batch", type=int, default=2_000_000, help="rows per micro-batch (rows)")
    parser.add_argument("--partitions", type=int, default=2, help="numPartitions")
    parser.add_argument("--warmup-batches", type=int, default=3, help="micro-batches skipped per query")
    parser.add_argument("--batches", type=int, default=6, help="measured micro-batches per query")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the variants")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--timeout-s", type=float, default=600)
    parser.add_argument("--impulse-option", action="append", default=[])
    args = parser.parse_args(argv)
    parts = args.part or ["python", "variants"]
    out = {}
    if "python" in parts:
        out["python"] = profile_python()
    if "variants" in parts:
        spark = bench.make_session(args)
        try:
            out["variants"] = profile_variants(spark, args)
        finally:
            spark.stop()
    if "jfr" in parts:
        out["jfr"] = profile_jfr(args)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
