"""A leaf's statistics (`impulse.profile.measure.Stats`) → the generator that imitates it: its
``fields.<path>.*`` properties and a comment saying what was seen. Pure: no Spark.

The rules, first match wins:

- a container (ARRAY, MAP, STRUCT): its ``nullRate``; an ARRAY's or MAP's size in the observed
  ``minLength``..``maxLength``, weighted by each size's count (``lengthWeights``; uniform when more than
  ``max_dictionary`` sizes span that range);
- BOOLEAN: ``random`` with the observed ``probability`` of true;
- at most ``max_dictionary`` distinct values: ``values`` with the counts as ``weights``, those seen more than
  once when they hold ≥ 95 % of the values (a value seen once is never copied; with ``keep_values`` all are
  kept); not for a STRING value holding a comma, which ``values`` cannot write;
- every value distinct: an integer ``sequence`` from the minimum (its step the mean gap), a UUID-looking STRING
  ``uuid``, a STRING of numbered keys (one prefix then a number, ``C-0042``: `impulse.profile.measure.Numbered`) a
  ``sequence`` of its numbers written with ``format`` (``C-{:04d}``; ``{}`` when the widths vary);
- a STRING with many distinct values is never copied: ``faker`` with a provider when the column's name or ≥ 90 %
  of its values say which (`PROVIDERS_BY_NAME`, `PROVIDERS_BY_PATTERN`; a pool sized so that as many rows see
  the sample's distinct ratio, `faker_cardinality`), else ``random`` text of the observed length range, each
  length weighted by its count (``lengthWeights``; uniform when more than ``max_dictionary`` lengths span that
  range); BINARY: ``random`` of the median length;
- numbers, DATE, TIMESTAMP: ``empirical`` through the K+1 quantiles (integers rounded, the minimum and maximum
  kept);
- a map's keys draw from a finite set without repetition (`impulse.nested`): ``values`` when few, ``random``
  over the observed range (integers, DATE, TIMESTAMP) or of the median length (STRING) when many.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from pyspark.sql.types import DecimalType

from connectors.errors import OptionError
from impulse.nested import MAX_SIZE
from impulse.profile.leaves import Leaf
from impulse.profile.measure import Stats, family

__all__ = ["Inference", "infer", "check_type", "faker_cardinality", "PROVIDERS_BY_NAME", "PROVIDERS_BY_PATTERN", "text"]

#: a column (or leaf) name's words → the Faker provider its values are drawn from; the first match wins
PROVIDERS_BY_NAME: tuple[tuple[str, str], ...] = (
    (r"e_?mail", "email"), (r"first_?name", "first_name"), (r"last_?name|surname", "last_name"),
    (r"user_?agent", "user_agent"), (r"(^|_)ip(_?addr(ess)?)?$|ipv4", "ipv4"), (r"url|uri|link", "url"),
    (r"phone|mobile", "phone_number"), (r"city", "city"), (r"country", "country"), (r"company", "company"),
    (r"street|address", "street_address"), (r"(full|person|customer|user)_?name$", "name"),
)
#: a `impulse.profile.measure.PATTERNS` name that ≥ 90 % of a STRING's values match → its Faker provider
PROVIDERS_BY_PATTERN = {"email": "email", "ipv4": "ipv4", "url": "url"}
_PATTERN_SHARE = 0.9
#: a dictionary's values seen more than once must hold this share of the non-null values
SINGLETONS_LEFT = 0.95
#: the largest Faker pool a profile asks for (built on the driver when the query starts)
FAKER_CAP = 100_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Inference:
    """A leaf's generator: its properties (without the ``fields.<path>.`` prefix, in writing order) and a comment."""

    properties: tuple[tuple[str, str], ...]
    comment: str


def text(value: object, stats: Stats) -> str:
    """A value (as measured: days, µs, numbers) as the option's text for this leaf's type."""
    fam = stats.family
    if fam == "date":
        return (date(1970, 1, 1) + timedelta(days=int(round(float(value))))).isoformat()
    if fam == "timestamp":
        micros = int(round(float(value)))
        return (_EPOCH + timedelta(microseconds=micros)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if fam == "int":
        return str(int(round(float(value))))
    if fam == "decimal":
        scale = stats.leaf.data_type.scale if isinstance(stats.leaf.data_type, DecimalType) else 0
        return f"{Decimal(str(value)).quantize(Decimal(1).scaleb(-scale)):f}"
    if fam == "float":
        return repr(float(value))
    if fam == "boolean":
        return "true" if value else "false"
    return str(value)


def _share(part: float, whole: int) -> str:
    return f"{part / whole:.6g}" if whole else "0"


_FAMILIES = ("int", "float", "decimal", "boolean", "string", "binary", "date", "timestamp", "array", "map", "struct")


def check_type(leaf: Leaf) -> str:
    """The leaf's family; raises `OptionError` naming the column when impulse cannot generate its type."""
    fam = family(leaf.data_type)
    if fam not in _FAMILIES:
        raise OptionError(f"column '{leaf.name}'", fam, "a type impulse can generate: integers, FLOAT, DOUBLE, "
                          "DECIMAL, BOOLEAN, STRING, BINARY, DATE, TIMESTAMP and ARRAY, MAP, STRUCT of them "
                          "(cast the column in --sql, or leave it out)")
    return fam


def _size_weights(counts: tuple[tuple[object, int], ...], low: int, high: int, max_sizes: int) -> str | None:
    """``lengthWeights`` of an ARRAY's or MAP's sizes or a STRING's lengths: each size's count from `low` to `high`
    (0 for one not seen); None when the sizes are too many (more than `max_sizes`) or none was counted."""
    if not counts or high - low + 1 > max_sizes:
        return None
    seen = {int(size): count for size, count in counts}
    return ",".join(str(seen.get(size, 0)) for size in range(low, high + 1))


def infer(stats: Stats, max_dictionary: int = 1000, keep_values: bool = False, map_key: bool = False) -> Inference:
    """The generator of one leaf (module docstring); raises `OptionError` for a type impulse cannot generate."""
    fam, leaf = stats.family, stats.leaf
    props: list[tuple[str, str]] = []
    seen = [f"{stats.rows} values", f"{_share(stats.nulls, stats.rows)} null"]
    if stats.nulls and not map_key:
        props.append(("nullRate", _share(stats.nulls, stats.rows)))
    check_type(leaf)
    q = stats.quantiles
    if fam == "struct":
        return Inference(tuple(props), ", ".join(seen))
    if fam in ("array", "map"):
        if q:
            low, high = int(q[0]), min(int(q[-1]), MAX_SIZE)
            props += [("minLength", str(low)), ("maxLength", str(high))]
            weights = _size_weights(stats.dictionary, low, high, max_dictionary)
            if weights is not None:
                props.append(("lengthWeights", weights))
            seen.append(f"sizes {int(q[0])}..{int(q[-1])}, median {q[len(q) // 2]:g}"
                        + (", weighted as seen" if weights is not None else ", uniform"))
        return Inference(tuple(props), ", ".join(seen))
    if stats.non_null == 0:
        return Inference(tuple(props) or (("nullRate", "1"),), "only nulls")
    seen.append(f"{stats.distinct} distinct")
    if fam == "boolean":
        share = sum(c for v, c in stats.dictionary if v) / stats.non_null
        props += [("kind", "random"), ("probability", f"{share:.6g}")]
        return Inference(tuple(props), ", ".join(seen) + f", {share:.3g} true")
    kept = _dictionary(stats, keep_values)
    values = [text(v, stats) for v, _ in kept]
    if kept and not any("," in v for v in values):
        props += [("kind", "values"), ("values", ",".join(values))]
        if not map_key:
            props.append(("weights", ",".join(str(c) for _, c in kept)))
        top = ", ".join(values[:3])
        dropped = len(stats.dictionary) - len(kept)
        note = f"; {dropped} value(s) seen once left out" if dropped else ""
        return Inference(tuple(props), ", ".join(seen) + f": a dictionary (most frequent {top}{note})")
    if map_key:
        return _map_key(stats, props, seen)
    unique = stats.distinct == stats.non_null and stats.non_null > 1
    patterns = dict(stats.patterns)
    if fam == "string":
        if unique and patterns.get("uuid", 0) >= _PATTERN_SHARE:
            return Inference(tuple(props + [("kind", "uuid")]), ", ".join(seen) + ", unique UUIDs")
        if unique and stats.numbered is not None and "{" not in stats.numbered.prefix and "}" not in stats.numbered.prefix:
            n = stats.numbered
            step = max(1, round((n.high - n.low) / (stats.non_null - 1)))
            fmt = n.prefix + (f"{{:0{n.width}d}}" if n.width else "{}")
            props += [("kind", "sequence"), ("start", str(n.low)), ("step", str(step)), ("format", fmt)]
            return Inference(tuple(props), ", ".join(seen) + f": unique numbered keys {fmt.format(n.low)}.."
                             f"{fmt.format(n.high)}")
        provider = _provider(leaf.path[-1], patterns)
        if provider is not None:
            props += [("kind", "faker"), ("provider", provider),
                      ("cardinality", str(faker_cardinality(stats.distinct, stats.non_null)))]
            return Inference(tuple(props), ", ".join(seen) + f": text like Faker's {provider} (never copied)")
        low, high = int(q[0]), int(q[-1])
        props += [("kind", "random"), ("minLength", str(low)), ("maxLength", str(high))]
        weights = _size_weights(stats.lengths, low, high, max_dictionary) if low < high else None
        if weights is not None:
            props.append(("lengthWeights", weights))
        return Inference(tuple(props), ", ".join(seen) + f": random text, lengths {low}..{high}"
                         + (", weighted as seen" if weights is not None else "") + " (never copied)")
    if fam == "binary":
        length = int(round(q[len(q) // 2]))
        return Inference(tuple(props + [("kind", "random"), ("length", str(length))]),
                         ", ".join(seen) + f", median length {length}")
    if unique and fam == "int":
        step = max(1, round((q[-1] - q[0]) / (stats.non_null - 1)))
        props += [("kind", "sequence"), ("start", text(q[0], stats)), ("step", str(step))]
        return Inference(tuple(props), ", ".join(seen) + f": unique, {text(q[0], stats)}..{text(q[-1], stats)}")
    knots = _distinct_knots([text(v, stats) for v in q])
    props += [("kind", "empirical"), ("quantiles", ",".join(knots))]
    return Inference(tuple(props), ", ".join(seen) + f", {knots[0]}..{knots[-1]}, median {text(q[len(q) // 2], stats)}")


def _dictionary(stats: Stats, keep_values: bool) -> tuple[tuple[object, int], ...]:
    """The (value, count) pairs a dictionary keeps: all with `keep_values`; else those seen more than once, when
    they hold at least `SINGLETONS_LEFT` of the non-null values (a value seen once is never copied)."""
    if keep_values or not stats.dictionary:
        return stats.dictionary
    kept = tuple((v, c) for v, c in stats.dictionary if c > 1)
    return kept if sum(c for _, c in kept) >= SINGLETONS_LEFT * stats.non_null else ()


def faker_cardinality(distinct: int, rows: int, cap: int = FAKER_CAP) -> int:
    """The pool size K whose uniform picks give `distinct` distinct values in `rows` draws, expected
    ``K(1 − e^(−rows/K))`` (bisection), at most `cap`."""
    if distinct >= rows:
        return cap
    low, high = max(distinct, 1), cap
    while low < high:
        mid = (low + high) // 2
        if mid * -math.expm1(-rows / mid) < distinct:
            low = mid + 1
        else:
            high = mid
    return low


def _distinct_knots(knots: list[str]) -> list[str]:
    """The knots as written (a flat stretch keeps its repeated value: it is a mass the inverse CDF must keep);
    a single value becomes two equal knots."""
    return knots if len(knots) > 1 else knots * 2


def _provider(name: str, patterns: dict[str, float]) -> str | None:
    words = re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()
    for pattern, provider in PROVIDERS_BY_NAME:
        if re.search(pattern, words):
            return provider
    for pattern, provider in PROVIDERS_BY_PATTERN.items():
        if patterns.get(pattern, 0.0) >= _PATTERN_SHARE:
            return provider
    return None


def _map_key(stats: Stats, props: list, seen: list) -> Inference:
    """A map's keys with many distinct values: ``random`` over a finite set (`impulse.nested`)."""
    fam, q = stats.family, stats.quantiles
    if fam in ("int", "date", "timestamp", "decimal"):
        props += [("kind", "random"), ("min", text(q[0], stats)), ("max", text(q[-1], stats))]
    elif fam == "string":
        props += [("kind", "random"), ("length", str(max(1, int(round(q[len(q) // 2])))))]
    else:
        raise OptionError(f"column '{stats.leaf.name}'", fam.upper(), "map keys impulse can generate: integers, "
                          "DECIMAL, DATE, TIMESTAMP, STRING, BOOLEAN or few distinct values")
    return Inference(tuple(props), ", ".join(seen) + ": map keys from the observed range")


