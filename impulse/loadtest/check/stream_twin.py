"""``--check`` of a query Spark runs on streams only: its expected answer as one micro-batch.

Spark refuses some operators on a batch DataFrame when it plans the query (analysis alone accepts them):
``dropDuplicatesWithinWatermark`` (``… is not supported with batch DataFrames/DataSets``) and
``applyInPandasWithState`` (``… is unsupported in batch query``). For such a query the batch twin
`impulse.loadtest.check` compares the stream with does not exist; the expected answer is then the same query
run as a stream over the same events in ONE micro-batch (`one_micro_batch`: ``Trigger.AvailableNow`` over a
bounded input with no per-batch limit, into Spark's ``memory`` sink), which is the answer the query gives when
no event arrives late. The ``memory`` sink keeps the rows in the driver (the Spark Connect server's, for a
Connect client), where ``spark.table(name)`` reads them; the table is dropped afterwards.

`streaming_only` decides it before the load on the batch twin: Spark's own refusal, recognised by its message
(`batch_refusal`); any other error of the batch twin is re-raised, never taken for a streaming-only query.
"""

from __future__ import annotations

import re
import uuid
from contextlib import contextmanager
from typing import Iterator

from pyspark.errors import PySparkException

__all__ = ["batch_refusal", "streaming_only", "one_micro_batch"]

# Spark's refusals of a streaming-only operator on a batch DataFrame (UnsupportedOperationChecker, the planner)
_REFUSAL = re.compile(r"\b(\w+) is (?:not supported with batch DataFrames|unsupported in batch query)")


def batch_refusal(exc: BaseException) -> str | None:
    """The operator of Spark's refusal to run a streaming-only operator on a batch DataFrame (e.g.
    ``dropDuplicatesWithinWatermark``), None for any other error."""
    if not isinstance(exc, PySparkException):
        return None
    found = _REFUSAL.search(str(exc))
    return found.group(1) if found else None


def _plan(frame) -> None:
    """Have Spark analyse and plan `frame` (where it checks the operators a batch query may use), not run it."""
    if type(frame).__module__.startswith("pyspark.sql.connect"):
        frame._explain_string()  # the server plans it (AnalyzePlan)
    else:
        frame._jdf.queryExecution().executedPlan()


def streaming_only(batch_twin) -> str | None:
    """The operator Spark runs on streams only that makes it refuse `batch_twin` (a batch DataFrame, planned, never
    run), or None when Spark can run it as a batch. Any other error of the planning is re-raised as it is."""
    try:
        _plan(batch_twin)
    except Exception as exc:
        operator = batch_refusal(exc)
        if operator is None:
            raise
        return operator
    return None


@contextmanager
def one_micro_batch(spark, stream, mode: str) -> Iterator:
    """`stream` (a streaming DataFrame over a bounded input: every event already due, no per-batch limit) run to its
    end with ``availableNow`` into Spark's ``memory`` sink in output mode `mode`; yields the rows it wrote as a
    DataFrame, valid inside the ``with`` only (the table is dropped after it). The query's failure is raised as
    Spark reports it (``StreamingQueryException``); a source that split the input into several micro-batches
    (it would not be the one-micro-batch answer) raises `RuntimeError`."""
    name = f"impulse_check_{uuid.uuid4().hex[:12]}"
    query = (stream.writeStream.format("memory").queryName(name).outputMode(mode).trigger(availableNow=True)
             .start())
    try:
        query.awaitTermination()
        read = [p.get("numInputRows") for p in query.recentProgress if p.get("numInputRows")]
        if len(read) > 1:
            raise RuntimeError(f"--check: the source read the run's events in {len(read)} micro-batches ({read} rows) "
                               "with availableNow, not in one: the one-micro-batch answer needs a source that reads "
                               "all that is available at once")
        yield spark.table(name)
    finally:
        if query.isActive:
            query.stop()
        spark.catalog.dropTempView(name)
