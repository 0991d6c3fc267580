"""Auto-registration entry point: PySpark registers ``DefaultSource`` under the name ``redis-sink``."""

from sinks.redis import RedisSinkDataSource as DefaultSource  # noqa: F401
