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

**Snapshot.** With ``changelog.snapshot=true`` the first round of each partition (counters ``[0, S)``: its
first block's keys, the rows live when the stream starts) is read from the snapshot: ``op`` is ``read``
instead of ``insert``; the changes follow.

**Previous and next change.** A key's change i > 0 follows its change i − 1 exactly one round earlier, at a
position that round's bijection gives (`Changelog.previous_counters`; the next change likewise one round later,
`Changelog.next_counters`): the key's previous state is the row of that event, again without state.
`impulse.debezium` builds Debezium's ``before`` image from it, `impulse.history` an SCD2 version's end.

The state after any prefix of events (each partition's counters ``[0, n)``) is therefore known without
replaying it: a test computes it from the batch read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import pyarrow as pa
from pyspark.sql.types import LongType, StringType

from connectors.errors import OptionError
from impulse import draws

__all__ = ["Changelog", "OPS", "INSERT", "UPDATE", "DELETE", "READ"]

OPS = ("insert", "update", "delete", "read")
INSERT, UPDATE, DELETE, READ = range(4)


@cache
def _op_text() -> pa.Array:
    # built at first use, not at import: pyarrow's first array imports pandas (~0.2 s), which a process that only
    # imports this module (Spark's planner and streaming-source processes on the driver) does not need
    return pa.array(OPS, pa.string())


@dataclass(frozen=True)
class Changelog:
    """The changes of a changelog stream (module docstring). Small and picklable: sent to executors."""

    key_column: str
    changes: int          # m: changes per key, ≥ 2
    delete_share: float   # share of keys whose last change is a delete, 0..1
    live_keys: int        # S: keys changing at once in a partition
    seed: int = 0
    snapshot: bool = False  # the first round of each partition is ``read`` (a snapshot) rather than ``insert``
    _units: np.ndarray = field(init=False, repr=False, compare=False)  # the multipliers coprime to S

    def __post_init__(self) -> None:
        s = np.arange(1, self.live_keys + 1, dtype=np.int64)
        object.__setattr__(self, "_units", s[np.gcd(s, self.live_keys) == 1])

    @classmethod
    def parse(cls, key_column: str, weights: str | None, live_keys: int, seed: int,
              snapshot: bool = False) -> "Changelog":
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
        return cls(key_column, round(changes), d / i, live_keys, seed, snapshot)

    def _bijections(self, subtask: int, first_round: int, rounds: int) -> tuple[np.ndarray, np.ndarray]:
        """(a, c) of rounds ``[first_round, first_round + rounds)``: position q of a round changes slot
        ``(a·q + c) mod S``."""
        word = draws.words(draws.stream_key(self.seed, self.key_column, "changelog/order"), subtask, first_round,
                           rounds)  # one word per round
        a = self._units[(word >> np.uint64(32)) % np.uint64(len(self._units))]
        c = ((word & np.uint64(0xFFFFFFFF)) % np.uint64(self.live_keys)).astype(np.int64)
        return a, c

    def _slots(self, subtask: int, counters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rounds, slots) of consecutive `counters`: each event's round and its key's slot in its block."""
        s = self.live_keys
        rounds = counters // s
        first_round = int(rounds[0]) if len(rounds) else 0
        index = rounds - first_round
        a, c = self._bijections(subtask, first_round, int(index[-1]) + 1 if len(rounds) else 0)
        slots = counters - rounds * s
        slots *= a[index]
        slots += c[index]
        slots %= s
        return rounds, slots

    def changes_of(self, subtask: int, first: int, count: int, partitions: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys int64, ops int8: `INSERT`, `UPDATE`, `DELETE`, `READ`) of events ``[first, first + count)`` of a
        partition."""
        s, m = self.live_keys, self.changes
        counters = np.arange(first, first + count, dtype=np.int64)
        rounds, slots = self._slots(subtask, counters)
        lifetimes = rounds // m
        stage = rounds - lifetimes * m  # the change's index in its key's lifetime
        lifetimes *= s
        lifetimes += slots
        ops = np.full(count, UPDATE, dtype=np.int8)
        ops[stage == 0] = INSERT
        if self.snapshot:
            ops[rounds == 0] = READ
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

    def previous_counters(self, subtask: int, first: int, count: int) -> np.ndarray:
        """The counter of the same key's previous change for each event ``[first, first + count)`` of a partition
        (int64; −1 for a key's first change). It lies in the round before the event's: at most ``2·S − 1``
        counters earlier."""
        return self._neighbours(subtask, first, count, -1)

    def next_counters(self, subtask: int, first: int, count: int) -> np.ndarray:
        """The counter of the same key's next change for each event ``[first, first + count)`` of a partition
        (int64; −1 for a key's last change). It lies in the round after the event's: at most ``2·S − 1`` counters
        later."""
        return self._neighbours(subtask, first, count, 1)

    def _neighbours(self, subtask: int, first: int, count: int, step: int) -> np.ndarray:
        """The counter of the same key's change `step` (±1) rounds away: the position that round's bijection gives
        the key's slot (``a⁻¹·(slot − c) mod S``); −1 where the key has none (before its first or after its last)."""
        s, m = self.live_keys, self.changes
        counters = np.arange(first, first + count, dtype=np.int64)
        if not count:
            return counters
        rounds, slots = self._slots(subtask, counters)
        stage = rounds % m
        has = stage != 0 if step < 0 else stage != m - 1
        out = np.full(count, -1, dtype=np.int64)
        if not has.any():
            return out
        other = rounds[has] + step
        lo = int(other.min())
        a, c = self._bijections(subtask, lo, int(other.max()) - lo + 1)
        units, where = np.unique(a, return_inverse=True)
        inverses = np.array([pow(int(u), -1, s) if s > 1 else 0 for u in units], dtype=np.int64)[where]
        index = other - lo
        position = slots[has] - c[index]
        position *= inverses[index]
        position %= s
        out[has] = other * s + position
        return out

    @staticmethod
    def op_array(ops: np.ndarray) -> pa.Array:
        """The ``op`` column: ``insert`` / ``update`` / ``delete`` / ``read`` text of `ops` (an Arrow take)."""
        return _op_text().take(pa.array(ops, pa.int8()))


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
                          f"a schema with an 'op STRING' column beside the key (insert, update, delete or read); have: {names}")
    return {changelog.key_column: ChangeColumn(key.name, "key", changelog), "op": ChangeColumn(op.name, "op", changelog)}
