"""Rendering Arrow rows as JSON and bytes, vectorised with pyarrow compute (no Python loop per row).

`json_objects` renders each row of a record batch as one compact JSON object, keys in column order:
integers and floats as numbers (NaN/inf as null), booleans, strings escaped, timestamps as ISO-8601
UTC with microseconds (``2026-01-01T00:00:00.000000Z``), binary as base64, nulls as ``null``. Columns
of nested types are rendered per row with the same conventions (maps as objects; a nested DECIMAL goes through a
double), correct but slower.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["json_objects", "as_binary", "python_rows", "python_values"]

_ESCAPES = [("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b"), ("\f", "\\f")]


def _json_string(column: pa.Array) -> pa.Array:
    text = column.cast(pa.string())
    for raw, escaped in _ESCAPES:
        text = pc.replace_substring(text, raw, escaped)
    if pc.any(pc.match_substring_regex(text, "[\\x00-\\x1f]")).as_py():
        return pa.array([None if v is None else json.dumps(v, ensure_ascii=False) for v in column.cast(pa.string()).to_pylist()],
                        pa.string())
    return pc.binary_join_element_wise('"', text, '"', "")


def _base64(column: pa.Array) -> pa.Array:
    """Base64 of each value; vectorised when every value has the same length (like impulse's payload)."""
    rows = len(column)
    if rows and column.null_count == 0 and column.type == pa.binary():
        offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset:column.offset + rows + 1]
        width = int(offsets[1] - offsets[0])
        if (np.diff(offsets) == width).all():
            raw = np.frombuffer(column.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]].reshape(rows, width)
            padded = np.zeros((rows, 3 * ((width + 2) // 3)), dtype=np.uint8)
            padded[:, :width] = raw
            encoded = np.frombuffer(base64.b64encode(padded.tobytes()), dtype=np.uint8)
            encoded = encoded.reshape(rows, padded.shape[1] // 3 * 4).copy()
            if padded.shape[1] > width:
                encoded[:, width - padded.shape[1]:] = ord("=")
            step = encoded.shape[1]
            text_offsets = np.arange(rows + 1, dtype=np.int32) * step
            return pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(text_offsets), pa.py_buffer(encoded)])
    return pa.array([None if v is None else base64.b64encode(v).decode() for v in column.to_pylist()], pa.string())


def _json_value(column: pa.Array) -> pa.Array:
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_decimal(kind):
        text = column.cast(pa.string())
    elif pa.types.is_floating(kind):
        finite = pc.is_finite(column)
        text = pc.if_else(finite, column.cast(pa.string()), pa.scalar(None, pa.string()))
    elif pa.types.is_boolean(kind):
        text = pc.if_else(column, "true", "false")
    elif pa.types.is_timestamp(kind):
        # %S of a µs timestamp carries the fraction: 2026-01-01T00:00:00.000000Z
        micros = column.cast(pa.timestamp("us", tz="UTC"))
        text = pc.binary_join_element_wise('"', pc.strftime(micros, format="%Y-%m-%dT%H:%M:%SZ"), '"', "")
    elif pa.types.is_date(kind):
        text = pc.binary_join_element_wise('"', column.cast(pa.string()), '"', "")
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = _json_string(column)
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        text = pc.binary_join_element_wise('"', _base64(column), '"', "")
    else:
        values = python_values(column)
        text = pa.array([json.dumps(_plain(v), ensure_ascii=False, separators=(",", ":")) for v in values], pa.string())
    return pc.fill_null(text, "null")


def _has_map(kind: pa.DataType) -> bool:
    if pa.types.is_map(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_has_map(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_map(kind.value_type)
    return False


def _unmap(value, kind: pa.DataType):
    if value is None:
        return None
    if pa.types.is_map(kind):
        return {k: _unmap(v, kind.item_type) for k, v in value}
    if pa.types.is_struct(kind):
        return {f.name: _unmap(value[f.name], f.type) for f in kind}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [_unmap(v, kind.value_type) for v in value]
    return value


def python_values(column: pa.Array) -> list:
    """``column.to_pylist()`` with maps as dicts (pyarrow gives lists of key/value pairs before 16)."""
    values = column.to_pylist()
    if not _has_map(column.type):
        return values
    return [_unmap(v, column.type) for v in values]


def python_rows(batch: pa.RecordBatch) -> list[dict]:
    """The rows of `batch` as dicts, maps as dicts (see `python_values`)."""
    return python_values(pa.StructArray.from_arrays(batch.columns, names=batch.schema.names)) if batch.num_columns \
        else [{} for _ in range(batch.num_rows)]


def _plain(value):
    """A nested value with the top-level columns' JSON conventions: timestamps ISO-8601 UTC with microseconds,
    dates ISO, binary base64, decimals as numbers (through a double), maps as objects."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc)
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_objects(batch: pa.RecordBatch) -> pa.Array:
    """One JSON object (a string) per row of `batch`."""
    pieces: list = []
    for i, name in enumerate(batch.schema.names):
        pieces.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
        pieces.append(_json_value(batch.column(i)))
    pieces.append("}")
    if batch.num_columns == 0:
        return pa.array(["{}"] * batch.num_rows, pa.string())
    return pc.binary_join_element_wise(*pieces, "")


def as_binary(column: pa.Array) -> pa.Array:
    """A column as bytes per row: strings as UTF-8, binary as is, anything else via its JSON text."""
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return column.cast(pa.binary())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column.cast(pa.string()).cast(pa.binary())
    return _json_value(column).cast(pa.binary())
