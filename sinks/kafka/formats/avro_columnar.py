"""A vectorised Avro encoder: each column is encoded over its Arrow buffers with numpy (zigzag varints,
little-endian floats, length-prefixed bytes, minimal two's-complement decimals, union branches for nullable
fields), nested records as the concatenation of their fields, arrays and maps as one block per row (items joined
with pyarrow's list join); the columns are joined row by row with pyarrow compute. No Python loop per row.

`encode_columnar` returns None when the schema is not one it handles (a decimal wider than 18 digits, a union other
than with null, an Arrow column whose type does not match the field): the caller then encodes with fastavro. Its
bytes are identical to fastavro's ``schemaless_writer`` for the same rows.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["encode_columnar"]



@cache
def _empty() -> pa.Scalar:
    # made at first use, not at import: pyarrow's first scalar imports pandas (~0.2 s), which the processes that
    # only import the sink (Spark's planners on the driver) never use
    return pa.scalar(b"", pa.binary())


def _binary(data: np.ndarray, lengths: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 1 << 31:
        raise ValueError("encoded column exceeds 2 GiB; write smaller batches")
    return pa.Array.from_buffers(pa.binary(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                             pa.py_buffer(np.ascontiguousarray(data, np.uint8))])


def _fixed(matrix: np.ndarray) -> pa.Array:
    rows, width = matrix.shape
    return _binary(matrix.reshape(-1), np.full(rows, width, dtype=np.int64))


def _varints(values: np.ndarray) -> pa.Array:
    """Avro's zigzag varint of each int64 value."""
    v = values.astype(np.int64, copy=False)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    shifts = np.arange(10, dtype=np.uint64) * np.uint64(7)
    groups = ((z[:, None] >> shifts[None, :]) & np.uint64(0x7F)).astype(np.uint8)
    n = np.ones(len(z), dtype=np.int64)
    for k in range(1, 10):
        n += z >= (np.uint64(1) << np.uint64(7 * k))
    cols = np.arange(10)[None, :]
    groups |= np.where(cols < (n[:, None] - 1), 0x80, 0).astype(np.uint8)
    return _binary(groups[cols < n[:, None]], n)


def _length_prefixed(column: pa.Array) -> pa.Array:
    data = column.cast(pa.binary())
    lengths = pc.binary_length(data).to_numpy(zero_copy_only=False)
    return pc.binary_join_element_wise(_varints(np.nan_to_num(lengths).astype(np.int64)), data, _empty())


def _decimals(column: pa.Array, scale: int) -> pa.Array | None:
    if not pa.types.is_decimal128(column.type) or column.type.scale != scale or column.type.precision > 18:
        return None
    raw = np.frombuffer(column.buffers()[1], dtype=np.int64)[2 * column.offset:2 * (column.offset + len(column))]
    unscaled = raw[0::2]  # low 8 bytes (little-endian): the whole value for precision ≤ 18
    magnitude = np.where(unscaled < 0, ~unscaled, unscaled).astype(np.uint64)
    bits = np.zeros(len(unscaled), dtype=np.int64)
    for k in range(64):
        bits += magnitude >= (np.uint64(1) << np.uint64(k))
    n = (bits + 8) // 8  # minimal two's complement, as Python's int.to_bytes and Java's BigInteger do
    big = unscaled.astype(">i8").view(np.uint8).reshape(-1, 8)
    body = _binary(big[np.arange(8)[None, :] >= (8 - n[:, None])], n)
    return pc.binary_join_element_wise(_varints(n), body, _empty())


def _column(column: pa.Array, kind: Any) -> pa.Array | None:
    """The encoded values of one non-union field (null slots hold garbage and are replaced by the caller)."""
    logical = kind.get("logicalType") if isinstance(kind, dict) else None
    base = kind.get("type") if isinstance(kind, dict) else kind
    t = column.type
    if logical == "decimal":
        return _decimals(column, kind.get("scale", 0)) if base == "bytes" else None
    if logical in ("timestamp-micros", "local-timestamp-micros") and pa.types.is_timestamp(t):
        return _varints(column.cast(pa.timestamp("us", t.tz)).view(pa.int64()).fill_null(0).to_numpy())
    if logical == "date" and pa.types.is_date32(t):
        return _varints(column.view(pa.int32()).fill_null(0).to_numpy().astype(np.int64))
    if logical is not None:
        return None
    if base in ("long", "int") and pa.types.is_integer(t) and not pa.types.is_unsigned_integer(t):
        if base == "int" and t.bit_width > 32:
            return None
        return _varints(column.fill_null(0).to_numpy().astype(np.int64))
    if base == "boolean" and pa.types.is_boolean(t):
        return _fixed(column.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)[:, None])
    if base in ("float", "double") and pa.types.is_floating(t):
        dtype = "<f4" if base == "float" else "<f8"
        values = column.fill_null(0).to_numpy().astype(dtype)
        return _fixed(values.view(np.uint8).reshape(len(column), -1))
    if base == "string" and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return _length_prefixed(column.fill_null(""))
    if base == "bytes" and (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        return _length_prefixed(column.fill_null(b""))
    return None


def _field(column: pa.Array, kind: Any, relevant: np.ndarray | None = None) -> pa.Array | None:
    """The encoded values of a field of type `kind`; `relevant` marks the rows whose value is written (a null
    struct's children are not)."""
    if isinstance(kind, list):  # a union: only [null, T] or [T, null]
        if len(kind) != 2 or "null" not in kind:
            return None
        null_index = kind.index("null")
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        value = _value(column, kind[1 - null_index], valid if relevant is None else valid & relevant)
        if value is None:
            return None
        tag = pa.scalar(bytes([2 * (1 - null_index)]), pa.binary())
        tagged = pc.binary_join_element_wise(tag, value, _empty())
        if column.null_count == 0:
            return tagged
        return pc.if_else(column.is_valid(), tagged, pa.scalar(bytes([2 * null_index]), pa.binary()))
    if column.null_count:
        nulls = column.is_null().to_numpy(zero_copy_only=False)
        if relevant is None or (nulls & relevant).any():
            return None  # a null in a non-nullable field: fastavro names the error
    return _value(column, kind, relevant)


def _value(column: pa.Array, kind: Any, relevant: np.ndarray | None) -> pa.Array | None:
    base = kind.get("type") if isinstance(kind, dict) else kind
    if base == "record" and pa.types.is_struct(column.type):
        return _record(column, kind, relevant)
    if base == "array" and (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        counts, start, end = _extent(column)
        items = _field(column.values.slice(start, end - start), kind["items"])
        return None if items is None else _blocks(items, counts)
    if base == "map" and pa.types.is_map(column.type):
        counts, start, end = _extent(column)
        keys, values = column.keys.slice(start, end - start), column.items.slice(start, end - start)
        if not pa.types.is_string(keys.type):
            return None
        encoded_values = _field(values, kind["values"])
        if encoded_values is None:
            return None
        entries = pc.binary_join_element_wise(_length_prefixed(keys), encoded_values, _empty())
        return _blocks(entries, counts)
    return _column(column, kind)


def _extent(column: pa.Array) -> tuple[np.ndarray, int, int]:
    """Entries per row of a list or map array and the range of its child array they cover. A null row may cover
    entries: they are encoded too, and the union tag of the null row replaces the result."""
    offsets = column.offsets.to_numpy()
    return np.diff(offsets).astype(np.int64), int(offsets[0]), int(offsets[-1])


def _blocks(items: pa.Array, counts: np.ndarray) -> pa.Array:
    """Avro's array/map encoding per row: one block (its count, its items) then the end marker 0; an empty one is
    the end marker alone (as fastavro writes)."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), items.cast(pa.binary())), _empty())
    end = pc.if_else(pa.array(counts > 0), pa.scalar(b"\x00", pa.binary()), _empty())
    return pc.binary_join_element_wise(_varints(counts), joined, end, _empty())


def _record(column: pa.StructArray, schema: dict, relevant: np.ndarray | None) -> pa.Array | None:
    children = {column.type.field(i).name: child for i, child in enumerate(column.flatten())}
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    inner = valid if relevant is None else valid & relevant
    pieces = []
    for field in schema.get("fields", []):
        if field["name"] not in children:
            return None
        encoded = _field(children[field["name"]], field["type"], inner)
        if encoded is None:
            return None
        pieces.append(encoded)
    if not pieces:
        return pa.array([b""] * len(column), pa.binary())
    return pc.binary_join_element_wise(*pieces, _empty()) if len(pieces) > 1 else pieces[0].cast(pa.binary())


def encode_columnar(batch: pa.RecordBatch, schema: dict) -> pa.Array | None:
    """One Avro payload per row of `batch` for the record `schema` (parsed JSON), fields matched by name (nested
    records, arrays and string-keyed maps included); None if the schema or a column type is outside what this
    encoder handles."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    if batch.num_columns == 0:
        return pa.array([b""] * batch.num_rows, pa.binary())
    return _record(pa.StructArray.from_arrays(batch.columns, names=batch.schema.names), schema, None)
