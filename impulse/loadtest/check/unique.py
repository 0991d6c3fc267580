"""``--check-unique COLS``: each key of the target once — what a dedup stage promises.

``--check`` compares the target with the expected answer as a multiset; a pipeline that forgets to dedup a source
with redelivered copies (``duplicateRate``) writes exactly the rows its batch twin computes, copies included, so
the comparison alone cannot tell. This check adds the dedup stage's own contract: among the delivered rows no key
(the values of `columns`, nulls included) occurs twice. `repeats` counts the rows that break it, a pure function
of the delivered keys.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from impulse.loadtest.settings.units import LoadError, parse_columns

__all__ = ["FLAG", "columns", "Repeats", "repeats"]

FLAG = "--check-unique"
#: Repeated keys shown as examples
EXAMPLES = 3


def columns(text: str | None) -> tuple[str, ...]:
    """``--check-unique``'s key columns (`impulse.loadtest.settings.units.parse_columns`); None → ()."""
    return () if text is None else parse_columns(text, FLAG)


@dataclass(frozen=True)
class Repeats:
    """The delivered rows against the key's uniqueness: `keys` distinct keys seen more than once, `extra` rows beyond
    the first of each key (the duplicate count), `examples` up to `EXAMPLES` such keys as JSON with their count."""

    keys: int
    extra: int
    examples: tuple[str, ...] = ()


def repeats(table: pa.Table, key: tuple[str, ...]) -> Repeats:
    """How often `table`'s rows repeat a value of the `key` columns (a key of nulls is a value like any other)."""
    missing = [name for name in key if name not in table.column_names]
    if missing:
        raise LoadError(f"{FLAG}: the target's rows have no column {', '.join(missing)} "
                        f"(they have {', '.join(table.column_names)})")
    if not key or table.num_rows == 0:
        return Repeats(0, 0)
    counts = table.select(list(key)).group_by(list(key), use_threads=False).aggregate([([], "count_all")])
    repeated = counts.filter(pc.greater(counts["count_all"], 1))
    n = repeated["count_all"]
    extra = int(pc.sum(n).as_py() or 0) - repeated.num_rows
    shown = repeated.sort_by([("count_all", "descending"), *((name, "ascending") for name in key)]).slice(0, EXAMPLES)
    examples = tuple(json.dumps({**{name: row[name] for name in key}, "times": row["count_all"]}, default=str)
                     for row in shown.to_pylist())
    return Repeats(repeated.num_rows, extra, examples)
