"""Auto-registration entry point: PySpark registers ``DefaultSource`` under the name ``kafka-sink``."""

from sinks.kafka.sink import KafkaSinkDataSource as DefaultSource  # noqa: F401 - PySpark's auto-registration looks it up
