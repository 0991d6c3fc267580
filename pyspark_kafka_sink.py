"""Auto-registration entry point: PySpark registers ``DefaultSource`` under the name ``kafka-sink``."""

from sinks.kafka import KafkaSinkDataSource as DefaultSource  # noqa: F401
