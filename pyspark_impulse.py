"""Auto-registration entry point: PySpark registers ``DefaultSource`` under the name ``impulse``."""

from impulse.source import ImpulseDataSource as DefaultSource  # noqa: F401 - PySpark's auto-registration looks it up
