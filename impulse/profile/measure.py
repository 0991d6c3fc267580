"""Each leaf's statistics, measured with Spark aggregates over the sample (one aggregate per leaf, plus one
``GROUP BY`` for a leaf with few distinct values): nothing but the statistics reaches the driver.

Values are measured in the generators' units (`impulse.fields`): DATE as days and TIMESTAMP as µs since the
epoch, STRING and BINARY by their lengths, ARRAY and MAP by their sizes. An ARRAY's or MAP's sizes and a STRING's
lengths are also counted one by one (a ``GROUP BY``; a STRING with a dictionary sums it instead), so the generator
can draw them as seen (``lengthWeights``). Quantiles are Spark's exact
``percentile`` (linear interpolation between ranks), so the same sample gives the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from impulse.fields import column_type
from impulse.profile.leaves import Leaf

__all__ = ["Stats", "Numbered", "family", "measured", "leaf_stats", "PATTERNS", "NUMBERED"]

#: a numbered text: a prefix without digits, then the number's digits (at most 18: a BIGINT)
NUMBERED = r"^(\D*)(\d{1,18})$"


@dataclass(frozen=True)
class Numbered:
    """The values of a unique STRING that are all `prefix` then a number: the numbers' range, and their width when
    every number is written with the same count of digits (zero-padded), else 0 (no value has a leading zero)."""

    prefix: str
    low: int
    high: int
    width: int

#: what a STRING's values may look like, as Java regular expressions: the share of values matching each is measured
PATTERNS = {
    "email": r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$",
    "uuid": r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    "ipv4": r"^(\d{1,3}\.){3}\d{1,3}$",
    "url": r"^https?://\S+$",
}


def family(data_type: DataType) -> str:
    """The leaf's family: int, float, decimal, boolean, string, binary, date, timestamp, array, map, struct or
    the Spark type's own name (one impulse cannot generate)."""
    if isinstance(data_type, ArrayType):
        return "array"
    if isinstance(data_type, MapType):
        return "map"
    if isinstance(data_type, StructType):
        return "struct"
    ctype = column_type(data_type)
    return data_type.simpleString().upper() if ctype is None else ctype.family


def measured(column: SparkColumn, data_type: DataType) -> SparkColumn:
    """The number a value is measured by: itself (numbers), days (DATE), µs (TIMESTAMP), length, size."""
    if isinstance(data_type, DateType):
        return F.unix_date(column)
    if isinstance(data_type, TimestampType):
        return F.unix_micros(column)
    if isinstance(data_type, TimestampNTZType):  # its wall-clock time as if in UTC, as impulse's options read it
        return F.timestamp_diff("MICROSECOND", F.lit("1970-01-01 00:00:00").cast("timestamp_ntz"), column)
    if isinstance(data_type, (StringType, BinaryType)):
        return F.length(column)
    if isinstance(data_type, (ArrayType, MapType)):
        return F.when(column.isNotNull(), F.size(column))
    if isinstance(data_type, StructType):
        return F.lit(None)
    if isinstance(data_type, BooleanType):
        return column.cast("int")
    return column


@dataclass(frozen=True)
class Stats:
    """What was seen of one leaf (see the module docstring for the units)."""

    leaf: Leaf
    family: str
    rows: int                      #: values at this level, null or not
    nulls: int
    distinct: int                  #: distinct non-null values (containers: 0)
    quantiles: tuple[float, ...]   #: of the measured numbers at 0, 1/K, …, 1 (empty: none measured)
    #: (value, count), most frequent first, when few distinct; an ARRAY's or MAP's: (size, count) by size
    dictionary: tuple[tuple[object, int], ...] = ()
    patterns: tuple[tuple[str, float], ...] = ()     #: STRING: (pattern name, share of non-null values matching)
    #: a unique STRING whose every value is one text then a number (``C-0042``): `Numbered`; else None
    numbered: "Numbered | None" = None
    #: STRING: (length, count) by length, when 2 to `max_dictionary` lengths span the observed range
    lengths: tuple[tuple[int, int], ...] = ()

    @property
    def non_null(self) -> int:
        return self.rows - self.nulls


def leaf_stats(sample: DataFrame, leaf: Leaf, knots: int, max_dictionary: int) -> Stats:
    """Measure one leaf of `sample` (K = `knots` quantile steps; the dictionary when at most `max_dictionary`
    distinct values)."""
    kind = family(leaf.data_type)
    frame = leaf.values(sample)
    v = F.col("v")
    m = measured(v, leaf.data_type).cast(DoubleType())
    scalar = kind not in ("array", "map", "struct")
    aggs = [F.count(F.lit(1)).alias("rows"), F.count(v).alias("non_null"),
            (F.count_distinct(v) if scalar and kind != "binary" else F.lit(0)).alias("distinct")]
    if kind != "struct":
        aggs.append(F.percentile(m, F.array(*[F.lit(i / knots) for i in range(knots + 1)])).alias("q"))
    if kind == "string":
        aggs += [F.avg(F.when(v.isNotNull(), v.rlike(p).cast("int"))).alias(f"p_{name}") for name, p in PATTERNS.items()]
    row = frame.agg(*aggs).first()
    quantiles = tuple(float(q) for q in (row["q"] or ())) if kind != "struct" else ()
    patterns = tuple((name, float(row[f"p_{name}"] or 0.0)) for name in PATTERNS) if kind == "string" else ()
    dictionary: tuple[tuple[object, int], ...] = ()
    if scalar and kind != "binary" and 0 < row["distinct"] <= max_dictionary:
        value = v if kind not in ("date", "timestamp", "boolean") else measured(v, leaf.data_type)
        if isinstance(leaf.data_type, (FloatType, DoubleType, DecimalType)):
            value = v
        counts = (frame.where(v.isNotNull()).groupBy(value.alias("value")).count()
                  .orderBy(F.desc("count"), F.asc("value")).collect())
        dictionary = tuple((r["value"], int(r["count"])) for r in counts)
    elif kind in ("array", "map") and row["non_null"]:  # the sizes' counts, at most one per size up to MAX_SIZE
        counts = frame.where(v.isNotNull()).groupBy(m.cast("int").alias("value")).count().orderBy("value").collect()
        dictionary = tuple((int(r["value"]), int(r["count"])) for r in counts)
    numbered = None
    if kind == "string" and row["non_null"] > 1 and row["distinct"] == row["non_null"]:
        numbered = _numbered(frame.where(v.isNotNull()), v)
    lengths: tuple[tuple[int, int], ...] = ()
    if kind == "string" and quantiles and 0 < quantiles[-1] - quantiles[0] < max_dictionary:  # one length: no weights
        lengths = _length_counts(frame.where(v.isNotNull()), m, dictionary)
    return Stats(leaf, kind, int(row["rows"]), int(row["rows"] - row["non_null"]), int(row["distinct"]), quantiles,
                 dictionary, patterns, numbered, lengths)


def _length_counts(values: DataFrame, length: SparkColumn,
                   dictionary: tuple[tuple[object, int], ...]) -> tuple[tuple[int, int], ...]:
    """A STRING's (length, count) pairs by length: summed from its `dictionary` when it has one (every distinct
    value counted; Python's ``len`` counts characters as Spark's ``length`` does), else one ``GROUP BY`` length."""
    if dictionary:
        counts: dict[int, int] = {}
        for value, count in dictionary:
            counts[len(value)] = counts.get(len(value), 0) + count
        return tuple(sorted(counts.items()))
    rows = values.groupBy(length.cast("int").alias("value")).count().orderBy("value").collect()
    return tuple((int(r["value"]), int(r["count"])) for r in rows)


def _numbered(values: DataFrame, v: SparkColumn) -> Numbered | None:
    """`Numbered` of a unique STRING's non-null values (one aggregate), or None when one value is not numbered, the
    prefixes differ, or the widths differ while a number has a leading zero."""
    prefix, digits = F.regexp_extract(v, NUMBERED, 1), F.regexp_extract(v, NUMBERED, 2)
    number = F.when(v.rlike(NUMBERED), digits).cast("bigint")  # '' (no match) is null, not an ANSI cast error
    row = values.agg(F.min(v.rlike(NUMBERED).cast("int")).alias("all"), F.count_distinct(prefix).alias("prefixes"),
                     F.first(prefix).alias("prefix"), F.min(number).alias("low"),
                     F.max(number).alias("high"), F.min(F.length(digits)).alias("narrow"),
                     F.max(F.length(digits)).alias("wide"),
                     F.max((digits.rlike("^0[0-9]")).cast("int")).alias("zeros")).first()
    if row["all"] != 1 or row["prefixes"] != 1 or (row["narrow"] != row["wide"] and row["zeros"]):
        return None
    return Numbered(row["prefix"], int(row["low"]), int(row["high"]), int(row["wide"]) if row["narrow"] == row["wide"] else 0)
