"""Changelog streams: which key each event changes and how (insert, update, delete), O(1) per event.

``changelog.key`` turns a stream into the change log of entities keyed by a BIGINT column; the ``op`` STRING
column says ``insert``, ``update`` or ``delete``. Every change is a pure function of (seed, partition,
counter), computed from the event alone: no state, no scan of earlier events.

**Layout.** A key's *lifetime* is `changes` consecutive changes: an insert, updates, and as its last change a
delete (with probability `delete_share`, drawn once per key) or one more update. Partition p interleaves
`live_keys` lifetimes at a time: its counters form blocks of ``live_keys × changes`` events, and block b's
round i (counters ``b·S·m + i·S …`` + S − 1, with S = live_keys and m = changes) makes change i of each of
the block's S keys, in an order shuffled per round (an affine bijection ``q ↦ (a·q + c) mod S`` with ``a``
coprime to S, drawn per round). The key of lifetime ``L = b·S + slot`` is ``L × numPartitions + p``, so:

- every key is inserted (round 0) before it is updated, and never changed after its delete (its last round);
- all changes of a key come from one partition (key mod numPartitions), in counter order;
- a key's changes are S events apart in its partition (its block's rounds), and the keys are distinct
  across partitions and lifetimes: a deleted key never comes back.

**Mix.** Weights ``I,U,D`` (``changelog.weights``, default ``1,8,1``) give ``changes = (I + U + D) / I``
(a whole number ≥ 2: each key's number of changes) and ``delete_share = D / I`` (≤ 1: the share of keys
that end with a delete), so over whole blocks the ops are I : U : D on average.

The state after any prefix of events (each partition's counters ``[0, n)``) is therefore known without
replaying it: a test computes it from the batch read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyspark.sql.types import LongType, StringType

from connectors.errors import OptionError
from impulse import draws

__all__ = ["Changelog", "OPS", "INSERT", "UPDATE", "DELETE"]

OPS = ("insert", "update", "delete")
INSERT, UPDATE, DELETE = range(3)
_OP_TEXT = np.frombuffer(b"".join(op.encode() for op in OPS), dtype=np.uint8).reshape(len(OPS), 6)  # 6 letters each


@dataclass(frozen=True)
class Changelog:
    """The changes of a changelog stream (module docstring). Small and picklable: sent to executors."""

    key_column: str
    changes: int          # m: changes per key, ≥ 2
    delete_share: float   # share of keys whose last change is a delete, 0..1
    live_keys: int        # S: keys changing at once in a partition
    seed: int = 0
    _units: np.ndarray = field(init=False, repr=False, compare=False)  # the multipliers coprime to S

    def __post_init__(self) -> None:
        s = np.arange(1, self.live_keys + 1, dtype=np.int64)
        object.__setattr__(self, "_units", s[np.gcd(s, self.live_keys) == 1])

    @classmethod
    def parse(cls, key_column: str, weights: str | None, live_keys: int, seed: int) -> "Changelog":
        """Check ``changelog.weights`` (``I,U,D``) and build; raises `OptionError` naming the option."""
        text = "1,8,1" if weights is None else weights
        expected = ("three numbers 'I,U,D' ≥ 0 with I > 0, (I+U+D)/I a whole number ≥ 2 (each key's number of "
                    "changes: an insert, updates, and a delete for a D/I share of keys) and D ≤ I, e.g. '1,8,1' or "
                    "'20,70,10'")
        try:
            i, u, d = (float(w) for w in text.split(","))
        except ValueError:
            raise OptionError("changelog.weights", weights, expected) from None
        if not all(math.isfinite(w) and w >= 0 for w in (i, u, d)) or i <= 0 or d > i:
            raise OptionError("changelog.weights", weights, expected)
        changes = (i + u + d) / i
        if abs(changes - round(changes)) > 1e-9 or round(changes) < 2:
            raise OptionError("changelog.weights", weights, expected + f"; here (I+U+D)/I = {changes:g}")
        return cls(key_column, round(changes), d / i, live_keys, seed)

    def changes_of(self, subtask: int, first: int, count: int, partitions: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys int64, ops int8: `INSERT`, `UPDATE`, `DELETE`) of events ``[first, first + count)`` of a partition."""
        s, m = self.live_keys, self.changes
        counters = np.arange(first, first + count, dtype=np.int64)
        rounds = counters // s  # = block · m + round within the block
        first_round = first // s
        index = rounds - first_round
        word = draws.words(draws.stream_key(self.seed, self.key_column, "changelog/order"), subtask, first_round,
                           int(index[-1]) + 1 if count else 0)  # one word per round
        a = self._units[(word >> np.uint64(32)) % np.uint64(len(self._units))][index]
        c = ((word & np.uint64(0xFFFFFFFF)) % np.uint64(s)).astype(np.int64)[index]
        slots = counters - rounds * s
        slots *= a
        slots += c
        slots %= s
        lifetimes = rounds // m
        stage = rounds - lifetimes * m  # the change's index in its key's lifetime
        lifetimes *= s
        lifetimes += slots
        ops = np.full(count, UPDATE, dtype=np.int8)
        ops[stage == 0] = INSERT
        last = stage == m - 1
        if self.delete_share > 0 and last.any():
            ending = lifetimes[last]
            lo = int(ending.min())
            share = draws.uniform(draws.words(draws.stream_key(self.seed, self.key_column, "changelog/delete"),
                                              subtask, lo, int(ending.max()) - lo + 1))
            ops[last] = np.where(share[ending - lo] < self.delete_share, DELETE, UPDATE)
        lifetimes *= partitions
        lifetimes += subtask
        return lifetimes, ops

    @staticmethod
    def op_array(ops: np.ndarray) -> pa.Array:
        """The ``op`` column: ``insert`` / ``update`` / ``delete`` text of `ops` (six bytes each, no copy per row)."""
        offsets = np.arange(0, 6 * (len(ops) + 1), 6, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), len(ops), [None, pa.py_buffer(offsets),
                                                             pa.py_buffer(_OP_TEXT[ops].reshape(-1))])


@dataclass(frozen=True)
class ChangeColumn:
    """A column of a changelog's rows that the changelog fills: its key (`role` ``key``) or its ``op``."""

    name: str
    role: str
    changelog: Changelog

    @property
    def arrow(self) -> pa.DataType:
        return pa.int64() if self.role == "key" else pa.string()


def change_columns(changelog: Changelog, schema_fields: dict) -> dict[str, ChangeColumn]:
    """The key and ``op`` columns of a schema (lower-cased name → its `StructField`), checked; raises `OptionError`."""
    key = schema_fields.get(changelog.key_column)
    names = ", ".join(f.name for f in schema_fields.values())
    if key is None or key.dataType != LongType():
        raise OptionError("changelog.key", changelog.key_column,
                          f"a BIGINT column of the schema ({names}) holding the key of each change")
    op = schema_fields.get("op")
    if op is None or op.dataType != StringType():
        raise OptionError("changelog.key", changelog.key_column,
                          f"a schema with an 'op STRING' column beside the key (insert, update or delete); have: {names}")
    return {changelog.key_column: ChangeColumn(key.name, "key", changelog), "op": ChangeColumn(op.name, "op", changelog)}
