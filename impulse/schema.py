"""The columns of impulse's rows: the built-in ones, or a user schema whose other columns are generated.

Without a user schema the rows are ``counter``, ``subtask_index``, ``timestamp`` (and ``payload`` with
``payloadBytes`` > 0), all NOT NULL. A user schema (``.schema("…")``, DDL or StructType) may name any
of those four, with their built-in meaning and type, and any other column, generated as
``fields.<column>.*`` says (`impulse.fields`; ARRAY, MAP and STRUCT columns by path: `impulse.nested`).
`row_spec` checks the two against each other and raises `OptionError` naming the column, the property and what
is allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pyarrow as pa
from pyspark.sql.types import BinaryType, LongType, StructField, StructType, TimestampType

from connectors.errors import OptionError
from impulse.changelog import ChangeColumn, Changelog, change_columns
from impulse.debezium import Debezium, Envelope, envelope
from impulse.fields import Column
from impulse.history import History, history
from impulse.nested import Node, column_of, split_path

__all__ = ["BUILT_IN", "RowSpec", "arrow_schema", "spark_schema", "default_schema", "default_rows", "row_spec"]

# name -> (Spark type, Arrow type, DDL)
BUILT_IN = {
    "counter": (LongType(), pa.int64(), "BIGINT"),
    "subtask_index": (LongType(), pa.int64(), "BIGINT"),
    "timestamp": (TimestampType(), pa.timestamp("us", tz="UTC"), "TIMESTAMP"),
    "payload": (BinaryType(), pa.binary(), "BINARY"),
}


@dataclass(frozen=True)
class RowSpec:
    """What each row holds, in order: a built-in column's name, a generated `Column`, or a changelog's key or
    op (`ChangeColumn`). Picklable."""

    columns: tuple[str | Column | Node | ChangeColumn, ...]
    arrow: pa.Schema
    envelope: Envelope | None = None  # a Debezium envelope makes every column instead (`impulse.debezium`)
    history: History | None = None    # an SCD2 history makes every row instead (`impulse.history`)


def spark_schema(payload_bytes: int) -> str:
    """The default schema as a Spark DDL string.

    Every column is ``NOT NULL`` (no event has a null field). Besides being true, it is faster: Spark
    turns each Arrow batch into rows with a generated projection, which for nullable columns calls
    ``isNullAt`` (an Arrow validity-bit read, bounds-checked) on every value: ~19 % of the task
    threads' samples in a profile, ~15-20 % less task CPU per row without it (`bench/README.md`).
    """
    ddl = "counter BIGINT NOT NULL, subtask_index BIGINT NOT NULL, timestamp TIMESTAMP NOT NULL"
    return ddl + (", payload BINARY NOT NULL" if payload_bytes > 0 else "")


def default_schema(payload_bytes: int) -> StructType:
    """`spark_schema` as a StructType."""
    names = ["counter", "subtask_index", "timestamp"] + (["payload"] if payload_bytes > 0 else [])
    return StructType([StructField(n, BUILT_IN[n][0], nullable=False) for n in names])


def default_rows(payload_bytes: int) -> "RowSpec":
    """The rows of the default schema."""
    return row_spec(None, {}, seed=0, payload_bytes=payload_bytes)


def arrow_schema(payload_bytes: int) -> pa.Schema:
    """The Arrow schema of the default rows; it equals Spark's schema exactly (µs, UTC, not null)."""
    return default_rows(payload_bytes).arrow


def row_spec(schema: StructType | None, fields: Mapping[str, Mapping[str, str]], *, seed: int,
             payload_bytes: int, changelog: Changelog | None = None, debezium: Debezium | None = None,
             scd2: bool = False) -> RowSpec:
    """Check a schema (None: the default one) against the ``fields.*`` options, the payload size and the
    changelog (its key and ``op`` columns are filled by it, `impulse.changelog`), or its Debezium envelope
    (`impulse.debezium`: the schema is the envelope's), or with `scd2` its history (`impulse.history`).

    `fields` maps a lower-cased column name to its properties (lower-cased names, string values).
    """
    if schema is None:
        schema = default_schema(payload_bytes)
    if debezium is not None and changelog is not None:
        if payload_bytes > 0:
            raise OptionError("payloadBytes", payload_bytes, "0 with changelog.envelope=debezium (the envelope has no "
                              "payload column)")
        made = envelope(schema, fields, seed=seed, changelog=changelog, options=debezium)
        return RowSpec((), made.arrow, made)
    if scd2 and changelog is not None:
        versions = history(schema, fields, seed=seed, changelog=changelog)
        return RowSpec((), versions.arrow, history=versions)
    by_name = {f.name.lower(): f for f in schema.fields}
    changes = {} if changelog is None else change_columns(changelog, by_name)
    nested: dict[str, dict[tuple[str, ...], Mapping[str, str]]] = {}  # column -> path below it -> properties
    for path, properties in fields.items():
        column, below = _column_and_path(path, by_name)
        prop = next(iter(properties))
        option, value = f"fields.{path}.{prop}", properties[prop]
        if column in changes:
            raise OptionError(option, value, f"no fields.* options for '{column}': the changelog fills it (changelog.key)")
        if column in BUILT_IN and column in by_name:
            raise OptionError(option, value, f"no fields.* options for '{column}': it is a built-in column "
                                             "(counter, subtask_index, timestamp, payload are not generated)")
        if column not in by_name:
            raise OptionError(option, value, f"a column of the schema ({', '.join(f.name for f in schema.fields)}); declare "
                              f"'{column}' with .schema(...) to generate it")
        nested.setdefault(column, {})[below] = properties
        partner = properties.get("jointwith", "").strip().lower()
        if partner and (partner == path or fields.get(partner, {}).get("kind", "").strip().lower() != "values"):
            raise OptionError(f"fields.{path}.jointWith", properties["jointwith"], "another column of kind=values "
                              "whose position in its values this column takes (fields.<that column>.kind=values)")
    columns: list[str | Node | ChangeColumn] = []
    arrow_fields = []
    for f in schema.fields:
        lower = f.name.lower()
        if lower in changes:
            columns.append(changes[lower])
            arrow_fields.append(pa.field(f.name, changes[lower].arrow, nullable=f.nullable))
        elif lower in BUILT_IN:
            spark_type, arrow_type, ddl = BUILT_IN[lower]
            if f.dataType != spark_type:
                raise OptionError(f"schema, column '{f.name}'", f.dataType.simpleString().upper(),
                                  f"{ddl}: '{lower}' is a built-in column of impulse (rename the column to generate it)")
            columns.append(lower)
            arrow_fields.append(pa.field(f.name, arrow_type, nullable=f.nullable))
        else:
            column = column_of(f.name, f.dataType, f.nullable, nested.get(lower, {}), seed)
            columns.append(column)
            arrow_fields.append(pa.field(f.name, column.arrow, nullable=f.nullable))
    has_payload = "payload" in columns
    if payload_bytes > 0 and not has_payload:
        raise OptionError("payloadBytes", payload_bytes, "0 when the schema has no 'payload BINARY' column")
    if has_payload and payload_bytes <= 0:
        raise OptionError("payloadBytes", payload_bytes, "a size > 0 for the schema's 'payload' column")
    return RowSpec(tuple(columns), pa.schema(arrow_fields))


def _column_and_path(path: str, by_name: Mapping[str, object]) -> tuple[str, tuple[str, ...]]:
    """A ``fields.*`` path's top-level column and the path below it: ``items.element.price`` →
    (``items``, (``element``, ``price``)); a column whose own name holds dots is matched whole first."""
    if path in by_name:
        return path, ()
    segments = split_path(path)
    if segments is None:
        return path, ()
    return segments[0], segments[1:]
