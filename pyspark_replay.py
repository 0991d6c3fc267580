"""Auto-registration entry point: PySpark registers ``DefaultSource`` under the name ``replay``."""

from impulse.replay.source import ReplayDataSource as DefaultSource  # noqa: F401 - PySpark's auto-registration looks it up
