"""A Kafka topic as a source to profile: ``kafka://HOST:PORT/TOPIC`` with JSON values, or values in Confluent's
wire format decoded through the Schema Registry (Avro, JSON Schema, Protobuf: `impulse.profile.registry`).

The sample is the topic's first N records, deterministically: each partition read from its earliest offset
(Spark's Kafka batch source, bounded by the offsets at the read), its records ranked by offset, and the first
N taken in (rank, partition) order — round-robin over the partitions, so records appended later never change
it.

When the sample's values are framed (magic byte 0, a schema id), the registry options
(``-o schema.registry.url=URL``, ``schema.registry.basic.auth.user.info``, ``schema.registry.ssl.ca.location``…,
as kafka-sink names them) are required (else ``OptionError`` naming ``schema.registry.url``), framed and plain
values may not be mixed, and Avro and Protobuf values become the rows of the newest schema id's Spark schema
(`impulse.profile.protobuf` for Protobuf); a JSON Schema value's payload is read as a plain JSON value is.

Otherwise each value is a JSON document; its schema is inferred by Spark's JSON reader over the sampled values
(nested objects become STRUCTs, arrays ARRAYs; keys in Spark's order) and the values parsed with it. The
record's own key, offset and Kafka timestamp are not profiled.

It needs Spark's Kafka connector on the session's class path (`impulse.session.make_session` with ``kafka``;
the command starts its session so) and a classic session (the schema inference reads an RDD of the values).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from connectors.errors import OptionError
from impulse.profile import protobuf, registry

__all__ = ["parse", "read", "is_topic"]

_URL = re.compile(r"^kafka://(?P<servers>[^/\s]+)/(?P<topic>[^/\s]+)$")


def is_topic(text: str) -> bool:
    """Whether a PATH argument names a Kafka topic."""
    return text.startswith("kafka://")


def parse(url: str) -> tuple[str, str]:
    """``kafka://HOST:PORT/TOPIC`` → (bootstrap servers, topic); raises `OptionError` naming the PATH."""
    match = _URL.match(url)
    if match is None:
        raise OptionError("PATH", url, "kafka://HOST:PORT/TOPIC (one topic; several brokers comma-separated)")
    return match["servers"], match["topic"]


def read(spark: SparkSession, url: str, sample: int, options: dict[str, str]) -> DataFrame:
    """The first `sample` records of the topic, their values decoded (module docstring). `options`: more
    options of Spark's Kafka source (``kafka.security.protocol``, …) and the ``schema.registry.*`` options.
    Raises `OptionError` for an unreachable topic, values that are not JSON objects, framed values it cannot
    decode (the module docstring's refusals)."""
    servers, topic = parse(url)
    conf = registry.registry_conf(options)
    options = {k: v for k, v in options.items() if not k.lower().startswith("schema.registry.")}
    try:
        records = (spark.read.format("kafka").options(**options).option("kafka.bootstrap.servers", servers)
                   .option("subscribe", topic).option("startingOffsets", "earliest")
                   .option("endingOffsets", "latest").load())
        ranked = records.select(
            "partition", F.row_number().over(Window.partitionBy("partition").orderBy("offset")).alias("rank"),
            "value")
        values = ranked.where(F.col("rank") <= sample).orderBy("rank", "partition").limit(sample).select("value")
        values = values.cache()
        if not values.limit(1).collect():
            raise OptionError("PATH", url, "a topic with records: it is empty")
        ids, plain = registry.framed_ids(values)
        if ids:
            values, decode = _unframe(values, url, ids, plain, conf)
            if decode is not None:
                return decode().cache()
        values = values.select(F.col("value").cast("string").alias("value"))
        schema = spark.read.json(values.rdd.map(lambda row: row[0] or "")).schema
    except PySparkException as err:
        raise OptionError("PATH", url, f"a Kafka topic Spark can read ({str(err).splitlines()[0]})") from None
    if "_corrupt_record" in schema.fieldNames() or not schema.fields:
        raise OptionError("PATH", url, "a topic whose values are JSON objects (some are not)")
    return values.select(F.from_json("value", schema).alias("v")).select("v.*")


def _unframe(values: DataFrame, url: str, ids: list[int], plain: int,
             conf: dict[str, str]) -> tuple[DataFrame, Callable[[], DataFrame] | None]:
    """Framed values: (the values, their decoding) for Avro and Protobuf; (the JSON payloads, None) for JSON
    Schema. ``OptionError`` without ``schema.registry.url``, for a mix of framed and plain values or of several
    schema types."""
    registry.check_framing(url, ids, plain, conf)
    found = registry.schemas(url, conf, ids)
    types = sorted({kind for kind, _ in found.values()})
    texts = {i: text for i, (_, text) in found.items()}
    if types == ["AVRO"]:
        return values, lambda: registry.decode_avro(values, url, texts)
    if types == ["PROTOBUF"]:
        return values, lambda: protobuf.decode_protobuf(values, url, texts)
    if types == ["JSON"]:
        return values.select(F.expr("substring(value, 6)").alias("value")), None
    raise OptionError("PATH", url, f"a topic whose values are of one schema type (schema ids {ids} are {types})")
