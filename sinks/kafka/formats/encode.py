"""Encoding an Arrow record batch into one payload per row, for each record format, then framing it.

``raw`` and ``json`` are columnar (pyarrow compute, `connectors.rows`). ``json-schema`` is the same JSON, framed.
``avro`` is columnar (`avro_columnar`: numpy over the Arrow buffers, nested records, arrays and maps included,
byte-identical to fastavro); a schema it does not handle (decimals wider than 18 digits, unions other than with
null) is written row by row with fastavro's compiled ``schemaless_writer``; bench/README.md compares both with
confluent-kafka's ``AvroSerializer``. ``protobuf`` builds one message per row from the file descriptor (upb's C
implementation serialises). `EncodingSpec` is what the driver hands the executors: the format, the schema text
the registry knows, the schema id; executors import the format's package only when they encode.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import io
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from connectors.rows import as_binary, json_objects, python_rows

from .avro_columnar import encode_columnar
from .framing import frame, message_indexes

__all__ = ["FORMATS", "REGISTRY_FORMATS", "EncodingSpec", "RecordEncodeError", "encode_batch", "encode_payloads", "protobuf_message_class"]

FORMATS = ("raw", "json", "avro", "protobuf", "json-schema")
REGISTRY_FORMATS = ("avro", "protobuf", "json-schema")


class RecordEncodeError(ValueError):
    """A row does not fit the schema (a poison record): `row` is its index in the batch, the message names the
    field and the reason as the encoder gave them."""

    def __init__(self, row: int, fmt: str, reason: str) -> None:
        self.row = row
        super().__init__(f"row {row} does not fit the {fmt} schema: {reason}")


@dataclass(frozen=True)
class EncodingSpec:
    """How the executors encode one column of records (picklable, small).

    `schema` is the schema text as registered: Avro JSON, a base64 serialized ``FileDescriptorProto`` (Protobuf,
    the first message is written) or a JSON Schema; None for ``raw``/``json``. `schema_id` is the registry's id
    (None: unframed). Encoding is deterministic: equal rows give equal bytes.
    """

    format: str
    schema: str | None = None
    schema_id: int | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format {self.format!r}: expected one of {', '.join(FORMATS)}")
        if self.format in REGISTRY_FORMATS and self.schema is None:
            raise ValueError(f"format {self.format!r} needs a schema")


def encode_batch(records: pa.RecordBatch | pa.StructArray | pa.Array, spec: EncodingSpec) -> pa.Array:
    """The records of `records` (a record batch or a struct array: one record a row; for ``raw``, any column)
    encoded per `spec` and framed with its schema id when it has one: a binary array, one value per row."""
    payloads = encode_payloads(records, spec)
    if spec.schema_id is None:
        return payloads
    indexes = message_indexes([0]) if spec.format == "protobuf" else b""
    return frame(payloads, spec.schema_id, indexes)


def encode_payloads(records: pa.RecordBatch | pa.StructArray | pa.Array, spec: EncodingSpec) -> pa.Array:
    """The unframed payloads of `records` per `spec` (binary array)."""
    if spec.format == "raw":
        if isinstance(records, pa.RecordBatch):
            return json_objects(records).cast(pa.binary())
        return as_binary(records)
    batch = records if isinstance(records, pa.RecordBatch) else pa.RecordBatch.from_struct_array(records)
    if spec.format in ("json", "json-schema"):
        return json_objects(batch).cast(pa.binary())
    if spec.format == "avro":
        columnar = encode_columnar(batch, _avro_json(spec.schema))
        if columnar is not None:
            return columnar
    rows = python_rows(batch)
    if spec.format == "avro":
        return pa.array(_avro_rows(rows, spec.schema), pa.binary())
    return pa.array(_protobuf_rows(rows, spec.schema), pa.binary())


# --------------------------------------------------------------------------------------------------- Avro


@lru_cache(maxsize=32)
def _avro_json(schema: str) -> dict:
    return json.loads(schema)


@lru_cache(maxsize=32)
def _parsed_avro(schema: str):
    import fastavro  # noqa: PLC0415 - the avro extra

    return fastavro.parse_schema(json.loads(schema))


def _avro_rows(rows: list[dict], schema: str) -> list[bytes]:
    from fastavro import schemaless_writer  # noqa: PLC0415 - the avro extra

    parsed = _parsed_avro(schema)
    out: list[bytes] = []
    buffer = io.BytesIO()
    for index, row in enumerate(rows):
        buffer.seek(0)
        buffer.truncate()
        try:
            schemaless_writer(buffer, parsed, row)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise RecordEncodeError(index, "avro", f"{type(exc).__name__}: {exc}") from exc
        out.append(buffer.getvalue())
    return out


# ----------------------------------------------------------------------------------------------- Protobuf


@lru_cache(maxsize=32)
def protobuf_message_class(schema: str):
    """The message class of the first message of a base64 serialized ``FileDescriptorProto`` (its imports of
    ``google/protobuf/*``, ``google/type/*`` and ``confluent/type/decimal.proto`` are resolved from the
    installed packages). Cached per schema text."""
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema))
    pool = descriptor_pool.DescriptorPool()
    for dependency in fdp.dependency:
        pool.AddSerializedFile(_well_known_file(dependency))
    pool.AddSerializedFile(fdp.SerializeToString())
    descriptor = pool.FindMessageTypeByName(f"{fdp.package}.{fdp.message_type[0].name}" if fdp.package
                                            else fdp.message_type[0].name)
    return message_factory.GetMessageClass(descriptor)


def _well_known_file(name: str) -> bytes:
    if name == "confluent/type/decimal.proto":
        return _confluent_decimal_file()
    if name == "google/type/date.proto":
        from google.type import date_pb2 as module  # noqa: PLC0415 - the protobuf extra's googleapis-common-protos
    elif name == "google/protobuf/timestamp.proto":
        module = timestamp_pb2
    else:
        raise ValueError(f"protobuf schema imports {name}, which this encoder does not know")
    return module.DESCRIPTOR.serialized_pb


def _confluent_decimal_file() -> bytes:
    """``confluent/type/decimal.proto`` (Confluent's decimal: the unscaled value as big-endian two's complement
    bytes, its precision and scale), built here so that encoding needs only ``protobuf``."""
    F = descriptor_pb2.FieldDescriptorProto
    message = descriptor_pb2.DescriptorProto(name="Decimal", field=[
        F(name="value", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_BYTES, json_name="value"),
        F(name="precision", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_UINT32, json_name="precision"),
        F(name="scale", number=3, label=F.LABEL_OPTIONAL, type=F.TYPE_INT32, json_name="scale")])
    return descriptor_pb2.FileDescriptorProto(name="confluent/type/decimal.proto", package="confluent.type",
                                              syntax="proto3", message_type=[message]).SerializeToString()


def _protobuf_rows(rows: list[dict], schema: str) -> list[bytes]:
    cls = protobuf_message_class(schema)
    out = []
    for index, row in enumerate(rows):
        message = cls()
        try:
            _fill(message, row)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            raise RecordEncodeError(index, "protobuf", f"{type(exc).__name__}: {exc}") from exc
        out.append(message.SerializeToString(deterministic=True))
    return out


def _fill(message, row: dict[str, Any]) -> None:
    fields = message.DESCRIPTOR.fields_by_name
    for name, value in row.items():
        if value is None:
            continue
        field = fields[name]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            target = getattr(message, name)
            value_field = field.message_type.fields_by_name["value"]
            for key, item in (value.items() if isinstance(value, dict) else value):
                if value_field.message_type is None:
                    target[key] = item
                else:
                    _set_message(target[key], item)
        elif _repeated(field):
            target = getattr(message, name)
            if field.message_type is None:
                target.extend(value)
            else:
                for item in value:
                    _set_message(target.add(), item)
        elif field.message_type is not None:
            _set_message(getattr(message, name), value)
        else:
            setattr(message, name, value)


def _repeated(field) -> bool:
    is_repeated = getattr(field, "is_repeated", None)  # protobuf ≥ 6.31; `label` was removed in 7
    return bool(is_repeated) if is_repeated is not None else field.label == field.LABEL_REPEATED


def _set_message(target, value: Any) -> None:
    full_name = target.DESCRIPTOR.full_name
    if full_name == "google.protobuf.Timestamp":
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        delta = value - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        target.seconds, target.nanos = divmod(micros, 1_000_000)[0], divmod(micros, 1_000_000)[1] * 1000
    elif full_name == "google.type.Date":
        target.year, target.month, target.day = value.year, value.month, value.day
    elif full_name == "confluent.type.Decimal":
        sign, digits, exponent = value.as_tuple()
        unscaled = int(decimal.Decimal((sign, digits, 0)))
        target.value = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
        target.scale = -exponent
        target.precision = max(len(digits), -exponent)
    else:
        _fill(target, value)
