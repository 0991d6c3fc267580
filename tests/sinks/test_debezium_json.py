"""debezium-json without Kafka: each record is Debezium's JsonConverter output (with and without the schema/payload
wrapper), time written as Debezium's logical types, tombstones follow deletes, a stream without the envelope is
refused naming changelog.envelope."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from connectors.errors import OptionError
from connectors.options import OptionReader
from impulse.debezium import COLUMNS
from sinks.kafka.encoding import read_formats, resolve
from sinks.kafka.formats.debezium import (
    ENVELOPE_COLUMNS,
    _struct_json,
    check_envelope,
    connect_schema,
    encode_json,
    json_spec,
    tombstone_index,
)
from tests.impulse.test_debezium import SCHEMA, rows_of


def test_the_sink_knows_the_sources_columns():
    assert ENVELOPE_COLUMNS == COLUMNS


def records(schemas_enable: bool, rows: list[dict], topic: str = "bank.accounts") -> list[tuple[dict, dict]]:
    batch = pa.RecordBatch.from_pylist(rows, schema=pa.schema([
        pa.field("key", pa.struct([pa.field("id", pa.int64(), False)]), False),
        pa.field("before", pa.struct([("id", pa.int64()), ("name", pa.string()), ("balance", pa.float64())])),
        pa.field("after", pa.struct([("id", pa.int64()), ("name", pa.string()), ("balance", pa.float64())])),
        pa.field("op", pa.string(), False), pa.field("ts_ms", pa.int64(), False),
        pa.field("source", pa.struct([pa.field(n, pa.int64() if n == "pos" else pa.string(), False)
                                      for n in ("connector", "name", "table", "snapshot", "pos")]), False)]))
    keys, values = encode_json(batch, json_spec(SCHEMA, topic, schemas_enable))
    return [(json.loads(k), json.loads(v)) for k, v in zip(keys.to_pylist(), values.to_pylist())]


@pytest.mark.parametrize("schemas_enable", [False, True])
def test_records_are_the_rows_as_debezium_writes_them(schemas_enable):
    rows = rows_of({"changelog.liveKeys": "4", "changelog.weights": "1,2,1", "changelog.snapshot": "true"},
                   partitions=2, per_partition=40)
    for row, (key, value) in zip(rows, records(schemas_enable, rows), strict=True):
        if schemas_enable:
            assert key["schema"] == {"type": "struct", "optional": False, "name": "bank.accounts.Key",
                                     "fields": [{"type": "int64", "optional": False, "field": "id"}]}
            assert [f["field"] for f in value["schema"]["fields"]] == ["before", "after", "source", "op", "ts_ms"]
            assert value["schema"]["name"] == "bank.accounts.Envelope"
            assert value["schema"]["fields"][0]["fields"][2] == {"type": "double", "optional": True, "field": "balance"}
            key, value = key["payload"], value["payload"]
        assert key == row["key"]
        assert list(value) == ["before", "after", "source", "op", "ts_ms"]
        assert value == {name: row[name] for name in value}
    assert {r["op"] for r in rows} == {"r", "u", "d", "c"}


def test_time_is_written_as_debezium_micro_timestamps_and_dates():
    kind = T.StructType([T.StructField("at", T.TimestampType()), T.StructField("day", T.DateType())])
    assert connect_schema(kind, True)["fields"] == [
        {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1, "optional": True, "field": "at"},
        {"type": "int32", "name": "io.debezium.time.Date", "version": 1, "optional": True, "field": "day"}]
    with pytest.raises(OptionError, match="cast the decimal\\(10,2\\) field 'amount' to DOUBLE or STRING"):
        connect_schema(T.StructType([T.StructField("amount", T.DecimalType(10, 2))]), True)
    column = pa.array([{"at": 1_500_000, "day": 3}, None], pa.struct([("at", pa.timestamp("us", "UTC")),
                                                                      ("day", pa.date32())]))
    assert _struct_json(column).to_pylist() == ['{"at":1500000,"day":3}', "null"]


def test_a_tombstone_follows_each_delete():
    index, tombstone = tombstone_index(pa.array(["c", "d", "u", "d", "d"]))
    assert index.tolist() == [0, 1, 1, 2, 3, 3, 4, 4]
    assert tombstone.tolist() == [False, False, True, False, False, True, False, True]


@pytest.mark.parametrize("options, option, text", [
    ({"value.format": "debezium-json"}, "value.format", "changelog.envelope"),
    ({"value.format": "json", "tombstones.on.delete": "false"}, "tombstones.on.delete", "debezium-json"),
    ({"value.format": "json", "schemas.enable": "false"}, "schemas.enable", "debezium-json"),
])
def test_debezium_options_need_the_envelope_and_the_format(options, option, text):
    plain = T.StructType([T.StructField("counter", T.LongType()), T.StructField("op", T.StringType())])
    reader = OptionReader(options, name="kafka sink")
    with pytest.raises(OptionError, match=rf"option '{option}'.*{text}"):
        resolve(reader, read_formats(reader), plain, "t")


def test_the_key_format_is_the_envelopes():
    reader = OptionReader({"value.format": "debezium-json", "key.format": "json"}, name="kafka sink")
    with pytest.raises(OptionError, match="key.format"):
        resolve(reader, read_formats(reader), SCHEMA, "t")
    check_envelope(SCHEMA, "debezium-json")  # the source's envelope passes
