"""What the project does to the Spark Python worker processes its readers and writers run in."""

from __future__ import annotations

import gc

from pyspark import TaskContext

__all__ = ["freeze_gc_once"]

_gc_frozen = False


def freeze_gc_once() -> None:
    """In a Spark Python worker, move the objects alive now out of the cyclic GC's reach, once.

    A reused worker runs ``gc.collect()`` after every task. With pyarrow, numpy and pyspark (which
    imports pandas) loaded it walks every object those modules hold, each task (figures: bench/README.md,
    ``bench/figures.py``). ``gc.freeze()`` moves those long-lived objects (modules, classes,
    functions) to the permanent generation, so the collection only scans what later tasks create.
    Nothing is kept alive by it: reference counting still frees every object; only a reference
    cycle among objects frozen here would stay in memory. Not done outside a Spark task (no
    TaskContext), so a driver or a test process is left alone.
    """
    global _gc_frozen
    if not _gc_frozen and TaskContext.get() is not None:
        gc.freeze()
        _gc_frozen = True
