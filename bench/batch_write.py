"""Batch writes through each sink vs the same sink's streaming path, and Kafka vs Spark's own batch writer.

One run starts a ``redis-server``, a Kafka broker (Kafka's default flush policy, as in
``bench/kafka_sink.py``) and the webhook bench's receiver process (``bench/webhook_sink.py``), and
writes the same ``--rows`` impulse rows (2 partitions, ``--payload-bytes`` payloads, ``startTime=0``
so all are due at once) in one job per contender on one ``local[2]`` session:

- ``<sink>_batch``: ``spark.read.format("impulse")…load()`` → ``df.write.format(<sink>).mode("append").save()``;
- ``<sink>_stream``: the same rows from ``spark.readStream.format("impulse")`` → ``writeStream`` with
  ``Trigger.AvailableNow`` (one micro-batch, no ``maxEventsPerTrigger``);
- ``spark_kafka_batch``: the batch DataFrame → Spark's own ``df.write.format("kafka")`` (Java producer,
  at-least-once, the sink's producer settings: `bench.kafka_sink.java_settings`).

Redis: ``target=list``, ``valueColumn=payload`` (one list per run, deleted after); Kafka: the payload as
the value, ``at_least_once`` for ``kafka_*`` and ``exactly_once`` for ``kafka_eo_*``; webhook: rows as
JSON, 100 per request. Time is wall time of the whole job (``save()``, or ``start()`` →
``awaitTermination()``): planning, generation, the JVM→Python transfer, the write and the commit. Every
run is checked (list length, ``read_committed`` record count, the receiver's row count; non-zero exit
otherwise). Rounds alternate the order of the contenders, after ``--warmup-rounds`` uncounted rounds;
medians are reported, with ratios batch / stream per sink and ``kafka_batch`` / ``spark_kafka_batch``.

    python bench/batch_write.py --rows 1000000 --repeat 3 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import pyspark
from kafka_sink import java_settings, landed  # noqa: E402  (sibling scripts: their folder is on sys.path)
from rounds import rounds  # noqa: E402
from webhook_sink import Receiver  # noqa: E402

from connectors.servers import KafkaBroker, RedisServer  # noqa: E402
from connectors.session import local_session, spark_kafka_session

SINKS = ("redis", "kafka", "kafka_eo", "webhook")
PARTITIONS = 2


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per job (rows)")
    parser.add_argument("--payload-bytes", type=int, default=100, help="bytes of each row's payload (bytes)")
    parser.add_argument("--repeat", type=int, default=3, help="counted rounds of all contenders; medians reported")
    parser.add_argument("--warmup-rounds", type=int, default=1, help="rounds run first and not counted")
    parser.add_argument("--sinks", default=",".join(SINKS), help=f"comma-separated subset of {','.join(SINKS)}")
    parser.add_argument("--skip-spark-kafka", action="store_true", help="do not measure Spark's own Kafka writer")
    parser.add_argument("--spark-kafka-fallback", default="4.2.0",
                        help="spark-sql-kafka version to use when the PySpark version cannot be resolved")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return parser.parse_args(argv)


class Targets:
    """The servers, and per run: the options of a fresh target, and the rows that landed in it."""

    def __init__(self, sinks: list[str]) -> None:
        self.redis = RedisServer() if "redis" in sinks else None
        self.kafka = KafkaBroker({"log.flush.interval.messages": 2**63 - 1}, jvm_options=[], heap="1g") \
            if any(s.startswith("kafka") for s in sinks) else None
        self.receiver = Receiver() if "webhook" in sinks else None
        for server in (self.redis, self.kafka):
            if server is not None:
                server.start()

    def close(self) -> None:
        for server in (self.redis, self.kafka, self.receiver):
            if server is not None:
                server.close()

    def fresh(self, sink: str, name: str) -> tuple[str, dict]:
        """(format, options) writing to a new, empty target called `name`."""
        if sink == "redis":
            return "redis-sink", {"url": self.redis.url, "target": "list", "keyPrefix": name, "valueColumn": "payload"}
        if sink.startswith("kafka"):
            topic = self.kafka.create_topic(name, partitions=PARTITIONS)
            return "kafka-sink", {"kafka.bootstrap.servers": self.kafka.bootstrap, "topic": topic,
                                  "deliveryGuarantee": "exactly_once" if sink == "kafka_eo" else "at_least_once"}
        return "webhook-sink", {"url": f"{self.receiver.url}/{name}", "batchSize": "100", "maxInFlight": "4"}

    def landed(self, sink: str, name: str, before: dict | None) -> int:
        if sink == "redis":
            client = self.redis.client()
            count = client.llen(name)
            client.delete(name)
            return count
        if sink.startswith("kafka"):
            count = landed(self.kafka, name)
            self.kafka.delete_topic(name)
            return count
        return self.receiver.stats()["rows"] - before["rows"]


def impulse(spark, rows: int, payload_bytes: int, stream: bool):
    reader = spark.readStream if stream else spark.read
    return (reader.format("impulse").option("eventsPerSecond", 1e9).option("numPartitions", PARTITIONS)
            .option("startTime", "0").option("payloadBytes", payload_bytes).option("limit", rows).load())


def run(spark, targets: Targets, contender: str, args) -> float:
    """Seconds of one job of `contender`, checked: every row landed once."""
    sink, _, path = contender.rpartition("_")
    name = f"bench-{contender.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    spark_kafka = sink == "spark_kafka"
    fmt, options = targets.fresh("kafka" if spark_kafka else sink, name)
    frame = impulse(spark, args.rows, args.payload_bytes, stream=path == "stream")
    if sink.startswith("kafka") or spark_kafka:
        frame = frame.selectExpr("payload AS value")
    if spark_kafka:
        fmt, options = "kafka", {"kafka.bootstrap.servers": options["kafka.bootstrap.servers"], "topic": name,
                                 **{k: str(v) for k, v in java_settings().items()}}
    before = targets.receiver.stats() if sink == "webhook" else None
    start = time.perf_counter()
    if path == "batch":
        frame.write.format(fmt).mode("append").options(**options).save()
    else:
        with tempfile.TemporaryDirectory() as checkpoint:
            query = (frame.writeStream.format(fmt).options(**options).option("checkpointLocation", checkpoint)
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            if query.exception() is not None:
                raise RuntimeError(f"{contender}: {query.exception()}")
    seconds = time.perf_counter() - start
    got = targets.landed("kafka" if spark_kafka else sink, name, before)
    if got != args.rows:
        raise RuntimeError(f"{contender}: {got} rows landed, {args.rows} written")
    return seconds


def contenders(args) -> list[str]:
    sinks = [s for s in args.sinks.split(",") if s]
    unknown = set(sinks) - set(SINKS)
    if unknown:
        raise SystemExit(f"--sinks: unknown {sorted(unknown)}; known: {','.join(SINKS)}")
    names = [f"{s}_{p}" for s in sinks for p in ("batch", "stream")]
    if "kafka" in sinks and not args.skip_spark_kafka:
        names.append("spark_kafka_batch")
    return names


def main(argv=None) -> int:
    args = parse_args(argv)
    names = contenders(args)

    package = None
    if "spark_kafka_batch" in names:
        spark, package = spark_kafka_session("local[2]", "bench-batch-write", args.spark_kafka_fallback)
    else:
        spark = local_session("local[2]", "bench-batch-write")
    targets = Targets(sorted({n.rpartition("_")[0].replace("spark_kafka", "kafka") for n in names}))
    seconds: dict[str, list[float]] = {n: [] for n in names}
    warmup: dict[str, list[float]] = {n: [] for n in names}
    try:
        for label, counted, name in rounds(names, args.repeat, args.warmup_rounds):
            took = run(spark, targets, name, args)
            (seconds if counted else warmup)[name].append(took)
            if not args.json:
                print(f"{label:<12} {name:<20} {args.rows / took:>12,.0f} rows/s  ({took:.1f} s)", flush=True)
    finally:
        targets.close()
        spark.stop()

    result: dict = {"rows": args.rows, "payload_bytes": args.payload_bytes, "partitions": PARTITIONS,
                    "repeat": args.repeat, "warmup_rounds": args.warmup_rounds, "pyspark": pyspark.__version__,
                    "spark_kafka_package": package, "cpus": os.cpu_count(), "load_average": os.getloadavg()[0],
                    "warmup_rows_per_s": {n: [round(args.rows / s) for s in v] for n, v in warmup.items()}}
    for name in names:
        median = statistics.median(seconds[name])
        result[name] = {"rows_per_s": round(args.rows / median), "seconds": round(median, 2),
                        "runs_rows_per_s": [round(args.rows / s) for s in seconds[name]]}
    ratios = {f"{s}_batch_vs_stream": round(result[f"{s}_batch"]["rows_per_s"] / result[f"{s}_stream"]["rows_per_s"], 3)
              for s in dict.fromkeys(n.rpartition("_")[0] for n in names) if s != "spark_kafka"}
    if "spark_kafka_batch" in names:
        spark_rate = result["spark_kafka_batch"]["rows_per_s"]
        ratios["kafka_batch_vs_spark_kafka_batch"] = round(result["kafka_batch"]["rows_per_s"] / spark_rate, 3)
        if "kafka_eo_batch" in result:
            ratios["kafka_eo_batch_vs_spark_kafka_batch"] = round(result["kafka_eo_batch"]["rows_per_s"] / spark_rate, 3)
    result["ratios"] = ratios
    if args.json:
        print(json.dumps(result))
    else:
        print(f"\n{args.rows:,} rows per job, {args.payload_bytes} B payloads, {PARTITIONS} partitions, "
              f"median of {args.repeat} after {args.warmup_rounds} warm-up round(s), load average "
              f"{result['load_average']:.1f}")
        for name in names:
            print(f"{name:<20} {result[name]['rows_per_s']:>12,.0f} rows/s  {result[name]['seconds']:>6.1f} s")
        for name, value in ratios.items():
            print(f"{name:<36} {value:.2f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as exc:  # a contender lost or duplicated rows: the figures would be meaningless
        print(f"batch_write benchmark failed: {exc}", file=sys.stderr)
        sys.exit(1)
