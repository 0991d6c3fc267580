"""What the Kafka sink encodes as a record's value and key, and how: the ``value.format`` / ``key.format``
options, the driver's Schema Registry calls (once per query start, in the writer build) and the executors'
encoding of an Arrow record batch with the `EncodingSpec` the driver resolved.

What is encoded, for a side whose format is not ``raw``: its column (``value`` / ``key``) when it is a STRUCT,
else (value only) every column that is not a Kafka column (`KAFKA_COLUMNS`) as one record. A row that does not
fit an explicit schema (``value.schema`` / ``key.schema``) is *unfit*: its record is kept as the row's JSON, with
the reason, for the sink's dead-letter path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from connectors.errors import OptionError, SinkError
from connectors.options import OptionReader
from connectors.rows import json_objects
from sinks.kafka.formats import (
    FORMATS,
    REGISTRY_FORMATS,
    EncodingSpec,
    RecordEncodeError,
    SchemaMappingError,
    encode_batch,
)
from sinks.kafka.formats.debezium import DEBEZIUM_FORMATS, VALUE_COLUMNS, DebeziumJson, check_envelope, json_spec
from sinks.kafka.formats.registry import STRATEGIES, registry_options, resolve_encoding

__all__ = ["KAFKA_COLUMNS", "SideEncoding", "Encodings", "read_formats", "resolve", "encode_side", "UNFIT"]

#: Columns that set a record's Kafka fields rather than its value (``timestamp`` only next to a ``value`` column)
KAFKA_COLUMNS = ("key", "topic", "partition", "headers")
#: The error code of a dead letter whose row does not fit the schema
UNFIT = "SCHEMA_MISMATCH"

_SIDES = ("value", "key")
_EXTRAS = {"avro": "avro", "protobuf": "protobuf", "json-schema": "jsonschema"}  # setup.cfg's extra of each format
_REGISTRY_OPTIONS = ("schema.registry.url", "auto.register.schemas", "use.latest.version",
                     "value.subject.name.strategy", "key.subject.name.strategy", "value.schema", "key.schema")


@dataclass(frozen=True)
class SideEncoding:
    """How one side (``value`` or ``key``) of every record is made: `spec` over the side's STRUCT column
    (`fields` is None) or over the columns `fields` of the batch, as one record a row."""

    side: str
    spec: EncodingSpec
    fields: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Encodings:
    """The sink's encodings; None for a ``raw`` side (the column as is, or the row as JSON). ``debezium-json``
    writes both sides with `debezium` (`sinks.kafka.formats.debezium`); `tombstones`: a null-valued record after each
    Debezium delete."""

    value: SideEncoding | None = None
    key: SideEncoding | None = None
    debezium: DebeziumJson | None = None
    tombstones: bool = False


def read_formats(reader: OptionReader) -> dict[str, str]:
    """``value.format`` and ``key.format`` (default ``raw`` both); marks the registry options known."""
    formats = {side: reader.choice(f"{side}.format", FORMATS + (DEBEZIUM_FORMATS if side == "value" else ()), "raw")
               for side in _SIDES}
    for name in _REGISTRY_OPTIONS:
        reader.has(name)
    reader.prefixed("schema.registry.")
    return formats


def _record_type(side: str, fmt: str, schema: T.StructType) -> tuple[T.StructType, tuple[str, ...] | None]:
    """The Spark type of `side`'s records and the columns that make them (None: the side's STRUCT column)."""
    fields = {f.name: f.dataType for f in schema.fields}
    if side in fields:
        if not isinstance(fields[side], T.StructType):
            raise OptionError(f"{side}.format", fmt, f"'raw' for a '{side}' column of type "
                              f"{fields[side].simpleString()}: {fmt} encodes a STRUCT '{side}' column"
                              + (", or, without a 'value' column, every other column" if side == "value" else ""))
        return fields[side], None
    if side == "key":
        raise OptionError("key.format", fmt, "'raw' without a 'key' column: key.format encodes a STRUCT 'key' column")
    record = T.StructType([f for f in schema.fields if f.name not in KAFKA_COLUMNS])
    if not record.fields:
        raise OptionError("value.format", fmt, "'raw' for rows without a column to encode (every column is a "
                                              f"Kafka column: {', '.join(KAFKA_COLUMNS)})")
    return record, tuple(f.name for f in record.fields)


def resolve(reader: OptionReader, formats: dict[str, str], schema: T.StructType, topic: str | None) -> Encodings:
    """Driver, once per query start: each non-raw side's encoding, its schema registered or looked up.

    ``OptionError`` for a bad option or a column the format cannot encode; `RegistryError` (registry
    unreachable, schema refused, subject unknown) quoting the registry. Nothing is written before this returns.
    """
    given = {name: reader.string(name) for name in _REGISTRY_OPTIONS}
    given = {name: value for name, value in given.items() if value is not None}
    given.update({f"schema.registry.{k}": v for k, v in reader.prefixed("schema.registry.").items()})
    tombstones = reader.boolean("tombstones.on.delete", True)
    schemas_enable = reader.boolean("schemas.enable", True)
    if formats["value"] in DEBEZIUM_FORMATS:
        return _debezium(formats, given, schema, topic, tombstones, schemas_enable, reader.has("schemas.enable"))
    for name in ("tombstones.on.delete", "schemas.enable"):
        if reader.has(name):
            raise OptionError(name, reader.string(name), "no value: it is an option of value.format "
                              f"{' or '.join(DEBEZIUM_FORMATS)}")
    sides = {}
    for side in _SIDES:
        fmt = formats[side]
        if fmt not in REGISTRY_FORMATS and f"{side}.schema" in given:
            raise OptionError(f"{side}.schema", given[f"{side}.schema"][:80],
                              f"no schema for {side}.format '{fmt}': set {side}.format to one of "
                              f"{', '.join(REGISTRY_FORMATS)}")
        if fmt == "raw":
            continue
        struct, fields = _record_type(side, fmt, schema)
        if fmt not in REGISTRY_FORMATS:
            sides[side] = SideEncoding(side, EncodingSpec(fmt), fields)
            continue
        options = registry_options(given, side)
        if topic is None and options.strategy != "record":
            raise OptionError("topic", None, f"a topic: the subject of {side}.subject.name.strategy "
                              f"'{options.strategy}' is named after it (or use 'record'; one of {', '.join(STRATEGIES)})")
        try:
            spec = resolve_encoding(fmt, struct, topic or "", options)
        except SchemaMappingError as exc:  # a Spark type the format has no mapping for
            raise OptionError(f"{side}.format", fmt, f"a format that can hold every column: {exc}") from exc
        except ImportError as exc:  # the format's extra is not installed on the driver
            raise SinkError(f"kafka-sink: {side}.format '{fmt}' needs the '{_EXTRAS[fmt]}' extra: pip install "
                            f"'impulse-connectors[{_EXTRAS[fmt]}]' on the driver and the executors ({exc})") from exc
        sides[side] = SideEncoding(side, spec, fields)
    return Encodings(**sides)


def _debezium(formats: dict[str, str], given: dict[str, str], schema: T.StructType, topic: str | None,
              tombstones: bool, schemas_enable: bool, schemas_given: bool) -> Encodings:
    """The encodings of ``value.format=debezium-*``: the envelope checked, then Debezium's JSON or Avro of both sides."""
    fmt = formats["value"]
    check_envelope(schema, fmt)
    if formats["key"] != "raw":
        raise OptionError("key.format", formats["key"], f"raw (unset): value.format '{fmt}' writes the key itself")
    if fmt == "debezium-json":
        return Encodings(debezium=json_spec(schema, topic, schemas_enable), tombstones=tombstones)
    if schemas_given:
        raise OptionError("schemas.enable", given.get("schemas.enable", str(schemas_enable)),
                          "no value with debezium-avro: the Schema Registry holds the schemas")
    by_name = {f.name.lower(): f for f in schema.fields}
    value = T.StructType([by_name[name] for name in VALUE_COLUMNS])
    namespace = "".join(c if c.isalnum() or c == "_" else "_" for c in topic or "impulse")
    sides = {}
    for side, struct, name, fields in (("value", value, "Envelope", tuple(by_name[n].name for n in VALUE_COLUMNS)),
                                       ("key", by_name["key"].dataType, "Key", None)):
        options = registry_options(given, side)
        if topic is None and options.strategy != "record":
            raise OptionError("topic", None, f"a topic: the subject of {side}.subject.name.strategy "
                              f"'{options.strategy}' is named after it (or use 'record'; one of {', '.join(STRATEGIES)})")
        try:
            spec = resolve_encoding("avro", struct, topic or "", options, name=name, namespace=namespace)
        except SchemaMappingError as exc:
            raise OptionError("value.format", fmt, f"a format that can hold every column: {exc}") from exc
        except ImportError as exc:
            raise SinkError(f"kafka-sink: value.format '{fmt}' needs the 'avro' extra: pip install "
                            f"'impulse-connectors[avro]' on the driver and the executors ({exc})") from exc
        sides[side] = SideEncoding(side, spec, fields)
    return Encodings(**sides, tombstones=tombstones)


def encode_side(batch: pa.RecordBatch, encoding: SideEncoding) -> tuple[pa.Array, list[str | None] | None]:
    """Executor: one framed record per row of `batch` (binary; null for a null STRUCT: a tombstone value or no
    key), and the reasons of the unfit rows (None when every row fits): an unfit row's record is its JSON.
    Deterministic: equal rows give equal bytes."""
    if encoding.fields is None:
        records = batch.column(batch.schema.names.index(encoding.side))
    else:
        records = pa.RecordBatch.from_arrays([batch.column(batch.schema.names.index(n)) for n in encoding.fields],
                                             names=list(encoding.fields))
    if isinstance(records, pa.ChunkedArray):
        records = records.combine_chunks()
    valid = None
    if isinstance(records, pa.StructArray) and records.null_count:
        valid = records.is_valid().to_numpy(zero_copy_only=False)
        records = records.filter(pa.array(valid))
    encoded, reasons = _encode_fitting(records, encoding.spec)
    if reasons is not None:
        unfit = pa.array([r is not None for r in reasons])
        as_json = json_objects(records if isinstance(records, pa.RecordBatch)
                               else pa.RecordBatch.from_struct_array(records)).cast(pa.binary())
        encoded = pc.if_else(unfit, as_json, encoded)
    if valid is not None:
        index = pa.array(np.cumsum(valid) - 1, pa.int64(), mask=~valid)
        encoded = encoded.take(index)
        if reasons is not None:
            reasons = [None if i is None else reasons[i] for i in index.to_pylist()]
    return encoded, reasons


def _encode_fitting(records, spec: EncodingSpec) -> tuple[pa.Array, list[str | None] | None]:
    """`encode_batch` of `records`; on rows that do not fit, the others encoded and those rows' reasons
    (their records null). Encoders stop at the first unfit row, so the rest is encoded again after it."""
    try:
        return encode_batch(records, spec), None
    except RecordEncodeError as exc:
        bad, reason = exc.row, _reason(exc)
    count = len(records)
    parts, reasons, start = [], [None] * count, 0
    while True:
        if bad > start:
            parts.append(encode_batch(records.slice(start, bad - start), spec))
        reasons[bad] = reason
        parts.append(pa.nulls(1, pa.binary()))
        start = bad + 1
        if start >= count:
            break
        try:
            parts.append(encode_batch(records.slice(start), spec))
            break
        except RecordEncodeError as exc:
            bad, reason = start + exc.row, _reason(exc)
    return pa.concat_arrays(parts), reasons


def _reason(exc: RecordEncodeError) -> str:
    return f"{UNFIT}: " + str(exc).replace(f"row {exc.row} ", "the row ", 1)
