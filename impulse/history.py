"""SCD2 history (``changelog.history=scd2``, a batch read): each key's versions, the expected table of a type-2
dimension pipeline fed by the changelog (`impulse.changelog`).

Every change that leaves a row (insert, update, snapshot read: not a delete) of events ``[0, limit)`` of a partition
is one version: the row image (the key column and the generated columns, as ``changelog.image`` or the schema
declares them; the same values as the changelog's row and as Debezium's ``after``), then

    valid_from  TIMESTAMP  the change's event time
    valid_to    TIMESTAMP  the event time of the key's next change (an update or its delete) within the read;
                           null when there is none
    is_current  BOOLEAN    whether valid_to is null: the version the table holds after the last event read

The next change is found from the event alone (`Changelog.next_counters`), so any range of events yields the same
versions: a pure function of the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pyarrow as pa
from pyspark.sql.types import BooleanType, StructType, TimestampType

from connectors.errors import OptionError
from impulse.changelog import DELETE, Changelog
from impulse.debezium import image_columns
from impulse.nested import Node

__all__ = ["HISTORIES", "SCD2", "SCD2_COLUMNS", "History", "history", "history_ddl"]

SCD2 = "scd2"
HISTORIES = ("none", SCD2)
#: The columns after the row image, with their Spark types
SCD2_COLUMNS = (("valid_from", TimestampType()), ("valid_to", TimestampType()), ("is_current", BooleanType()))
_TIME = pa.timestamp("us", tz="UTC")


def history_ddl(image: str) -> str:
    """The schema of the history as Spark DDL, for a row image given as DDL."""
    return f"{image}, valid_from TIMESTAMP NOT NULL, valid_to TIMESTAMP, is_current BOOLEAN NOT NULL"


@dataclass(frozen=True)
class History:
    """How the history's rows are made (module docstring). Small and picklable: sent to executors."""

    changelog: Changelog
    key_index: int
    image: tuple[Node | None, ...]
    arrow: pa.Schema

    def batch(self, subtask: int, first: int, count: int, partitions: int, end: int, times) -> pa.RecordBatch:
        """The versions of events ``[first, first + count)`` of partition `subtask`, whose events end at `end`;
        ``times(lo, n)``: the event times (µs) of events ``[lo, lo + n)``."""
        keys, ops = self.changelog.changes_of(subtask, first, count, partitions)
        following = self.changelog.next_counters(subtask, first, count)
        ended = (following >= 0) & (following < end)
        last = int(following[ended].max()) + 1 if ended.any() else first + count
        stamps = times(first, max(last, first + count) - first)
        keep = ops != DELETE
        columns = [pa.array(keys) if node is None else node.array(subtask, first, count, partitions)
                   for node in self.image]
        valid_to = pa.array(stamps[np.where(ended, following - first, 0)], _TIME, mask=~ended)
        columns += [pa.array(stamps[:count], _TIME), valid_to, pa.array(~ended)]
        index = pa.array(np.flatnonzero(keep))
        return pa.RecordBatch.from_arrays([c.take(index) for c in columns], schema=self.arrow)


def history(schema: StructType, fields: Mapping[str, Mapping[str, str]], *, seed: int,
            changelog: Changelog) -> History:
    """Check a schema against the history's (the row image, then `SCD2_COLUMNS`); raises `OptionError` naming
    ``changelog.history`` (or the ``fields.*`` option that does not fit)."""
    names = [(f.name.lower(), f.dataType) for f in schema.fields]
    image = StructType(schema.fields[:-len(SCD2_COLUMNS)])
    key = {f.name.lower(): f.dataType for f in image.fields}.get(changelog.key_column)
    if names[-len(SCD2_COLUMNS):] != list(SCD2_COLUMNS) or key is None or key.simpleString() != "bigint":
        raise OptionError("changelog.history", SCD2, f"a schema of the row image then valid_from TIMESTAMP, valid_to "
                          f"TIMESTAMP, is_current BOOLEAN, the image holding '{changelog.key_column} BIGINT' (leave "
                          f".schema(...) out and set 'changelog.image'); have: {schema.simpleString()}")
    nodes, key_index, image_arrow = image_columns(image, fields, seed=seed, key_column=changelog.key_column)
    by_name = {f.name: f for f in schema.fields}
    arrow = pa.schema([*image_arrow, pa.field(schema.fields[-3].name, _TIME, by_name[schema.fields[-3].name].nullable),
                       pa.field(schema.fields[-2].name, _TIME, True),
                       pa.field(schema.fields[-1].name, pa.bool_(), by_name[schema.fields[-1].name].nullable)])
    return History(changelog, key_index, nodes, arrow)
