"""Record-format encoders over the same rows, without Spark: `sinks.kafka.formats.encode_batch` (Arrow batch →
framed records) for avro (flat: columnar; nested: fastavro per row) / protobuf / json-schema, against a plain
confluent-kafka `AvroSerializer` loop per row (dicts prebuilt, not timed) over the same rows; the first 100
records of each Avro pair are checked byte for byte. A Schema Registry is started here (Apicurio, `connectors.servers`) unless
`--registry URL` names one. Rounds alternate; medians of rows/s are printed (and JSON with `--json`).

    python bench/kafka_formats.py --rows 200000 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import decimal
import json
import statistics
import sys
import time
import uuid

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (DecimalType, DoubleType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from connectors.servers import SchemaRegistry
from sinks.kafka.formats import encode_batch, registry_options, resolve_encoding

SCHEMA = StructType([
    StructField("id", LongType(), False),
    StructField("user", StringType(), True),
    StructField("amount", DecimalType(12, 2), True),
    StructField("ts", TimestampType(), False),
    StructField("score", DoubleType(), True),
    StructField("count", IntegerType(), False),
    StructField("country", StringType(), False),
])


def make_batch(rows: int) -> pa.RecordBatch:
    """Deterministic rows (seed 0): ids, 12-character user names with 1 % nulls, cents, microsecond timestamps."""
    rng = np.random.default_rng(0)
    users = np.char.add("user-", (rng.integers(0, 10**7, rows)).astype(str))
    users = pa.array(users, pa.string(), mask=rng.random(rows) < 0.01)
    cents = [decimal.Decimal(int(c)).scaleb(-2) for c in rng.integers(0, 10**9, rows)]
    ts = pa.array(1_780_000_000_000_000 + np.arange(rows, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC"))
    columns = [pa.array(np.arange(rows, dtype=np.int64)), users,
               pa.array(cents, pa.decimal128(12, 2)),
               ts, pa.array(rng.random(rows)), pa.array(rng.integers(0, 1000, rows, dtype=np.int32)),
               pa.array(rng.choice(["CH", "DE", "FR", "US"], rows))]
    return pa.RecordBatch.from_arrays(columns, schema=to_arrow_schema(SCHEMA, timezone="UTC"))


NESTED = StructType([StructField("id", LongType(), False), StructField("order", SCHEMA, True)])


def nest(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The same rows with every column but `id` inside one STRUCT column: the row-by-row (fastavro) path."""
    inner = pa.StructArray.from_arrays(batch.columns, names=batch.schema.names)
    return pa.RecordBatch.from_arrays([batch.column(0), inner], schema=to_arrow_schema(NESTED, timezone="UTC"))


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--registry", help="a running registry's Confluent API URL (default: start one here)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    with contextlib.ExitStack() as stack:
        url = args.registry or stack.enter_context(SchemaRegistry()).url
        batch = make_batch(args.rows)
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        options = registry_options({"schema.registry.url": url})
        specs = {fmt: resolve_encoding(fmt, SCHEMA, topic + "-" + fmt, options) for fmt in
                 ("avro", "protobuf", "json-schema")}
        nested, nested_spec = nest(batch), resolve_encoding("avro", NESTED, topic + "-nested", options)
        client = SchemaRegistryClient({"url": url})
        serializer = AvroSerializer(client, specs["avro"].schema)
        nested_serializer = AvroSerializer(client, nested_spec.schema)
        ctx = SerializationContext(topic + "-avro", MessageField.VALUE)
        nested_ctx = SerializationContext(topic + "-nested", MessageField.VALUE)
        dicts, nested_dicts = batch.to_pylist(), nested.to_pylist()
        contenders = {
            "encode_batch avro": lambda: encode_batch(batch, specs["avro"]),
            "AvroSerializer loop": lambda: [serializer(row, ctx) for row in dicts],
            "encode_batch avro nested": lambda: encode_batch(nested, nested_spec),
            "AvroSerializer loop nested": lambda: [nested_serializer(row, nested_ctx) for row in nested_dicts],
            "encode_batch protobuf": lambda: encode_batch(batch, specs["protobuf"]),
            "encode_batch json-schema": lambda: encode_batch(batch, specs["json-schema"]),
        }
        # the same bytes from both Avro contenders (same schema id, same payload): a check, not timed
        ours = encode_batch(batch.slice(0, 100), specs["avro"]).to_pylist()
        theirs = [serializer(row, ctx) for row in dicts[:100]]
        ours += encode_batch(nested.slice(0, 100), nested_spec).to_pylist()
        theirs += [nested_serializer(row, nested_ctx) for row in nested_dicts[:100]]
        if ours != theirs:
            print("encode_batch avro and AvroSerializer disagree", file=sys.stderr)
            return 1
        rates: dict[str, list[float]] = {name: [] for name in contenders}
        for r in range(args.rounds):
            order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
            for name in order:
                seconds, out = timed(contenders[name])
                assert len(out) == args.rows
                rates[name].append(args.rows / seconds)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, value in medians.items():
        print(f"{name:28s} {value:12,.0f} rows/s")
    for suffix in ("", " nested"):
        print(f"ratio encode_batch avro{suffix} / AvroSerializer loop{suffix}: "
              f"{medians['encode_batch avro' + suffix] / medians['AvroSerializer loop' + suffix]:.2f}x")
    if args.json:
        print(json.dumps({"rows": args.rows, "rounds": args.rounds, "rows_per_s": medians,
                          "when": dt.datetime.now(dt.timezone.utc).isoformat()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
