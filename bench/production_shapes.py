"""Data as production delivers it, without Spark: what Debezium envelopes, redelivered duplicates and Poisson
arrivals cost the impulse source's generation (`impulse.events.event_batches`, rows/s of one partition), and what
kafka-sink's ``debezium-json`` encoding costs against raw JSON (``connectors.rows.json_objects``, the sink's row
JSON) for the same changes. Rounds alternate the contenders; medians of rows/s are printed (JSON with ``--json``).

    python bench/production_shapes.py --rows 1000000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType, TimestampType

from connectors.rows import json_objects
from impulse.debezium import SOURCE_FIELDS
from impulse.events import EventLayout, event_batches
from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from impulse.schema import row_spec
from sinks.kafka.formats.debezium import encode_json, json_spec

IMAGE = StructType([StructField("id", LongType()), StructField("name", StringType()), StructField("balance", DoubleType())])
PLAIN = StructType([StructField("id", LongType()), StructField("op", StringType()), StructField("name", StringType()),
                    StructField("balance", DoubleType()), StructField("timestamp", TimestampType())])
ENVELOPE = StructType([
    StructField("key", StructType([StructField("id", LongType(), False)]), False), StructField("before", IMAGE),
    StructField("after", IMAGE), StructField("op", StringType(), False), StructField("ts_ms", LongType(), False),
    StructField("source", StructType([StructField(n, LongType() if t == "BIGINT" else StringType(), False)
                                      for n, t in SOURCE_FIELDS]), False)])
BASE = {"eventsPerSecond": "1000000", "numPartitions": "1"}


def layout(options: dict, schema: StructType | None) -> EventLayout:
    opts = ImpulseOptions.from_options({**BASE, **options})
    rows = row_spec(schema, opts.fields, seed=0, payload_bytes=0, changelog=opts.changelog, debezium=opts.debezium)
    schedule = Schedule(0, opts.delay_us, 0, None, opts.seed if opts.poisson else None)
    return EventLayout(0, schedule, 0, None, 0, rows, 1, None, opts.duplicates)


CHANGELOG = {"changelog.key": "id", "changelog.liveKeys": "1024", "fields.balance.kind": "normal",
             "fields.balance.mean": "100"}
GENERATION = {
    "uniform (default columns)": layout({}, None),
    "arrival=poisson": layout({"arrival": "poisson"}, None),
    "duplicateRate=0.05, duplicateDelay=1ms": layout({"duplicateRate": "0.05", "duplicateDelay": "1ms"}, None),
    "changelog (id, op, name, balance, timestamp)": layout(CHANGELOG, PLAIN),
    "changelog.envelope=debezium (same image)": layout({**CHANGELOG, "changelog.envelope": "debezium"}, ENVELOPE),
}


def generate(name: str, rows: int) -> float:
    start = time.perf_counter()
    made = sum(b.num_rows for b in event_batches(0, 0, rows, GENERATION[name]))
    return made / (time.perf_counter() - start)


def encoders(rows: int) -> dict:
    plain = list(event_batches(0, 0, rows, GENERATION["changelog (id, op, name, balance, timestamp)"]))
    envelope = list(event_batches(0, 0, rows, GENERATION["changelog.envelope=debezium (same image)"]))
    wrapped, bare = json_spec(ENVELOPE, "bank.accounts", True), json_spec(ENVELOPE, "bank.accounts", False)
    return {"raw JSON (json_objects of the changelog row)": lambda: [json_objects(b) for b in plain],
            "debezium-json, schemas.enable=false": lambda: [encode_json(b, bare) for b in envelope],
            "debezium-json, schemas.enable=true": lambda: [encode_json(b, wrapped) for b in envelope]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {}
    encode = encoders(args.rows)
    for round_ in range(args.rounds):
        names = list(GENERATION) if round_ % 2 == 0 else list(reversed(GENERATION))
        for name in names:
            rates.setdefault(name, []).append(generate(name, args.rows))
        for name in (list(encode) if round_ % 2 == 0 else list(reversed(encode))):
            start = time.perf_counter()
            encode[name]()
            rates.setdefault(name, []).append(args.rows / (time.perf_counter() - start))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    if args.json:
        print(json.dumps(medians, indent=1))
        return
    for name, rate in medians.items():
        print(f"{name:50s} {rate:14,.0f} rows/s")
    uniform, raw = medians["uniform (default columns)"], medians["raw JSON (json_objects of the changelog row)"]
    for name in ("arrival=poisson", "duplicateRate=0.05, duplicateDelay=1ms"):
        print(f"{name} / uniform: {medians[name] / uniform:.2f}×")
    print(f"envelope / changelog generation: {medians['changelog.envelope=debezium (same image)'] / medians['changelog (id, op, name, balance, timestamp)']:.2f}×")
    for name in ("debezium-json, schemas.enable=false", "debezium-json, schemas.enable=true"):
        print(f"{name} / raw JSON: {medians[name] / raw:.2f}×")


if __name__ == "__main__":
    main()
