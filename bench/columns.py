"""Realistic events: impulse's generated columns against bare impulse, dbldatagen, hand-written Spark SQL, and
the ceiling of Spark's Python data source path.

Contenders, each a streaming query into ``noop`` with the same rows per micro-batch and partitions, in one Spark
session, alternating their order round by round (medians over rounds; `impulse_vs_rate.run_query` measures):

- ``columns``: impulse with the reference schema below (``fields.*`` options, ``outOfOrderness=5s``);
- ``bare``: impulse with its default columns (counter, subtask_index, timestamp);
- ``dbldatagen``: dbldatagen's closest spec (no Zipf: ``user_id`` uses its exponential distribution), built on
  ``rate-micro-batch`` instead of its own ``rate`` base (whose rows per micro-batch follow the wall clock), so
  every contender reads exactly the same number of rows per micro-batch;
- ``sql``: ``rate-micro-batch`` plus the ``selectExpr`` a Spark user writes by hand (``rand(seed)``,
  ``randn``, ``pmod(hash(…))``, ``uuid()``; a power of ``rand`` for the skewed ``user_id``);
- ``prebuilt``: a Python source that re-sends one prebuilt Arrow batch of the bare schema (no generation at
  all; `profile_impulse.variant_class`): what Spark's Python data source path itself allows;
- ``prebuilt_columns``: the same for the reference schema (one batch of impulse's own rows, re-sent): what the
  path allows for these columns, generation for free. Its ratio to ``bare`` bounds the first goal for any
  generator written as a Python data source;
- ``ref``: bare impulse plus one ``kind=ref`` column (``pick=recent``, Zipf over the 1000 newest of a
  1000 events/s stream): the cost of a reference column;
- ``changelog``: a changelog stream (``id``, ``op``, ``timestamp``; ``changelog.weights=20,70,10``): the cost
  of computing each event's key and op;
- ``orders``: the README's nested e-commerce order (``ORDERS``: a customer struct with a Faker name and
  e-mail, a shipping address struct of Faker text, 5 % null, 1-5 line items of SKU, quantity and price, a map
  of 0-4 distinct attributes);
- ``prebuilt_orders``: one prebuilt Arrow batch of the same rows re-sent, as ``prebuilt_columns`` (the order
  schema's own ceiling);
- ``dbldatagen_orders``: dbldatagen's nearest equivalent: its ``fakerText`` (a Faker call per value, in a
  pandas UDF) for the text, ``withStructColumn`` for the structs, SQL expressions for the line items and
  attributes (dbldatagen has no generator for arrays of structs or maps).

The reference schema: ``event_id`` sequence; ``user_id`` BIGINT zipf (cardinality 1M, exponent 1.1);
``amount`` DOUBLE normal (50, 15, min 0); ``country`` STRING values US,DE,FR,IN,BR weights 40,15,15,20,10;
``device`` STRING values ios,android,web; ``session`` uuid; ``is_promo`` BOOLEAN probability 0.1;
``coupon`` STRING length 8, nullRate 0.9; ``timestamp`` with outOfOrderness 5s. Columns without nulls are
declared NOT NULL, as a user who knows them would (Spark then skips a null check per value).

Goals: columns ≥ 0.8× bare; bare ≥ 0.95× prebuilt; columns ≥ 5× dbldatagen; columns ≥ 1.0× sql; orders ≥ 0.8×
prebuilt_orders. Also shown,
without a target: prebuilt_columns / bare (the first goal's ceiling), columns / prebuilt_columns (what
generation costs), ref / bare and changelog / bare (the CPU per million rows shows their cost in ms), orders /
dbldatagen_orders.

Example::

    python bench/columns.py --rows-per-batch 1000000 --batches 5 --rounds 3 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import impulse_vs_rate as bench  # noqa: E402  (a sibling script: its folder is on sys.path; sets PYSPARK_PYTHON)
from pyspark import cloudpickle

import profile_impulse

SCHEMA = ("event_id BIGINT NOT NULL, user_id BIGINT NOT NULL, amount DOUBLE NOT NULL, country STRING NOT NULL, "
          "device STRING NOT NULL, session STRING NOT NULL, is_promo BOOLEAN NOT NULL, coupon STRING, "
          "timestamp TIMESTAMP NOT NULL")
FIELDS = {
    "fields.event_id.kind": "sequence",
    "fields.user_id.kind": "zipf", "fields.user_id.cardinality": "1000000", "fields.user_id.exponent": "1.1",
    "fields.amount.kind": "normal", "fields.amount.mean": "50", "fields.amount.stddev": "15", "fields.amount.min": "0",
    "fields.country.kind": "values", "fields.country.values": "US,DE,FR,IN,BR",
    "fields.country.weights": "40,15,15,20,10",
    "fields.device.kind": "values", "fields.device.values": "ios,android,web",
    "fields.session.kind": "uuid",
    "fields.is_promo.kind": "random", "fields.is_promo.probability": "0.1",
    "fields.coupon.kind": "random", "fields.coupon.length": "8", "fields.coupon.nullRate": "0.9",
    "outOfOrderness": "5s",
}
SQL = [
    "value AS event_id",
    "CAST(floor(1000000 * pow(rand(1), 4)) AS BIGINT) AS user_id",
    "greatest(0D, 50D + 15D * randn(2)) AS amount",
    "CASE WHEN r < 0.40 THEN 'US' WHEN r < 0.55 THEN 'DE' WHEN r < 0.70 THEN 'FR' WHEN r < 0.90 THEN 'IN' "
    "ELSE 'BR' END AS country",
    "element_at(array('ios', 'android', 'web'), CAST(pmod(hash(value, 4), 3) AS INT) + 1) AS device",
    "uuid() AS session",
    "rand(5) < 0.1 AS is_promo",
    "CASE WHEN rand(6) < 0.9 THEN NULL ELSE substring(sha2(CAST(value AS STRING), 256), 1, 8) END AS coupon",
    "timestamp - make_dt_interval(0, 0, 0, rand(7) * 5) AS timestamp",
]
REF = ("counter BIGINT NOT NULL, subtask_index BIGINT NOT NULL, timestamp TIMESTAMP NOT NULL, "
       "customer_id BIGINT NOT NULL", {
           "fields.customer_id.kind": "ref", "fields.customer_id.refEventsPerSecond": "1000",
           "fields.customer_id.pick": "recent", "fields.customer_id.cardinality": "1000"})
CHANGELOG = ("id BIGINT NOT NULL, op STRING NOT NULL, timestamp TIMESTAMP NOT NULL",
             {"changelog.key": "id", "changelog.weights": "20,70,10"})
ORDERS = ("order_id BIGINT NOT NULL, customer STRUCT<name: STRING, email: STRING>, "
          "shipping STRUCT<street: STRING, city: STRING, postcode: STRING, country: STRING>, "
          "items ARRAY<STRUCT<sku: STRING, quantity: INT, price: DECIMAL(10,2)>>, "
          "attributes MAP<STRING, STRING>, timestamp TIMESTAMP", {
              "seed": "11", "fields.order_id.kind": "sequence",
              **{f"fields.{path}.{p}": v for path, provider in (
                  ("customer.name", "name"), ("customer.email", "email"), ("shipping.street", "street_address"),
                  ("shipping.city", "city"), ("shipping.postcode", "postcode"))
                 for p, v in (("kind", "faker"), ("provider", provider))},
              "fields.shipping.country.kind": "values", "fields.shipping.country.values": "US",
              "fields.shipping.nullRate": "0.05",
              "fields.items.minLength": "1", "fields.items.maxLength": "5",
              "fields.items.element.sku.kind": "zipf", "fields.items.element.sku.cardinality": "5000",
              "fields.items.element.sku.format": "SKU-{:05d}",
              "fields.items.element.quantity.min": "1", "fields.items.element.quantity.max": "3",
              "fields.items.element.price.kind": "exponential", "fields.items.element.price.mean": "25",
              "fields.attributes.key.kind": "values", "fields.attributes.key.values": "channel,device,coupon,gift_wrap",
              "fields.attributes.value.kind": "values", "fields.attributes.value.values": "web,app,yes,no"})
CONTENDERS = ("columns", "bare", "dbldatagen", "sql", "prebuilt", "prebuilt_columns", "ref", "changelog", "orders",
              "prebuilt_orders", "dbldatagen_orders")
GOALS = (("columns", "bare", 0.8), ("bare", "prebuilt", 0.95), ("columns", "dbldatagen", 5.0), ("columns", "sql", 1.0),
         ("orders", "prebuilt_orders", 0.8))
RATIOS = (("prebuilt_columns", "bare"), ("columns", "prebuilt_columns"), ("ref", "bare"),
          ("changelog", "bare"), ("orders", "dbldatagen_orders"))  # shown, no target


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rows-per-batch", type=int, default=1_000_000, help="rows per micro-batch, every contender")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of every contender")
    parser.add_argument("--warmup-batches", type=int, default=2, help="micro-batches skipped at the start of a query")
    parser.add_argument("--batches", type=int, default=5, help="measured micro-batches per query")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every contender once")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory")
    parser.add_argument("--timeout-s", type=float, default=900, help="give up on one query after this many seconds")
    parser.add_argument("--only", action="append", choices=CONTENDERS, help="run these contenders only (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    return parser.parse_args(argv)


def frames(spark, args) -> dict:
    """A function per contender that returns its streaming DataFrame."""
    rows, parts = args.rows_per_batch, args.partitions
    impulse = {"delay": "1us", "startTime": "0", "numPartitions": str(parts), "maxEventsPerTrigger": str(rows)}

    def rate():
        return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows)
                .option("numPartitions", parts).load())

    def prebuilt(schema: str | None = None, fields: dict | None = None):
        cloudpickle.register_pickle_by_value(profile_impulse)  # executors import bench/ modules by value
        spark.dataSource.register(profile_impulse.variant_class("prebuilt", prebuilt=True))
        reader = spark.readStream.format("prebuilt").options(**impulse)
        return (reader.schema(schema).options(**fields) if schema else reader).load()

    return {
        "columns": lambda: spark.readStream.format("impulse").schema(SCHEMA).options(**impulse, **FIELDS).load(),
        "bare": lambda: spark.readStream.format("impulse").options(**impulse).load(),
        "dbldatagen": lambda: dbldatagen_frame(spark, rate, parts),
        "sql": lambda: rate().selectExpr("*", "rand(3) AS r").selectExpr(*SQL),
        "prebuilt": prebuilt,
        "prebuilt_columns": lambda: prebuilt(SCHEMA, FIELDS),
        "ref": lambda: spark.readStream.format("impulse").schema(REF[0]).options(**impulse, **REF[1]).load(),
        "changelog": lambda: (spark.readStream.format("impulse").schema(CHANGELOG[0])
                              .options(**impulse, **CHANGELOG[1]).load()),
        "orders": lambda: spark.readStream.format("impulse").schema(ORDERS[0]).options(**impulse, **ORDERS[1]).load(),
        "prebuilt_orders": lambda: prebuilt(*ORDERS),
        "dbldatagen_orders": lambda: dbldatagen_orders(spark, rate, parts),
    }


def dbldatagen_frame(spark, rate, partitions: int):
    """dbldatagen's spec for the reference schema, on a `rate-micro-batch` base (see the module docstring)."""
    import dbldatagen as dg

    spec = (dg.DataGenerator(spark, name="reference", rows=10 ** 12, partitions=partitions, randomSeed=42)
            .withColumn("event_id", "long", expr="id")
            .withColumn("user_id", "long", minValue=0, maxValue=999_999, random=True,
                        distribution=dg.distributions.Exponential(1.5))
            .withColumn("amount", "double", minValue=0.0, maxValue=200.0, random=True,
                        distribution=dg.distributions.Normal(50.0, 15.0))
            .withColumn("country", "string", values=["US", "DE", "FR", "IN", "BR"], weights=[40, 15, 15, 20, 10],
                        random=True)
            .withColumn("device", "string", values=["ios", "android", "web"], random=True)
            .withColumn("session", "string", expr="uuid()")
            .withColumn("is_promo", "boolean", expr="rand(5) < 0.1")
            .withColumn("coupon", "string", template=r"\\w\\w\\w\\w\\w\\w\\w\\w", percentNulls=0.9, random=True)
            .withColumn("ts", "timestamp", expr="current_timestamp()"))
    spec._getBaseDataFrame = lambda start_id, streaming, options: rate().withColumnRenamed("value", "id")
    return spec.build(withStreaming=True, options={})


def dbldatagen_orders(spark, rate, partitions: int):
    """dbldatagen's nearest equivalent of `ORDERS`, on a `rate-micro-batch` base (see the module docstring)."""
    import dbldatagen as dg

    item = ("named_struct('sku', format_string('SKU-%05d', CAST(pmod(hash(id, i, 1), 5000) AS INT)), "
            "'quantity', 1 + CAST(pmod(hash(id, i, 2), 3) AS INT), "
            "'price', CAST(-25 * ln(1 - pmod(hash(id, i, 3), 1000000) / 1000000D) AS DECIMAL(10,2)))")
    spec = (dg.DataGenerator(spark, name="orders", rows=10 ** 12, partitions=partitions, randomSeed=11)
            .withColumn("order_id", "long", expr="id")
            .withColumn("name", "string", text=dg.fakerText("name"), omit=True)
            .withColumn("email", "string", text=dg.fakerText("email"), omit=True)
            .withColumn("street", "string", text=dg.fakerText("street_address"), omit=True)
            .withColumn("city", "string", text=dg.fakerText("city"), omit=True)
            .withColumn("postcode", "string", text=dg.fakerText("postcode"), omit=True)
            .withColumn("country", "string", values=["US"], omit=True)
            .withStructColumn("customer", fields=["name", "email"])
            .withStructColumn("shipping_fields", fields=["street", "city", "postcode", "country"], omit=True)
            .withColumn("shipping", "struct<street:string,city:string,postcode:string,country:string>",
                        expr="CASE WHEN rand(8) < 0.05 THEN NULL ELSE shipping_fields END",
                        baseColumn="shipping_fields")
            .withColumn("items", "array<struct<sku:string,quantity:int,price:decimal(10,2)>>",
                        expr=f"transform(sequence(1, 1 + CAST(pmod(hash(id, 0), 5) AS INT)), i -> {item})")
            .withColumn("attribute_keys", "array<string>", omit=True,
                        expr="slice(shuffle(array('channel', 'device', 'coupon', 'gift_wrap')), 1, "
                             "CAST(pmod(hash(id, 9), 5) AS INT))")
            .withColumn("attributes", "map<string,string>", baseColumn="attribute_keys",
                        expr="map_from_arrays(attribute_keys, transform(attribute_keys, k -> "
                             "element_at(array('web', 'app', 'yes', 'no'), 1 + CAST(pmod(hash(id, k), 4) AS INT))))")
            .withColumn("ts", "timestamp", expr="current_timestamp()"))
    spec._getBaseDataFrame = lambda start_id, streaming, options: rate().withColumnRenamed("value", "id")
    return spec.build(withStreaming=True, options={})


def main(argv=None) -> int:
    args = parse_args(argv)
    names = args.only or list(CONTENDERS)
    spark = bench.make_session(args)
    build = frames(spark, args)
    try:
        results, errors = bench.alternating_rounds(spark, args, build, names)
    finally:
        spark.stop()
    summary = summarise(args, results, errors)
    print(json.dumps(summary, indent=2) if args.json else report(summary))
    return 1 if errors else 0


def summarise(args, results: dict[str, list[dict]], errors: int) -> dict:
    medians = {n: statistics.median(r["rows_per_s"] for r in runs) for n, runs in results.items() if runs}
    goals = [{"goal": f"{a} >= {want}x {b}", "ratio": medians[a] / medians[b], "met": medians[a] / medians[b] >= want}
             for a, b, want in GOALS if a in medians and b in medians]
    ratios = [{"ratio_of": f"{a} / {b}", "ratio": medians[a] / medians[b]} for a, b in RATIOS
              if a in medians and b in medians]
    return {"rows_per_batch": args.rows_per_batch, "partitions": args.partitions, "batches": args.batches,
            "rounds": args.rounds, "master": args.master, "errors": errors,
            "rows_per_s_median": medians, "rows_per_s": {n: [r["rows_per_s"] for r in runs] for n, runs in results.items()},
            "cpu_s_per_million_rows_median": {n: statistics.median(r["cpu_s_per_million_rows"] for r in runs)
                                              for n, runs in results.items() if runs},
            "cpu_s_per_million_rows_by_part_median": {
                n: {part: statistics.median(r["cpu_s_per_million_rows_by_part"][part] for r in runs)
                    for part in runs[0]["cpu_s_per_million_rows_by_part"]} for n, runs in results.items() if runs},
            "goals": goals, "ratios": ratios}


def report(summary: dict) -> str:
    lines = [f"{summary['rows_per_batch']:,} rows per micro-batch, {summary['partitions']} partitions, "
             f"{summary['batches']} measured micro-batches x {summary['rounds']} rounds, noop sink, {summary['master']}"]
    for name, rate in summary["rows_per_s_median"].items():
        cpu = summary["cpu_s_per_million_rows_median"][name]
        parts = ", ".join(f"{k} {v * 1000:.0f}" for k, v in summary["cpu_s_per_million_rows_by_part_median"][name].items())
        lines.append(f"  {name:10s} {rate / 1e6:6.2f} M rows/s  CPU {cpu * 1000:5.0f} ms per million rows ({parts})")
    for goal in summary["goals"]:
        lines.append(f"  {goal['goal']:28s} {goal['ratio']:.2f}  {'met' if goal['met'] else 'NOT met'}")
    for ratio in summary["ratios"]:
        lines.append(f"  {ratio['ratio_of']:28s} {ratio['ratio']:.2f}")
    if summary["errors"]:
        lines.append(f"  {summary['errors']} run(s) failed")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
