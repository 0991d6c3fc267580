"""The Kafka sink: options.py (KafkaOptions), librdkafka.py (the ctypes binding that hands Arrow batches to
librdkafka), client.py (confluent-kafka, client caches, error tables), sink.py (KafkaSink, KafkaSinkDataSource,
create_topic), adapter.py (KafkaAdapter), encoding.py (value.format / key.format: what is encoded, the
driver's registry calls, the executors' encoding), formats/ (record formats: raw, json, Avro, Protobuf, JSON Schema
through a Schema Registry). Names below resolve lazily (`sinks.lazy_names`)."""

from sinks import lazy_names

__all__ = ["KafkaSinkDataSource", "KafkaSink", "create_topic", "KafkaOptions", "KafkaAdapter"]

__getattr__ = lazy_names(__name__, {
    "KafkaSinkDataSource": "sink",
    "KafkaSink": "sink",
    "create_topic": "sink",
    "KafkaOptions": "options",
    "KafkaAdapter": "adapter",
})
