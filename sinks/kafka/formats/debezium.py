"""Debezium change events as Kafka records: ``value.format=debezium-json`` (and ``debezium-avro``, `sinks.kafka.encoding`).

The input is a stream of Debezium's envelope (`impulse.debezium`: ``key``, ``before``, ``after``, ``op``, ``ts_ms``,
``source``, as the impulse source makes it with ``changelog.envelope=debezium``). Each row is one record, as
Debezium's ``JsonConverter`` writes it:

- the record key: the ``key`` STRUCT as a JSON object (``{"id": 7}``);
- the value: ``{"before": …, "after": …, "source": …, "op": "u", "ts_ms": …}``; TIMESTAMP fields as
  microseconds since the epoch (Debezium's ``io.debezium.time.MicroTimestamp``), DATE fields as days
  (``io.debezium.time.Date``), BINARY as base64;
- with ``schemas.enable`` (default true, as the converter's): each of the two wrapped as
  ``{"schema": <Connect schema>, "payload": …}``; the schemas are named after the topic
  (``<topic>.Key``, ``<topic>.Value``, ``<topic>.Envelope``), as Debezium names them after its topic prefix;
- ``tombstones.on.delete`` (default true, as Debezium): a record with the same key and a null value after each
  delete (``op`` = ``d``), so a compacted topic forgets the key.

Everything is columnar (pyarrow compute); equal rows give equal bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from connectors.errors import OptionError
from connectors.rows import json_objects

__all__ = ["DEBEZIUM_FORMATS", "ENVELOPE_COLUMNS", "VALUE_COLUMNS", "DebeziumJson", "check_envelope", "connect_schema",
           "encode_json", "tombstone_index"]

DEBEZIUM_FORMATS = ("debezium-json", "debezium-avro")
#: The input's columns, in order (`impulse.debezium.COLUMNS`)
ENVELOPE_COLUMNS = ("key", "before", "after", "op", "ts_ms", "source")
#: The value's fields, in Debezium's order
VALUE_COLUMNS = ("before", "after", "source", "op", "ts_ms")

_CONNECT = {T.LongType: "int64", T.IntegerType: "int32", T.ShortType: "int16", T.ByteType: "int8",
            T.FloatType: "float", T.DoubleType: "double", T.BooleanType: "boolean", T.StringType: "string",
            T.BinaryType: "bytes"}


@dataclass(frozen=True)
class DebeziumJson:
    """How executors write ``debezium-json`` records (picklable): the schema texts wrapped around the key and the
    value (None: ``schemas.enable=false``)."""

    key_schema: str | None
    value_schema: str | None


def check_envelope(schema: T.StructType, fmt: str) -> None:
    """Refuse, naming ``changelog.envelope``, a stream whose columns are not Debezium's envelope."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    structs = ("key", "before", "after", "source")
    fits = (all(name in fields for name in ENVELOPE_COLUMNS)
            and all(isinstance(fields[name], T.StructType) for name in structs)
            and isinstance(fields["op"], T.StringType) and isinstance(fields["ts_ms"], T.LongType)
            and fields["before"].simpleString() == fields["after"].simpleString())
    if not fits:
        raise OptionError("value.format", fmt, "a stream of Debezium change events: set the impulse source's "
                          "'changelog.envelope' to 'debezium' (with 'changelog.key'), which gives the columns "
                          f"{', '.join(ENVELOPE_COLUMNS)}; have: {schema.simpleString()}")


def connect_schema(kind: T.DataType, optional: bool, name: str | None = None, field: str | None = None) -> dict[str, Any]:
    """Kafka Connect's JSON schema of a Spark type (as ``JsonConverter`` writes it, Debezium's logical names for time);
    `OptionError` naming ``value.format`` for a type it has no mapping for."""
    out: dict[str, Any]
    if isinstance(kind, T.StructType):
        out = {"type": "struct", "fields": [connect_schema(f.dataType, f.nullable, field=f.name) for f in kind.fields]}
    elif isinstance(kind, T.ArrayType):
        out = {"type": "array", "items": connect_schema(kind.elementType, kind.containsNull)}
    elif isinstance(kind, T.MapType):
        out = {"type": "map", "keys": connect_schema(kind.keyType, False),
               "values": connect_schema(kind.valueType, kind.valueContainsNull)}
    elif isinstance(kind, T.TimestampType | T.TimestampNTZType):
        out = {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1}
    elif isinstance(kind, T.DateType):
        out = {"type": "int32", "name": "io.debezium.time.Date", "version": 1}
    elif type(kind) in _CONNECT:
        out = {"type": _CONNECT[type(kind)]}
    else:
        raise OptionError("value.format", "debezium-json", f"a row image whose types Kafka Connect's JSON can hold: "
                          f"cast the {kind.simpleString()} field{' ' + repr(field) if field else ''} to DOUBLE or STRING")
    out["optional"] = optional
    if name is not None:
        out["name"] = name
    if field is not None:
        out["field"] = field
    return out


def json_spec(schema: T.StructType, topic: str | None, schemas_enable: bool) -> DebeziumJson:
    """Driver: the `DebeziumJson` of a stream of the envelope (checked with `check_envelope` first)."""
    if not schemas_enable:
        return DebeziumJson(None, None)
    prefix = topic or "impulse"
    fields = {f.name.lower(): f for f in schema.fields}
    image = fields["after"].dataType
    key = connect_schema(fields["key"].dataType, False, name=f"{prefix}.Key")
    value = {"type": "struct", "fields": [
        connect_schema(image, True, name=f"{prefix}.Value", field="before"),
        connect_schema(image, True, name=f"{prefix}.Value", field="after"),
        connect_schema(fields["source"].dataType, False, name="io.debezium.connector.impulse.Source", field="source"),
        connect_schema(T.StringType(), False, field="op"),
        connect_schema(T.LongType(), True, field="ts_ms")], "optional": False, "name": f"{prefix}.Envelope", "version": 1}
    return DebeziumJson(_compact(key), _compact(value))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_json(batch: pa.RecordBatch, spec: DebeziumJson) -> tuple[pa.Array, pa.Array]:
    """Executor: (keys, values), one binary record each per row of a batch of the envelope."""
    columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
    payload = pc.binary_join_element_wise(
        '{"before":', _struct_json(columns["before"]), ',"after":', _struct_json(columns["after"]),
        ',"source":', _struct_json(columns["source"]), ',"op":"', columns["op"], '","ts_ms":',
        pc.fill_null(columns["ts_ms"].cast(pa.string()), "null"), "}", "")
    key = _struct_json(columns["key"])
    return _wrapped(key, spec.key_schema), _wrapped(payload, spec.value_schema)


def _wrapped(payload: pa.Array, schema: str | None) -> pa.Array:
    if schema is not None:
        payload = pc.binary_join_element_wise('{"schema":' + schema + ',"payload":', payload, "}", "")
    return payload.cast(pa.binary())


def _struct_json(column: pa.Array) -> pa.Array:
    """Each value of a STRUCT column as a JSON object (``null`` for a null struct), time as Debezium writes it."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    column = column.cast(_plain(column.type))
    fields = pa.RecordBatch.from_arrays(column.flatten(), names=[f.name for f in column.type])
    text = json_objects(fields)
    if column.null_count:
        text = pc.if_else(column.is_valid(), text, "null")
    return text


def _plain(kind: pa.DataType) -> pa.DataType:
    """`kind` with timestamps as int64 (µs) and dates as int32 (days): the numbers Debezium writes."""
    if pa.types.is_timestamp(kind):
        return pa.int64()
    if pa.types.is_date32(kind):
        return pa.int32()
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_plain(f.type)) for f in kind])
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_plain(kind.value_type)))
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_plain(kind.value_type)))
    if pa.types.is_map(kind):
        return pa.map_(kind.key_field.with_type(_plain(kind.key_type)), kind.item_field.with_type(_plain(kind.item_type)))
    return kind


def tombstone_index(ops: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Each row once, and once more right after it when its op is ``d``: (the rows to take, int64; whether each
    taken record is a tombstone, bool)."""
    deletes = pc.fill_null(pc.equal(ops, "d"), False).to_numpy(zero_copy_only=False)
    index = np.repeat(np.arange(len(deletes), dtype=np.int64), 1 + deletes.astype(np.int64))
    tombstone = np.zeros(len(index), dtype=bool)
    tombstone[1:] = index[1:] == index[:-1]
    return index, tombstone
