"""Redis commands for a whole record batch, encoded in RESP with pyarrow compute (no loop per row).

``commands(b"SET", keys, values)`` gives one binary value per row holding the complete command
``*3\\r\\n$3\\r\\nSET\\r\\n$<len>\\r\\n<key>\\r\\n$<len>\\r\\n<value>\\r\\n``; `packed` returns all of them
as one contiguous buffer, ready for a socket.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["commands", "packed", "command", "command_over"]

Part = bytes | pa.Array


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def command(*args: bytes) -> bytes:
    """One command with constant arguments."""
    return b"*%d\r\n" % len(args) + b"".join(_bulk(a) for a in args)


def commands(*parts: Part) -> pa.Array:
    """One command per row; each part is a constant (bytes) or a binary array with one value per row."""
    pieces: list = []
    constant = b"*%d\r\n" % len(parts)
    for part in parts:
        if isinstance(part, bytes):
            constant += _bulk(part)
            continue
        column = part.cast(pa.binary())
        pieces += [pa.scalar(constant + b"$", pa.binary()), pc.binary_length(column).cast(pa.string()).cast(pa.binary()),
                   pa.scalar(b"\r\n", pa.binary()), column]
        constant = b"\r\n"
    pieces.append(pa.scalar(constant, pa.binary()))
    return pc.binary_join_element_wise(*pieces, pa.scalar(b"", pa.binary()))


def command_over(head: tuple[bytes, ...], values: pa.Array, tail: tuple[bytes, ...] = ()) -> bytes:
    """One command whose arguments are `head`, every value of `values` in order, then `tail`."""
    column = values.cast(pa.binary())
    middle = pc.binary_join_element_wise(pa.scalar(b"$", pa.binary()),
                                         pc.binary_length(column).cast(pa.string()).cast(pa.binary()),
                                         pa.scalar(b"\r\n", pa.binary()), column, pa.scalar(b"\r\n", pa.binary()),
                                         pa.scalar(b"", pa.binary()))
    return (b"*%d\r\n" % (len(head) + len(column) + len(tail)) + b"".join(map(_bulk, head))
            + bytes(packed(middle)) + b"".join(map(_bulk, tail)))


def packed(array: pa.Array) -> memoryview:
    """The concatenated bytes of a binary array's values (zero-copy)."""
    if len(array) == 0:
        return memoryview(b"")
    offsets = array.buffers()[1]
    bounds = np.frombuffer(offsets, dtype=np.int32)[array.offset:array.offset + len(array) + 1]
    return memoryview(array.buffers()[2])[int(bounds[0]):int(bounds[-1])]
