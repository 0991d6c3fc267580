"""Debezium change events (``changelog.envelope=debezium``): a changelog's events in Debezium's envelope.

The *row image* is the entity's columns: the key column (``changelog.key``, BIGINT) and generated columns
(``fields.<column>.*``). Each event of the changelog (`impulse.changelog`) becomes one row of the stream::

    key     STRUCT<<key column>: BIGINT>   the entity's key, as Debezium's record key
    before  STRUCT<row image>              the key's state before the change; null for op c and r
    after   STRUCT<row image>              its state after the change; null for op d
    op      STRING                         c (create), u (update), d (delete), r (read: a snapshot row)
    ts_ms   BIGINT                         the event time (``timestamp``), ms since the epoch
    source  STRUCT<connector, name, table, snapshot: STRING, pos: BIGINT>

``after`` of an event is the row image generated for that event (its counter), the key column set to its key;
``before`` is the ``after`` of the key's previous change (`Changelog.previous_counters`), so a key's successive
events chain: each ``before`` equals the previous ``after``. ``source.connector`` is ``impulse``, ``name`` and
``table`` are ``changelog.name`` and ``changelog.table``, ``snapshot`` is ``true`` for op r else ``false``,
``pos`` is ``counter × numPartitions + subtask_index``: distinct per event and increasing along each partition,
hence along each key's changes. Every value is a pure function of the seed and the event.

The schema is the envelope's: declared with ``.schema(...)`` (`envelope_ddl` writes it), or made by the source
from ``changelog.image`` (the row image as DDL) when no schema is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Mapping

import numpy as np
import pyarrow as pa
from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType

from connectors.errors import OptionError
from impulse.changelog import DELETE, INSERT, READ, UPDATE, Changelog
from impulse.nested import Node, column_of, split_path

__all__ = ["ENVELOPES", "DEBEZIUM", "COLUMNS", "SOURCE_FIELDS", "OP_CODES", "Debezium", "Envelope", "envelope_ddl",
           "envelope", "image_columns"]

DEBEZIUM = "debezium"
ENVELOPES = ("none", DEBEZIUM)
#: The stream's columns, in order
COLUMNS = ("key", "before", "after", "op", "ts_ms", "source")
#: The ``source`` STRUCT's fields and their DDL types
SOURCE_FIELDS = (("connector", "STRING"), ("name", "STRING"), ("table", "STRING"), ("snapshot", "STRING"),
                 ("pos", "BIGINT"))
#: Debezium's op code of each changelog op (`impulse.changelog`'s INSERT, UPDATE, DELETE, READ)
OP_CODES = {INSERT: "c", UPDATE: "u", DELETE: "d", READ: "r"}
CONNECTOR = "impulse"
_SPARK = {"STRING": StringType(), "BIGINT": LongType()}


@cache
def _texts() -> tuple[pa.Array, pa.Array]:
    """The op codes by changelog op and ``snapshot``'s two texts, built at first use (not at import: `impulse.source`
    imports this module, and pyarrow's first array imports pandas, which Spark's driver-side processes never use)."""
    return pa.array([OP_CODES[i] for i in range(len(OP_CODES))], pa.string()), pa.array(["false", "true"], pa.string())


@dataclass(frozen=True)
class Debezium:
    """The envelope's options: the row image as DDL (None: the declared schema says it), ``source.name`` and
    ``source.table``."""

    image: str | None
    name: str
    table: str


def envelope_ddl(key: str, image: str) -> str:
    """The envelope's schema as Spark DDL, for a row image given as DDL (e.g. ``id BIGINT, name STRING``)."""
    source = ", ".join(f"{name}: {ddl} NOT NULL" for name, ddl in SOURCE_FIELDS)
    return (f"key STRUCT<{_quoted(key)}: BIGINT NOT NULL> NOT NULL, before STRUCT<{image}>, after STRUCT<{image}>, "
            f"op STRING NOT NULL, ts_ms BIGINT NOT NULL, source STRUCT<{source}> NOT NULL")


def _quoted(name: str) -> str:
    return name if name.replace("_", "a").isalnum() and not name[0].isdigit() else "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class Envelope:
    """How the envelope's rows are made (module docstring). Small and picklable: sent to executors."""

    changelog: Changelog
    key_index: int                      # the key column's position in the row image
    image: tuple[Node | None, ...]      # each image column's generator; None at `key_index`
    arrow: pa.Schema                    # the stream's Arrow schema
    name: str
    table: str

    def batch(self, subtask: int, first: int, count: int, partitions: int, timestamps_us: np.ndarray) -> pa.RecordBatch:
        """The rows of events ``[first, first + count)`` of partition `subtask`; `timestamps_us`: their event times."""
        keys, ops = self.changelog.changes_of(subtask, first, count, partitions)
        previous = self.changelog.previous_counters(subtask, first, count)
        had = previous >= 0
        lo = int(previous[had].min()) if had.any() else first
        span = first + count - lo  # the image is made once over [lo, first + count): `before` reads its start
        image_type = self.arrow.field("after").type
        children = [pa.array(np.zeros(span, np.int64)) if node is None else node.array(subtask, lo, span, partitions)
                    for node in self.image]
        fields = list(image_type)

        def image(at: np.ndarray, null: np.ndarray) -> pa.StructArray:
            index = pa.array(at)
            columns = [pa.array(keys) if i == self.key_index else child.take(index) for i, child in enumerate(children)]
            return pa.StructArray.from_arrays(columns, fields=fields, mask=pa.array(null))

        after = image(np.arange(first - lo, first + count - lo, dtype=np.int64), ops == DELETE)
        before = image(np.where(had, previous - lo, 0), ~had)
        counters = np.arange(first, first + count, dtype=np.int64)
        source_type = self.arrow.field("source").type
        codes, snapshot = _texts()
        source = pa.StructArray.from_arrays([
            pa.repeat(pa.scalar(CONNECTOR), count), pa.repeat(pa.scalar(self.name), count),
            pa.repeat(pa.scalar(self.table), count), snapshot.take(pa.array((ops == READ).astype(np.int8))),
            pa.array(counters * partitions + subtask)], fields=list(source_type))
        key = pa.StructArray.from_arrays([pa.array(keys)], fields=list(self.arrow.field("key").type))
        columns = [key, before, after, codes.take(pa.array(ops)), pa.array(timestamps_us // 1000), source]
        return pa.RecordBatch.from_arrays(columns, schema=self.arrow)


def envelope(schema: StructType, fields: Mapping[str, Mapping[str, str]], *, seed: int, changelog: Changelog,
             options: Debezium) -> Envelope:
    """Check a schema against the envelope (module docstring) and the ``fields.*`` options of its row image;
    raises `OptionError` naming ``changelog.envelope`` (a schema that is not the envelope) or the option."""
    names = [f.name.lower() for f in schema.fields]
    by_name = {f.name.lower(): f for f in schema.fields}
    after = by_name.get("after")
    image = after.dataType if after is not None and isinstance(after.dataType, StructType) else None
    if image is None or names != list(COLUMNS) or not _fits(by_name, image, changelog.key_column):
        shown = _image_ddl(image) if image is not None else f"{changelog.key_column} BIGINT, …"
        raise OptionError("changelog.envelope", DEBEZIUM,
                          f"a stream of Debezium's envelope: the schema '{envelope_ddl(changelog.key_column, shown)}' "
                          f"(leave .schema(...) out and set 'changelog.image' to the row image, e.g. '"
                          f"{changelog.key_column} BIGINT, name STRING'); have: {schema.simpleString()}")
    nodes, key_index, image_arrow = image_columns(image, fields, seed=seed, key_column=changelog.key_column)
    key_field = by_name["key"].dataType.fields[0]
    source = by_name["source"].dataType
    arrow = pa.schema([
        pa.field(by_name["key"].name, pa.struct([pa.field(key_field.name, pa.int64(), key_field.nullable)]),
                 by_name["key"].nullable),
        pa.field(by_name["before"].name, image_arrow, True),
        pa.field(by_name["after"].name, image_arrow, True),
        pa.field(by_name["op"].name, pa.string(), by_name["op"].nullable),
        pa.field(by_name["ts_ms"].name, pa.int64(), by_name["ts_ms"].nullable),
        pa.field(by_name["source"].name, pa.struct([pa.field(f.name, pa.int64() if ddl == "BIGINT" else pa.string(),
                                                             f.nullable) for f, (_, ddl) in zip(source.fields, SOURCE_FIELDS)]),
                 by_name["source"].nullable),
    ])
    return Envelope(changelog, key_index, nodes, arrow, options.name, options.table)


def _fits(by_name: Mapping[str, StructField], image: StructType, key: str) -> bool:
    """Whether the columns are the envelope of `image` (names and types; ``before`` and ``after`` nullable)."""
    key_type = by_name["key"].dataType
    source = by_name["source"].dataType
    image_key = {f.name.lower(): f.dataType for f in image.fields}.get(key)
    return (isinstance(key_type, StructType) and [(f.name.lower(), f.dataType) for f in key_type.fields] == [(key, LongType())]
            and image_key == LongType() and _same(by_name["before"].dataType, image)
            and by_name["before"].nullable and by_name["after"].nullable
            and by_name["op"].dataType == StringType() and by_name["ts_ms"].dataType == LongType()
            and isinstance(source, StructType)
            and [(f.name.lower(), f.dataType) for f in source.fields] == [(n, _SPARK[d]) for n, d in SOURCE_FIELDS])


def _same(a: DataType, b: DataType) -> bool:
    return a.simpleString() == b.simpleString()


def _image_ddl(image: StructType) -> str:
    return ", ".join(f"{_quoted(f.name)} {f.dataType.simpleString().upper()}" for f in image.fields)


def image_columns(image: StructType, fields: Mapping[str, Mapping[str, str]], *, seed: int,
                  key_column: str) -> tuple[tuple[Node | None, ...], int, pa.DataType]:
    """The generators of a row image's columns (None for the key column, which the changelog fills), the key's
    position and the image's Arrow STRUCT type; raises `OptionError` naming the ``fields.*`` option that does not fit."""
    image_by_name = {f.name.lower(): f for f in image.fields}
    nested: dict[str, dict[tuple[str, ...], Mapping[str, str]]] = {}
    for path, properties in fields.items():
        segments = split_path(path) or (path,)
        column, below = (path, ()) if path in image_by_name else (segments[0], tuple(segments[1:]))
        prop = next(iter(properties))
        option, value = f"fields.{path}.{prop}", properties[prop]
        if column == key_column:
            raise OptionError(option, value, f"no fields.* options for '{column}': the changelog fills it (changelog.key)")
        if column not in image_by_name:
            raise OptionError(option, value, f"a column of the row image ({', '.join(f.name for f in image.fields)})")
        nested.setdefault(column, {})[below] = properties
    nodes: list[Node | None] = []
    for f in image.fields:
        if f.name.lower() == key_column:
            nodes.append(None)
            continue
        node = column_of(f.name, f.dataType, f.nullable, nested.get(f.name.lower(), {}), seed)
        if node.refers:
            raise OptionError(f"fields.{f.name}.kind", "ref", "another kind in a row image: a reference depends on the "
                              "event's schedule, which a key's other states (before, valid_to) do not keep")
        nodes.append(node)
    key_index = [f.name.lower() for f in image.fields].index(key_column)
    image_arrow = pa.struct([pa.field(f.name, pa.int64() if node is None else node.arrow, nullable=f.nullable)
                             for f, node in zip(image.fields, nodes)])
    return tuple(nodes), key_index, image_arrow
