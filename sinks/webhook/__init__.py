"""The webhook sink: options.py (WebhookOptions), signing.py (Standard Webhooks signatures), client.py (the HTTP
session, pacer, deadline reader), bodies.py (request bodies and their halving), sink.py (WebhookSink,
WebhookSinkDataSource), adapter.py (WebhookAdapter). Names below resolve lazily (`sinks.lazy_names`)."""

from sinks import lazy_names

__all__ = ["WebhookSinkDataSource", "WebhookSink", "WebhookOptions", "WebhookAdapter"]

__getattr__ = lazy_names(__name__, {
    "WebhookSinkDataSource": "sink",
    "WebhookSink": "sink",
    "WebhookOptions": "options",
    "WebhookAdapter": "adapter",
})
