"""Confluent's wire format: magic byte 0, the schema id as 4 bytes big-endian, for Protobuf the message indexes,
then the encoded payload. Vectorised over Arrow binary arrays (numpy on the offsets, no loop per row)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

__all__ = ["MAGIC_BYTE", "frame", "header", "message_indexes", "split_header"]

MAGIC_BYTE = 0


def _zigzag_varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def message_indexes(path: Sequence[int]) -> bytes:
    """The Protobuf message-index prefix of the message at `path` (indexes of nested message types from the file's
    top level; ``[0]`` is the first top-level message, written as the single byte 0 as Confluent's clients do)."""
    if list(path) == [0]:
        return b"\x00"
    return _zigzag_varint(len(path)) + b"".join(_zigzag_varint(i) for i in path)


def header(schema_id: int, indexes: bytes = b"") -> bytes:
    """The bytes before the payload: magic byte, `schema_id` (0 ≤ id < 2³¹) big-endian, then `indexes`."""
    if not 0 <= schema_id < 1 << 31:
        raise ValueError(f"schema id {schema_id} is not in [0, 2^31)")
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big") + indexes


def frame(payloads: pa.Array, schema_id: int, indexes: bytes = b"") -> pa.Array:
    """Each payload prefixed by `header(schema_id, indexes)`; a binary array of the same length. Null payloads
    stay null (a Kafka tombstone is not framed)."""
    prefix = np.frombuffer(header(schema_id, indexes), dtype=np.uint8)
    payloads = payloads.cast(pa.binary())
    rows = len(payloads)
    offsets = np.frombuffer(payloads.buffers()[1], dtype=np.int32)[payloads.offset:payloads.offset + rows + 1]
    data = payloads.buffers()[2]
    body = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    valid = ~np.asarray(payloads.is_null().to_numpy(zero_copy_only=False), dtype=bool) if payloads.null_count else \
        np.ones(rows, dtype=bool)
    lengths = np.diff(offsets)
    out_lengths = lengths + valid * len(prefix)
    out_offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(out_lengths, out=out_offsets[1:])
    if out_offsets[-1] >= 1 << 31:
        raise ValueError("framed batch exceeds 2 GiB; write smaller batches")
    out = np.empty(int(out_offsets[-1]), dtype=np.uint8)
    starts = out_offsets[:-1][valid]
    for k, byte in enumerate(prefix):  # a loop over the header's bytes (5 to ~10), not over rows
        out[starts + k] = byte
    # payload bytes: every output position that is not a header byte, in order
    mask = np.ones(len(out), dtype=bool)
    for k in range(len(prefix)):
        mask[starts + k] = False
    out[mask] = body[offsets[0]:offsets[-1]]
    validity = None if not payloads.null_count else payloads.buffers()[0]
    if validity is not None and payloads.offset:
        validity = pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(pa.binary(), rows, [validity, pa.py_buffer(out_offsets.astype(np.int32)),
                                                     pa.py_buffer(out)])


def split_header(record: bytes) -> tuple[int, bytes]:
    """``(schema_id, payload)`` of one framed record (for a Protobuf record, `payload` still starts with the
    message indexes). ``ValueError`` if the magic byte is not 0."""
    if len(record) < 5 or record[0] != MAGIC_BYTE:
        raise ValueError("not a Confluent wire-format record (no magic byte 0)")
    return int.from_bytes(record[1:5], "big"), record[5:]
