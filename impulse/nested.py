"""Nested columns: ARRAY, MAP and STRUCT of generated values, at any depth, built as Arrow arrays at once.

**Options by path.** ``fields.<path>.<property>``: the last word is always the property, the words before it
the path from the top-level column: a struct's field by its name (``address.city``), an array's elements
by ``element`` (``items.element.price``), a map's keys and values by ``key`` and ``value``
(``attrs.key``, ``attrs.value``). So a struct field named like a property is addressed the same way
(``fields.meta.kind.values`` sets the values of field ``kind`` of struct ``meta``); a name holding a dot is
written in backquotes (``fields.`a.b`.kind``). Each scalar leaf takes every property of `impulse.fields`.

**Sizes.** An array's or a map's size is ``length`` (fixed) or uniform in ``minLength``..``maxLength``
(default 0..4), drawn from the stream (seed, path, ``length``). ``lengthWeights`` (one weight ≥ 0 per size from
``minLength`` to ``maxLength``, not all 0) makes it weighted instead: a uniform u of that stream takes the first size
whose cumulative share exceeds u (``impulse-profile`` writes the sizes' observed counts). Its ``nullRate`` (stream (seed, path,
``null``)) makes the whole array, map or struct null.

**Slots.** With at most M elements, event c's element j is generated as *slot* ``c·M + j`` of the element's
path: the element generator draws the words of slots ``[first·M, (first + count)·M)`` as if they were events,
and turns into values only the slots within each event's size (`impulse.fields.Column.array`'s ``keep``). So
every element is a pure function of (seed, its path, its options, ``subtask_index``, c, j), whatever the batch
boundaries, at the cost of drawing M elements' words per event.
Elements nest the same way (an array of arrays: slot ``(c·M + j)·M' + k``); a struct's fields use the
struct's own counters.

**Map keys** are distinct within a map: they are drawn without repetition from a finite key set of K
values: ``values`` (its values, uniform: no weights), ``faker`` (the distinct values of its pool) or
``random`` (integers, DECIMAL, DATE, TIMESTAMP: ``min..max``; BOOLEAN: false, true; numbers formatted on a
STRING with ``format``/``min``/``max``; plain STRING: K = 62^min(length, 10) texts of ``length``
characters (16), whose last min(length, 10) characters spell the key's index in base 62 and the rest are
random). A set of at most 64 keys is shuffled per map: slot j takes the key of the j-th smallest of K words
drawn for the map (stream (seed, path.key, ``strata``), K words per map; ``argsort``, stable), so a map's keys
are a uniform random subset in random order. A larger set is stratified: slot j of a map with M slots takes
index ``(j·⌊K/M⌋ + u_j + r) mod K``, with u_j uniform in ``[0, ⌊K/M⌋)`` and r uniform in ``[0, K)`` per map
(streams (seed, path.key, ``strata``/``rotation``)): distinct, each key uniform over the set, and a map's
keys spread evenly over it. A key set smaller than ``minLength`` (or ``length``, or an
explicit ``maxLength``) is refused; without ``maxLength`` the size is at most K.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Protocol

import numpy as np
import pyarrow as pa
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from connectors.errors import OptionError
from connectors.options import OptionReader
from impulse import draws
from impulse.fields import (
    ALPHANUMERIC,
    PROPERTIES,
    Column,
    alphanumeric,
    draw_lengths,
    generated_column,
    length_weights,
    numbers_to_type,
    values_at,
)

__all__ = ["Node", "Repeated", "Struct", "MapKeys", "column_of", "split_path", "DEFAULT_SIZE", "MAX_SIZE",
           "SHUFFLED_KEY_SETS"]

DEFAULT_SIZE = (0, 4)
MAX_SIZE = 4096  # elements of one array or map
_SPELLING = {p.lower(): p for p in PROPERTIES}
SHUFFLED_KEY_SETS = 64  # key sets up to this size are shuffled per map, larger ones stratified
_KEY_SET_CAP = 2 ** 62  # key indices stay within int64 while rotated
_DIGITS = 10  # base-62 digits of a STRING key's index: 62¹⁰ < 2⁶²
Path = tuple[str, ...]


class Node(Protocol):
    """What `impulse.events` needs of a generated column, scalar (`impulse.fields.Column`) or nested."""

    @property
    def arrow(self) -> pa.DataType: ...

    @property
    def refers(self) -> bool: ...

    def array(self, subtask: int, first: int, count: int, partitions: int,
              since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array: ...


@dataclass(frozen=True)
class MapKeys:
    """A map's keys: K distinct candidates, indexed without repetition within a map (module docstring)."""

    column: Column                 # the parsed key column: kind values, faker or random
    size: int                      # K
    items: pa.Array | None = None  # kind=faker: the distinct values of the pool
    keys: tuple[int, int] = (0, 0)  # stream keys: strata, rotation

    def array(self, subtask: int, first: int, count: int, slots: int, keep: np.ndarray | None = None) -> pa.Array:
        """The keys of `slots` slots of maps ``[first, first + count)``, slot-major per map (count × slots), then
        those where `keep` (one per slot) is true."""
        k = self.size
        if k <= SHUFFLED_KEY_SETS:  # a random permutation of the whole set per map: a uniform random subset
            order = draws.words(self.keys[0], subtask, first, count, k).reshape(count, k)
            index = np.argsort(order, axis=1, kind="stable")[:, :slots].astype(np.int64).reshape(-1)
            return self.candidates(index if keep is None else index[keep])
        width = k // slots
        index = draws.integers(draws.words(self.keys[0], subtask, first, count, slots), 0, width - 1)
        index = index.reshape(count, slots)
        index += np.arange(slots, dtype=np.int64) * np.int64(width)
        index += draws.integers(draws.words(self.keys[1], subtask, first, count), 0, k - 1)[:, None]
        index = index.reshape(-1)
        if keep is not None:
            index = index[keep]
        index[index >= k] -= np.int64(k)
        return self.candidates(index)

    def candidates(self, index: np.ndarray) -> pa.Array:
        """Key number `index` (int64 in [0, K)) of the set, in the key's Arrow type; distinct indices give
        distinct keys."""
        column = self.column
        if column.kind == "values":
            return values_at(column, index)
        if column.kind == "faker":
            return self.items.take(pa.array(index))
        family = column.type.family
        if family == "boolean":
            return pa.array(index == 1)
        if family == "string" and column.fmt is None:
            return _string_keys(column, index)
        values = index + np.int64(column.params[0])
        if family == "date":
            return pa.array(values.astype(np.int32), type=pa.date32())
        if family == "timestamp":
            return pa.array(values, type=column.type.arrow)
        return numbers_to_type(column, values)


def _string_keys(column: Column, index: np.ndarray) -> pa.Array:
    """Texts of `length` characters: random ones, then the index's last min(length, 10) base-62 digits."""
    length = column.params[0]
    digits = min(length, _DIGITS)
    rows = len(index)
    text = np.empty((rows, length), dtype=np.uint8)
    rest = index.copy()
    for position in range(length - 1, length - 1 - digits, -1):  # one pass per character, not per row
        text[:, position] = ALPHANUMERIC[rest % 62]
        rest //= 62
    if length > digits:
        words = draws.words_at(column.keys[0], index, -(-(length - digits) // 4))
        text[:, :length - digits] = alphanumeric(words)[:, :length - digits]
    offsets = np.arange(0, (rows + 1) * length, length, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(text.reshape(-1))])


@dataclass(frozen=True)
class Repeated:
    """An ARRAY (`map_keys` None) or a MAP: a size per event, then its elements from slots (module docstring)."""

    name: str
    arrow: pa.DataType
    element: Node                  # the array's elements, or the map's values
    map_keys: MapKeys | None
    size: tuple[int, int]          # minLength, maxLength (equal: a fixed length)
    null_rate: float
    keys: tuple[int, int]          # stream keys: length, null
    length_weights: tuple[float, ...] | None = None  # cumulative shares of the sizes low..high (None: uniform)

    @property
    def refers(self) -> bool:
        return self.element.refers

    def array(self, subtask: int, first: int, count: int, partitions: int,
              since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
        low, high = self.size
        if low == high:
            lengths = np.full(count, high, dtype=np.int64)
        else:
            lengths = draw_lengths(draws.words(self.keys[0], subtask, first, count), low, high, self.length_weights)
        nulls = _nulls(self.null_rate, self.keys[1], subtask, first, count)
        if nulls is not None:
            lengths[nulls] = 0
        slots = None  # which slots hold an element (None: all), for the elements' own `keep`
        if low != high or nulls is not None or keep is not None:
            slots = np.arange(high) < lengths[:, None]
            if keep is not None:
                slots &= keep[:, None]
                lengths, nulls = lengths[keep], None if nulls is None else nulls[keep]
                if nulls is not None and not nulls.any():
                    nulls = None
            slots = slots.reshape(-1)
        since = None if since_start_us is None else np.repeat(since_start_us, high)
        child = self.element.array(subtask, first * high, count * high, partitions, since, slots)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if offsets[-1] >= 2 ** 31:
            raise ValueError(f"column '{self.name}': {offsets[-1]} elements in one Arrow batch, more than 2³¹ - 1; "
                             "lower maxLength")
        if self.map_keys is not None:
            keys = (self.map_keys.array(subtask, first, count, high, slots) if high
                    else pa.array([], self.arrow.key_type))
            child = pa.StructArray.from_arrays([keys, child], fields=[self.arrow.key_field, self.arrow.item_field])
        return _from_children(self.arrow, len(lengths), nulls, [pa.py_buffer(offsets.astype(np.int32))], [child])


@dataclass(frozen=True)
class Struct:
    """A STRUCT: each field generated on the struct's own counters."""

    name: str
    arrow: pa.DataType
    fields: tuple                  # of Node, in the struct's order
    null_rate: float
    null_key: int

    @property
    def refers(self) -> bool:
        return any(f.refers for f in self.fields)

    def array(self, subtask: int, first: int, count: int, partitions: int,
              since_start_us: np.ndarray | None = None, keep: np.ndarray | None = None) -> pa.Array:
        children = [f.array(subtask, first, count, partitions, since_start_us, keep) for f in self.fields]
        nulls = _nulls(self.null_rate, self.null_key, subtask, first, count)
        if keep is not None and nulls is not None:
            nulls = nulls[keep]
            nulls = nulls if nulls.any() else None
        return _from_children(self.arrow, count if keep is None else int(keep.sum()), nulls, [], children)


def _nulls(rate: float, key: int, subtask: int, first: int, count: int) -> np.ndarray | None:
    if rate <= 0:
        return None
    nulls = draws.uniform(draws.words(key, subtask, first, count)) < rate
    return nulls if nulls.any() else None


def _from_children(arrow: pa.DataType, count: int, nulls: np.ndarray | None, buffers: list,
                   children: list) -> pa.Array:
    validity = None if nulls is None else pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    return pa.Array.from_buffers(arrow, count, [validity] + buffers,
                                 null_count=0 if nulls is None else int(nulls.sum()), children=children)


# --- parsing -------------------------------------------------------------------------------------------------

_SEGMENT = re.compile(r"`((?:[^`]|``)+)`|([^.`]+)")


def split_path(text: str) -> Path | None:
    """``address.city`` → ('address', 'city'); a backquoted word may hold dots (``a.`b.c``` → ('a', 'b.c'),
    a doubled backquote is one). Lower-cased; None when `text` is not such a path."""
    segments, at = [], 0
    while True:
        match = _SEGMENT.match(text, at)
        if match is None:
            return None
        segments.append((match.group(1).replace("``", "`") if match.group(1) is not None else match.group(2)).lower())
        at = match.end()
        if at == len(text):
            return tuple(segments)
        if text[at] != ".":
            return None
        at += 1


def _quoted(name: str) -> str:
    return f"`{name.replace('`', '``')}`" if "." in name or "`" in name else name


def _type_name(data_type: DataType) -> str:
    return data_type.simpleString().upper()


def column_of(name: str, data_type: DataType, nullable: bool, options: Mapping[Path, Mapping[str, str]],
              seed: int) -> Node:
    """The generator of a top-level column `name` of any type impulse generates. `options` maps a path below the
    column (``()`` the column itself, ``('items', 'element', 'price')`` → ``('element', 'price')``) to its
    properties (lower-case names). Raises `OptionError` naming ``fields.<path>.<property>`` and what is allowed."""
    seen: set[Path] = set()
    node = _build((), name, data_type, nullable, options, seed, seen)
    for path in options:
        if path not in seen:
            prop, value = next(iter(options[path].items()))
            prop = _SPELLING.get(prop, prop)
            known = ", ".join(sorted(p for p in _paths((), name, data_type) if p != name)) or "none"
            option = "fields." + ".".join([name, *map(_quoted, path)]) + "." + prop
            raise OptionError(option, value, f"a path into column '{name}' ({_type_name(data_type)}): an array's "
                              f"elements are '<array>.element', a map's '<map>.key' and '<map>.value', a struct's "
                              f"fields '<struct>.<field>'; its nested paths: {known}")
    return node


def _paths(path: Path, display: str, data_type: DataType) -> list[str]:
    out = [display]
    if isinstance(data_type, ArrayType):
        out += _paths(path + ("element",), display + ".element", data_type.elementType)
    elif isinstance(data_type, MapType):
        out += _paths(path + ("key",), display + ".key", data_type.keyType)
        out += _paths(path + ("value",), display + ".value", data_type.valueType)
    elif isinstance(data_type, StructType):
        for f in data_type.fields:
            out += _paths(path + (f.name.lower(),), display + "." + _quoted(f.name), f.dataType)
    return out


def _build(path: Path, display: str, data_type: DataType, nullable: bool, options: Mapping[Path, Mapping[str, str]],
           seed: int, seen: set[Path]) -> Node:
    seen.add(path)
    props = options.get(path, {})
    prefix = f"fields.{display}."
    lower = display.lower()
    if isinstance(data_type, StructType):
        _only(props, prefix, ("nullrate",), f"a STRUCT: nullRate; its fields are set as fields.{display}.<field>."
                                            "<property>")
        null_rate = _null_rate(props, prefix, nullable, display)
        fields = tuple(_build(path + (f.name.lower(),), display + "." + _quoted(f.name), f.dataType, f.nullable,
                              options, seed, seen) for f in data_type.fields)
        arrow = pa.struct([pa.field(f.name, node.arrow, nullable=f.nullable)
                           for f, node in zip(data_type.fields, fields)])
        return Struct(display, arrow, fields, null_rate, draws.stream_key(seed, lower, "null"))
    if isinstance(data_type, (ArrayType, MapType)):
        is_map = isinstance(data_type, MapType)
        what, parts = (("a MAP", f"keys and values are set as fields.{display}.key.<property> and "
                                 f"fields.{display}.value.<property>") if is_map else
                       ("an ARRAY", f"elements are set as fields.{display}.element.<property>"))
        _only(props, prefix, ("nullrate", "length", "minlength", "maxlength", "lengthweights"),
              f"{what}: nullRate, length, minLength, maxLength, lengthWeights; its {parts}")
        null_rate = _null_rate(props, prefix, nullable, display)
        map_keys = None
        if is_map:
            map_keys = _map_keys(path + ("key",), display + ".key", data_type.keyType, options, seed, seen)
            element = _build(path + ("value",), display + ".value", data_type.valueType, data_type.valueContainsNull,
                             options, seed, seen)
            arrow = pa.map_(pa.field("key", map_keys.column.arrow, nullable=False),
                            pa.field("value", element.arrow, nullable=data_type.valueContainsNull))
        else:
            element = _build(path + ("element",), display + ".element", data_type.elementType, data_type.containsNull,
                             options, seed, seen)
            arrow = pa.list_(pa.field("element", element.arrow, nullable=data_type.containsNull))
        size = _size(props, prefix, None if map_keys is None else map_keys.size)
        return Repeated(display, arrow, element, map_keys, size, null_rate,
                        (draws.stream_key(seed, lower, "length"), draws.stream_key(seed, lower, "null")),
                        _length_weights(props, prefix, size))
    return generated_column(display, data_type, nullable, props, seed)


def _only(props: Mapping[str, str], prefix: str, allowed: tuple[str, ...], what: str) -> None:
    for prop, value in props.items():
        if prop not in allowed:
            raise OptionError(prefix + _SPELLING.get(prop, prop), value, f"a property of {what}")


def _null_rate(props: Mapping[str, str], prefix: str, nullable: bool, display: str) -> float:
    reader = OptionReader({prefix + k: v for k, v in props.items()}, name=f"column '{display}'")
    rate = reader.number(prefix + "nullRate", 0.0, minimum=0.0)
    if rate > 1:
        raise OptionError(prefix + "nullRate", props.get("nullrate"), "a fraction from 0 to 1")
    if rate > 0 and not nullable:
        raise OptionError(prefix + "nullRate", props.get("nullrate"),
                          f"0 for a NOT NULL value; declare '{display}' nullable (an array's elements: "
                          "ARRAY<T> rather than ARRAY<T NOT NULL>) to give it nulls")
    return rate


def _size(props: Mapping[str, str], prefix: str, key_set: int | None) -> tuple[int, int]:
    """(minLength, maxLength); `key_set`: a map's number of distinct keys, which bounds its size."""
    reader = OptionReader({prefix + k: v for k, v in props.items()}, name="nested column")
    length = reader.integer(prefix + "length", None, minimum=0, maximum=MAX_SIZE)
    low = reader.integer(prefix + "minLength", None, minimum=0, maximum=MAX_SIZE)
    high = reader.integer(prefix + "maxLength", None, minimum=0, maximum=MAX_SIZE)
    if length is not None and (low is not None or high is not None):
        raise OptionError(prefix + "length", length, "either 'length' or 'minLength'/'maxLength', not both")
    if length is not None:
        low = high = length
    else:
        low = DEFAULT_SIZE[0] if low is None else low
        if high is None:
            high = max(low, DEFAULT_SIZE[1] if key_set is None else min(DEFAULT_SIZE[1], key_set))
    if low > high:
        raise OptionError(prefix + "minLength/maxLength", {"minLength": low, "maxLength": high},
                          "minLength ≤ maxLength")
    if key_set is not None and high > key_set:
        option = "length" if length is not None else ("maxLength" if "maxlength" in props else "minLength")
        raise OptionError(prefix + option, high, f"at most {key_set}: a map's keys are distinct and its key set "
                          f"({prefix}key.*) has {key_set} values")
    return (low, high)


def _length_weights(props: Mapping[str, str], prefix: str, size: tuple[int, int]) -> tuple[float, ...] | None:
    """``lengthWeights`` → the cumulative shares of the sizes ``minLength..maxLength`` (None without it)."""
    return length_weights(props.get("lengthweights"), prefix + "lengthWeights", *size, fixed="length" in props)


_KEY_KINDS = ("values", "faker", "random")


def _map_keys(path: Path, display: str, data_type: DataType, options: Mapping[Path, Mapping[str, str]], seed: int,
              seen: set[Path]) -> MapKeys:
    seen.add(path)
    props = options.get(path, {})
    prefix = f"fields.{display}."
    if "nullrate" in props:
        raise OptionError(prefix + "nullRate", props["nullrate"], "no nullRate for a map's keys: they are never null")
    if "weights" in props:
        raise OptionError(prefix + "weights", props["weights"], "no weights for a map's keys: each map draws them "
                          "without repetition, uniformly")
    if isinstance(data_type, (ArrayType, MapType, StructType)):
        raise OptionError(f"schema, column '{display}'", _type_name(data_type), "a scalar type for a map's keys")
    column = generated_column(display, data_type, False, props, seed)
    family = column.type.family
    if column.kind not in _KEY_KINDS or (column.kind == "random" and family in ("float", "binary")):
        raise OptionError(prefix + "kind", column.kind, f"a kind that gives a map's {column.type.name} keys a finite "
                          "set to draw distinct keys from: values, faker (STRING) or random (integers, DECIMAL, "
                          "DATE, TIMESTAMP, BOOLEAN, STRING)")
    items = None
    if column.kind == "values":
        size = len(set(column.params[0]))
        if size != len(column.params[0]):
            raise OptionError(prefix + "values", props.get("values"), "distinct values for a map's keys")
    elif column.kind == "faker":
        items = column.params[0].unique()
        size = len(items)
    elif family == "boolean":
        size = 2
    elif family == "string" and column.fmt is None:
        low, high, _ = column.params
        if low != high:
            raise OptionError(prefix + "minLength/maxLength", {"minLength": low, "maxLength": high},
                              "a fixed 'length' for a map's random STRING keys")
        size = 62 ** min(high, _DIGITS)
    else:
        size = column.params[1] - column.params[0] + 1
    lower = display.lower()
    return MapKeys(column, min(size, _KEY_SET_CAP), items,
                   (draws.stream_key(seed, lower, "strata"), draws.stream_key(seed, lower, "rotation")))
