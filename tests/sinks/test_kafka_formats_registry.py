"""Record formats against a real Schema Registry (Apicurio Registry), read back by confluent-kafka's own
deserializers as independent readers: Avro, Protobuf and JSON Schema, flat and nested rows, nulls, decimals,
timestamps; the subject strategies, use.latest.version, a refused incompatible schema, an unreachable registry."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from connectors.errors import OptionError
from connectors.servers import free_port
from sinks.kafka.formats import (RegistryError, encode_batch, protobuf_message_class,
                                 registry_options, resolve_encoding, split_header)
from tests.sinks.formats_data import FLAT, FLAT_ROWS, NESTED, NESTED_ROWS, UTC, batch

pytestmark = [pytest.mark.integration, pytest.mark.schema_registry]

CASES = [("flat", FLAT, FLAT_ROWS), ("nested", NESTED, NESTED_ROWS)]


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def _options(registry, **extra) -> dict[str, str]:
    return {"schema.registry.url": registry.url, **extra}


def _client(registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": registry.url})


def _ctx(topic: str):
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext(topic, MessageField.VALUE)


def _pb_plain(message) -> dict:
    """A Protobuf message as plain Python values, nulls where a field with presence is unset."""
    out = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = {k: (_pb_value(v, _decimal) if hasattr(v, "DESCRIPTOR") else v)
                               for k, v in value.items()}
        elif getattr(field, "is_repeated", False):
            out[field.name] = [_pb_value(v, _decimal) if hasattr(v, "DESCRIPTOR") else v for v in value]
        elif field.has_presence and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _pb_value(value, _decimal) if hasattr(value, "DESCRIPTOR") else value
    return out


def _decimal(message) -> Decimal:
    """confluent.type.Decimal: the unscaled value as big-endian two's complement bytes, and its scale."""
    return Decimal(int.from_bytes(message.value, "big", signed=True)).scaleb(-message.scale)


def _pb_value(value, to_decimal):
    name = value.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        return value.ToDatetime(tzinfo=UTC)
    if name == "google.type.Date":
        return dt.date(value.year, value.month, value.day)
    if name == "confluent.type.Decimal":
        return to_decimal(value)
    return _pb_plain(value)


def _json_expected(value):
    """What a JSON reader sees for a row value: the encoder's JSON conventions."""
    import base64

    if isinstance(value, dict):
        return {k: _json_expected(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_expected(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, Decimal):
        return float(value)
    return value


@pytest.mark.parametrize("case,struct,rows", CASES, ids=[c[0] for c in CASES])
def test_avro_round_trip_read_by_avro_deserializer(schema_registry, case, struct, rows):
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    topic = _topic()
    spec = resolve_encoding("avro", struct, topic, registry_options(_options(schema_registry)))
    records = encode_batch(batch(struct, rows), spec).to_pylist()
    reader = AvroDeserializer(_client(schema_registry))
    assert [split_header(r)[0] for r in records] == [spec.schema_id] * len(rows)
    assert [reader(r, _ctx(topic)) for r in records] == rows


@pytest.mark.parametrize("case,struct,rows", CASES, ids=[c[0] for c in CASES])
def test_protobuf_round_trip_read_by_protobuf_deserializer(schema_registry, case, struct, rows):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    topic = _topic()
    spec = resolve_encoding("protobuf", struct, topic, registry_options(_options(schema_registry)))
    records = encode_batch(batch(struct, rows), spec).to_pylist()
    reader = ProtobufDeserializer(protobuf_message_class(spec.schema), {"use.deprecated.format": False})
    decoded = [_pb_plain(reader(r, _ctx(topic))) for r in records]
    # Protobuf has no null list or map: a null STRUCT reads back as null, arrays and maps as written
    assert decoded == rows
    assert f"{topic}-value" in _client(schema_registry).get_subjects()


@pytest.mark.parametrize("case,struct,rows", CASES, ids=[c[0] for c in CASES])
def test_json_schema_round_trip_read_by_json_deserializer(schema_registry, case, struct, rows):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    topic = _topic()
    spec = resolve_encoding("json-schema", struct, topic, registry_options(_options(schema_registry)))
    records = encode_batch(batch(struct, rows), spec).to_pylist()
    reader = JSONDeserializer(None, schema_registry_client=_client(schema_registry))  # validates against the schema
    assert [reader(r, _ctx(topic)) for r in records] == [_json_expected(r) for r in rows]


@pytest.mark.parametrize("strategy", ["topic", "record", "topic_record"])
@pytest.mark.parametrize("fmt", ["avro", "protobuf", "json-schema"])
def test_subject_name_strategies(schema_registry, strategy, fmt):
    topic = _topic()
    namespace = f"ns{uuid.uuid4().hex[:8]}"
    options = registry_options(_options(schema_registry, **{"value.subject.name.strategy": strategy}))
    spec = resolve_encoding(fmt, FLAT, topic, options, name="Order", namespace=namespace)
    expected = {"topic": f"{topic}-value", "record": f"{namespace}.Order",
                "topic_record": f"{topic}-{namespace}.Order"}[strategy]
    client = _client(schema_registry)
    assert expected in client.get_subjects()
    assert client.get_latest_version(expected).schema_id == spec.schema_id


def test_key_side_uses_key_subject(schema_registry):
    topic = _topic()
    key = StructType([StructField("k", StringType(), False)])
    spec = resolve_encoding("avro", key, topic, registry_options(_options(schema_registry), side="key"))
    assert _client(schema_registry).get_latest_version(f"{topic}-key").schema_id == spec.schema_id
    assert json.loads(spec.schema)["name"] == "Key"


def test_use_latest_version_takes_the_subjects_latest_schema(schema_registry):
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    topic = _topic()
    registered = {"type": "record", "name": "Value", "namespace": "impulse", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": "none"}]}
    first = resolve_encoding("avro", FLAT, topic, registry_options(_options(
        schema_registry, **{"value.schema": json.dumps(registered)})))
    struct = StructType([StructField("id", LongType(), False), StructField("note", StringType(), False)])
    spec = resolve_encoding("avro", struct, topic, registry_options(_options(
        schema_registry, **{"use.latest.version": "true", "auto.register.schemas": "false"})))
    assert spec.schema_id == first.schema_id and json.loads(spec.schema) == registered
    record = encode_batch(batch(struct, [{"id": 5, "note": "x"}]), spec).to_pylist()[0]
    assert AvroDeserializer(_client(schema_registry))(record, _ctx(topic)) == {"id": 5, "note": "x"}


def test_without_auto_register_an_unregistered_schema_names_the_subject(schema_registry):
    topic = _topic()
    with pytest.raises(RegistryError, match=f"subject '{topic}-value'.*auto.register.schemas=true"):
        resolve_encoding("avro", FLAT, topic, registry_options(_options(
            schema_registry, **{"auto.register.schemas": "false"})))
    resolve_encoding("avro", FLAT, topic, registry_options(_options(schema_registry)))
    again = resolve_encoding("avro", FLAT, topic, registry_options(_options(
        schema_registry, **{"auto.register.schemas": "false"})))
    assert _client(schema_registry).get_latest_version(f"{topic}-value").schema_id == again.schema_id


def test_incompatible_schema_is_refused_quoting_the_registry(schema_registry):
    topic = _topic()
    v1 = StructType([StructField("id", LongType(), False)])
    resolve_encoding("avro", v1, topic, registry_options(_options(schema_registry)))
    schema_registry.set_compatibility(f"{topic}-value", "BACKWARD")
    v2 = StructType([StructField("id", LongType(), False), StructField("name", StringType(), False)])
    with pytest.raises(RegistryError, match=rf"subject '{topic}-value': HTTP 409.*compatibility rule") as info:
        resolve_encoding("avro", v2, topic, registry_options(_options(schema_registry)))
    assert "name" in str(info.value)  # the registry's reason names the field it refuses
    # a compatible change (a nullable field, default null) is accepted under the same rule
    v3 = StructType([StructField("id", LongType(), False), StructField("name", StringType(), True)])
    resolve_encoding("avro", v3, topic, registry_options(_options(schema_registry)))
    assert len(_client(schema_registry).get_versions(f"{topic}-value")) == 2


def test_registry_down_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    with pytest.raises(RegistryError, match=r"cannot reach the Schema Registry at .*'schema.registry.url'.*subject"):
        resolve_encoding("avro", FLAT, "orders", registry_options({"schema.registry.url": url}))


def test_explicit_json_schema_without_title_is_refused_only_by_the_record_strategies(schema_registry):
    text = json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}})
    spec = resolve_encoding("json-schema", FLAT, _topic(), registry_options(_options(schema_registry,
                                                                                     **{"value.schema": text})))
    assert spec.schema == text
    with pytest.raises(OptionError, match="'value.schema'.*title"):
        resolve_encoding("json-schema", FLAT, _topic(), registry_options(_options(
            schema_registry, **{"value.schema": text, "value.subject.name.strategy": "record"})))


@pytest.mark.parametrize("fmt,text", [("avro", "not json"), ("protobuf", "syntax = 'proto3'; message M {}"),
                                      ("json-schema", "[1]")])
def test_explicit_schema_that_is_not_a_schema_names_the_option(schema_registry, fmt, text):
    with pytest.raises(OptionError, match="'value.schema'"):
        resolve_encoding(fmt, FLAT, _topic(), registry_options(_options(schema_registry, **{"value.schema": text})))

