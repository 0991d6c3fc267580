"""The Kafka sink's record encoding without servers: the format options refused at build with the option named, the
record columns, null STRUCT values as tombstones, and rows that do not fit an explicit schema kept with their reason."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from connectors.errors import OptionError
from connectors.options import OptionReader
from sinks.kafka.encoding import SideEncoding, encode_side, read_formats, resolve
from sinks.kafka.formats import EncodingSpec, split_header

SCHEMA = {"type": "record", "name": "Value", "namespace": "impulse",
          "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
ROW = StructType([StructField("id", LongType(), False), StructField("name", StringType(), True)])


def _resolve(options: dict, schema: StructType, topic: str | None = "t"):
    reader = OptionReader(options, name="kafka sink")
    return resolve(reader, read_formats(reader), schema, topic)


def _decode(record: bytes) -> dict:
    schema_id, payload = split_header(record)
    assert schema_id == 7
    return fastavro.schemaless_reader(io.BytesIO(payload), fastavro.parse_schema(SCHEMA))


@pytest.mark.parametrize("options,schema,words", [
    ({"value.format": "xml"}, ROW, "'value.format'.*'avro'"),
    ({"value.schema": "{}"}, ROW, "'value.schema'.*value.format 'raw'"),
    ({"value.format": "avro", "schema.registry.url": "http://x"},
     StructType([StructField("value", StringType())]), "'value.format'.*STRUCT 'value' column"),
    ({"key.format": "json"}, ROW, "'key.format'.*without a 'key' column"),
    ({"value.format": "json"}, StructType([StructField("key", StringType())]), "every column is a Kafka column"),
    ({"value.format": "avro"}, ROW, "'schema.registry.url'"),
    ({"value.format": "avro", "schema.registry.url": "http://x", "value.subject.name.strategy": "name"}, ROW,
     "'value.subject.name.strategy'.*topic_record"),
])
def test_bad_format_options_name_the_option(options, schema, words):
    with pytest.raises(OptionError, match=words):
        _resolve(options, schema)


def test_a_topic_strategy_needs_the_topic_option():
    with pytest.raises(OptionError, match="'topic'.*subject"):
        _resolve({"value.format": "avro", "schema.registry.url": "http://x"}, ROW, topic=None)


def test_json_records_are_every_column_but_the_kafka_ones():
    schema = StructType([StructField("key", StringType()), StructField("id", LongType()),
                         StructField("headers", BinaryType())])
    encodings = _resolve({"value.format": "json"}, schema)
    assert encodings.value.fields == ("id",) and encodings.key is None
    batch = pa.record_batch([pa.array(["k"]), pa.array([3]), pa.array([b"h"])], names=["key", "id", "headers"])
    values, unfit = encode_side(batch, encodings.value)
    assert [json.loads(v) for v in values.to_pylist()] == [{"id": 3}] and unfit is None


def test_rows_that_do_not_fit_are_kept_as_json_with_their_reason():
    spec = SideEncoding("value", EncodingSpec("avro", json.dumps(SCHEMA), 7), ("id", "name"))
    batch = pa.record_batch([pa.array([1, 2, 3, 4]), pa.array(["a", None, "c", None])], names=["id", "name"])
    values, unfit = encode_side(batch, spec)
    assert [r is not None for r in unfit] == [False, True, False, True]
    assert all(r.startswith("SCHEMA_MISMATCH: the row does not fit the avro schema") for r in unfit if r)
    records = values.to_pylist()
    assert [_decode(records[i]) for i in (0, 2)] == [{"id": 1, "name": "a"}, {"id": 3, "name": "c"}]
    assert [json.loads(records[i]) for i in (1, 3)] == [{"id": 2, "name": None}, {"id": 4, "name": None}]


def test_a_null_struct_value_is_a_tombstone_and_encoding_is_deterministic():
    spec = SideEncoding("value", EncodingSpec("avro", json.dumps(SCHEMA), 7))
    struct = pa.StructArray.from_arrays([pa.array([1, 2, 3]), pa.array(["a", "b", "c"])], names=["id", "name"],
                                        mask=pa.array([False, True, False]))
    batch = pa.record_batch([struct], names=["value"])
    values, unfit = encode_side(batch, spec)
    assert unfit is None and values.is_null().to_pylist() == [False, True, False]
    assert [_decode(v) for v in values.to_pylist() if v is not None] == [{"id": 1, "name": "a"}, {"id": 3, "name": "c"}]
    assert encode_side(batch, spec)[0].equals(values)
