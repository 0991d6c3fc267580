"""The one table of this project's connectors; everything that lists them reads it.

Each row names a data source: its format name, what it is (`kind`: ``"source"`` or ``"sink"``), the class
(``"module:Class"``, imported lazily so that reading the table never needs a sink's client library), the pip
extra that installs its client library, the client modules a writer imports on the executors, and, for a sink,
the conformance adapter (``"module:Class"``, a `connectors.conformance.adapter.SinkAdapter`, kept beside the
sink) that binds the suite to a target named on the command line. Derived from it:

- `connectors.data_sources` / `connectors.register_all` (every row);
- the load harness's project sinks, their pre-flight and their warm-up imports
  (`impulse.loadtest.target`, `impulse.loadtest.session`);
- the conformance CLI's sink names and arguments (``python -m connectors.conformance``).

Adding a sink is its module(s) (a package with its sink and its adapter), its top-level ``pyspark_<name>``
entry point (for PySpark's auto-registration) and one `Connector` row: in `CONNECTORS` for a sink of this project
(under ``sinks/``), or, for a sink in a package of its own, declared by that package under the entry-point group
`ENTRY_POINT_GROUP` (``impulse.connectors``), naming a `Connector` (or a tuple of them)::

    [options.entry_points]
    impulse.connectors =
        file-sink = my_file_sink.row:CONNECTOR

`connectors` lists the table's rows, then the installed packages' (a name already taken is refused, naming both).
The module an entry point names is imported whenever the rows are listed: keep it light (the row alone).
`import_extra` is the one gate in front of an optional extra's package.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from importlib.metadata import entry_points
from importlib.util import find_spec
from types import ModuleType
from typing import Any, Literal

from connectors.errors import SinkError

__all__ = ["Kind", "KINDS", "Connector", "CONNECTORS", "ENTRY_POINT_GROUP", "connectors", "connector", "sinks", "load", "import_extra"]


Kind = Literal["source", "sink"]
KINDS: tuple[Kind, ...] = ("source", "sink")


@dataclass(frozen=True)
class Connector:
    """One data source of the project (see the module docstring)."""

    name: str
    kind: Kind
    data_source: str
    extra: str | None = None
    preload: tuple[str, ...] = ()
    adapter: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"connector {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")

    @property
    def module(self) -> str:
        """The module that defines the data source class."""
        return self.data_source.split(":")[0]

    def data_source_class(self) -> type:
        return load(self.data_source)

    def adapter_class(self) -> type:
        if self.adapter is None:
            raise LookupError(f"{self.name} has no conformance adapter (it is a {self.kind})")
        return load(self.adapter)

    def executor_modules(self) -> tuple[str, ...]:
        """What a writer of this connector imports where it runs: its module, then its client libraries."""
        return (self.module, *self.preload)

    def require_clients(self) -> None:
        """Raise `SinkError` naming the extra to install when a client module of this connector is missing
        here (the driver checks before a write starts; the executors need the same installation)."""
        missing = [module for module in self.preload if find_spec(module) is None]
        if missing:
            raise SinkError(f"{self.name} needs the Python package{'s' * (len(missing) > 1)} "
                            f"{', '.join(missing)}, which {'are' if len(missing) > 1 else 'is'} not installed: "
                            f"{self.install_hint()} (on the driver and every executor)")

    def install_hint(self) -> str:
        extra = f"[{self.extra}]" if self.extra else ""
        return f"pip install 'impulse-connectors{extra}'"


CONNECTORS: tuple[Connector, ...] = (
    Connector("impulse", "source", "impulse.source:ImpulseDataSource"),
    Connector("nexmark", "source", "impulse.nexmark.source:NexmarkDataSource"),
    Connector("replay", "source", "impulse.replay.source:ReplayDataSource"),
    Connector("redis-sink", "sink", "sinks.redis.sink:RedisSinkDataSource", extra="redis", preload=("redis", "hiredis"),
              adapter="sinks.redis.adapter:RedisAdapter"),
    Connector("kafka-sink", "sink", "sinks.kafka.sink:KafkaSinkDataSource", extra="kafka", preload=("confluent_kafka",),
              adapter="sinks.kafka.adapter:KafkaAdapter"),
    Connector("webhook-sink", "sink", "sinks.webhook.sink:WebhookSinkDataSource", extra="webhook",
              preload=("requests",), adapter="sinks.webhook.adapter:WebhookAdapter"),
)


#: The entry-point group under which an installed package declares its connectors' rows (module docstring).
ENTRY_POINT_GROUP = "impulse.connectors"


def connectors() -> tuple[Connector, ...]:
    """Every row: the table's, then those installed packages declare under `ENTRY_POINT_GROUP` (read at call time,
    never copied at import)."""
    rows = CONNECTORS + _installed(tuple(sys.path))
    seen: dict[str, Connector] = {}
    for row in rows:
        if row.name in seen:
            raise ValueError(f"two connectors are named {row.name!r}: {seen[row.name].data_source} and "
                             f"{row.data_source} (an '{ENTRY_POINT_GROUP}' entry point must choose a name of its own)")
        seen[row.name] = row
    return rows


@lru_cache(maxsize=4)
def _installed(path: tuple[str, ...]) -> tuple[Connector, ...]:
    """The rows the packages installed on `path` (``sys.path``, the cache key) declare under `ENTRY_POINT_GROUP`."""
    rows: list[Connector] = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        found = point.load()
        for row in found if isinstance(found, tuple) else (found,):
            if not isinstance(row, Connector):
                raise TypeError(f"entry point {point.name} = {point.value} (group '{ENTRY_POINT_GROUP}') names a "
                                f"{type(row).__name__}, not a connectors.registry.Connector")
            rows.append(row)
    return tuple(rows)


def connector(name: str) -> Connector:
    """The row of format `name`; `KeyError` names the known ones."""
    for row in connectors():
        if row.name == name:
            return row
    raise KeyError(f"no connector named {name!r}: known are {', '.join(r.name for r in connectors())}")


def sinks() -> tuple[Connector, ...]:
    """The rows of kind ``"sink"``, in table order."""
    return tuple(row for row in connectors() if row.kind == "sink")


def import_extra(module: str, extra: str, needed_by: str, package: str) -> ModuleType:
    """`module`, from the package of an optional extra, imported: the one gate in front of an extra's package.

    Raises `SinkError` ``"<needed_by> needs <package>: pip install 'impulse-connectors[<extra>]'"`` when it is not
    installed (`package` is the name pip knows it by).
    """
    try:
        return import_module(module)
    except ImportError as exc:
        raise SinkError(f"{needed_by} needs {package}: pip install 'impulse-connectors[{extra}]'") from exc


def load(target: str) -> Any:
    """The object named ``"module:attribute"``."""
    module, _, attribute = target.partition(":")
    return getattr(import_module(module), attribute)
