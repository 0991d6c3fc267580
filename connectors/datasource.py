"""`SinkDataSource`: the PySpark `DataSource` of every sink, streaming and batch writes from one `build`.

A sink's data source names the `connectors.protocol.Sink` class it builds (`sink_class`, whose ``name`` is the
format's, ``name()``), says how its options are called in errors (`label`) and builds its sink from the parsed
options (`build`); this class gives it the rest:

- ``streamWriter`` → `connectors.protocol.stream_writer` (``writeStream``);
- ``writer`` → `connectors.batch.batch_writer` (``df.write … mode("append")``, SQL ``INSERT INTO``);
- ``schema`` → `connectors.batch.no_schema` (a sink has no columns to read).

Before either, the sink's client libraries (its `connectors.registry` row's ``preload``) must be installed:
a missing one fails the write at start naming the pip extra that installs it.

Both writers parse the same options and run the same protocol; `build` runs on the driver, once per
writer Spark asks for.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from connectors.batch import BatchWriter, batch_writer, no_schema
from connectors.options import OptionReader
from connectors.protocol import ProtocolWriter, Sink, stream_writer
from connectors.registry import connectors

__all__ = ["SinkDataSource"]


class SinkDataSource(DataSource):
    """Subclasses set `sink_class` and `label`, and implement `build`."""

    #: the class of the sink `build` makes; its ``name`` is the format's name (``name()``)
    sink_class: type[Sink]
    #: the sink as option errors name it, e.g. ``"redis sink"``
    label: str

    @classmethod
    def name(cls) -> str:
        """The format's name, e.g. ``"redis-sink"``: the ``name`` of `sink_class`."""
        return cls.sink_class.name

    def build(self, reader: OptionReader, schema) -> Sink:
        """The sink of the options in `reader` (its getters raise `OptionError`), for rows of `schema`."""
        raise NotImplementedError

    def schema(self):
        """Never: a sink has no columns (`connectors.batch.no_schema` says how to declare a SQL view of it)."""
        no_schema(self.name())

    def streamWriter(self, schema, overwrite: bool) -> ProtocolWriter:
        """A streaming write (`connectors.protocol`)."""
        _require_clients(self.name())
        return stream_writer(self.options, name=self.label, build=lambda reader: self.build(reader, schema))

    def writer(self, schema, overwrite: bool) -> BatchWriter:
        """A batch write (`connectors.batch`): same options and guarantee, ``mode("append")`` only."""
        _require_clients(self.name())
        return batch_writer(self.options, overwrite, name=self.label, build=lambda reader: self.build(reader, schema))


def _require_clients(name: str) -> None:
    """The registry's check that the client libraries of format `name` are installed; a sink outside the
    registry (a third party's, built on `SinkDataSource`) has its own imports to fail on."""
    for row in connectors():
        if row.name == name:
            row.require_clients()
