"""A topic's values in Confluent's wire format (magic byte 0, a 4-byte big-endian schema id, the payload),
decoded through the Schema Registry for `impulse.profile.topic`.

The registry is asked on the driver, once per schema id found in the sample (``schema.registry.url`` and every
``schema.registry.<name>`` option, as kafka-sink takes them: ``basic.auth.user.info``, ``ssl.ca.location``…).

- **Avro**: the sample's Spark schema is the newest id's schema (the greatest id seen), mapped as kafka-sink maps
  the other way (`sinks.kafka.formats.schemas`; also ``timestamp-millis``, ``enum`` → STRING, ``fixed`` → BINARY).
  Each record is decoded on the executors with its own writer schema resolved to that one (Avro's schema
  evolution), with fastavro, a batch at a time into Arrow. Records whose schema cannot be resolved to the newest
  are refused, naming the topic and both ids (checked on the driver, one record of each id, before any decoding).
- **JSON Schema**: the payload is a JSON document; the caller parses it as it parses plain JSON values.
- **Protobuf**: decoded by `impulse.profile.protobuf` (the newest id's first message).

Needs the ``avro`` extra (confluent-kafka's registry client, fastavro), imported when a framed value is found.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from connectors.env import resolve_env
from connectors.errors import OptionError, SinkError

__all__ = ["URL_OPTION", "avro_spark_type", "check_framing", "decode_avro", "framed_ids", "is_framed",
           "registry_conf", "schemas"]

URL_OPTION = "schema.registry.url"
_PREFIX = "schema.registry."
_PRIMITIVE: dict[str, DataType] = {"boolean": BooleanType(), "int": IntegerType(), "long": LongType(),
                                   "float": FloatType(), "double": DoubleType(), "string": StringType(),
                                   "bytes": BinaryType(), "enum": StringType(), "fixed": BinaryType()}
_LOGICAL: dict[str, DataType] = {"date": DateType(), "timestamp-millis": TimestampType(),
                                 "timestamp-micros": TimestampType(), "local-timestamp-millis": TimestampNTZType(),
                                 "local-timestamp-micros": TimestampNTZType()}


def is_framed() -> Any:
    """A column expression: whether the record's ``value`` (BINARY) is in Confluent's wire format. A JSON
    document never starts with the byte 0."""
    return (F.length("value") >= 5) & (F.substring("value", 1, 1) == F.unhex(F.lit("00")))


def schema_id() -> Any:
    """A column expression: the schema id of a framed ``value`` (bytes 2-5, big-endian), as a LONG."""
    return F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("long")


def record_schema_id(record: bytes) -> int:
    """The schema id of one framed record (bytes 2-5, big-endian): `schema_id` for a task's Python rows."""
    return int.from_bytes(record[1:5], "big")


def arrow_schema(struct: StructType) -> pa.Schema:
    """`struct` as Arrow's schema, TIMESTAMP as UTC timestamps (as the decoders give them)."""
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415 - pyspark's Arrow helpers, needs pyarrow

    try:
        return to_arrow_schema(struct, timezone="UTC")
    except TypeError:  # a PySpark whose helper has no timezone argument: it always uses UTC
        return to_arrow_schema(struct)


def framed_ids(values: DataFrame) -> tuple[list[int], int]:
    """(the schema ids of the framed values, sorted; how many values are not framed), by one small aggregate."""
    counted = (values.select(F.when(is_framed(), schema_id()).alias("id"))
               .groupBy("id").count().collect())
    ids = sorted(row["id"] for row in counted if row["id"] is not None)
    return ids, sum(row["count"] for row in counted if row["id"] is None)


def check_framing(url: str, ids: list[int], plain: int, conf: Mapping[str, str]) -> None:
    """Refuse framed values (schema `ids`) of topic `url` that cannot be decoded: ``OptionError`` naming
    ``schema.registry.url`` when `conf` has no URL, naming the topic when `plain` values (not framed) are mixed in."""
    if "url" not in conf:
        raise OptionError(URL_OPTION, None,
                          f"the Schema Registry's URL (-o {URL_OPTION}=URL): the values of {url} are in "
                          f"Confluent's wire format (schema ids {ids})")
    if plain:
        raise OptionError("PATH", url, f"a topic whose values are all in Confluent's wire format or all plain JSON "
                                       f"({plain} of the sample are not framed, the others have schema ids {ids})")


def registry_conf(options: Mapping[str, str]) -> dict[str, str]:
    """The ``SchemaRegistryClient`` configuration of the ``schema.registry.*`` options (``url`` included), each
    ``${ENV:NAME}`` read from the driver's environment. ``OptionError`` naming the option for an unset variable."""
    conf = {}
    for key, value in options.items():
        if key.lower().startswith(_PREFIX):
            try:
                conf[key[len(_PREFIX):]] = resolve_env(value, sink="impulse-profile", what=f"option '{key}'",
                                                       where="the driver")
            except SinkError as exc:
                raise OptionError(key, value, f"a value whose environment variables are set ({exc})") from None
    return conf


def schemas(url: str, conf: Mapping[str, str], ids: list[int]) -> dict[int, tuple[str, str]]:
    """Each id → (its schema type ``AVRO`` | ``JSON`` | ``PROTOBUF``, its schema text: for Protobuf the serialized
    file descriptor, base64), asked from the registry.
    ``OptionError`` naming ``schema.registry.url`` when the registry cannot answer."""
    try:
        from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: PLC0415 - the avro extra
    except ImportError as exc:
        raise OptionError(URL_OPTION, conf.get("url"), "a registry with the 'avro' extra installed: pip install "
                                                       f"'impulse-connectors[avro]' ({exc})") from None
    try:
        client = SchemaRegistryClient(dict(conf))
        found = {i: client.get_schema(i) for i in ids}
        found.update({i: client.get_schema(i, fmt="serialized") for i, schema in found.items()
                      if (schema.schema_type or "").upper() == "PROTOBUF"})  # a descriptor, not .proto text
    except Exception as exc:  # noqa: BLE001 - the client raises its own errors and httpx's; all mean the same here
        raise OptionError(URL_OPTION, conf.get("url"),
                          f"a Schema Registry that knows the schema ids {ids} of topic {url} ({exc})") from None
    return {i: ((s.schema_type or "AVRO").upper(), s.schema_str) for i, s in found.items()}


def avro_spark_type(schema: Any, named: dict[str, Any] | None = None, path: str = "value",
                    namespace: str = "") -> tuple[DataType, bool]:
    """(the Spark type, whether null is allowed) of an Avro schema (parsed JSON). ``ValueError`` naming the path
    for what Spark cannot hold: a union of several non-null types, a recursive record. `named` collects the named
    types met so far (by short and full name), `namespace` is the enclosing one."""
    named = {} if named is None else named
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"{path}: a union of {branches} (only one type besides null can be profiled)")
        return avro_spark_type(branches[0], named, path, namespace)[0], "null" in schema
    if isinstance(schema, str):
        if schema in named:
            if named[schema] is None:
                raise ValueError(f"{path}: the record {schema} contains itself (recursive records are not profiled)")
            return named[schema], False
        if schema not in _PRIMITIVE:
            raise ValueError(f"{path}: the Avro type {schema!r} is not known")
        return _PRIMITIVE[schema], False
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal":
        return DecimalType(schema["precision"], schema.get("scale", 0)), False
    if logical in _LOGICAL:
        return _LOGICAL[logical], False
    if kind == "record":
        names = _names(schema, namespace)
        named.update(dict.fromkeys(names))
        fields = []
        for f in schema["fields"]:
            inner, nullable = avro_spark_type(f["type"], named, f"{path}.{f['name']}", names[1].rpartition(".")[0])
            fields.append(StructField(f["name"], inner, nullable))
        struct = StructType(fields)
        named.update(dict.fromkeys(names, struct))
        return struct, False
    if kind == "array":
        inner, nullable = avro_spark_type(schema["items"], named, f"{path}[]", namespace)
        return ArrayType(inner, nullable), False
    if kind == "map":
        inner, nullable = avro_spark_type(schema["values"], named, f"{path}{{}}", namespace)
        return MapType(StringType(), inner, nullable), False
    if kind in ("enum", "fixed"):
        named.update(dict.fromkeys(_names(schema, namespace), _PRIMITIVE[kind]))
        return _PRIMITIVE[kind], False
    return avro_spark_type(kind, named, path, namespace)


def _names(schema: Mapping[str, Any], namespace: str) -> tuple[str, str]:
    """(short name, full name) of a named type: its own namespace, else the enclosing one (Avro's rule)."""
    name, space = schema["name"], schema.get("namespace", namespace)
    full = f"{space}.{name}" if space and "." not in name else name
    return (name.rsplit(".", 1)[-1], full)


def decode_avro(values: DataFrame, url: str, texts: dict[int, str]) -> DataFrame:
    """The framed Avro `values` (a ``value`` BINARY column) decoded, each with its writer schema resolved to the
    newest one's (module docstring). ``OptionError`` naming the topic `url` for a schema Spark cannot hold or
    a writer schema that does not resolve to the newest."""
    import fastavro  # noqa: PLC0415 - the avro extra

    newest = max(texts)
    try:
        struct = avro_spark_type(json.loads(texts[newest]))[0]
    except ValueError as exc:
        raise OptionError("PATH", url, f"a topic whose Avro schema (id {newest}) Spark can hold: {exc}") from None
    if not isinstance(struct, StructType):
        struct = StructType([StructField("value", struct, True)])
        wrap = True
    else:
        wrap = False
    firsts = (values.select(schema_id().alias("id"), "value")
              .groupBy("id").agg(F.min("value").alias("value")).collect())
    reader = fastavro.parse_schema(json.loads(texts[newest]))
    for row in firsts:
        try:
            fastavro.schemaless_reader(io.BytesIO(bytes(row["value"])[5:]),
                                       fastavro.parse_schema(json.loads(texts[row["id"]])), reader)
        except Exception as exc:  # noqa: BLE001 - fastavro's resolution and decoding errors alike
            raise OptionError("PATH", url, f"records whose schema id {row['id']} resolves to the newest id "
                                           f"{newest} of the sample ({type(exc).__name__}: {exc})") from None
    return values.select("value").mapInArrow(_decoder(texts, newest, struct, wrap), struct)


def _decoder(texts: dict[int, str], newest: int, struct: StructType, wrap: bool):
    """The function each task runs: Arrow batches of framed values → Arrow batches of decoded rows."""
    arrow = arrow_schema(struct)

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import fastavro  # noqa: PLC0415 - the avro extra, on the executors

        parsed = {i: fastavro.parse_schema(json.loads(t)) for i, t in texts.items()}
        for batch in batches:
            rows = []
            for record in batch.column(0).to_pylist():
                value = fastavro.schemaless_reader(io.BytesIO(record[5:]), parsed[record_schema_id(record)],
                                                   parsed[newest])
                rows.append({"value": value} if wrap else value)
            yield pa.RecordBatch.from_pylist(rows, schema=arrow)

    return decode
