"""The small figures behind choices in the code, measured in one process (no Spark job, no server).

    python bench/figures.py                 # every figure, printed one per line
    python bench/figures.py --json          # the same as one JSON object

- ``hash``: SHA-256 and BLAKE2b throughput over 64 MiB (the protocol's input fingerprint uses SHA-256,
  `connectors.protocol`);
- ``gc``: the objects a Python process holds with pyarrow, numpy, pyspark.sql and pandas imported, and the CPU
  time of one ``gc.collect()`` over them (what `connectors.worker.freeze_gc_once` spares each task);
- ``histogram``: recording 5,000 latencies with `connectors.latency.LatencyHistogram.record` (vectorised) and
  with hdrhistogram's ``record_value`` per value;
- ``metadata``: ``importlib.metadata.version("redis")``, the scan redis-py makes on every new connection unless
  told its version (`sinks.redis.sink`), here with this process's ``sys.path`` (a Spark Python worker's is
  longer).

Figures go to ``bench/README.md`` with the machine and its load; the code states contracts, not these numbers.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.metadata
import json
import sys
import time

import numpy as np
import pyarrow  # noqa: F401  (what a Spark Python worker has loaded: counted by the gc figure)
import pyspark.sql  # noqa: F401
from hdrh.histogram import HdrHistogram

from connectors.latency import LatencyHistogram
from connectors.registry import import_extra


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hash-mib", type=int, default=64, help="bytes hashed per algorithm, MiB")
    parser.add_argument("--latencies", type=int, default=5000, help="latencies recorded per histogram")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each timing; the best is kept")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser.parse_args(argv)


def best_ms(fn, repeat: int, clock=time.perf_counter) -> float:
    """The shortest of `repeat` runs of `fn`, in milliseconds of `clock`."""
    runs = []
    for _ in range(repeat):
        start = clock()
        fn()
        runs.append((clock() - start) * 1e3)
    return min(runs)


def measure(args: argparse.Namespace) -> dict:
    data = b"x" * (args.hash_mib << 20)
    figures = {}
    for name in ("sha256", "blake2b"):
        ms = best_ms(lambda: hashlib.new(name, data), args.repeat)
        figures[f"hash_{name}_gb_per_s"] = round(len(data) / ms / 1e6, 2)
    import_extra("pandas", "test", "bench/figures.py", "pandas")  # what a Spark Python worker has loaded too
    figures["gc_objects"] = len(gc.get_objects())
    figures["gc_collect_cpu_ms"] = round(best_ms(gc.collect, args.repeat, time.process_time), 1)
    values = np.random.default_rng(1).integers(0, 10_000_000, args.latencies)
    figures["histogram_vectorised_ms"] = round(best_ms(lambda: LatencyHistogram().record(values), args.repeat), 2)

    def per_value() -> None:
        histogram = HdrHistogram(1, 3_600_000_000, 3)
        for value in values.tolist():
            histogram.record_value(value)

    figures["histogram_record_value_ms"] = round(best_ms(per_value, args.repeat), 2)
    figures["metadata_version_ms"] = round(best_ms(lambda: importlib.metadata.version("redis"), args.repeat), 1)
    return figures


def main(argv=None) -> int:
    args = parse_args(argv)
    figures = measure(args)
    print(json.dumps(figures) if args.json else "\n".join(f"{k}: {v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
