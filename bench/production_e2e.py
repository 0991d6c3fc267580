"""Data as production delivers it, end to end: Debezium change events through kafka-sink into Kafka against raw
JSON of the same changes, and duplicates and Poisson arrivals through Spark against the uniform source. Each part
prints its ratios against the named rival, in one run.

- ``kafka``: the sink's own write path (at_least_once, no Spark: ``KafkaSink.open`` → ``write`` → ``close``, as
  ``bench/kafka_sink.py``'s ``sink_write``) into a fresh 2-partition topic of one local broker, for one
  partition's changelog of ``--rows`` changes (image ``id, name, balance``, 1,024 live keys): ``raw`` (the
  changelog rows ``id, op, name, balance, timestamp``, each one JSON object) against ``debezium-json`` with and
  without the schema/payload wrapper and ``debezium-avro`` (through a Schema Registry; its registration in the
  writer build, untimed) of the same changes in Debezium's envelope, a tombstone after each delete. Every run is
  checked: a ``read_committed`` consumer sees every record (the changes, plus the tombstones). Change events/s.
  The wrapped ``debezium-json`` record carries its Connect schema (~15× the raw change's bytes): it is also measured
  against raw JSON of the same changes padded to the same bytes per record (``raw, padded to debezium-json's
  bytes``, ``ratios_to_ceiling``).
- ``source``: impulse → ``noop`` through Spark (``local[2]``, 2 partitions, ``maxEventsPerTrigger`` =
  ``--rows-per-batch``, backfilled from the epoch): uniform arrivals against ``arrival=poisson`` and
  ``duplicateRate=0.05, duplicateDelay=1ms``; rows/s over the micro-batches after ``--warmup-batches`` (their rows over the sum of
  their trigger times, as ``bench/kafka_sink.py``'s Spark runs), copies counted as rows; and the CPU seconds
  per million rows of each query (the Spark JVM and its Python workers), the rival's over each contender's.

Each part runs one uncounted warm-up round, then ``--rounds`` rounds in rotated order (`rounds.rounds`); medians.

    python bench/production_e2e.py --rows 300000 --rows-per-batch 500000 --batches 4 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import uuid

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import impulse_vs_rate  # noqa: E402  (sibling scripts: their folder is on sys.path)
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
from kafka_sink import landed, run_sink_write  # noqa: E402
from production_shapes import CHANGELOG, ENVELOPE, PLAIN, layout  # noqa: E402
from pyspark.sql.types import StringType, StructField, StructType  # noqa: E402
from rounds import rounds  # noqa: E402

from connectors.rows import json_objects  # noqa: E402
from connectors.servers import KafkaBroker, SchemaRegistry  # noqa: E402
from impulse.events import event_batches  # noqa: E402
from sinks.kafka.formats.debezium import encode_json, json_spec  # noqa: E402

#: raw JSON of the changes with a `pad` column that makes each record as long as the wrapped Debezium JSON one
SAME_BYTES = "raw, padded to debezium-json's bytes"

#: kafka-sink contenders: name → (input, sink options); `raw` is the rival
SINK = {"raw": ("changelog", {"value.format": "raw"}),
        SAME_BYTES: ("padded", {"value.format": "raw"}),
        "debezium-json": ("envelope", {"value.format": "debezium-json"}),
        "debezium-json, schemas.enable=false": ("envelope", {"value.format": "debezium-json",
                                                             "schemas.enable": "false"}),
        "debezium-avro": ("envelope", {"value.format": "debezium-avro"})}
#: source contenders through Spark: name → impulse options; `uniform` is the rival
SOURCE = {"uniform": {}, "arrival=poisson": {"arrival": "poisson"},
          "duplicateRate=0.05, duplicateDelay=1ms": {"duplicateRate": "0.05", "duplicateDelay": "1ms"}}
GOALS = {"kafka": ("raw", 0.8), "source": ("uniform", 0.9)}
#: contender → the rival of the same bytes per record: the wrapped Debezium JSON record carries its Connect schema,
#: ~15× the bytes of the raw change, which no encoder makes up; against raw JSON as large per record, its encoder
#: and send are measured on their own
CEILINGS = {"debezium-json": SAME_BYTES}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000, help="changes written per kafka-sink run")
    parser.add_argument("--rows-per-batch", type=int, default=500_000, help="rows per micro-batch (source part)")
    parser.add_argument("--partitions", type=int, default=2, help="impulse partitions (source part)")
    parser.add_argument("--warmup-batches", type=int, default=2, help="micro-batches skipped per query")
    parser.add_argument("--batches", type=int, default=4, help="measured micro-batches per query")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every contender once")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory")
    parser.add_argument("--timeout-s", type=float, default=600, help="give up on one query after this many seconds")
    parser.add_argument("--parts", nargs="+", choices=sorted(GOALS), default=sorted(GOALS), help="what to measure")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return parser.parse_args(argv)


def kafka_part(args) -> dict[str, list[float]]:
    """Change events/s of each `SINK` contender, per counted round."""
    inputs = {"changelog": list(event_batches(0, 0, args.rows, layout(CHANGELOG, PLAIN))),
              "envelope": list(event_batches(0, 0, args.rows, layout({**CHANGELOG, "changelog.envelope": "debezium"},
                                                                     ENVELOPE)))}
    deletes = sum(b.column("op").to_pylist().count("d") for b in inputs["envelope"])
    inputs["padded"] = padded(inputs["changelog"], inputs["envelope"])
    schemas = {"changelog": PLAIN, "envelope": ENVELOPE,
               "padded": StructType([*PLAIN.fields, StructField("pad", StringType())])}
    rates: dict[str, list[float]] = {name: [] for name in SINK}
    with KafkaBroker({"log.flush.interval.messages": 2**63 - 1}, jvm_options=[], heap="1g") as broker, \
            SchemaRegistry() as registry:
        for label, counted, name in rounds(list(SINK), args.rounds, 1):
            data, options = SINK[name]
            topic = broker.create_topic(f"bench-cdc-{uuid.uuid4().hex[:8]}", partitions=2)
            seconds = run_sink_write(broker, topic, inputs[data], {**options, "schema.registry.url": registry.url},
                                     schemas[data])
            want = args.rows + (deletes if data == "envelope" else 0)   # a tombstone after each delete
            got = landed(broker, topic)
            if got != want:
                raise RuntimeError(f"{name}: {got} records visible to read_committed, {want} written")
            broker.delete_topic(topic)
            if counted:
                rates[name].append(args.rows / seconds)
            print(f"[{label}] kafka-sink {name}: {args.rows / seconds:,.0f} changes/s", file=sys.stderr, flush=True)
    return rates


def record_bytes(batches: list[pa.RecordBatch], encode) -> float:
    """Mean bytes per record (key and value) of `batches` encoded by `encode` (batch → (keys, values) or values)."""
    total = 0
    for batch in batches:
        encoded = encode(batch)
        for array in encoded if isinstance(encoded, tuple) else (encoded,):
            total += sum(pc.binary_length(array).to_pylist())
    return total / sum(b.num_rows for b in batches)


def padded(changelog: list[pa.RecordBatch], envelope: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """The changelog's batches with a `pad` column of spaces making each raw JSON record as long, on average, as
    the wrapped Debezium JSON record (key and value) of the same change."""
    wrapped = json_spec(ENVELOPE, "bench-cdc-00000000", True)   # a topic name of the runs' length
    target = record_bytes(envelope, lambda b: encode_json(b, wrapped))
    pad = max(0, round(target - record_bytes(changelog, json_objects)) - len(',"pad":""'))
    return [b.append_column("pad", pa.array([" " * pad] * b.num_rows, pa.string())) for b in changelog]


def run_source(spark, options: dict, args) -> tuple[float, float]:
    """One availableNow query of impulse (`options`) into noop: rows/s (the rows of the micro-batches after
    ``--warmup-batches`` over the sum of their trigger times; copies of duplicates are rows, so a batch of
    ``--rows-per-batch`` events holds more rows) and CPU seconds per million rows of the whole query (the Spark
    JVM and its Python workers, `impulse_vs_rate.tree_cpu_s`: less swayed by a loaded machine than wall time)."""
    limit = args.rows_per_batch * (args.warmup_batches + args.batches)
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    cpu_before = sum(impulse_vs_rate.tree_cpu_s(jvm_pid).values())
    query = (spark.readStream.format("impulse").options(**options, limit=str(limit)).load()
             .writeStream.format("noop").trigger(availableNow=True).start())
    if not query.awaitTermination(args.timeout_s):
        query.stop()
        raise TimeoutError(f"{options}: not done after {args.timeout_s} s")
    if query.exception() is not None:
        raise RuntimeError(f"{options}: {query.exception()}")
    cpu = sum(impulse_vs_rate.tree_cpu_s(jvm_pid).values()) - cpu_before
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    measured = batches[args.warmup_batches:]
    if len(measured) < args.batches:
        raise RuntimeError(f"{options}: {len(measured)} measured micro-batches, {args.batches} expected")
    rate = sum(p["numInputRows"] for p in measured) / (sum(p["durationMs"]["triggerExecution"] for p in measured) / 1e3)
    return rate, cpu / sum(p["numInputRows"] for p in batches) * 1e6


def source_part(args) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Rows/s and CPU s per million rows of each `SOURCE` contender through Spark into noop, per counted round."""
    spark = impulse_vs_rate.make_session(args)
    base = {"delay": "1us", "startTime": "0", "numPartitions": str(args.partitions),
            "maxEventsPerTrigger": str(args.rows_per_batch)}
    rates: dict[str, list[float]] = {name: [] for name in SOURCE}
    cpu: dict[str, list[float]] = {name: [] for name in SOURCE}
    try:
        for label, counted, name in rounds(list(SOURCE), args.rounds, 1):   # a warm-up round: workers, JIT
            rate, cpu_s = run_source(spark, {**base, **SOURCE[name]}, args)
            if counted:
                rates[name].append(rate)
                cpu[name].append(cpu_s)
            print(f"[{label}] source {name}: {rate:,.0f} rows/s, {cpu_s:.2f} CPU s per million rows", file=sys.stderr,
                  flush=True)
    finally:
        spark.stop()
    return rates, cpu


def main(argv=None) -> int:
    args = parse_args(argv)
    measure = {"kafka": kafka_part, "source": source_part}
    result: dict = {"rows": args.rows, "rows_per_batch": args.rows_per_batch, "rounds": args.rounds}
    for part in args.parts:
        rates, cpu = (measure[part](args), None) if part == "kafka" else measure[part](args)
        medians = {name: statistics.median(values) for name, values in rates.items()}
        rival, goal = GOALS[part]
        result[part] = {"per_s_median": {k: round(v) for k, v in medians.items()},
                        "runs": {k: [round(v) for v in values] for k, values in rates.items()},
                        "ratios": {f"{name}_vs_{rival}": round(medians[name] / medians[rival], 3)
                                   for name in medians if name != rival},
                        "goal": f">= {goal}x {rival}"}
        ceilings = {f"{name}_vs_{ceiling}": round(medians[name] / medians[ceiling], 3)
                    for name, ceiling in CEILINGS.items() if name in medians and ceiling in medians}
        if ceilings:
            result[part]["ratios_to_ceiling"] = ceilings
        if cpu is not None:   # the rival's CPU per row over each contender's: > 1 when the contender needs less
            cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
            result[part]["cpu_s_per_million_rows_median"] = {k: round(v, 3) for k, v in cpu_medians.items()}
            result[part]["cpu_ratios"] = {f"{rival}_cpu_vs_{name}_cpu": round(cpu_medians[rival] / cpu_medians[name], 3)
                                          for name in cpu_medians if name != rival and cpu_medians[name] > 0}
    if not args.json:
        for part in args.parts:
            print(f"{part}: " + ", ".join(f"{name} {rate:,.0f}/s" for name, rate in result[part]["per_s_median"].items()))
            for name, ratio in result[part]["ratios"].items():
                print(f"  {name}: {ratio:.2f}x (goal {result[part]['goal']})")
            for name, ratio in result[part].get("ratios_to_ceiling", {}).items():
                print(f"  {name}: {ratio:.2f}x (the same bytes per record)")
            for name, ratio in result[part].get("cpu_ratios", {}).items():
                print(f"  {name} (CPU per row): {ratio:.2f}x")
    print(json.dumps(result, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
