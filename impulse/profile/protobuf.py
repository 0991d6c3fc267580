"""Protobuf values in Confluent's wire format, decoded for `impulse.profile.topic` (through `impulse.profile.registry`).

The schema is the registry's serialized file descriptor of the newest schema id in the sample; its first message
is the record (the message indexes after the schema id must say so: a single 0, as kafka-sink writes, else the
topic is refused). Records of older ids are decoded with their own descriptor, by field name into the newest
message's Spark schema (Protobuf's evolution: a field the older message lacks is null or empty).

| Protobuf                                   | Spark                                              |
|--------------------------------------------|----------------------------------------------------|
| int32, sint32, sfixed32                    | INT                                                |
| int64, sint64, sfixed64, uint32, uint64, fixed32, fixed64 | BIGINT                              |
| float / double / bool / string / bytes     | FLOAT / DOUBLE / BOOLEAN / STRING / BINARY         |
| enum                                       | STRING (the value's name)                          |
| google.protobuf.Timestamp, google.type.Date | TIMESTAMP, DATE                                   |
| message                                    | STRUCT (nullable: messages have presence)          |
| repeated T, map<K, V>                      | ARRAY<T>, MAP<K, V> (never null: Protobuf has no null list) |

A scalar is nullable when it has presence (proto3 ``optional``, proto2); ``confluent.type.Decimal`` and
recursive messages are refused naming the field. Needs the ``protobuf`` extra.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connectors.errors import OptionError
from impulse.profile.registry import arrow_schema, record_schema_id

__all__ = ["decode_protobuf", "spark_type"]

_SCALARS: dict[int, DataType] = {  # FieldDescriptor.TYPE_* → Spark
    1: DoubleType(), 2: FloatType(), 3: LongType(), 4: LongType(), 5: IntegerType(), 6: LongType(), 7: LongType(),
    8: BooleanType(), 9: StringType(), 12: BinaryType(), 13: LongType(), 14: StringType(), 15: IntegerType(),
    16: LongType(), 17: IntegerType(), 18: LongType()}
_MESSAGE = 11
_WELL_KNOWN: dict[str, DataType] = {"google.protobuf.Timestamp": TimestampType(), "google.type.Date": DateType()}
_UTC = dt.timezone.utc


def spark_type(descriptor: Any, path: str = "value", seen: tuple[str, ...] = ()) -> StructType:
    """The Spark STRUCT of a message descriptor (module docstring). ``ValueError`` naming the field for a type
    Spark cannot hold here."""
    if descriptor.full_name in seen:
        raise ValueError(f"{path}: the message {descriptor.full_name} contains itself (recursive messages are not "
                         "profiled)")
    seen = (*seen, descriptor.full_name)
    fields = []
    for field in descriptor.fields:
        fpath = f"{path}.{field.name}"
        repeated = field.is_repeated
        if repeated and field.message_type is not None and field.message_type.GetOptions().map_entry:
            key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            fields.append(StructField(field.name, MapType(_kind(key, fpath + "{}", seen),
                                                          _kind(value, fpath + "{}", seen), False), False))
        elif repeated:
            fields.append(StructField(field.name, ArrayType(_kind(field, fpath + "[]", seen), False), False))
        else:
            nullable = field.type == _MESSAGE or field.has_presence
            fields.append(StructField(field.name, _kind(field, fpath, seen), nullable))
    return StructType(fields)


def _kind(field: Any, path: str, seen: tuple[str, ...]) -> DataType:
    if field.type != _MESSAGE:
        return _SCALARS[field.type]
    name = field.message_type.full_name
    if name in _WELL_KNOWN:
        return _WELL_KNOWN[name]
    if name == "confluent.type.Decimal":
        raise ValueError(f"{path}: confluent.type.Decimal (its precision is per value: not profiled)")
    return spark_type(field.message_type, path, seen)


def _value(field: Any, value: Any, kind: DataType) -> Any:
    if field.type == 14:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found else str(value)
    if isinstance(kind, TimestampType):
        return value.ToDatetime(tzinfo=_UTC)
    if isinstance(kind, DateType):
        return dt.date(value.year, value.month, value.day) if value.year else None
    if isinstance(kind, StructType):
        return _row(value, kind)
    return value


def _row(message: Any, struct: StructType) -> dict[str, Any]:
    """A message as a row of `struct`, field by name (a field the message lacks: null, or empty if repeated)."""
    fields = message.DESCRIPTOR.fields_by_name
    row: dict[str, Any] = {}
    for target in struct.fields:
        field = fields.get(target.name)
        kind = target.dataType
        if field is None:
            row[target.name] = [] if isinstance(kind, ArrayType) else {} if isinstance(kind, MapType) else None
        elif isinstance(kind, MapType):
            value_field = field.message_type.fields_by_name["value"]
            entries = getattr(message, field.name).items()
            row[target.name] = {k: _value(value_field, v, kind.valueType) for k, v in entries}
        elif isinstance(kind, ArrayType):
            row[target.name] = [_value(field, v, kind.elementType) for v in getattr(message, field.name)]
        elif target.nullable and not message.HasField(field.name):
            row[target.name] = None
        else:
            row[target.name] = _value(field, getattr(message, field.name), kind)
    return row


def decode_protobuf(values: DataFrame, url: str, texts: dict[int, str]) -> DataFrame:
    """The framed Protobuf `values` (a ``value`` BINARY column; `texts`: each id's serialized descriptor, base64)
    decoded into the newest id's Spark schema (module docstring). ``OptionError`` naming the topic `url` for a
    message Spark cannot hold."""
    from sinks.kafka.formats import protobuf_message_class  # noqa: PLC0415 - the protobuf extra

    newest = max(texts)
    try:
        struct = spark_type(protobuf_message_class(texts[newest]).DESCRIPTOR)
    except ValueError as exc:
        raise OptionError("PATH", url, f"a topic whose Protobuf schema (id {newest}) Spark can hold: {exc}") from None
    return values.select("value").mapInArrow(_decoder(url, texts, struct), struct)


def _decoder(url: str, texts: dict[int, str], struct: StructType):
    """The function each task runs: Arrow batches of framed values → Arrow batches of decoded rows."""
    arrow = arrow_schema(struct)

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from sinks.kafka.formats import protobuf_message_class  # noqa: PLC0415 - the protobuf extra, on executors

        classes = {i: protobuf_message_class(t) for i, t in texts.items()}
        for batch in batches:
            rows = []
            for record in batch.column(0).to_pylist():
                if record[5:6] != b"\x00":
                    raise ValueError(f"{url}: a record's message indexes {record[5:6].hex()} name a message other "
                                     "than the schema's first (only the first is profiled)")
                message = classes[record_schema_id(record)].FromString(record[6:])
                rows.append(_row(message, struct))
            yield pa.RecordBatch.from_pylist(rows, schema=arrow)

    return decode
