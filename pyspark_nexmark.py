"""Auto-registration entry point: PySpark registers ``DefaultSource`` under the name ``nexmark``."""

from impulse.nexmark.source import NexmarkDataSource as DefaultSource  # noqa: F401 - PySpark's auto-registration looks it up
