"""debezium-avro against the real Schema Registry and broker: the envelope's value and key registered under the
topic's subjects and read back by confluent-kafka's AvroDeserializer equal to the changelog, a tombstone after
each delete."""

from __future__ import annotations

import uuid

import pytest

from tests.sinks.debezium_readback import OPTIONS
from tests.sinks.test_kafka_formats_registry import _client

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.schema_registry]


def test_debezium_avro_reads_back_with_confluents_deserializer(spark, kafka_broker, schema_registry):
    from confluent_kafka.schema_registry.avro import AvroDeserializer  # noqa: PLC0415 - the avro extra
    from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: PLC0415 - the avro extra

    topic = kafka_broker.create_topic(f"dbz-avro-{uuid.uuid4().hex[:8]}", partitions=2)
    options = {**OPTIONS, "limit": "400"}
    frame = spark.read.format("impulse").options(**options).load()
    (frame.write.format("kafka-sink").mode("append").option("commitId", uuid.uuid4().hex)
     .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic)
     .option("value.format", "debezium-avro").option("schema.registry.url", schema_registry.url).save())
    events = [r.asDict(recursive=True) for r in frame.collect()]
    deletes = sum(e["op"] == "d" for e in events)
    assert deletes > 0

    read = AvroDeserializer(_client(schema_registry))
    messages = kafka_broker.consume_all(topic)
    assert len(messages) == len(events) + deletes
    assert {f"{topic}-value", f"{topic}-key"} <= set(_client(schema_registry).get_subjects())
    by_pos, previous = {}, None
    for m in messages:
        key = read(m.key(), SerializationContext(topic, MessageField.KEY))
        if m.value() is None:
            assert previous is not None and previous[1]["op"] == "d" and previous[0] == key
        else:
            value = read(m.value(), SerializationContext(topic, MessageField.VALUE))
            by_pos[value["source"]["pos"]] = {"key": key, **value}
            previous = (key, value)
    assert by_pos == {e["source"]["pos"]: {"key": e["key"], **{n: e[n] for n in ("before", "after", "source", "op",
                                                                                   "ts_ms")}} for e in events}
