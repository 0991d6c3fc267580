"""``--expect MODULE:FUNCTION``: ``--check``'s expected answer from the user's own reference implementation.

Without it ``--check`` compares the stream with the same query run as a batch (or, for an operator Spark runs
on streams only, as one micro-batch) over the same events: a logic bug present in both passes. With it the
expected rows are the user's, so the check proves the stream equals the user's reference answer.

Contract: ``FUNCTION(events)`` receives the same bounded batch DataFrame of the run's events that the
transform's batch twin receives (`impulse.loadtest.check.judge.batch_events`: the run's source options, ``startTime``
pinned to the run's schedule start; with ``--via`` the frame of `impulse.loadtest.via.check.expected_input`:
the decoded events with ``--decode``, else the input topic's records as Spark's Kafka source gives them) and
returns the rows the query should have written, as one of:

- a Spark DataFrame (a batch one) with the output's columns, in any order, cast by name to the output's types;
- a pandas DataFrame with the output's columns;
- an iterable of dicts (the output's column names as keys), ``Row`` objects, or tuples / lists (the output's
  column order).

Pandas and plain Python rows are converted (`as_frame`) with the schema of the stream's output: the transform's
DataFrame, before the harness adds ``timestamp`` for ``--event-time-column`` (it adds it to these rows too).
The rows are then judged as the query's own answer would be (`impulse.loadtest.check.judge`: in append mode,
those final under the stream's last watermark by ``--event-time-column``; update / complete: the final state
per key). The function runs on the driver; a large answer is best returned as a Spark DataFrame.

When things are checked, each failure a `LoadError` naming ``--expect`` (the CLI exits 2):

- `LoadConfig.validate`, before Spark starts: ``--expect`` needs ``--check``;
- `resolve`, once the session exists (a module may define UDFs at its top level, which needs one) and before
  any load: MODULE:FUNCTION is written so, MODULE imports (the working directory first, then ``PYTHONPATH``;
  then it is shipped where tasks run, like the transform's module) and FUNCTION is callable;
- `answer`, after the run: FUNCTION raises, returns something else than rows, or rows the output's schema cannot
  hold (missing or extra columns, values of another type).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from impulse.loadtest.query.transform import connect_mode, function_of, load, reason, ship
from impulse.loadtest.settings.units import LoadError

__all__ = ["Oracle", "resolve", "answer", "as_frame", "FLAG"]

FLAG = "--expect"


@dataclass(frozen=True)
class Oracle:
    """A resolved ``--expect``: `text` as given, `function` the user's FUNCTION."""

    text: str
    function: Callable[[Any], Any]

    @property
    def label(self) -> str:
        return f"{FLAG} {self.text}"


def _is_remote(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def locate(text: str):
    """``--expect`` `text` found and read before Spark starts (`impulse.loadtest.query.transform.function_of`): a
    `Transform` whose FUNCTION `resolve` imports once the session exists."""
    return function_of(text, FLAG, "my_pipeline:reference, a function of the run's events returning the rows the "
                                   "query should write")


def resolve(spark, text: str | None) -> Oracle | None:
    """``--expect`` `text` imported and checked on `spark`'s session (None without it); see the module docstring."""
    if text is None:
        return None

    oracle = load(spark, locate(text))
    ship(spark, oracle)
    return Oracle(text, oracle.function)


def answer(spark, oracle: Oracle, events, schema):
    """`oracle`'s rows over `events` (a batch DataFrame) as a DataFrame of `schema`, the stream's output's
    (`as_frame`); `LoadError` naming ``--expect`` when FUNCTION raises or its result does not fit."""
    with connect_mode(_is_remote(spark)):
        try:
            result = oracle.function(events)
        except Exception as exc:  # noqa: BLE001 - the user's code: quoted, naming the flag
            raise LoadError(f"{oracle.label}: the function raised: {reason(exc)}") from None
        return as_frame(spark, result, schema, oracle.label)


def as_frame(spark, result, schema, label: str = FLAG):
    """`result` (a Spark DataFrame, a pandas DataFrame, or an iterable of dicts, ``Row`` objects or tuples) as a
    Spark DataFrame of `schema`'s columns and types (nullable); `LoadError` naming `label` when it cannot be."""
    loose = StructType([StructField(f.name, f.dataType, True) for f in schema.fields])
    names = [f.name for f in loose.fields]
    if isinstance(result, DataFrame):
        return _cast(result, loose, label)
    if _is_pandas(result):
        _same_columns([str(c) for c in result.columns], names, label)
        return _create(spark, result[names], loose, label)
    if isinstance(result, (str, bytes, Mapping)) or not hasattr(result, "__iter__"):
        raise LoadError(f"{label}: returned {type(result).__name__}, not rows; return a DataFrame, a pandas DataFrame "
                        "or a list of dicts or tuples")
    rows = [_row(row, names, label) for row in result]
    return _create(spark, rows, loose, label)


def _is_pandas(value: Any) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame)


def _same_columns(given: Sequence[str], names: Sequence[str], label: str) -> None:
    missing = [n for n in names if n not in given]
    extra = [c for c in given if c not in names]
    if missing or extra or len(given) != len(names):
        said = "; ".join(part for part in (f"missing {', '.join(missing)}" if missing else "",
                                           f"not in the output: {', '.join(extra)}" if extra else "") if part)
        raise LoadError(f"{label}: returned the columns ({', '.join(given)}); the output's are ({', '.join(names)})"
                        f"{': ' + said if said else ' (a column twice)'}")


def _row(row: Any, names: Sequence[str], label: str) -> tuple:
    """One plain row in the order of `names`."""
    if hasattr(row, "asDict") and isinstance(row, tuple):  # a pyspark Row: by its field names
        row = row.asDict()
    if isinstance(row, Mapping):
        _same_columns([str(k) for k in row], names, label)
        return tuple(row[n] for n in names)
    if isinstance(row, (tuple, list)):
        if len(row) != len(names):
            raise LoadError(f"{label}: a row of {len(row)} values, {tuple(row)!r}; the output has {len(names)} "
                            f"columns ({', '.join(names)})")
        return tuple(row)
    raise LoadError(f"{label}: a row is {row!r} ({type(row).__name__}); give dicts, Rows or tuples")


def _create(spark, data, schema, label: str):
    """``spark.createDataFrame(data, schema)``, which converts and type-checks the rows as it goes."""
    try:
        return spark.createDataFrame(data, schema)
    except Exception as exc:  # noqa: BLE001 - the conversion of the user's rows only: quoted, naming the flag
        raise LoadError(f"{label}: its rows do not fit the output's schema ({schema.simpleString()}): "
                        f"{reason(exc)}") from None


def _cast(frame, schema, label: str):
    """A batch DataFrame with `schema`'s columns, cast by name to its types."""

    if frame.isStreaming:
        raise LoadError(f"{label}: returned a streaming DataFrame; derive the expected rows from the events passed "
                        "in, a batch DataFrame")
    _same_columns(list(frame.columns), [f.name for f in schema.fields], label)
    try:
        cast = frame.select(*[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema.fields])
        cast.schema  # noqa: B018 - analysis: over Spark Connect a cast Spark cannot make shows here, not at select
    except Exception as exc:  # noqa: BLE001 - the cast of the user's columns only: quoted, naming the flag
        raise LoadError(f"{label}: its columns cannot be cast to the output's schema ({schema.simpleString()}): "
                        f"{reason(exc)}") from None
    return cast
