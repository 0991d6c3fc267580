"""The one table of this project's connectors; everything that lists them reads it.

Each row names a data source: its format name, the class (``"module:Class"``, imported lazily so that
reading the table never needs a sink's client library), the pip extra that installs its client
library, the client modules a writer imports on the executors, and, for a sink, the conformance
adapter (``"module:Class"``, a `connectors.conformance.adapter.SinkAdapter`) that binds the suite to
a target named on the command line. Derived from it:

- `connectors.data_sources` / `connectors.register_all` (every row);
- the load harness's project sinks, their pre-flight and their warm-up imports
  (`impulse.loadtest.target`, `impulse.loadtest.session`);
- the conformance CLI's sink names and arguments (``python -m connectors.conformance``).

Adding a sink is its module, its top-level ``pyspark_<name>`` entry point (for PySpark's
auto-registration) and one `Connector` row in `CONNECTORS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

__all__ = ["Connector", "CONNECTORS", "connectors", "connector", "sinks", "load"]


@dataclass(frozen=True)
class Connector:
    """One data source of the project (see the module docstring)."""

    name: str
    data_source: str
    extra: str | None = None
    preload: tuple[str, ...] = ()
    adapter: str | None = None

    @property
    def module(self) -> str:
        """The module that defines the data source class."""
        return self.data_source.split(":")[0]

    @property
    def is_sink(self) -> bool:
        return self.adapter is not None

    def data_source_class(self) -> type:
        return load(self.data_source)

    def adapter_class(self) -> type:
        if self.adapter is None:
            raise LookupError(f"{self.name} has no conformance adapter (it is not a sink)")
        return load(self.adapter)

    def executor_modules(self) -> tuple[str, ...]:
        """What a writer of this connector imports where it runs: its module, then its client libraries."""
        return (self.module, *self.preload)

    def require_clients(self) -> None:
        """Raise `SinkError` naming the extra to install when a client module of this connector is missing
        here (the driver checks before a write starts; the executors need the same installation)."""
        from importlib.util import find_spec

        from connectors.errors import SinkError

        missing = [module for module in self.preload if find_spec(module) is None]
        if missing:
            raise SinkError(f"{self.name} needs the Python package{'s' * (len(missing) > 1)} "
                            f"{', '.join(missing)}, which {'are' if len(missing) > 1 else 'is'} not installed: "
                            f"{self.install_hint()} (on the driver and every executor)")

    def install_hint(self) -> str:
        extra = f"[{self.extra}]" if self.extra else ""
        return f"pip install 'impulse-connectors{extra}'"


CONNECTORS: tuple[Connector, ...] = (
    Connector("impulse", "impulse.source:ImpulseDataSource"),
    Connector("nexmark", "impulse.nexmark.source:NexmarkDataSource"),
    Connector("redis-sink", "sinks.redis:RedisSinkDataSource", extra="redis", preload=("redis", "hiredis"),
              adapter="connectors.conformance.adapters:RedisAdapter"),
    Connector("kafka-sink", "sinks.kafka:KafkaSinkDataSource", extra="kafka", preload=("confluent_kafka",),
              adapter="connectors.conformance.adapters:KafkaAdapter"),
    Connector("webhook-sink", "sinks.webhook:WebhookSinkDataSource", extra="webhook", preload=("requests",),
              adapter="connectors.conformance.adapters:WebhookAdapter"),
)


def connectors() -> tuple[Connector, ...]:
    """Every row of the table (read at call time, never copied at import)."""
    return CONNECTORS


def connector(name: str) -> Connector:
    """The row of format `name`; `KeyError` names the known ones."""
    for row in connectors():
        if row.name == name:
            return row
    raise KeyError(f"no connector named {name!r}: known are {', '.join(r.name for r in connectors())}")


def sinks() -> tuple[Connector, ...]:
    """The rows that are sinks (those with a conformance adapter), in table order."""
    return tuple(row for row in connectors() if row.is_sink)


def load(target: str) -> Any:
    """The object named ``"module:attribute"``."""
    module, _, attribute = target.partition(":")
    return getattr(import_module(module), attribute)
