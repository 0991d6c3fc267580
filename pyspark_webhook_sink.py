"""Auto-registration entry point: PySpark registers ``DefaultSource`` under the name ``webhook-sink``."""

from sinks.webhook.sink import WebhookSinkDataSource as DefaultSource  # noqa: F401 - PySpark's auto-registration looks it up
