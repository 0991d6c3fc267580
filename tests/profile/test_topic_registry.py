"""impulse-profile on a Kafka topic of Avro values in Confluent's wire format, written by kafka-sink through the
real Schema Registry (Apicurio) from Vega's cars (a nested ``engine`` record, a ``tags`` array, timestamps,
decimals, nulls; its schema then evolved), and a JSON Schema and a Protobuf topic beside it, profiled by one
command: the Avro and Protobuf specs' schemas are the written frames' own and the generated data is within the
fidelity bound. The refusals (no ``schema.registry.url``, framed and plain values mixed) and the Avro and
Protobuf → Spark type mappings have fast unit tests."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
import vega_datasets
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from connectors.errors import OptionError
from impulse.profile.protobuf import spark_type
from impulse.profile.registry import avro_spark_type, check_framing, registry_conf
from sinks.kafka.formats import protobuf_descriptor, protobuf_message_class

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

DATA = Path(vega_datasets.__file__).parent / "_data"
UTC = dt.timezone.utc


def _rows() -> list[dict]:
    cars = json.loads((DATA / "cars.json").read_text())
    return [{"id": i, "name": c["Name"], "origin": c["Origin"],
             "built": dt.datetime.fromisoformat(c["Year"]).replace(tzinfo=UTC) + dt.timedelta(hours=i % 24),
             "weight": Decimal(c["Weight_in_lbs"]).quantize(Decimal("0.1")),
             "mpg": None if c["Miles_per_Gallon"] is None else float(c["Miles_per_Gallon"]),
             "engine": {"cylinders": c["Cylinders"], "horsepower": c["Horsepower"]},
             "tags": [c["Origin"].lower()] + (["efficient"] if (c["Miles_per_Gallon"] or 0) > 30 else [])}
            for i, c in enumerate(cars)]


def _write(frame, kafka_broker, schema_registry, fmt: str, topic: str | None = None) -> str:
    topic = topic or kafka_broker.create_topic(f"{fmt}-cars-{uuid.uuid4().hex[:8]}", partitions=2)
    (frame.write.format("kafka-sink").mode("append").option("commitId", uuid.uuid4().hex)
     .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic)
     .option("value.format", fmt).option("schema.registry.url", schema_registry.url).save())
    return topic


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.schema_registry
def test_avro_json_schema_and_protobuf_topics_are_profiled_through_the_registry(spark, kafka_broker,
                                                                               schema_registry, tmp_path):
    schema = StructType([
        StructField("id", LongType(), False), StructField("name", StringType()), StructField("origin", StringType()),
        StructField("built", TimestampType()), StructField("weight", DecimalType(8, 1)),
        StructField("mpg", DoubleType()),
        StructField("engine", StructType([StructField("cylinders", LongType()),
                                          StructField("horsepower", LongType())])),
        StructField("tags", ArrayType(StringType()))])
    frame = spark.createDataFrame(_rows(), schema)
    avro = _write(frame, kafka_broker, schema_registry, "avro")
    # then the schema evolves (a nullable column added, a second schema id): the older records are decoded with
    # their own schema resolved to the newest, their new column null
    evolved = frame.limit(40).withColumn("colour", F.when(F.col("id") >= 0, F.lit("red")))  # nullable
    _write(evolved, kafka_broker, schema_registry, "avro", topic=avro)
    # no unique column in the second topic: no foreign key between the two
    jsons = _write(frame.select("origin", "mpg", "engine"), kafka_broker, schema_registry, "json-schema")
    protos = _write(frame.select("name", "built", "mpg", "engine"), kafka_broker, schema_registry, "protobuf")

    # one command, both topics (one Spark start): the registry options apply to each
    run = subprocess.run([sys.executable, "-m", "impulse.profile.cli", f"kafka://{kafka_broker.bootstrap}/{avro}",
                          f"kafka://{kafka_broker.bootstrap}/{jsons}",
                          f"kafka://{kafka_broker.bootstrap}/{protos}", "--sample", "500", "--output", str(tmp_path),
                          "--master", "local[2]", "--min-fidelity", "TV=0.1",
                          "-o", f"schema.registry.url={schema_registry.url}"],
                         capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert run.returncode == 0, run.stderr[-3000:]
    spec = tomllib.loads((tmp_path / f"{avro}.toml").read_text())
    assert StructType.fromDDL(spec["schema"]) == evolved.schema, spec["schema"]  # the newest writer's, exactly
    assert "446 rows sampled" in (tmp_path / f"{avro}.toml").read_text()
    # JSON Schema values are parsed as JSON: their schema inferred from the values (Spark's JSON reader)
    inferred = StructType.fromDDL(tomllib.loads((tmp_path / f"{jsons}.toml").read_text())["schema"])
    assert inferred.fieldNames() == ["engine", "mpg", "origin"]
    assert inferred["engine"].dataType.fieldNames() == ["cylinders", "horsepower"]
    # Protobuf: the descriptor's types (scalars with presence nullable, messages nullable)
    assert StructType.fromDDL(tomllib.loads((tmp_path / f"{protos}.toml").read_text())["schema"]) == \
        frame.select("name", "built", "mpg", "engine").schema
    report = json.loads((tmp_path / "fidelity.json").read_text())
    paths = {c["path"]: c for c in report["columns"]}
    assert {f"{avro}.{p}" for p in ("engine.cylinders", "engine.horsepower", "built", "weight", "tags.element")} \
        | {f"{jsons}.engine.horsepower", f"{jsons}.origin", f"{protos}.built", f"{protos}.engine.cylinders"} \
        <= set(paths), sorted(paths)
    assert paths[f"{avro}.origin"]["generator"] == "values" and paths[f"{avro}.engine.horsepower"]["null_sample"] > 0
    assert paths[f"{avro}.colour"]["null_sample"] == pytest.approx(406 / 446, abs=1e-3)
    assert not report["missed"]
    # every scalar leaf within KS 0.1 (an array's size is generated uniform over its range: out of the gate)
    assert all(c["distance"] <= 0.1 for c in report["columns"]
               if c["metric"] == "KS" and c["path"] != f"{avro}.tags"), \
        [(c["path"], c["distance"]) for c in report["columns"]]


def test_protobuf_descriptors_map_to_the_spark_types_kafka_sink_writes_them_from():
    struct = StructType([
        StructField("id", LongType(), False), StructField("n", IntegerType(), True),
        StructField("at", TimestampType(), True), StructField("day", DateType(), True),
        StructField("tags", ArrayType(StringType(), False), False),
        StructField("attrs", MapType(StringType(), DoubleType(), False), False),
        StructField("inner", StructType([StructField("x", StringType(), True)]), True)])
    descriptor = protobuf_message_class(base64.b64encode(protobuf_descriptor(struct).SerializeToString()).decode())
    assert spark_type(descriptor.DESCRIPTOR) == struct


def test_framed_values_without_the_registry_url_are_refused_naming_the_option():
    with pytest.raises(OptionError, match=r"schema\.registry\.url.*kafka://b:9092/t .*wire format .*\[3, 7\]"):
        check_framing("kafka://b:9092/t", [3, 7], 0, registry_conf({"kafka.security.protocol": "SSL"}))
    with pytest.raises(OptionError, match=r"kafka://b:9092/t.*2 of the sample are not framed.*\[3\]"):
        check_framing("kafka://b:9092/t", [3], 2, registry_conf({"schema.registry.url": "http://r"}))
    check_framing("kafka://b:9092/t", [3], 0, registry_conf({"schema.registry.url": "http://r"}))


def test_registry_options_read_the_environment_and_name_an_unset_variable(monkeypatch):
    monkeypatch.setenv("IMPULSE_TEST_AUTH", "u:p")
    monkeypatch.delenv("IMPULSE_TEST_UNSET", raising=False)
    assert registry_conf({"schema.registry.url": "http://r", "schema.registry.basic.auth.user.info":
                          "${ENV:IMPULSE_TEST_AUTH}", "kafka.security.protocol": "SSL"}) == \
        {"url": "http://r", "basic.auth.user.info": "u:p"}
    with pytest.raises(OptionError, match=r"schema\.registry\.ssl\.ca\.location.*IMPULSE_TEST_UNSET"):
        registry_conf({"schema.registry.ssl.ca.location": "${ENV:IMPULSE_TEST_UNSET}"})


def test_avro_types_map_to_the_spark_types_kafka_sink_writes_them_from():
    record = {"type": "record", "name": "R", "namespace": "n", "fields": [
        {"name": "a", "type": "int"},
        {"name": "b", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "c", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "d", "type": {"type": "int", "logicalType": "date"}},
        {"name": "e", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "f", "type": {"type": "enum", "name": "Colour", "symbols": ["RED"]}},
        {"name": "g", "type": {"type": "map", "values": ["null", "Colour"]}},
        {"name": "h", "type": {"type": "array", "items": {"type": "record", "name": "I", "fields": [
            {"name": "x", "type": "string"}]}}},
        {"name": "i", "type": ["null", "n.I"]}]}
    element = StructType([StructField("x", StringType(), False)])
    assert avro_spark_type(record) == (StructType([
        StructField("a", IntegerType(), False), StructField("b", TimestampType(), True),
        StructField("c", TimestampNTZType(), False), StructField("d", DateType(), False),
        StructField("e", DecimalType(9, 2), False), StructField("f", StringType(), False),
        StructField("g", MapType(StringType(), StringType(), True), False),
        StructField("h", ArrayType(element, False), False), StructField("i", element, True)]), False)


@pytest.mark.parametrize("schema, named", [
    ({"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]}, "value.u"),
    ({"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]}, "value.next"),
])
def test_avro_schemas_spark_cannot_hold_are_refused_naming_the_field(schema, named):
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        avro_spark_type(schema)
