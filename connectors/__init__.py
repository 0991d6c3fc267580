"""What the source and the sinks share: the registry, option parsing, errors, the commit protocol.

`connectors.registry` holds the one table of every data source of the project; registering them all::

    from connectors import register_all
    register_all(spark)          # every row of connectors.registry: impulse, nexmark, redis-sink, …

After ``pip install`` this is not needed: PySpark finds the top-level ``pyspark_*`` modules itself.
"""

from __future__ import annotations

from connectors.registry import connectors

__all__ = ["data_sources", "register_all"]


def data_sources() -> dict[str, type]:
    """Every data source class of the project, keyed by its format name (`connectors.registry.CONNECTORS`)."""
    return {row.name: row.data_source_class() for row in connectors()}


def register_all(spark) -> list[str]:
    """Register every data source of the project on `spark`; returns their format names."""
    sources = data_sources()
    for cls in sources.values():
        spark.dataSource.register(cls)
    return sorted(sources)
