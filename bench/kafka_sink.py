"""Kafka sink throughput against a plain confluent-kafka producer loop and Spark's own Kafka sink.

One run starts one local Apache Kafka broker (``connectors.servers.KafkaBroker``, C2 JIT, Kafka's default
flush policy rather than the test suite's fsync per append) and writes the
same records — impulse's ``payload`` column (``--payload-bytes`` per record) as the value, no key,
to a fresh 2-partition topic — with the same producer settings (the sink's defaults: acks=all,
idempotence, ``linger.ms``, ``batch.size``, compression…), five ways:

- ``plain``: one confluent-kafka ``Producer`` in this process, ``produce()`` over prebuilt values,
  ``poll(0)`` every 1000 records, waits on ``BufferError``, ``flush()`` at the end (building the
  values is not timed) — what a user writes by hand with confluent-kafka;
- ``sink_write``: the same records as Arrow record batches (impulse's, 131072 rows each) through the
  sink's own write path in this process, at_least_once — ``KafkaSink.open`` → ``write`` → ``close``,
  no Spark: Arrow batches handed to librdkafka whole (``sinks.kafka.librdkafka``), back-pressure, failure checks;
- ``sink_at_least_once`` / ``sink_exactly_once``: impulse → ``kafka-sink`` through Spark
  (``local[2]``, 2 partitions, micro-batches of ``--rows`` records, ``Trigger.AvailableNow``);
- ``spark_kafka``: impulse → Spark's own ``format("kafka")`` (Java producer, at-least-once), from
  ``spark.jars.packages`` ``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>``, or
  ``--spark-kafka-fallback`` when Spark's resolver cannot resolve that version
  (`connectors.session.spark_kafka_session`).

Spark runs report steady state: rows / Σ triggerExecution of the micro-batches after ``--warmup``
(source generation, Arrow transfer and Spark's per-batch overhead included). ``plain`` and
``sink_write`` also report this process's CPU time per record (µs; librdkafka's threads included).
Every run is checked: a ``read_committed`` consumer must see every record written. Runs are interleaved
``--repeat`` times, in an order rotated each round, after ``--warmup-rounds`` rounds that are run the same
way but not counted (their rates are listed under ``warmup_rates``); the medians are reported.

    python bench/kafka_sink.py --rows 1000000 --payload-bytes 100 --json

``--value-format avro`` measures the record formats instead, on impulse's rows (``counter``, ``subtask_index``,
``timestamp``, ``payload``: every column one record), three ways, no Spark, at_least_once, through a Schema
Registry (``connectors.servers.SchemaRegistry``, or ``--schema-registry-url``):

- ``sink_avro``: the sink's write path with ``value.format=avro`` (encoding and framing included);
- ``sink_json``: the same rows through the same path as ``raw``: each row one JSON object;
- ``plain_avro``: a confluent-kafka ``Producer`` loop that serialises each row with ``AvroSerializer`` (the same
  registered schema; the rows as Python dicts are built before timing).

    python bench/kafka_sink.py --value-format avro --rows 200000 --batches 3 --repeat 3 --json
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

import pyarrow as pa

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import pyspark
from pyspark.sql.types import BinaryType, StructField, StructType
from rounds import rounds  # noqa: E402  (a sibling script: its folder is on sys.path)

from connectors.protocol import WriteIdentity
from connectors.servers import KafkaBroker  # noqa: E402
from connectors.servers import KAFKA_VERSION
from connectors.session import local_session, spark_kafka_session
from impulse.events import EventLayout, event_batches  # noqa: E402
from impulse.schedule import Schedule  # noqa: E402
from sinks.kafka.options import PRODUCER_DEFAULTS  # noqa: E402
from sinks.kafka.sink import KafkaSinkDataSource

CONTENDERS = ("plain", "sink_write", "sink_at_least_once", "sink_exactly_once", "spark_kafka")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="records per micro-batch (records)")
    parser.add_argument("--batches", type=int, default=3, help="measured micro-batches per Spark run; the plain "
                                                                "loop writes rows × batches records")
    parser.add_argument("--warmup", type=int, default=1, help="micro-batches run before measuring (batches)")
    parser.add_argument("--payload-bytes", type=int, default=100, help="bytes per record value (bytes)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds of all contenders; medians reported")
    parser.add_argument("--warmup-rounds", type=int, default=1,
                        help="rounds of all contenders run first and not counted (the broker's and Spark's JIT warm "
                             "up: a cold first round ran at 0.4-0.7x the later ones)")
    parser.add_argument("--compression", help="compression.type for every contender (default: the sink's, lz4)")
    parser.add_argument("--arrow-max-records", type=int,
                        help="spark.sql.execution.arrow.maxRecordsPerBatch (records per Arrow batch sent to a Python "
                             "writer; Spark's default 10000)")
    parser.add_argument("--spark-kafka-fallback", default="4.2.0",
                        help="spark-sql-kafka version to use when the PySpark version cannot be resolved")
    parser.add_argument("--skip-spark-kafka", action="store_true", help="do not measure Spark's own Kafka sink")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--value-format", choices=["avro"], help="measure the record format against raw JSON and "
                                                                 "a confluent-kafka AvroSerializer loop instead")
    parser.add_argument("--schema-registry-url", help="with --value-format: a running registry (default: start one)")
    return parser.parse_args(argv)


OVERRIDES: dict = {}


def producer_settings() -> dict:
    """The settings every contender uses: the sink's defaults (librdkafka names), with --compression."""
    return {**PRODUCER_DEFAULTS, "enable.idempotence": True, **OVERRIDES}


def java_settings() -> dict:
    """The same settings for Spark's Java producer (``kafka.``-prefixed options)."""
    conf = producer_settings()
    return {
        "kafka.acks": conf["acks"], "kafka.linger.ms": conf["linger.ms"], "kafka.batch.size": conf["batch.size"],
        "kafka.compression.type": conf["compression.type"], "kafka.enable.idempotence": "true",
        "kafka.buffer.memory": conf["queue.buffering.max.kbytes"] * 1024,
        "kafka.delivery.timeout.ms": max(conf["message.timeout.ms"], conf["linger.ms"] + 30_000 + 1),
    }


# ------------------------------------------------------------------------------------------- contenders


def run_plain(broker, topic: str, values: list, progress: bool) -> float:
    from confluent_kafka import Producer

    failures = []
    producer = Producer({**producer_settings(), "bootstrap.servers": broker.bootstrap,
                         "on_delivery": lambda err, msg: failures.append(err) if err else None,
                         "delivery.report.only.error": True})
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    next_report = start + 1.0
    for begin in range(0, len(values), 1_000):
        if progress and time.perf_counter() >= next_report:  # once a second, on a fixed schedule
            next_report += 1.0
            elapsed = time.perf_counter() - start
            print(f"  plain: {begin:,} sent, {begin / elapsed:,.0f} records/s, {len(failures)} errors, "
                  f"{len(producer):,} in flight", file=sys.stderr, flush=True)
        for value in values[begin:begin + 1_000]:
            try:
                produce(topic, value)
            except BufferError:  # local queue full: serve delivery reports until there is room
                while True:
                    poll(0.05)
                    try:
                        produce(topic, value)
                        break
                    except BufferError:
                        continue
        poll(0)
    while producer.flush(1.0):
        pass
    seconds = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"plain producer: {len(failures)} records failed, first: {failures[0]}")
    return seconds


def run_sink_write(broker, topic: str, batches: list, extra: dict | None = None, schema=None) -> float:
    """Seconds the sink's write path (at_least_once, no Spark) takes for `batches`, from open to close. `extra`:
    sink options added; `schema`: the input's Spark schema (default one binary ``value`` column)."""
    options = {"kafka.bootstrap.servers": broker.bootstrap, "topic": topic, "deliveryGuarantee": "at_least_once",
               **(extra or {}), **{f"kafka.{k}": str(v) for k, v in OVERRIDES.items()}}
    schema = schema or StructType([StructField("value", BinaryType())])
    sink = KafkaSinkDataSource(options).streamWriter(schema, False).sink
    identity = WriteIdentity(f"bench-{uuid.uuid4().hex}", 0, 0, 0)
    start = time.perf_counter()
    conn = sink.open(identity)
    try:
        sink.write(conn, identity, iter(batches))
    finally:
        sink.close(conn)
    return time.perf_counter() - start


def run_sink_format(broker, topic: str, batches: list, fmt: str, registry_url: str) -> float:
    """Seconds the sink's write path (at_least_once, no Spark) takes for `batches` with ``value.format=fmt``
    (the registry call of the writer build not included)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return run_sink_write(broker, topic, batches, {"value.format": fmt, "schema.registry.url": registry_url},
                          from_arrow_schema(batches[0].schema))


def run_plain_avro(broker, topic: str, rows: list[dict], schema: str, registry_url: str) -> float:
    """Seconds a confluent-kafka loop takes to serialise `rows` with ``AvroSerializer`` (`schema`, the one the
    sink derives, registered by the first call, untimed) and produce them, flushed."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), schema)
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({**producer_settings(), "bootstrap.servers": broker.bootstrap,
                         "delivery.report.only.error": True})
    serialize(rows[0], context)  # the registration, once, untimed (the sink's happens in its writer build)
    start = time.perf_counter()
    for index, row in enumerate(rows):
        value = serialize(row, context)
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
        if index % 1_000 == 0:
            producer.poll(0)
    while producer.flush(1.0):
        pass
    return time.perf_counter() - start


def formats_main(args) -> int:
    """``--value-format avro``: the sink with the format vs raw JSON vs a plain AvroSerializer loop."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from connectors.rows import python_rows
    from connectors.servers import SchemaRegistry
    from sinks.kafka.formats import derived_schema

    layout = EventLayout(0, Schedule(0, 1.0), 0, None, args.payload_bytes)
    total = args.rows * args.batches
    batches = list(event_batches(0, 0, total, layout))
    rows = [row for b in batches for row in python_rows(b)]
    schema = derived_schema(args.value_format, from_arrow_schema(batches[0].schema), "Value")  # as the sink derives it
    contenders = ("sink_avro", "sink_json", "plain_avro")
    rates: dict[str, list[float]] = {c: [] for c in contenders}
    warmup: dict[str, list[int]] = {c: [] for c in contenders}
    broker = KafkaBroker({"log.flush.interval.messages": 2**63 - 1}, jvm_options=[], heap="1g")
    registry = SchemaRegistry.external(args.schema_registry_url) if args.schema_registry_url else SchemaRegistry()
    with broker, registry:
        for label, counted, kind in rounds(list(contenders), args.repeat, args.warmup_rounds):
            topic = broker.create_topic(f"bench-{kind.replace('_', '-')}-{uuid.uuid4().hex[:6]}", partitions=2)
            if kind == "plain_avro":
                seconds = run_plain_avro(broker, topic, rows, schema, registry.url)
            else:
                seconds = run_sink_format(broker, topic, batches, "raw" if kind == "sink_json" else args.value_format,
                                          registry.url)
            got = landed(broker, topic)
            if got != total:
                raise RuntimeError(f"{kind}: {got} records visible to read_committed, {total} written")
            broker.delete_topic(topic)
            (rates[kind].append(total / seconds) if counted else warmup[kind].append(round(total / seconds)))
            if not args.json:
                print(f"{label} {kind:<12} {total / seconds:>12,.0f} records/s", flush=True)
    result: dict = {"rows": args.rows, "rows_per_batch": args.rows, "batches": args.batches,
                    "payload_bytes": args.payload_bytes, "repeat": args.repeat, "warmup_rounds": args.warmup_rounds,
                    "warmup_rates": warmup, "value_format": args.value_format}
    for kind in contenders:
        result[kind] = {"records_per_s": round(statistics.median(rates[kind])), "runs": [round(r) for r in rates[kind]]}
    avro, as_json, plain = (result[k]["records_per_s"] for k in contenders)
    result["ratios"] = {"sink_avro_vs_sink_json": round(avro / as_json, 3),
                        "sink_avro_vs_plain_avro": round(avro / plain, 3)}
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


def run_spark(spark, broker, topic: str, kind: str, args) -> tuple[float, dict]:
    """Steady-state records/s of one Spark query, and its mean phase times (ms per micro-batch)."""
    total = args.rows * (args.warmup + args.batches)
    frame = (spark.readStream.format("impulse").option("eventsPerSecond", 1e9).option("numPartitions", 2)
             .option("startTime", "0").option("payloadBytes", args.payload_bytes).option("limit", total)
             .option("maxEventsPerTrigger", args.rows).load().selectExpr("payload AS value"))
    with tempfile.TemporaryDirectory() as checkpoint:
        writer = frame.writeStream.option("checkpointLocation", checkpoint).option("topic", topic) \
            .option("kafka.bootstrap.servers", broker.bootstrap).trigger(availableNow=True)
        if kind == "spark_kafka":
            writer = writer.format("kafka").options(**{k: str(v) for k, v in java_settings().items()})
        else:
            guarantee = kind.removeprefix("sink_")
            writer = writer.format("kafka-sink").option("deliveryGuarantee", guarantee) \
                .options(**{f"kafka.{k}": str(v) for k, v in OVERRIDES.items()})
        query = writer.start()
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"{kind}: {query.exception()}")
        progress = [p for p in query.recentProgress if p["numInputRows"]][args.warmup:]
    seconds = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    phases = {k: round(statistics.mean(p["durationMs"].get(k, 0) for p in progress))
              for k in ("addBatch", "latestOffset", "queryPlanning", "walCommit", "commitOffsets", "triggerExecution")}
    return sum(p["numInputRows"] for p in progress) / seconds, phases


def landed(broker, topic: str) -> int:
    """Records a ``read_committed`` consumer sees (offsets would also count the transaction markers)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    ends = broker.end_offsets(topic, "read_committed")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True, "fetch.max.bytes": 52_428_800,
                         "max.partition.fetch.bytes": 52_428_800})  # 1 MB a fetch by default: minutes per run
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p, end in ends.items() if end > 0])
    pending, count = {p for p, end in ends.items() if end > 0}, 0
    try:
        while pending:
            for message in consumer.consume(10_000, timeout=1.0):
                error = message.error()
                if error is None:
                    count += 1
                elif error.code() == error._PARTITION_EOF and message.offset() >= ends[message.partition()]:
                    pending.discard(message.partition())
    finally:
        consumer.close()
    return count


# ------------------------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.compression:
        OVERRIDES["compression.type"] = args.compression
    if args.value_format:
        return formats_main(args)
    contenders = [c for c in CONTENDERS if not (c == "spark_kafka" and args.skip_spark_kafka)]
    layout = EventLayout(0, Schedule(0, 1.0), 0, None, args.payload_bytes)
    plain_rows = args.rows * args.batches
    batches = [pa.record_batch([b.column("payload")], names=["value"]) for b in event_batches(0, 0, plain_rows, layout)]
    values = [v for b in batches for v in b.column(0).to_pylist()]

    conf = {k: v for k, v in {"spark.sql.execution.arrow.maxRecordsPerBatch": args.arrow_max_records}.items() if v}
    note = package = None
    if args.skip_spark_kafka:
        spark = local_session("local[2]", "bench-kafka-sink", **conf)
    else:
        spark, package = spark_kafka_session("local[2]", "bench-kafka-sink", args.spark_kafka_fallback, **conf)
        if not package.endswith(f":{pyspark.__version__}"):
            note = (f"spark-sql-kafka {pyspark.__version__} could not be resolved; used {package.rsplit(':', 1)[1]} "
                    f"on the PySpark {pyspark.__version__} runtime")

    rates: dict[str, list[float]] = {c: [] for c in contenders}
    warmup: dict[str, list[int]] = {c: [] for c in contenders}  # not counted; reported
    cpu: dict[str, list[float]] = {"plain": [], "sink_write": []}  # µs of this process's CPU per record
    phases: dict[str, list[dict]] = {c: [] for c in contenders if c not in ("plain", "sink_write")}
    # Kafka's default flush policy (the OS writes back): the test suite's broker fsyncs every append
    # to survive SIGKILL in crash tests, which would make every contender wait on the disk.
    broker = KafkaBroker({"log.flush.interval.messages": 2**63 - 1}, jvm_options=[], heap="1g")
    broker.start()
    try:
        for label, counted, kind in rounds(contenders, args.repeat, args.warmup_rounds):
            topic = broker.create_topic(f"bench-{kind.replace('_', '-')}-{uuid.uuid4().hex[:6]}", partitions=2)
            if kind in cpu:
                cpu_start = time.process_time()  # the Python thread and librdkafka's threads
                seconds = run_plain(broker, topic, values, not args.json) if kind == "plain" \
                    else run_sink_write(broker, topic, batches)
                measured = (time.process_time() - cpu_start) / plain_rows * 1e6
                rate, expected = plain_rows / seconds, plain_rows
            else:
                rate, measured = run_spark(spark, broker, topic, kind, args)
                expected = args.rows * (args.warmup + args.batches)
            got = landed(broker, topic)
            if got != expected:
                raise RuntimeError(f"{kind}: {got} records visible to read_committed, {expected} written")
            broker.delete_topic(topic)
            if not counted:
                warmup[kind].append(round(rate))
            else:
                rates[kind].append(rate)
                (cpu if kind in cpu else phases)[kind].append(measured)  # µs per record, or phase ms
            if not args.json:
                print(f"{label} {kind:<20} {rate:>12,.0f} records/s", flush=True)
    finally:
        broker.close()
        spark.stop()

    mb = args.payload_bytes / 1e6
    result: dict = {"rows_per_batch": args.rows, "batches": args.batches, "payload_bytes": args.payload_bytes,
                    "repeat": args.repeat, "warmup_rounds": args.warmup_rounds, "warmup_rates": warmup, "arrow_max_records": args.arrow_max_records, "producer_settings": {k: v for k, v in producer_settings().items()},
                    "spark_kafka_package": package, "note": note, "kafka_version": _kafka_version()}
    for kind in contenders:
        median = statistics.median(rates[kind])
        result[kind] = {"records_per_s": round(median), "mb_per_s": round(median * mb, 2),
                        "runs": [round(r) for r in rates[kind]]}
        if kind in cpu:
            result[kind]["cpu_us_per_record"] = round(statistics.median(cpu[kind]), 3)
        if kind in phases:
            result[kind]["phase_ms"] = phases[kind][len(phases[kind]) // 2]
    alo, eo, plain, write = (result[k]["records_per_s"]
                             for k in ("sink_at_least_once", "sink_exactly_once", "plain", "sink_write"))
    result["ratios"] = {"sink_write_vs_plain": round(write / plain, 3),
                        "sink_write_cpu_vs_plain": round(result["sink_write"]["cpu_us_per_record"]
                                                         / result["plain"]["cpu_us_per_record"], 3),
                        "at_least_once_vs_plain": round(alo / plain, 3),
                        "exactly_once_vs_at_least_once": round(eo / alo, 3), "exactly_once_vs_plain": round(eo / plain, 3)}
    if "spark_kafka" in result:
        spark_rate = result["spark_kafka"]["records_per_s"]
        result["ratios"].update(at_least_once_vs_spark_kafka=round(alo / spark_rate, 3),
                                exactly_once_vs_spark_kafka=round(eo / spark_rate, 3))
    if args.json:
        print(json.dumps(result))
    else:
        _print(result, contenders)
    return 0


def _kafka_version() -> str:
    return KAFKA_VERSION


def _print(result: dict, contenders: list[str]) -> None:
    print(f"\n{result['rows_per_batch']:,} records per micro-batch × {result['batches']} measured, "
          f"{result['payload_bytes']} B values, 2 partitions, Kafka {result['kafka_version']}, "
          f"median of {result['repeat']} after {result['warmup_rounds']} warm-up round(s)")
    labels = {"plain": "plain confluent-kafka loop", "sink_write": "kafka-sink write path, no Spark",
              "sink_at_least_once": "kafka-sink at_least_once",
              "sink_exactly_once": "kafka-sink exactly_once", "spark_kafka": "Spark format('kafka')"}
    for kind in contenders:
        r = result[kind]
        cpu = f"  {r['cpu_us_per_record']:.2f} µs CPU/record" if "cpu_us_per_record" in r else ""
        print(f"{labels[kind]:<32} {r['records_per_s']:>12,.0f} records/s {r['mb_per_s']:>8.1f} MB/s{cpu}")
    for name, value in result["ratios"].items():
        print(f"{name:<36} {value:.2f}")
    if result["note"]:
        print("note:", result["note"])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as exc:  # a contender lost or refused records: the figures would be meaningless
        print(f"kafka_sink benchmark failed: {exc}", file=sys.stderr)
        sys.exit(1)
