"""How a total is shared among partitions: the impulse source's ``limit``, and what a conformance run expects
each partition to hold."""

from __future__ import annotations

__all__ = ["split_limit"]


def split_limit(total: int, partitions: int) -> tuple[int, ...]:
    """How a total `limit` is shared: partition i gets ``total // partitions``, plus one if ``i < total % partitions``."""
    return tuple(total // partitions + (1 if i < total % partitions else 0) for i in range(partitions))
