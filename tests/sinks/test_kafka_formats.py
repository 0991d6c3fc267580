"""Record formats without a server: the Spark → Avro / Protobuf / JSON Schema mappings, the wire-format framing,
subject names and the registry options."""

from __future__ import annotations

import base64
import json

import pyarrow as pa
import pytest
from pyspark.sql.types import (ArrayType, DecimalType, IntegerType, LongType, MapType, StringType, StructField,
                               StructType)

from connectors.errors import OptionError, SinkError
from connectors.rows import python_rows
from sinks.kafka.formats import (EncodingSpec, SchemaMappingError, avro_schema, derived_schema, encode_batch, frame,
                                 header, json_schema, message_indexes, protobuf_descriptor, protobuf_message_class,
                                 record_full_name, registry_options, split_header, subject_name)
from tests.sinks.formats_data import FLAT, FLAT_ROWS, NESTED, NESTED_ROWS, batch


def test_avro_schema_maps_every_type_with_logical_types_and_nullable_unions():
    fields = {f["name"]: f["type"] for f in avro_schema(FLAT, "Order", "shop")["fields"]}
    assert fields["id"] == "long"
    assert fields["name"] == ["null", "string"]
    assert fields["price"] == ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]
    assert fields["ts"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]
    assert fields["day"] == ["null", {"type": "int", "logicalType": "date"}]
    assert (fields["ratio"], fields["small"], fields["tiny"], fields["blob"]) == ("float", "int", "int",
                                                                                  ["null", "bytes"])
    schema = avro_schema(FLAT, "Order", "shop")
    assert (schema["name"], schema["namespace"]) == ("Order", "shop")


def test_avro_nested_records_get_unique_names_and_parse():
    import fastavro

    schema = avro_schema(NESTED, "Event", "ns")
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    user = fields["user"][1]
    assert user["type"] == "record" and user["name"] == "EventUser"
    assert user["fields"][1]["type"] == {"type": "array", "items": "string"}
    assert fields["attrs"] == {"type": "map", "values": "long"}
    assert fields["items"]["items"]["name"] == "EventItemsItem"
    fastavro.parse_schema(schema)  # unique names, valid defaults: fastavro refuses anything else


def test_map_with_non_string_keys_is_refused_naming_the_field():
    struct = StructType([StructField("m", MapType(IntegerType(), LongType()), True)])
    for build in (lambda: avro_schema(struct), lambda: json_schema(struct), lambda: protobuf_descriptor(struct)):
        with pytest.raises(SchemaMappingError, match=r"'Record\.m'.*map keys must be STRING"):
            build()


def test_json_schema_is_closed_with_nullable_oneof_and_formats():
    import jsonschema

    schema = json_schema(FLAT, "shop.Order")
    assert schema["title"] == "shop.Order" and schema["additionalProperties"] is False
    assert schema["properties"]["ts"] == {"oneOf": [{"type": "null"}, {"type": "string", "format": "date-time"}]}
    assert schema["properties"]["tiny"] == {"type": "integer", "minimum": -128, "maximum": 127}
    from connectors.rows import json_objects

    for struct, rows in ((FLAT, FLAT_ROWS), (NESTED, NESTED_ROWS)):
        for text in json_objects(batch(struct, rows)).to_pylist():
            jsonschema.validate(json.loads(text), json_schema(struct))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"id": 1}, schema)


def test_protobuf_descriptor_builds_a_message_class_with_presence_for_nullable_scalars():
    fdp = protobuf_descriptor(NESTED, "Event", "shop")
    assert fdp.package == "shop" and fdp.syntax == "proto3"
    assert sorted(fdp.dependency) == ["confluent/type/decimal.proto", "google/protobuf/timestamp.proto"]
    cls = protobuf_message_class(base64.b64encode(fdp.SerializeToString()).decode())
    assert cls.DESCRIPTOR.full_name == "shop.Event"
    flat = protobuf_message_class(derived_schema("protobuf", FLAT))
    message = flat()
    assert not message.HasField("name")  # optional: unset is distinguishable from ""
    message.name = ""
    assert message.HasField("name")


def test_protobuf_refuses_null_elements_naming_the_field():
    struct = StructType([StructField("xs", ArrayType(StringType(), True), False)])
    with pytest.raises(SchemaMappingError, match=r"'Record\.xs'.*cannot hold nulls"):
        protobuf_descriptor(struct)


def test_avro_payloads_decode_with_fastavro_and_are_deterministic():
    import io

    import fastavro

    spec = EncodingSpec("avro", derived_schema("avro", NESTED))
    payloads = encode_batch(batch(NESTED, NESTED_ROWS), spec).to_pylist()
    parsed = fastavro.parse_schema(json.loads(spec.schema))
    assert [fastavro.schemaless_reader(io.BytesIO(p), parsed) for p in payloads] == NESTED_ROWS
    assert encode_batch(batch(NESTED, NESTED_ROWS), spec).to_pylist() == payloads


def test_framing_header_and_message_indexes():
    assert header(1) == b"\x00\x00\x00\x00\x01"
    assert header(0x01020304, b"\x00") == b"\x00\x01\x02\x03\x04\x00"
    assert message_indexes([0]) == b"\x00"
    assert message_indexes([1]) == b"\x02\x02"  # count 1, index 1, zigzag varints
    assert message_indexes([0, 2]) == b"\x04\x00\x04"
    with pytest.raises(ValueError):
        header(1 << 31)


def test_frame_prefixes_every_payload_and_keeps_nulls_and_slices():
    payloads = pa.array([b"ab", None, b"", b"xyz"] * 3, pa.binary()).slice(1, 7)
    framed = frame(payloads, 258, b"\x00").to_pylist()
    expected = [None if p is None else b"\x00\x00\x00\x01\x02\x00" + p for p in payloads.to_pylist()]
    assert framed == expected
    assert split_header(framed[1]) == (258, b"\x00" + payloads[1].as_py())
    with pytest.raises(ValueError, match="magic byte"):
        split_header(b"\x01\x00\x00\x00\x01")


def test_subject_names_follow_confluents_strategies():
    assert subject_name("topic", "orders", "value", "shop.Order") == "orders-value"
    assert subject_name("topic", "orders", "key", "shop.Order") == "orders-key"
    assert subject_name("record", "orders", "value", "shop.Order") == "shop.Order"
    assert subject_name("topic_record", "orders", "value", "shop.Order") == "orders-shop.Order"
    assert record_full_name("avro", derived_schema("avro", FLAT, "Order", "shop")) == "shop.Order"
    assert record_full_name("protobuf", derived_schema("protobuf", FLAT, "Order", "shop")) == "shop.Order"
    assert record_full_name("json-schema", derived_schema("json-schema", FLAT, "Order", "shop")) == "shop.Order"


def test_registry_options_validate_and_resolve_env_secrets(monkeypatch):
    with pytest.raises(OptionError, match="'schema.registry.url'"):
        registry_options({})
    with pytest.raises(OptionError, match=r"'value.subject.name.strategy'.*topic \| record \| topic_record"):
        registry_options({"schema.registry.url": "http://x", "value.subject.name.strategy": "Topic_Name"})
    with pytest.raises(OptionError, match="'use.latest.version'"):
        registry_options({"schema.registry.url": "http://x", "use.latest.version": "yes"})
    monkeypatch.setenv("SR_SECRET", "user:pa$$")
    options = registry_options({"schema.registry.url": "http://x", "schema.registry.basic.auth.user.info":
                                "${ENV:SR_SECRET}", "key.subject.name.strategy": "record"}, side="key")
    assert options.client_conf == {"url": "http://x", "basic.auth.user.info": "user:pa$$"}
    assert (options.strategy, options.auto_register, options.use_latest) == ("record", True, False)
    monkeypatch.delenv("SR_SECRET")
    with pytest.raises(SinkError, match="SR_SECRET.*not set"):
        registry_options({"schema.registry.url": "http://x", "schema.registry.basic.auth.user.info": "${ENV:SR_SECRET}"})


def test_encoding_spec_refuses_unknown_formats_and_missing_schemas():
    with pytest.raises(ValueError, match="expected one of raw, json, avro, protobuf, json-schema"):
        EncodingSpec("xml")
    with pytest.raises(ValueError, match="needs a schema"):
        EncodingSpec("avro")



def _fastavro_payloads(struct, rows: list[dict]) -> list[bytes]:
    import io

    import fastavro

    parsed = fastavro.parse_schema(json.loads(derived_schema("avro", struct)))
    out = []
    for row in rows:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, row)
        out.append(buffer.getvalue())
    return out


def test_columnar_avro_is_byte_identical_to_fastavro():
    import datetime as dt
    import decimal

    import numpy as np

    from sinks.kafka.formats.avro_columnar import encode_columnar

    rng = np.random.default_rng(7)
    edge = [0, 1, -1, 63, -64, 64, -65, 127, 128, 1 << 31, -(1 << 31), (1 << 62), -(1 << 63), (1 << 63) - 1]
    ids = edge + [int(v) for v in rng.integers(-(1 << 63), (1 << 63) - 1, 50, dtype=np.int64)]
    rows = []
    for i, v in enumerate(ids):
        row = dict(FLAT_ROWS[i % len(FLAT_ROWS)])
        row["id"] = v
        row["price"] = None if i % 5 == 0 else decimal.Decimal(int(rng.integers(-10**10 + 1, 10**10))).scaleb(-2)
        row["ts"] = None if i % 7 == 0 else dt.datetime(1900, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(
            microseconds=int(rng.integers(0, 1 << 62)) % (300 * 365 * 86400 * 10**6))
        rows.append(row)
    columnar = encode_columnar(batch(FLAT, rows), json.loads(derived_schema("avro", FLAT)))
    assert columnar is not None, "the flat schema fell back to fastavro: the test compares nothing"
    assert columnar.to_pylist() == _fastavro_payloads(FLAT, rows)
    nested = batch(NESTED, NESTED_ROWS * 3)
    for part in (nested, nested.slice(1, 5), nested.slice(4)):  # slices: offsets into the list and map children
        encoded = encode_columnar(part, json.loads(derived_schema("avro", NESTED)))
        assert encoded is not None and encoded.to_pylist() == _fastavro_payloads(NESTED, python_rows(part))
    wide = StructType([StructField("d", DecimalType(30, 2), False)])  # beyond int64: fastavro's path
    assert encode_columnar(batch(wide, [{"d": decimal.Decimal("1.00")}]), json.loads(derived_schema("avro", wide))) \
        is None


def test_a_row_that_does_not_fit_an_explicit_schema_names_the_row():
    from sinks.kafka.formats import RecordEncodeError

    schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"},
                                                                   {"name": "name", "type": "string"}]})
    rows = [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
    struct = StructType([StructField("id", LongType(), False), StructField("name", StringType(), True)])
    with pytest.raises(RecordEncodeError, match="row 1 does not fit the avro schema") as info:
        encode_batch(batch(struct, rows), EncodingSpec("avro", schema))
    assert info.value.row == 1
