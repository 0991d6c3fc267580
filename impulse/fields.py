"""Generated columns: a user schema plus ``fields.<column>.<property>`` options → vectorised generators.

A column's value for an event is a pure function of (``seed``, the lower-cased column name, that column's
options, ``subtask_index``, ``counter``): `impulse.draws` keys one random stream per (seed, column,
purpose), and the value of event ``c`` uses only that event's words. The null mask draws from its own
stream, so adding ``nullRate`` leaves the non-null values as they were. ``kind=sequence`` uses the
event's *global index* ``counter × numPartitions + subtask_index`` (with a total ``limit`` of L events,
the indices are exactly 0..L-1).

ARRAY, MAP and STRUCT columns are built from these, their leaves addressed by path: `impulse.nested`.

Kinds, the types they take and their properties (besides ``kind``, ``nullRate`` and, on STRING, ``format``); each
is one row of `KIND_TABLE`, its parser and its generator:

==============  ==========================================  ==============================================
kind            types                                       properties (default)
==============  ==========================================  ==============================================
sequence        integers, FLOAT, DOUBLE, DECIMAL, STRING    start (0), step (1)
random          every type                                  numbers, DATE, TIMESTAMP: min, max; STRING:
                                                            length or minLength..maxLength (16), each
                                                            length weighted by lengthWeights (uniform), or
                                                            min/max with a format; BINARY: length (16);
                                                            BOOLEAN: probability (0.5)
normal          numbers, STRING                             mean (0), stddev (1), min, max (a clip)
exponential     numbers, STRING                             mean (1)
zipf            integers, STRING                            cardinality (required), exponent (1), min (0)
values          all but BINARY                              values (required, comma-separated), weights,
                                                            jointWith
uuid            STRING                                      —
ref             integers, STRING                            refEventsPerSecond (required), refNumPartitions
                                                            (1), refLimit, refStart (0), refStep (1), pick
                                                            (uniform), cardinality and exponent (1) with
                                                            pick=recent, window with pick=window
faker           STRING                                      provider (required), locale (en_US),
                                                            cardinality (10000): `impulse.faker_pool`
empirical       numbers, DATE, TIMESTAMP                    quantiles (required: at least 2, ascending)
==============  ==========================================  ==============================================

``values`` with ``jointWith`` = another column of the same level draws its position in ``values`` with that
column's random stream instead of its own: when both list the same number of values with the same weights, each
event takes the values at one position in both, so the pairs written are the pairs listed (a joint distribution:
``fields.city.values=Paris,Lyon,Boston`` beside ``fields.country.values=FR,FR,US`` with ``jointWith=city``
never writes ``Paris, US``). Each column keeps its own ``nullRate``.

A ``random`` STRING's length is uniform in ``minLength``..``maxLength``, drawn from its own stream (seed, column,
``length``); ``lengthWeights`` (one weight ≥ 0 per length from ``minLength`` to ``maxLength``, not all 0) makes it
weighted: a uniform u of that stream takes the first length whose cumulative share exceeds u (`draw_lengths`, as
an ARRAY's or MAP's size in `impulse.nested`). `impulse.profile` writes it from a sample's length counts.

``empirical`` draws from a distribution given by its quantiles: ``quantiles`` = q₀ ≤ q₁ ≤ … ≤ q_K are the
values at the probabilities 0, 1/K, …, 1, and a uniform u becomes ``q_i + (uK − i)(q_{i+1} − q_i)`` with
``i = ⌊uK⌋`` (a piecewise-linear inverse CDF). So no value falls outside [q₀, q_K], the KS distance to the
distribution the knots were read from is at most about 1/K, and integers (DATE, TIMESTAMP: days, µs) are
rounded half to even, DECIMAL to its scale. `impulse.profile` writes it from a sample.

``ref`` refers to the entities of another impulse stream on the same pinned timeline (the same
``startTime``, or ``refStartTime`` = the referenced stream's ``startTime``) whose key is a ``sequence``
from 0: that stream's entity ``g`` (its global index) is
created at ``start + ⌊(g // P) · P · 10⁶ / R⌋`` µs (R = ``refEventsPerSecond``, P =
``refNumPartitions``, `impulse.schedule`), so the entities created by a time t are exactly
``0 .. E(t) − 1`` with ``E(t) = P · (events due per partition by t)`` (at most ``refLimit``). An event at
scheduled time t (its ``timestamp`` before any disorder) picks one of them: ``pick=uniform`` over all,
``pick=recent`` the ``r``-th newest with ``r`` Zipf-distributed over ``cardinality`` ranks (probability ∝
1/(r+1)^exponent; when fewer exist, ``r mod E``), ``pick=window`` uniformly among those created at or
after ``t − window`` (the newest when none was). So every value names an entity created at or before the
event's scheduled time. The value written is the entity's key, ``refStart + refStep × id``, when the referenced
key is a ``sequence`` with that ``start`` and ``step`` (defaults 0 and 1: the id itself).

TIMESTAMP_NTZ takes every kind and property of TIMESTAMP: its values are the same µs, read as a wall-clock time
without a zone (an option's time without a zone is that wall-clock time).

Defaults by type (no ``kind``): integers ``random`` over the type's whole range; FLOAT, DOUBLE
``random`` in [0, 1); DECIMAL(p,s) ``random`` from 0 to its largest value; BOOLEAN ``random`` (0.5);
STRING ``random`` of 16 characters; BINARY ``random`` of 16 bytes; DATE and TIMESTAMP ``random`` in
[2000-01-01, 2030-01-01).

Random strings are drawn from ``A-Z a-z 0-9``, one character per 16 bits (``⌊v·62 / 2¹⁶⌋``). Numbers on a
STRING column are formatted by ``format``: literal text around one ``{}``, ``{:d}``, ``{:Nd}``,
``{:0Nd}`` (integers) or ``{:.Nf}`` (decimals), as Python's `str.format` would (``user-{:06d}`` →
``user-000042``). Integers from ``normal``/``exponential`` are rounded half to even and clipped to the type.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Callable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from connectors.errors import OptionError
from connectors.options import OptionReader, parse_time_us
from impulse import draws, faker_pool
from impulse.schedule import Schedule

__all__ = ["Column", "ColumnType", "Kind", "column_type", "generated_column", "values_at", "alphanumeric",
           "numbers_to_type", "length_weights", "draw_lengths", "ALPHANUMERIC", "KIND_TABLE", "KINDS", "PROPERTIES", "TYPE_NAMES"]

PICKS = ("uniform", "recent", "window")
TYPE_NAMES = ("TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p,s), BOOLEAN, STRING, BINARY, DATE, TIMESTAMP, "
              "TIMESTAMP_NTZ")
_DAY_US = 86_400_000_000
_EPOCH_2000_DAYS, _EPOCH_2030_DAYS = 10_957, 21_915
ALPHANUMERIC = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)


@dataclass(frozen=True)
class ColumnType:
    """What the generators need to know of a Spark type: its family, Arrow type and integer bounds."""

    name: str            # as in DDL, for messages
    family: str          # int, float, decimal, boolean, string, binary, date, timestamp
    arrow: pa.DataType
    lo: int = 0          # integers: the type's range; decimals: the unscaled range
    hi: int = 0
    scale: int = 0


_INTS = {ByteType: ("TINYINT", pa.int8(), 8), ShortType: ("SMALLINT", pa.int16(), 16),
         IntegerType: ("INT", pa.int32(), 32), LongType: ("BIGINT", pa.int64(), 64)}


def column_type(data_type: DataType) -> ColumnType | None:
    """The `ColumnType` of a Spark type, or None when impulse cannot generate it."""
    for spark, (name, arrow, bits) in _INTS.items():
        if type(data_type) is spark:
            return ColumnType(name, "int", arrow, -2 ** (bits - 1), 2 ** (bits - 1) - 1)
    if isinstance(data_type, DecimalType):
        p, s = data_type.precision, data_type.scale
        top = min(10 ** p - 1, 2 ** 63 - 1)
        return ColumnType(f"DECIMAL({p},{s})", "decimal", pa.decimal128(p, s), -top, top, s)
    simple = {FloatType: ("FLOAT", "float", pa.float32()), DoubleType: ("DOUBLE", "float", pa.float64()),
              BooleanType: ("BOOLEAN", "boolean", pa.bool_()), StringType: ("STRING", "string", pa.string()),
              BinaryType: ("BINARY", "binary", pa.binary()), DateType: ("DATE", "date", pa.date32()),
              TimestampType: ("TIMESTAMP", "timestamp", pa.timestamp("us", tz="UTC")),
              TimestampNTZType: ("TIMESTAMP_NTZ", "timestamp", pa.timestamp("us"))}
    entry = simple.get(type(data_type))
    return None if entry is None else ColumnType(*entry)


@dataclass(frozen=True)
class Column:
    """One generated column: everything `array` needs, small and picklable (sent to executors)."""

    name: str
    type: ColumnType
    kind: str
    params: tuple = ()            # the kind's parsed parameters (`Kind.parse`)
    null_rate: float = 0.0
    fmt: tuple | None = None      # STRING from numbers: see `_parse_format`
    keys: tuple[int, int, int] = field(default=(0, 0, 0))  # stream keys: value, null, length

    def array(self, subtask: int, first: int, count: int, partitions: int,
              since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
        """The values of events ``counter ∈ [first, first + count)`` of partition `subtask`; with `keep` (bool,
        one per event) only those where it is true (the same values as without it: `impulse.nested`'s slots).

        `since_start_us`: each event's scheduled time (before disorder) minus the referenced streams' start time
        (``refStartTime``, default the stream's own start), µs;
        only ``kind=ref`` reads it (`refers`).
        """
        values = _BY_NAME[self.kind].generate(self, subtask, first, count, partitions, since_start_us, keep)
        if self.null_rate <= 0:
            return values
        nulls = draws.uniform(draws.words(self.keys[1], subtask, first, count)) < self.null_rate
        return _with_nulls(values, nulls if keep is None else nulls[keep])

    @property
    def arrow(self) -> pa.DataType:
        """The column's Arrow type (Spark's, as `pyspark.sql.pandas.types.to_arrow_type` makes it)."""
        return self.type.arrow

    @property
    def refers(self) -> bool:
        """Whether the values depend on the events' scheduled times (``kind=ref``)."""
        return _BY_NAME[self.kind].refers

    def _words(self, subtask: int, first: int, count: int, per_event: int = 1,
               keep: np.ndarray | None = None) -> np.ndarray:
        """The value stream's words of events ``[first, first + count)``, then those where `keep` is true: every
        event draws its words, so a value never depends on which others are kept."""
        x = draws.words(self.keys[0], subtask, first, count, per_event)
        return x if keep is None else x[keep]


def generated_column(name: str, data_type: DataType, nullable: bool, properties: Mapping[str, str],
                     seed: int) -> Column:
    """Parse one column's ``fields.<name>.*`` (`properties`, keys lower-case) against its type.

    Raises `OptionError` naming ``fields.<name>.<property>``, the value and what is allowed.
    """
    prefix = f"fields.{name}."
    ctype = column_type(data_type)
    if ctype is None:
        raise OptionError(f"schema, column '{name}'", data_type.simpleString().upper(),
                          f"a type impulse can generate: {TYPE_NAMES}, and ARRAY, MAP, STRUCT of them")
    reader = OptionReader({prefix + k: v for k, v in properties.items()}, name=f"column '{name}'")
    kind = _BY_NAME[reader.choice(prefix + "kind", KINDS, "random")]
    if ctype.family not in kind.families:
        raise OptionError(prefix + "kind", kind.name, f"a kind for a {ctype.name} column: one of "
                          + ", ".join(k.name for k in KIND_TABLE if ctype.family in k.families))
    null_rate = reader.number(prefix + "nullRate", 0.0, minimum=0.0)
    if null_rate > 1:
        raise OptionError(prefix + "nullRate", properties.get("nullrate"), "a fraction from 0 to 1")
    if null_rate > 0 and not nullable:
        raise OptionError(prefix + "nullRate", properties.get("nullrate"),
                          f"0 for a NOT NULL column; declare '{name}' nullable to give it nulls")
    fmt, numbers = None, ctype
    if ctype.family == "string" and kind.writes_numbers(reader, prefix):
        # numbers on a STRING column: drawn as BIGINT or DOUBLE (by the format), then formatted
        fmt = _parse_format(reader.string(prefix + "format", "{}"), prefix + "format")
        continuous = fmt[1] == "float" or (kind.continuous and fmt[1] == "plain")
        numbers = ColumnType("STRING", "float" if continuous else "int", pa.int64(), -2 ** 63, 2 ** 63 - 1)
    lower = name.lower()
    params = kind.parse(numbers, reader, prefix, draws.stream_key(seed, lower, "faker"))
    joint = reader.string(prefix + "jointWith") if kind.name == "values" else None
    reader.finish()
    drawn_as = lower if joint is None or not joint.strip() else joint.strip().lower()  # a joint column: its partner's
    keys = (draws.stream_key(seed, drawn_as, "value"), draws.stream_key(seed, lower, "null"),
            draws.stream_key(seed, lower, "length"))
    return Column(name, ctype, kind.name, params, null_rate, fmt, keys)


# --- parsing -------------------------------------------------------------------------------------------------

def _literal(ctype: ColumnType, text: str, option: str):
    """A value of the column's type, as the generators hold it (ints, floats, unscaled decimals, days, µs)."""
    family = ctype.family
    text = text.strip()
    try:
        if family == "int":
            value = int(text.replace("_", ""))
            if not ctype.lo <= value <= ctype.hi:
                raise OptionError(option, text, f"an integer from {ctype.lo} to {ctype.hi} (the range of {ctype.name})")
            return value
        if family == "float":
            value = float(text)
            if not math.isfinite(value):
                raise ValueError
            return value
        if family == "decimal":
            unscaled = Decimal(text).scaleb(ctype.scale)
            if unscaled != unscaled.to_integral_value():
                raise OptionError(option, text, f"a decimal with at most {ctype.scale} digits after the point "
                                                f"({ctype.name})")
            value = int(unscaled)
            if not ctype.lo <= value <= ctype.hi:
                raise OptionError(option, text, f"a value that fits {ctype.name}")
            return value
        if family == "boolean":
            return {"true": True, "false": False}[text.lower()]
        if family == "date":
            return date.fromisoformat(text).toordinal() - date(1970, 1, 1).toordinal()
        if family == "timestamp":
            return parse_time_us(text, option)
        return text
    except OptionError:
        raise
    except (ValueError, KeyError, InvalidOperation):
        expected = {"int": "an integer", "float": "a number", "decimal": "a decimal number",
                    "boolean": "true or false", "date": "an ISO date such as 2026-01-31",
                    "timestamp": "an ISO-8601 time or epoch milliseconds"}[family]
        raise OptionError(option, text, f"{expected} for the {ctype.name} column") from None


def _literal_or(reader: OptionReader, ctype: ColumnType, option: str, default):
    text = reader.string(option)
    return default if text is None else _literal(ctype, text, option)


# Each kind's parser (`Kind.parse`): (the column's type, or the numbers' on a STRING column; the reader; the
# column's option prefix; the key that seeds a faker pool) → `Column.params`, in the units the generators use
# (see `_literal`).

def _parse_sequence(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """(start, step): floats on FLOAT and DOUBLE, else integers (DECIMAL: unscaled)."""
    family = ctype.family
    one = 1.0 if family == "float" else 10 ** ctype.scale
    return (_literal_or(reader, ctype, prefix + "start", 0.0 if family == "float" else 0),
            _literal_or(reader, ctype, prefix + "step", one))


def _parse_random(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """BOOLEAN: (probability,); STRING and BINARY: (shortest, longest length, the cumulative shares of the lengths
    from ``lengthWeights`` or None: uniform); the others: (min, max)."""
    family = ctype.family
    if family == "boolean":
        p = reader.number(prefix + "probability", 0.5, minimum=0.0)
        if p > 1:
            raise OptionError(prefix + "probability", p, "a probability from 0 to 1")
        return (p,)
    if family in ("string", "binary"):
        length = reader.integer(prefix + "length", None, minimum=0, maximum=1 << 20)
        low = reader.integer(prefix + "minLength", None, minimum=0, maximum=1 << 20)
        high = reader.integer(prefix + "maxLength", None, minimum=0, maximum=1 << 20)
        if length is not None and (low is not None or high is not None):
            raise OptionError(prefix + "length", length, "either 'length' or 'minLength'/'maxLength', not both")
        weights = reader.string(prefix + "lengthWeights") if family == "string" else None
        if family == "binary" and (low is not None or high is not None):
            raise OptionError(prefix + ("minLength" if low is not None else "maxLength"), low if low is not None else high,
                              "no such property for BINARY: use 'length'")
        if length is None:
            low = 16 if low is None and high is None else (low or 0)
            high = low if high is None else high
            if low > high:
                raise OptionError(prefix + "minLength/maxLength", {"minLength": low, "maxLength": high},
                                  "minLength ≤ maxLength")
            return (low, high, length_weights(weights, prefix + "lengthWeights", low, high, fixed=False))
        return (length, length, length_weights(weights, prefix + "lengthWeights", length, length, fixed=True))
    defaults = {"int": (ctype.lo, ctype.hi), "float": (0.0, 1.0), "decimal": (0, ctype.hi),
                "date": (_EPOCH_2000_DAYS, _EPOCH_2030_DAYS - 1),
                "timestamp": (_EPOCH_2000_DAYS * _DAY_US, _EPOCH_2030_DAYS * _DAY_US - 1)}
    lo = _literal_or(reader, ctype, prefix + "min", defaults[family][0])
    hi = _literal_or(reader, ctype, prefix + "max", defaults[family][1])
    if lo > hi:
        raise OptionError(prefix + "min/max", {"min": reader.string(prefix + "min"), "max": reader.string(prefix + "max")},
                          "min ≤ max")
    return (lo, hi)


def length_weights(text: str | None, option: str, low: int, high: int, fixed: bool) -> tuple[float, ...] | None:
    """``lengthWeights`` (`option`; one weight ≥ 0 per length from minLength `low` to maxLength `high`, not all 0,
    comma-separated) → the cumulative shares of those lengths, for `draw_lengths`; None without it. Refused with a
    `fixed` ``length``. A random STRING's and an ARRAY's or MAP's (`impulse.nested`)."""
    if text is None:
        return None
    expected = (f"{high - low + 1} weights ≥ 0, not all 0, comma-separated: one per length from minLength {low} to "
                f"maxLength {high}")
    if fixed:
        raise OptionError(option, text, "no weights with a fixed 'length'; set minLength and maxLength instead")
    try:
        weights = np.array([float(w) for w in text.split(",")], dtype=np.float64)
    except ValueError:
        raise OptionError(option, text, expected) from None
    if len(weights) != high - low + 1 or not np.isfinite(weights).all() or (weights < 0).any() or not weights.sum() > 0:
        raise OptionError(option, text, expected)
    return tuple(float(c) for c in np.cumsum(weights) / weights.sum())


def draw_lengths(words: np.ndarray, low: int, high: int, cumulative: tuple[float, ...] | None) -> np.ndarray:
    """One length in `low`..`high` per word (int64): uniform, or with `cumulative` (`length_weights`) the first
    length whose cumulative share exceeds the word's uniform draw (so each length has its weight's share)."""
    if cumulative is None:
        return draws.integers(words, low, high)
    lengths = np.searchsorted(np.asarray(cumulative), draws.uniform(words), side="right").astype(np.int64)
    np.minimum(lengths, high - low, out=lengths)
    lengths += low
    return lengths


def _parse_normal(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """(mean, stddev, clip min or None, clip max or None)."""
    mean = reader.number(prefix + "mean", 0.0)
    stddev = reader.number(prefix + "stddev", 1.0, minimum=0.0)
    clip_lo, clip_hi = (reader.number(prefix + p, None) for p in ("min", "max"))
    if clip_lo is not None and clip_hi is not None and clip_lo > clip_hi:
        raise OptionError(prefix + "min/max", {"min": clip_lo, "max": clip_hi}, "min ≤ max")
    return (mean, stddev, clip_lo, clip_hi)


def _parse_exponential(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """(mean,)."""
    return (reader.number(prefix + "mean", 1.0, above=0.0),)


def _parse_zipf(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """(cardinality, exponent, min)."""
    cardinality = reader.integer(prefix + "cardinality", None, minimum=1, maximum=1 << 40)
    if cardinality is None:
        raise OptionError(prefix + "cardinality", None, "the number of distinct values (an integer ≥ 1) for kind=zipf")
    exponent = reader.number(prefix + "exponent", 1.0, minimum=0.0)
    low = _literal_or(reader, ctype, prefix + "min", 0)
    if low + cardinality - 1 > ctype.hi:
        raise OptionError(prefix + "cardinality", cardinality,
                          f"at most {ctype.hi - low + 1}: min + cardinality - 1 must fit {ctype.name}")
    return (cardinality, exponent, low)


def _parse_values(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """(the values, their weights or None)."""
    text = reader.string(prefix + "values", required=True)
    items = tuple(_literal(ctype, v, prefix + "values") for v in text.split(","))
    weights_text = reader.string(prefix + "weights")
    weights = None
    if weights_text is not None:
        try:
            weights = tuple(float(w) for w in weights_text.split(","))
        except ValueError:
            raise OptionError(prefix + "weights", weights_text, "comma-separated numbers ≥ 0") from None
        if len(weights) != len(items) or min(weights) < 0 or sum(weights) <= 0 or not all(map(math.isfinite, weights)):
            raise OptionError(prefix + "weights", weights_text,
                              f"{len(items)} numbers ≥ 0 (one per value), not all 0")
    return (items, weights)


def _parse_empirical(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """(the quantiles as float64 values in the generators' units,): at least 2, ascending."""
    text = reader.string(prefix + "quantiles", required=True)
    knots = tuple(_literal(ctype, v, prefix + "quantiles") for v in text.split(","))
    if len(knots) < 2 or any(b < a for a, b in zip(knots, knots[1:])):
        raise OptionError(prefix + "quantiles", text, "at least 2 values in ascending order (the minimum first, "
                                                      "the maximum last)")
    return (knots,)


def _parse_nothing(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """A kind without properties."""
    return ()


def _parse_faker(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """(the pool of texts,): `impulse.faker_pool`, seeded by `pool_key`."""
    provider = reader.string(prefix + "provider")
    if provider is None:
        raise OptionError(prefix + "provider", None, "a Faker provider for kind=faker, e.g. name, email, city, "
                          "ipv4, user_agent")
    locale = reader.string(prefix + "locale", "en_US").strip()
    cardinality = reader.integer(prefix + "cardinality", 10_000, minimum=1, maximum=1_000_000)
    return (faker_pool.pool(provider.strip(), locale, cardinality, pool_key, prefix),)


def _parse_ref(ctype: ColumnType, reader: OptionReader, prefix: str, pool_key: int) -> tuple:
    """(delay µs of one referenced partition, refNumPartitions, refLimit or None, pick, cardinality, exponent,
    window µs, refStart, refStep)."""
    rate = reader.number(prefix + "refEventsPerSecond", None, above=0.0)
    if rate is None:
        raise OptionError(prefix + "refEventsPerSecond", None, "the eventsPerSecond of the referenced stream "
                          "(> 0), required for kind=ref")
    partitions = reader.integer(prefix + "refNumPartitions", 1, minimum=1, maximum=100_000)
    limit = reader.integer(prefix + "refLimit", None, minimum=1, maximum=min(ctype.hi, 2 ** 62))
    pick = reader.choice(prefix + "pick", PICKS, "uniform")
    cardinality, exponent, window = 1, 0.0, 0
    if pick == "recent":
        cardinality = reader.integer(prefix + "cardinality", None, minimum=1, maximum=1 << 40)
        if cardinality is None:
            raise OptionError(prefix + "cardinality", None, "how many of the newest entities pick=recent chooses "
                              "from (an integer ≥ 1)")
        exponent = reader.number(prefix + "exponent", 1.0, minimum=0.0)
    elif pick == "window":
        window = reader.duration_us(prefix + "window")
        if window is None:
            raise OptionError(prefix + "window", None, "a duration for pick=window: only entities created within it "
                              "before the event are picked, e.g. '10s'")
    key_start = reader.integer(prefix + "refStart", 0, minimum=ctype.lo, maximum=ctype.hi)
    key_step = reader.integer(prefix + "refStep", 1, minimum=1, maximum=ctype.hi)
    return (partitions * 1e6 / rate, partitions, limit, pick, cardinality, exponent, window, key_start, key_step)


_SPEC = re.compile(r"^(?:(?P<zero>0)?(?P<width>\d+)?d?|\.(?P<digits>\d+)f)$")


def _parse_format(text: str, option: str) -> tuple:
    """``prefix{spec}suffix`` → (prefix, 'plain'|'int'|'float', width or digits, zero-pad, suffix)."""
    expected = "text around one '{}', '{:d}', '{:Nd}', '{:0Nd}' or '{:.Nf}', e.g. 'user-{:06d}'"
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError:
        raise OptionError(option, text, expected) from None
    fields = [i for i, (_, name, _, _) in enumerate(parts) if name is not None]
    if len(fields) != 1:
        raise OptionError(option, text, expected)
    i = fields[0]
    _, name, spec, conversion = parts[i]
    match = _SPEC.match(spec or "")
    if name not in ("", "0") or conversion or not match:
        raise OptionError(option, text, expected)
    prefix = "".join(p[0] for p in parts[:i + 1])
    suffix = "".join(p[0] for p in parts[i + 1:])
    if match["digits"] is not None:
        return (prefix, "float", int(match["digits"]), False, suffix)
    return (prefix, "int" if spec else "plain", int(match["width"] or 0), bool(match["zero"]), suffix)


# --- generation ----------------------------------------------------------------------------------------------

def numbers_to_type(column: Column, values: np.ndarray) -> pa.Array:
    """int64/float64 numbers → the column's Arrow type (rounding, clipping, scaling, formatting)."""
    ctype = column.type
    if column.fmt is not None:
        return _format(values, column.fmt)
    if ctype.family == "int":
        if values.dtype.kind == "f":
            values = np.clip(np.rint(values), ctype.lo, ctype.hi)
        return pa.array(values.astype(ctype.arrow.to_pandas_dtype()), type=ctype.arrow)
    if ctype.family == "float":
        return pa.array(values.astype(ctype.arrow.to_pandas_dtype()), type=ctype.arrow)
    if values.dtype.kind == "f":  # decimal from a continuous kind
        values = np.clip(np.rint(values * 10.0 ** ctype.scale), ctype.lo, ctype.hi).astype(np.int64)
    return _decimals(values, ctype.arrow)


def _decimals(unscaled: np.ndarray, arrow: pa.DataType) -> pa.Array:
    """Decimal128 from int64 unscaled values (two little-endian words each, sign-extended)."""
    words = np.empty((len(unscaled), 2), dtype=np.int64)
    words[:, 0] = unscaled
    words[:, 1] = unscaled >> 63
    return pa.Array.from_buffers(arrow, len(unscaled), [None, pa.py_buffer(words)])


def _sequence(column: Column, subtask: int, first: int, count: int, partitions: int,
        since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    start, step = column.params
    index = np.arange(first, first + count, dtype=np.int64)
    index *= partitions
    index += subtask
    if keep is not None:
        index = index[keep]
    if isinstance(start, float):
        return numbers_to_type(column, start + step * index.astype(np.float64))
    index *= np.int64(step)  # int64 arithmetic: beyond the type's range values wrap around
    index += np.int64(start)
    return numbers_to_type(column, index)


def _random(column: Column, subtask: int, first: int, count: int, partitions: int,
        since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    family = column.type.family
    if family == "boolean":
        return pa.array(draws.uniform(column._words(subtask, first, count, keep=keep)) < column.params[0])
    if family in ("string", "binary") and column.fmt is None:
        return _random_bytes(column, subtask, first, count, keep)
    lo, hi = column.params
    x = column._words(subtask, first, count, keep=keep)
    if isinstance(lo, float):
        values = draws.uniform(x)
        values *= hi - lo
        values += lo
        return numbers_to_type(column, values)
    values = draws.integers(x, lo, hi)
    if family == "date":
        return pa.array(values.astype(np.int32), type=pa.date32())
    if family == "timestamp":
        return pa.array(values, type=column.type.arrow)
    return numbers_to_type(column, values)


def _random_bytes(column: Column, subtask: int, first: int, count: int, keep: np.ndarray | None) -> pa.Array:
    low, high, cumulative = column.params
    text = column.type.family == "string"
    per_word = 4 if text else 8
    per_event = max(1, -(-high // per_word))
    raw = column._words(subtask, first, count, per_event, keep).reshape(-1, per_event)
    rows = len(raw)
    if text:
        data = alphanumeric(raw)[:, :high]
    else:
        data = raw.view(np.uint8).reshape(rows, per_event * 8)[:, :high]
    if low == high:
        lengths = None
        flat = np.ascontiguousarray(data).reshape(-1)
        offsets = np.arange(0, (rows + 1) * high, high, dtype=np.int64)
    else:
        lengths = draw_lengths(draws.words(column.keys[2], subtask, first, count), low, high, cumulative)
        if keep is not None:
            lengths = lengths[keep]
        flat = data[np.arange(high) < lengths[:, None]]
        offsets = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
    large = pa.large_string() if text else pa.large_binary()
    array = pa.Array.from_buffers(large, rows, [None, pa.py_buffer(offsets), pa.py_buffer(flat)])
    return array.cast(column.type.arrow)


def alphanumeric(raw: np.ndarray) -> np.ndarray:
    """Characters ``A-Z a-z 0-9`` (uint8, shape (rows, 4 × words)) from words (uint64, shape (rows, words)):
    one per 16 bits v, ``⌊v·62 / 2¹⁶⌋``."""
    rows = raw.shape[0]
    chunks = raw.view(np.uint16).reshape(rows, -1).astype(np.uint32)
    chunks *= 62
    chunks >>= 16
    return ALPHANUMERIC[chunks]


def _normal(column: Column, subtask: int, first: int, count: int, partitions: int,
        since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    mean, stddev, lo, hi = column.params
    values = draws.normal(column._words(subtask, first, count, keep=keep), mean, stddev)
    if lo is not None or hi is not None:
        np.clip(values, lo, hi, out=values)
    return numbers_to_type(column, values)


def _exponential(column: Column, subtask: int, first: int, count: int, partitions: int,
        since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    return numbers_to_type(column, draws.exponential(column._words(subtask, first, count, keep=keep), column.params[0]))


def _zipf(column: Column, subtask: int, first: int, count: int, partitions: int,
        since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    cardinality, exponent, low = column.params
    ranks = draws.zipf(cardinality, exponent).ranks(column._words(subtask, first, count, keep=keep))
    if low:
        ranks += np.int64(low)
    return numbers_to_type(column, ranks)


def _values(column: Column, subtask: int, first: int, count: int, partitions: int,
        since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    items, weights = column.params
    return values_at(column, draws.choice(column._words(subtask, first, count, keep=keep), weights, len(items)))


def values_at(column: Column, index: np.ndarray) -> pa.Array:
    """Item `index` (int64, each in range) of a ``values`` column's values, in its Arrow type."""
    items = column.params[0]
    ctype = column.type
    if ctype.family == "decimal":
        return _decimals(np.array(items, dtype=np.int64)[index], ctype.arrow)
    if ctype.family == "timestamp":
        return pa.array(np.array(items, dtype=np.int64)[index], type=ctype.arrow)
    if ctype.family == "date":
        return pa.array(np.array(items, dtype=np.int32)[index], type=ctype.arrow)
    return pa.array(items, type=ctype.arrow).take(pa.array(index))


def _empirical(column: Column, subtask: int, first: int, count: int, partitions: int,
               since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    """A piecewise-linear inverse CDF through the quantiles (module docstring)."""
    knots = np.array(column.params[0], dtype=np.float64)
    steps = len(knots) - 1
    position = draws.uniform(column._words(subtask, first, count, keep=keep)) * steps
    index = np.minimum(position.astype(np.int64), steps - 1)
    values = knots[index] + (position - index) * (knots[index + 1] - knots[index])
    family = column.type.family
    if family == "decimal":
        values = np.clip(np.rint(values), column.type.lo, column.type.hi).astype(np.int64)
        return _decimals(values, column.type.arrow)
    if family in ("date", "timestamp"):
        values = np.rint(values).astype(np.int64)
        return pa.array(values.astype(np.int32) if family == "date" else values, type=column.type.arrow)
    return numbers_to_type(column, values)


def _uuid(column: Column, subtask: int, first: int, count: int, partitions: int,
        since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    """UUID version 4 text (RFC 9562): 122 random bits from two words, lower-case hex with dashes."""
    raw = column._words(subtask, first, count, 2, keep).view(np.uint8).reshape(-1, 16)
    count = len(raw)
    raw[:, 6] &= 0x0F
    raw[:, 6] |= 0x40
    raw[:, 8] &= 0x3F
    raw[:, 8] |= 0x80
    lanes = _hex_lanes(raw.view(np.uint32))  # (count, 4): the 8 hex characters of each 4 bytes
    text = np.empty(count, dtype=_UUID_TEXT)
    text["a"], text["b"], text["c"] = lanes[:, 0], lanes[:, 1], lanes[:, 1] >> 32
    text["d"], text["e"], text["f"] = lanes[:, 2], lanes[:, 2] >> 32, lanes[:, 3]
    for dash in ("d1", "d2", "d3", "d4"):
        text[dash] = ord("-")
    offsets = np.arange(0, (count + 1) * 36, 36, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(text)])


# 36 bytes a row: 8 hex, '-', 4, '-', 4, '-', 4, '-', 12 (written as 4 + 8)
_UUID_TEXT = np.dtype({"names": ["a", "d1", "b", "d2", "c", "d3", "d", "d4", "e", "f"],
                       "formats": ["<u8", "u1", "<u4", "u1", "<u4", "u1", "<u4", "u1", "<u4", "<u8"],
                       "offsets": [0, 8, 9, 13, 14, 18, 19, 23, 24, 28], "itemsize": 36})
_M16 = np.uint64(0x0000FFFF0000FFFF)
_M8 = np.uint64(0x00FF00FF00FF00FF)
_NIBBLES = np.uint64(0x000F000F000F000F)


def _hex_lanes(words: np.ndarray) -> np.ndarray:
    """Lower-case hex text of uint32 values, 8 ASCII characters packed in a uint64 each (SWAR, in memory order)."""
    y = words.astype(np.uint64)
    y |= y << np.uint64(16)
    y &= _M16
    y |= y << np.uint64(8)
    y &= _M8  # each byte in its own 16-bit slot
    pairs = (y >> np.uint64(4)) & _NIBBLES  # high nibble first in memory
    pairs |= (y & _NIBBLES) << np.uint64(8)
    letters = pairs + np.uint64(0x0606060606060606)
    letters >>= np.uint64(4)
    letters &= np.uint64(0x0101010101010101)
    letters *= np.uint64(ord("a") - ord("0") - 10)
    pairs += np.uint64(0x3030303030303030)
    pairs += letters
    return pairs


def _ref(column: Column, subtask: int, first: int, count: int, partitions: int,
         since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    """Ids of referenced entities created at or before each event's scheduled time (module docstring)."""
    delay_us, ref_partitions, limit, pick, cardinality, exponent, window_us, key_start, key_step = column.params
    created = Schedule(0, delay_us)  # the referenced stream's schedule, on the same start

    def existing(at: np.ndarray) -> np.ndarray:
        n = created.due_many(at)
        n *= ref_partitions
        if limit is not None:
            np.minimum(n, limit, out=n)
        return n

    if keep is not None:
        since_start_us = since_start_us[keep]
    newest = existing(since_start_us)
    np.maximum(newest, 1, out=newest)  # entity 0 exists from the start; an event is never scheduled before it
    x = column._words(subtask, first, count, keep=keep)
    if pick == "recent":
        ranks = draws.zipf(cardinality, exponent).ranks(x)
        ranks %= newest
        ids = newest - 1
        ids -= ranks
    else:
        oldest = np.zeros_like(newest) if pick == "uniform" else np.minimum(existing(since_start_us - window_us - 1),
                                                                          newest - 1)
        span = newest - oldest
        ids = np.floor(draws.uniform(x) * span).astype(np.int64)
        np.minimum(ids, span - 1, out=ids)
        ids += oldest
    if key_step != 1:
        ids *= np.int64(key_step)
    if key_start:
        ids += np.int64(key_start)
    return numbers_to_type(column, ids)


def _faker(column: Column, subtask: int, first: int, count: int, partitions: int,
        since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
    """A uniform pick from the column's pool (`impulse.faker_pool`): one word per event."""
    pool = column.params[0]
    return pool.take(pa.array(draws.integers(column._words(subtask, first, count, keep=keep), 0, len(pool) - 1)))


# --- kinds ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Kind:
    """One kind of generated column (``fields.<column>.kind``): all that defines it, one row of `KIND_TABLE`
    (documented in the module docstring's table; tests/impulse/test_fields.py checks that table against this one).
    """

    name: str
    families: tuple[str, ...]      #: the types it generates (`ColumnType.family`)
    properties: tuple[str, ...]    #: what it reads besides kind, nullRate and format (`PROPERTIES`)
    #: (type, reader, option prefix, faker pool key) → `Column.params`; the type is the numbers' on a STRING column
    parse: Callable[[ColumnType, OptionReader, str, int], tuple]
    #: (column, subtask, first counter, count, partitions, since_start_us, keep) → the values (`Column.array`)
    generate: Callable[..., pa.Array]
    #: on a STRING column: numbers formatted by ``format`` always (None), or only when one of these properties is
    #: given (``()``: never, the kind writes text of its own)
    numbers_with: tuple[str, ...] | None = None
    continuous: bool = False       #: draws doubles, which a plain ``{}`` format writes as such
    refers: bool = False           #: reads the events' scheduled times (`Column.refers`)

    def writes_numbers(self, reader: OptionReader, prefix: str) -> bool:
        """Whether, on a STRING column, it draws numbers and formats them (by its `numbers_with`)."""
        return self.numbers_with is None or any(reader.has(prefix + p) for p in self.numbers_with)


_NUMBERS = ("int", "float", "decimal")

KIND_TABLE: tuple[Kind, ...] = (
    Kind("sequence", _NUMBERS + ("string",), ("start", "step"), _parse_sequence, _sequence),
    Kind("random", _NUMBERS + ("boolean", "string", "binary", "date", "timestamp"),
         ("min", "max", "length", "minLength", "maxLength", "lengthWeights", "probability"), _parse_random, _random,
         numbers_with=("min", "max", "format")),
    Kind("normal", _NUMBERS + ("string",), ("mean", "stddev", "min", "max"), _parse_normal, _normal, continuous=True),
    Kind("exponential", _NUMBERS + ("string",), ("mean",), _parse_exponential, _exponential, continuous=True),
    Kind("zipf", ("int", "string"), ("cardinality", "exponent", "min"), _parse_zipf, _zipf),
    Kind("values", _NUMBERS + ("boolean", "string", "date", "timestamp"), ("values", "weights", "jointWith"),
         _parse_values, _values, numbers_with=()),
    Kind("uuid", ("string",), (), _parse_nothing, _uuid, numbers_with=()),
    Kind("ref", ("int", "string"), ("refEventsPerSecond", "refNumPartitions", "refLimit", "refStart", "refStep", "pick",
                           "cardinality", "exponent", "window"), _parse_ref, _ref, refers=True),
    Kind("faker", ("string",), ("provider", "locale", "cardinality"), _parse_faker, _faker, numbers_with=()),
    Kind("empirical", _NUMBERS + ("date", "timestamp"), ("quantiles",), _parse_empirical, _empirical),
)
_BY_NAME = {kind.name: kind for kind in KIND_TABLE}
KINDS = tuple(_BY_NAME)
#: every property of a column: the ones of all kinds, in table order, after those any column takes (an ARRAY's or
#: MAP's, `impulse.nested`, are random STRING's: ``length``, ``minLength``, ``maxLength``, ``lengthWeights``)
PROPERTIES = tuple(dict.fromkeys(("kind", "nullRate", "format", *(p for k in KIND_TABLE for p in k.properties))))


def _format(values: np.ndarray, fmt: tuple) -> pa.Array:
    """Numbers → strings as ``str.format`` with the parsed `fmt` would, vectorised with pyarrow."""
    prefix, spec, width, zero, suffix = fmt
    negative = None
    if spec == "plain" and values.dtype.kind == "f":
        body = pc.cast(pa.array(values), pa.string())  # the shortest text that reads back as the same double
    elif spec == "float":
        scaled = np.rint(values * 10.0 ** width).astype(np.int64)
        negative = scaled < 0
        magnitude = np.abs(scaled)
        whole = pc.cast(pa.array(magnitude // 10 ** width), pa.string())
        if width:
            fraction = pc.utf8_lpad(pc.cast(pa.array(magnitude % 10 ** width), pa.string()), width, "0")
            body = pc.binary_join_element_wise(whole, fraction, ".")
        else:
            body = whole
    else:
        if values.dtype.kind == "f":
            values = np.rint(values).astype(np.int64)
        negative = values < 0
        body = pc.cast(pa.array(np.abs(values)), pa.string())
        if zero and width:  # the sign counts in the width: -42 with {:06d} is '-00042'
            body = pc.utf8_lpad(body, max(width - 1, 0), "0")
            body = pc.if_else(pa.array(negative), body, pc.utf8_lpad(body, width, "0"))
    if negative is not None and negative.any():
        body = pc.if_else(pa.array(negative), pc.binary_join_element_wise("-", body, ""), body)
    if spec == "int" and width and not zero:
        body = pc.utf8_lpad(body, width, " ")
    if prefix or suffix:
        body = pc.binary_join_element_wise(prefix, body, suffix, "")
    return body


def _with_nulls(values: pa.Array, nulls: np.ndarray) -> pa.Array:
    """`values` with the rows where `nulls` is true set to null (a validity bitmap, no copy of the data)."""
    if not nulls.any():
        return values
    if values.offset:
        values = pa.concat_arrays([values])
    validity = np.packbits(~nulls, bitorder="little")
    buffers = values.buffers()
    return pa.Array.from_buffers(values.type, len(values), [pa.py_buffer(validity)] + buffers[1:],
                                 null_count=int(nulls.sum()))
