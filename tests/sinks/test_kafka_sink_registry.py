"""kafka-sink with value.format avro / protobuf / json-schema through Spark, against the real Schema Registry
(Apicurio Registry) and the real broker, read back by confluent-kafka's own deserializers: flat and nested rows,
nulls, decimals, timestamps; every record once across a SIGKILLed driver; an incompatible schema and an
unreachable registry refused at start with nothing written; rows that do not fit an explicit schema dead-lettered."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest

from connectors.conformance import expected_events
from connectors.servers import free_port
from sinks.kafka.formats import protobuf_message_class, split_header
from tests.sinks.formats_data import FLAT, FLAT_ROWS, NESTED, NESTED_ROWS
from tests.sinks.poison_driver import kill_mid_batch, start
from tests.readme import DOCS, python_block
from tests.sinks.test_kafka_formats_registry import _client, _ctx, _json_expected, _pb_plain

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.schema_registry]


def _topic(kafka_broker, partitions: int = 2) -> str:
    return kafka_broker.create_topic(f"reg-{uuid.uuid4().hex[:10]}", partitions=partitions)


def _write(frame, options: dict[str, str]) -> None:
    writer = frame.write.format("kafka-sink").mode("append").option("commitId", uuid.uuid4().hex)
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()


def _options(kafka_broker, schema_registry, topic: str, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": kafka_broker.bootstrap, "topic": topic,
            "schema.registry.url": schema_registry.url, **extra}


def _reader(fmt: str, schema_registry, topic: str):
    """confluent-kafka's deserializer of `fmt`, as plain Python values comparable with the rows written."""
    client = _client(schema_registry)
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        avro = AvroDeserializer(client)
        return lambda record: avro(record, _ctx(topic))
    if fmt == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        schema = client.get_schema(client.get_latest_version(f"{topic}-value").schema_id, fmt="serialized").schema_str
        proto = ProtobufDeserializer(protobuf_message_class(schema), {"use.deprecated.format": False})
        return lambda record: _pb_plain(proto(record, _ctx(topic)))
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    jsons = JSONDeserializer(None, schema_registry_client=client)  # validates each record against its schema
    return lambda record: jsons(record, _ctx(topic))


@pytest.mark.parametrize("shape", ["flat", "nested"])
@pytest.mark.parametrize("fmt", ["avro", "protobuf", "json-schema"])
def test_rows_read_back_by_confluent_deserializers(spark, kafka_broker, schema_registry, fmt, shape):
    topic = _topic(kafka_broker)
    if shape == "flat":  # no value column: every column is the record
        frame, rows = spark.createDataFrame(FLAT_ROWS, FLAT), FLAT_ROWS
    else:  # a STRUCT value column, next to a raw key
        frame = spark.createDataFrame(NESTED_ROWS, NESTED).selectExpr("CAST(id AS STRING) AS key",
                                                                      "struct(*) AS value")
        rows = NESTED_ROWS
    _write(frame, _options(kafka_broker, schema_registry, topic, **{"value.format": fmt}))

    messages = kafka_broker.consume_all(topic)
    schema_id = _client(schema_registry).get_latest_version(f"{topic}-value").schema_id
    assert {split_header(m.value())[0] for m in messages} == {schema_id}
    read = _reader(fmt, schema_registry, topic)
    decoded = sorted((read(m.value()) for m in messages), key=lambda r: r["id"])
    expected = sorted(rows, key=lambda r: r["id"])
    assert decoded == ([_json_expected(r) for r in expected] if fmt == "json-schema" else expected)
    if shape == "nested":
        assert sorted(m.key() for m in messages) == sorted(str(r["id"]).encode() for r in rows)


@pytest.mark.parametrize("strategy", ["record", "topic_record"])
def test_record_strategies_with_an_avro_key(spark, kafka_broker, schema_registry, strategy):
    topic, namespace = _topic(kafka_broker), f"n{uuid.uuid4().hex[:6]}"
    frame = spark.range(5).selectExpr("named_struct('k', id) AS key", "named_struct('id', id, 'x', 'a') AS value")
    _write(frame, _options(kafka_broker, schema_registry, topic, **{
        "value.format": "avro", "key.format": "avro", "value.subject.name.strategy": strategy,
        "value.schema": json.dumps({"type": "record", "name": "Event", "namespace": namespace,
                                    "fields": [{"name": "id", "type": "long"}, {"name": "x", "type": "string"}]})}))
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    reader = AvroDeserializer(_client(schema_registry))
    messages = kafka_broker.consume_all(topic)
    assert sorted(reader(m.value(), _ctx(topic))["id"] for m in messages) == list(range(5))
    keys = [reader(m.key(), SerializationContext(topic, MessageField.KEY)) for m in messages]
    assert sorted(k["k"] for k in keys) == list(range(5))
    subjects = _client(schema_registry).get_subjects()
    value_subject = f"{namespace}.Event" if strategy == "record" else f"{topic}-{namespace}.Event"
    assert {f"{topic}-key", value_subject} <= set(subjects) and f"{topic}-value" not in subjects


def test_an_incompatible_schema_is_refused_at_start_with_nothing_written(spark, kafka_broker, schema_registry):
    topic = _topic(kafka_broker)
    options = _options(kafka_broker, schema_registry, topic, **{"value.format": "avro"})
    _write(spark.range(3).selectExpr("id"), options)
    schema_registry.set_compatibility(f"{topic}-value", "BACKWARD")
    with pytest.raises(Exception, match=rf"subject '{topic}-value': HTTP 409.*compatibility rule"):
        _write(spark.range(3).selectExpr("id", "'x' AS name"), options)  # a new required field
    assert len(kafka_broker.consume_all(topic)) == 3


def test_the_registry_down_at_start_fails_the_query_naming_it(spark, kafka_broker, tmp_path):
    topic = _topic(kafka_broker)
    url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    query = start(spark, "kafka-sink", {"kafka.bootstrap.servers": kafka_broker.bootstrap, "topic": topic,
                                        "value.format": "avro", "schema.registry.url": url},
                  100, 100, str(tmp_path / "ck"), ["subtask_index", "counter"])
    with pytest.raises(Exception, match=r"cannot reach the Schema Registry at .*'schema.registry.url'"):
        query.awaitTermination(120)
    assert kafka_broker.consume_all(topic) == []


UNFIT_SCHEMA = json.dumps({"type": "record", "name": "Value", "namespace": "impulse", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]})


def test_rows_that_do_not_fit_an_explicit_schema_are_dead_lettered(spark, kafka_broker, schema_registry):
    topic, dead = _topic(kafka_broker), _topic(kafka_broker, 1)
    frame = spark.range(20).selectExpr("id", "CASE WHEN id % 7 = 3 THEN NULL ELSE 'n' END AS name")
    _write(frame, _options(kafka_broker, schema_registry, topic, **{
        "value.format": "avro", "value.schema": UNFIT_SCHEMA, "deadLetterTopic": dead}))
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    reader = AvroDeserializer(_client(schema_registry))
    ids = sorted(reader(m.value(), _ctx(topic))["id"] for m in kafka_broker.consume_all(topic))
    assert ids == [i for i in range(20) if i % 7 != 3]
    letters = kafka_broker.consume_all(dead)
    assert sorted(json.loads(m.value())["id"] for m in letters) == [3, 10, 17]
    headers = dict(letters[0].headers())
    assert headers["impulse.error.code"] == b"SCHEMA_MISMATCH" and b"avro schema" in headers["impulse.error.reason"]


def test_without_a_dead_letter_topic_an_unfit_row_fails_naming_row_and_field(spark, kafka_broker, schema_registry):
    topic = _topic(kafka_broker, 1)
    frame = spark.range(5).coalesce(1).selectExpr("id", "CASE WHEN id = 2 THEN NULL ELSE 'n' END AS name")
    with pytest.raises(Exception, match=r"row 2 .*does not fit the avro schema.*name"):
        _write(frame, _options(kafka_broker, schema_registry, topic, **{
            "value.format": "avro", "value.schema": UNFIT_SCHEMA}))
    assert kafka_broker.consume_all(topic) == []


ROWS, PER_TRIGGER = 6_000, 1_000


def test_every_record_once_across_a_killed_driver(spark, kafka_broker, schema_registry, tmp_path):
    topic = _topic(kafka_broker)
    options = _options(kafka_broker, schema_registry, topic, **{"value.format": "avro"})
    columns = ["CAST(subtask_index AS STRING) AS key", "named_struct('subtask_index', subtask_index, 'counter', "
               "counter, 'timestamp', timestamp, 'lane', CAST(lane AS INT)) AS value"]
    checkpoint = str(tmp_path / "ck")
    kill_mid_batch({"format": "kafka-sink", "options": options, "rows": ROWS, "perTrigger": PER_TRIGGER,
                    "checkpoint": checkpoint, "columns": columns})
    query = start(spark, "kafka-sink", options, ROWS, PER_TRIGGER, checkpoint, columns)
    query.awaitTermination(240)
    assert query.exception() is None
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    reader = AvroDeserializer(_client(schema_registry))
    decoded = [reader(m.value(), _ctx(topic)) for m in kafka_broker.consume_all(topic)]
    assert sorted((r["subtask_index"], r["counter"]) for r in decoded) == expected_events(ROWS)


def test_the_readme_avro_block_runs(spark, kafka_broker, schema_registry, tmp_path):
    """The README's "Record formats and the Schema Registry" block as written (the broker's and the registry's
    addresses, a topic and a checkpoint of the test's own filled in): nested events read back by AvroDeserializer."""
    topic = _topic(kafka_broker)
    block = (python_block("## Record formats and the Schema Registry", page=DOCS / "how-to" / "kafka-sink.md")
             .replace("localhost:9092", kafka_broker.bootstrap)
             .replace("http://localhost:8080/apis/ccompat/v7", schema_registry.url)
             .replace('"orders"', f'"{topic}"').replace("/tmp/ck-orders", str(tmp_path / "ck")))
    namespace: dict = {"spark": spark, "print": lambda *_: None}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    assert len(kafka_broker.consume_all(topic)) == 100
    order = namespace["order"]
    assert set(order) == {"id", "at", "customer", "amount", "tags"} and order["tags"] == ["web", "promo"]
    assert isinstance(order["at"], dt.datetime) and order["at"].tzinfo is not None
    assert order["amount"] == Decimal(order["id"] * 125).scaleb(-2)
    assert order["customer"] == {"id": order["id"] % 7, "tier": "gold" if order["id"] % 2 == 0 else None}


def test_use_latest_version_writes_with_the_subjects_schema(spark, kafka_broker, schema_registry):
    topic = _topic(kafka_broker)
    registered = {"type": "record", "name": "Legacy", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"], "default": None}]}
    schema_id = schema_registry.request("POST", f"/subjects/{topic}-value/versions",
                                        {"schema": json.dumps(registered)})["id"]
    frame = spark.range(4).selectExpr("id", "IF(id % 2 = 0, 'even', NULL) AS name")
    _write(frame, _options(kafka_broker, schema_registry, topic, **{
        "value.format": "avro", "use.latest.version": "true", "auto.register.schemas": "false"}))
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    messages = kafka_broker.consume_all(topic)
    assert {split_header(m.value())[0] for m in messages} == {schema_id}
    reader = AvroDeserializer(_client(schema_registry))
    assert sorted((r["id"], r["name"]) for r in (reader(m.value(), _ctx(topic)) for m in messages)) == \
        [(0, "even"), (1, None), (2, "even"), (3, None)]
    assert len(_client(schema_registry).get_versions(f"{topic}-value")) == 1  # nothing registered by the sink
