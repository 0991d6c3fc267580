"""Auto-registration entry point: PySpark registers ``DefaultSource`` under the name ``redis-sink``."""

from sinks.redis.sink import RedisSinkDataSource as DefaultSource  # noqa: F401 - PySpark's auto-registration looks it up
