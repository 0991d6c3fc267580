"""A Spark schema as an Avro schema, a Protobuf file descriptor and a JSON Schema (pure functions, deterministic).

| Spark            | Avro                                   | Protobuf (proto3)            | JSON Schema                      |
|------------------|----------------------------------------|------------------------------|----------------------------------|
| BOOLEAN          | boolean                                | bool                         | boolean                          |
| TINYINT/SMALLINT/INT | int                                | int32                        | integer (with min/max)           |
| BIGINT           | long                                   | int64                        | integer                          |
| FLOAT / DOUBLE   | float / double                         | float / double               | number                           |
| STRING           | string                                 | string                       | string                           |
| BINARY           | bytes                                  | bytes                        | string, contentEncoding base64   |
| DECIMAL(p,s)     | bytes, logicalType decimal (p, s)      | confluent.type.Decimal       | number                           |
| DATE             | int, logicalType date                  | google.type.Date             | string, format date              |
| TIMESTAMP        | long, logicalType timestamp-micros     | google.protobuf.Timestamp    | string, format date-time         |
| TIMESTAMP_NTZ    | long, logicalType local-timestamp-micros | google.protobuf.Timestamp  | string, format date-time         |
| ARRAY<T>         | array                                  | repeated T                   | array                            |
| MAP<STRING,V>    | map                                    | map<string, V>               | object, additionalProperties V   |
| STRUCT           | record (named after its path)          | nested message               | object                           |

A nullable field is a union ``["null", T]`` with default null in Avro, ``optional`` (proto3 explicit presence)
in Protobuf (messages always have presence; a null ARRAY or MAP is written empty, Protobuf has no null list),
and ``[T, "null"]`` in JSON Schema. Map keys must be strings (Avro's rule); nested arrays, and arrays or maps of
nullable elements, are Avro/JSON only (Protobuf has no repeated-of-repeated nor null elements).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = ["SchemaMappingError", "avro_schema", "json_schema", "protobuf_descriptor", "PROTOBUF_DEPENDENCIES"]


class SchemaMappingError(ValueError):
    """A Spark type has no mapping in the requested format; the message names the field path and the type."""


def _unsupported(path: str, kind: DataType, fmt: str, why: str = "") -> SchemaMappingError:
    return SchemaMappingError(f"field '{path}' of type {kind.simpleString()} cannot be written as {fmt}"
                              f"{': ' + why if why else ''}; cast it (e.g. to STRING) or drop it")


def _record_name(path: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in path.replace("_", ".").split(".") if part) or "Record"


# ------------------------------------------------------------------------------------------------------ Avro

_AVRO_PRIMITIVE: dict[type, Any] = {
    BooleanType: "boolean", ByteType: "int", ShortType: "int", IntegerType: "int", LongType: "long",
    FloatType: "float", DoubleType: "double", StringType: "string", BinaryType: "bytes",
    DateType: {"type": "int", "logicalType": "date"},
    TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
    TimestampNTZType: {"type": "long", "logicalType": "local-timestamp-micros"},
}


def avro_schema(struct: StructType, name: str = "Record", namespace: str | None = None) -> dict[str, Any]:
    """The Avro record schema (a JSON-ready dict) of `struct`: record `name` in `namespace`; nested records are
    named ``<Name><Field>`` after their path, so every record name in the schema is unique."""
    record: dict[str, Any] = _avro_record(struct, name, name)
    if namespace:
        record = {"type": "record", "name": name, "namespace": namespace, "fields": record["fields"]}
    return record


def _avro_record(struct: StructType, name: str, path: str) -> dict[str, Any]:
    fields = []
    for field in struct.fields:
        kind = _avro_type(field.dataType, f"{path}.{field.name}", name + _record_name(field.name))
        if field.nullable:
            fields.append({"name": field.name, "type": ["null", kind], "default": None})
        else:
            fields.append({"name": field.name, "type": kind})
    return {"type": "record", "name": name, "fields": fields}


def _avro_type(kind: DataType, path: str, name: str) -> Any:
    if type(kind) in _AVRO_PRIMITIVE:
        return _AVRO_PRIMITIVE[type(kind)]
    if isinstance(kind, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": kind.precision, "scale": kind.scale}
    if isinstance(kind, StructType):
        return _avro_record(kind, name, path)
    if isinstance(kind, ArrayType):
        items = _avro_type(kind.elementType, f"{path}[]", name + "Item")
        return {"type": "array", "items": ["null", items] if kind.containsNull else items}
    if isinstance(kind, MapType):
        if not isinstance(kind.keyType, StringType):
            raise _unsupported(path, kind, "Avro", "map keys must be STRING")
        values = _avro_type(kind.valueType, f"{path}{{}}", name + "Value")
        return {"type": "map", "values": ["null", values] if kind.valueContainsNull else values}
    raise _unsupported(path, kind, "Avro")


# ----------------------------------------------------------------------------------------------- JSON Schema

_INT_RANGES = {ByteType: 7, ShortType: 15, IntegerType: 31}


def json_schema(struct: StructType, title: str = "Record") -> dict[str, Any]:
    """The JSON Schema (draft-07, a JSON-ready dict) of `struct` with `title`; rows rendered by
    `connectors.rows.json_objects` validate against it. Objects are closed (``additionalProperties: false``)."""
    schema = _json_object(struct, title)
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **schema}


def _json_object(struct: StructType, path: str) -> dict[str, Any]:
    return {"type": "object",
            "properties": {f.name: _json_field(f.dataType, f.nullable, f"{path}.{f.name}") for f in struct.fields},
            "required": [f.name for f in struct.fields], "additionalProperties": False}


def _json_field(kind: DataType, nullable: bool, path: str) -> dict[str, Any]:
    schema = _json_type(kind, path)
    if nullable:
        schema = {"oneOf": [{"type": "null"}, schema]}
    return schema


def _json_type(kind: DataType, path: str) -> dict[str, Any]:
    if isinstance(kind, BooleanType):
        return {"type": "boolean"}
    if type(kind) in _INT_RANGES:
        bits = _INT_RANGES[type(kind)]
        return {"type": "integer", "minimum": -(1 << bits), "maximum": (1 << bits) - 1}
    if isinstance(kind, LongType):
        return {"type": "integer"}
    if isinstance(kind, (FloatType, DoubleType, DecimalType)):
        return {"type": "number"}
    if isinstance(kind, StringType):
        return {"type": "string"}
    if isinstance(kind, BinaryType):
        return {"type": "string", "contentEncoding": "base64"}
    if isinstance(kind, DateType):
        return {"type": "string", "format": "date"}
    if isinstance(kind, (TimestampType, TimestampNTZType)):
        return {"type": "string", "format": "date-time"}
    if isinstance(kind, StructType):
        return _json_object(kind, path)
    if isinstance(kind, ArrayType):
        return {"type": "array", "items": _json_field(kind.elementType, kind.containsNull, f"{path}[]")}
    if isinstance(kind, MapType):
        if not isinstance(kind.keyType, StringType):
            raise _unsupported(path, kind, "JSON Schema", "map keys must be STRING")
        return {"type": "object",
                "additionalProperties": _json_field(kind.valueType, kind.valueContainsNull, f"{path}{{}}")}
    raise _unsupported(path, kind, "JSON Schema")


# -------------------------------------------------------------------------------------------------- Protobuf

# well-known imports a descriptor may need; Confluent's clients and registries know them without references
PROTOBUF_DEPENDENCIES = {
    "decimal": ("confluent/type/decimal.proto", ".confluent.type.Decimal"),
    "date": ("google/type/date.proto", ".google.type.Date"),
    "timestamp": ("google/protobuf/timestamp.proto", ".google.protobuf.Timestamp"),
}

_PB_SCALAR = {BooleanType: "TYPE_BOOL", ByteType: "TYPE_INT32", ShortType: "TYPE_INT32", IntegerType: "TYPE_INT32",
              LongType: "TYPE_INT64", FloatType: "TYPE_FLOAT", DoubleType: "TYPE_DOUBLE", StringType: "TYPE_STRING",
              BinaryType: "TYPE_BYTES"}
_PB_WELL_KNOWN = {DecimalType: "decimal", DateType: "date", TimestampType: "timestamp", TimestampNTZType: "timestamp"}


def protobuf_descriptor(struct: StructType, name: str = "Record", package: str = "impulse",
                        file_name: str | None = None):
    """A ``google.protobuf.descriptor_pb2.FileDescriptorProto`` (proto3) whose first message, `name` in
    `package`, is `struct`; nested STRUCTs are nested messages named after their field. Field numbers follow
    the column order from 1. Needs the ``protobuf`` package."""
    fdp = descriptor_pb2.FileDescriptorProto(name=file_name or f"{package.replace('.', '/')}/{name}.proto",
                                             package=package, syntax="proto3")
    used: set[str] = set()
    fdp.message_type.append(_pb_message(descriptor_pb2, struct, name, name, used, f".{package}.{name}"))
    for key in sorted(used):
        fdp.dependency.append(PROTOBUF_DEPENDENCIES[key][0])
    return fdp


def _pb_message(pb2, struct: StructType, name: str, path: str, used: set[str], scope: str):
    """`scope`: this message's full name (``.package.Outer.Name``); type names are written fully qualified."""
    message = pb2.DescriptorProto(name=name)
    F = pb2.FieldDescriptorProto
    for number, field in enumerate(struct.fields, start=1):
        fpath = f"{path}.{field.name}"
        out = F(name=field.name, number=number, label=F.LABEL_OPTIONAL, json_name=field.name)
        kind = field.dataType
        if isinstance(kind, ArrayType):
            if kind.containsNull:
                raise _unsupported(fpath, kind, "Protobuf", "repeated fields cannot hold nulls (declare it NOT NULL "
                                                            "in the array, or use Avro)")
            out.label = F.LABEL_REPEATED
            _pb_set_type(pb2, message, out, kind.elementType, fpath + "[]", _record_name(field.name) + "Item", used, scope)
        elif isinstance(kind, MapType):
            if not isinstance(kind.keyType, StringType):
                raise _unsupported(fpath, kind, "Protobuf", "map keys must be STRING")
            if kind.valueContainsNull:
                raise _unsupported(fpath, kind, "Protobuf", "map values cannot be null")
            entry = pb2.DescriptorProto(name=_record_name(field.name) + "Entry")
            entry.options.map_entry = True
            entry.field.append(F(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING, json_name="key"))
            value = F(name="value", number=2, label=F.LABEL_OPTIONAL, json_name="value")
            _pb_set_type(pb2, message, value, kind.valueType, fpath + "{}", _record_name(field.name) + "Value", used,
                         scope)
            entry.field.append(value)
            message.nested_type.append(entry)
            out.label = F.LABEL_REPEATED
            out.type = F.TYPE_MESSAGE
            out.type_name = f"{scope}.{entry.name}"
        else:
            _pb_set_type(pb2, message, out, kind, fpath, _record_name(field.name), used, scope)
            if field.nullable and out.type != F.TYPE_MESSAGE:  # proto3 `optional`: a synthetic one-field oneof
                out.proto3_optional = True
                out.oneof_index = len(message.oneof_decl)
                message.oneof_decl.append(pb2.OneofDescriptorProto(name=f"_{field.name}"))
        message.field.append(out)
    return message


def _pb_set_type(pb2, message, out, kind: DataType, path: str, nested_name: str, used: set[str],
                 scope: str) -> None:
    F = pb2.FieldDescriptorProto
    if type(kind) in _PB_SCALAR:
        out.type = getattr(F, _PB_SCALAR[type(kind)])
    elif type(kind) in _PB_WELL_KNOWN:
        key = _PB_WELL_KNOWN[type(kind)]
        used.add(key)
        out.type = F.TYPE_MESSAGE
        out.type_name = PROTOBUF_DEPENDENCIES[key][1]
    elif isinstance(kind, StructType):
        message.nested_type.append(_pb_message(pb2, kind, nested_name, path, used, f"{scope}.{nested_name}"))
        out.type = F.TYPE_MESSAGE
        out.type_name = f"{scope}.{nested_name}"
    else:
        raise _unsupported(path, kind, "Protobuf")
