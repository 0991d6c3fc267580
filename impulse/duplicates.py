"""Redelivered duplicates (``duplicateRate``, ``duplicateDelay``): an at-least-once producer's retries.

A `rate` share of events is delivered twice. The copy is the same row (every column: ``counter``,
``subtask_index``, ``payload``, the event time and every generated value, since each is a function of the event) and
arrives ``d`` events later in its partition, ``d`` drawn uniformly in ``[1, max_events]`` where `max_events` is
``duplicateDelay`` at the partition's rate (``⌊duplicateDelay / delay⌋``, at least 1): it is emitted right after
the partition's event ``counter + d``. Whether an event is copied and its ``d`` are pure functions of (seed,
partition, counter) (streams ``duplicate``/``copy`` and ``duplicate``/``delay`` of `impulse.draws`), so any range of
counters yields the same rows, copies included, in the same order: a replay, a restart and the bounded batch read
agree. A copy due after a partition's last event (its ``limit``) is not delivered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from impulse import draws

__all__ = ["Duplicates"]


@dataclass(frozen=True)
class Duplicates:
    """Which events are delivered twice and how many events later (module docstring). Small and picklable."""

    rate: float
    max_events: int
    seed: int = 0

    def copies(self, subtask: int, first: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """The copies arriving among events ``[first, end)`` of a partition: (the counters they copy, the counter
        each arrives after), both int64, in arrival order (an event's own copies by counter)."""
        lo = max(0, first - self.max_events)
        count = end - 1 - lo  # an event's copy arrives at least one event later
        if count <= 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        copied = draws.uniform(draws.words(draws.stream_key(self.seed, "duplicate", "copy"), subtask, lo, count)) < self.rate
        delays = draws.integers(draws.words(draws.stream_key(self.seed, "duplicate", "delay"), subtask, lo, count),
                                1, self.max_events)
        sources = np.arange(lo, lo + count, dtype=np.int64)
        arrivals = sources + delays
        keep = copied & (arrivals >= first) & (arrivals < end)
        sources, arrivals = sources[keep], arrivals[keep]
        order = np.lexsort((sources, arrivals))
        return sources[order], arrivals[order]
