"""What the source and the sinks share: the registry, option parsing, errors, the commit protocol.

The registry is the one place that lists every data source of the project::

    from connectors import register_all
    register_all(spark)          # impulse, redis-sink, kafka-sink, webhook-sink

After ``pip install`` this is not needed: PySpark finds the top-level ``pyspark_*`` modules itself.
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["data_sources", "register_all"]

# name -> "module:class"; imported lazily so that importing `connectors` never needs a sink's client library.
_SOURCES = {
    "impulse": "impulse.source:ImpulseDataSource",
    "redis-sink": "sinks.redis:RedisSinkDataSource",
    "kafka-sink": "sinks.kafka:KafkaSinkDataSource",
    "webhook-sink": "sinks.webhook:WebhookSinkDataSource",
}


def data_sources() -> dict[str, type]:
    """Every data source class of the project, keyed by its format name."""
    out = {}
    for name, target in _SOURCES.items():
        module, cls = target.split(":")
        out[name] = getattr(import_module(module), cls)
    return out


def register_all(spark) -> list[str]:
    """Register every data source of the project on `spark`; returns their format names."""
    sources = data_sources()
    for cls in sources.values():
        spark.dataSource.register(cls)
    return sorted(sources)
