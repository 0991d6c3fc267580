"""A partition's rows cut into request bodies of exactly ``batchSize`` rows, and a refused body cut in halves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.rows import json_objects
from sinks.webhook.options import WebhookOptions

__all__ = ["Rows", "Bodies"]


@dataclass(frozen=True)
class Rows:
    """Consecutive rows of a partition as one request sends them: each row's JSON followed by a one-byte separator."""

    first: int                  # the index of the first row in the partition
    text: memoryview            # the rows' rendered bytes
    ends: np.ndarray            # where each row (with its separator) ends in `text`
    shape: str                  # "array" (a JSON array), "object" (one row, batchSize 1) or "ndjson"

    @property
    def count(self) -> int:
        return len(self.ends)

    def body(self) -> bytes:
        if self.shape == "ndjson":
            return bytes(self.text)
        if self.shape == "object":
            return bytes(self.text[:-1])
        return b"".join((b"[", self.text[:-1], b"]"))

    def halves(self) -> tuple["Rows", "Rows"]:
        """The first and the second half of the rows (a request of one row cannot be split)."""
        middle = self.count // 2
        cut = int(self.ends[middle - 1])
        return (Rows(self.first, self.text[:cut], self.ends[:middle], self.shape),
                Rows(self.first + middle, self.text[cut:], self.ends[middle:] - cut, self.shape))


class Bodies:
    """Cuts a partition's rows into requests of exactly ``batchSize`` rows, whatever Spark's record batches.

    Rows are rendered per record batch with `json_objects`, each followed by its separator, so the
    rows of a request are one contiguous slice of an Arrow buffer: no Python work per row. Rows that
    do not fill a request are carried over to the next record batch.
    """

    def __init__(self, options: WebhookOptions) -> None:
        self.size = options.batch_size
        ndjson = options.format == "ndjson"
        self.shape = "ndjson" if ndjson else "object" if options.batch_size == 1 else "array"
        self._separator = "\n" if ndjson else ","
        self._left: pa.Array | None = None
        self._row = 0  # index in the partition of the next row to cut

    def add(self, batch: pa.RecordBatch) -> Iterator[Rows]:
        """Every full request the rows so far make; keeps the rest."""
        rendered = pc.binary_join_element_wise(json_objects(batch), self._separator, "")
        if self._left is not None:
            rendered = pa.concat_arrays([self._left, rendered])
        full = len(rendered) - len(rendered) % self.size
        self._left = rendered.slice(full) if full < len(rendered) else None
        if full:
            yield from self._requests(rendered, full)

    def rest(self) -> Iterator[Rows]:
        """The last, shorter request of the partition (if any)."""
        left, self._left = self._left, None
        if left is not None and len(left):
            yield from self._requests(left, len(left))

    def _requests(self, rendered: pa.Array, rows: int) -> Iterator[Rows]:
        offsets = np.frombuffer(rendered.buffers()[1], dtype=np.int32, count=len(rendered) + 1, offset=rendered.offset * 4)
        data = memoryview(rendered.buffers()[2])
        for start in range(0, rows, self.size):
            stop = min(start + self.size, rows)
            yield Rows(self._row, data[offsets[start]:offsets[stop]], offsets[start + 1:stop + 1] - offsets[start],
                       self.shape)
            self._row += stop - start
