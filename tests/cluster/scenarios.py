"""The end-to-end steps the cluster and Connect tests share, written against any ``SparkSession``
(classic on a standalone master, or a Spark Connect client): impulse → a sink until the limit, the bounded
batch read, and undoing a batch's commit so that a restart from the checkpoint replays it.

Only the standard library at module level: `job.py` imports this in a driver of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

__all__ = ["PARTITIONS", "batch_read", "expected", "impulse_options", "uncommit_last_batch", "write"]

PARTITIONS = 2


def impulse_options(limit: int, per_trigger: int) -> dict[str, str]:
    """A fast backfill of `limit` events over `PARTITIONS` partitions, at most `per_trigger` per micro-batch."""
    return {"eventsPerSecond": "1000000", "startTime": "0", "numPartitions": str(PARTITIONS), "limit": str(limit),
            "maxEventsPerTrigger": str(per_trigger)}


def expected(limit: int) -> list[tuple[int, int]]:
    """``(subtask_index, counter)`` of every event of a `limit` split over `PARTITIONS` (remainder to the low ones)."""
    share, extra = divmod(limit, PARTITIONS)
    return sorted((p, c) for p in range(PARTITIONS) for c in range(share + (p < extra)))


def write(spark, fmt: str, options: Mapping[str, str], checkpoint: str | Path, limit: int, per_trigger: int) -> int:
    """Run impulse → `fmt` with `options` until `limit` events are written (``availableNow``); the last batch id.

    Raises the query's exception if it failed.
    """
    query = (spark.readStream.format("impulse").options(**impulse_options(limit, per_trigger)).load()
             .writeStream.format(fmt).options(**options).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"{fmt} query failed: {error}")
    return int(query.lastProgress["batchId"])


def batch_read(spark, limit: int) -> list[tuple[int, int]]:
    """``spark.read.format("impulse")`` of `limit` events: ``(subtask_index, counter)`` sorted, duplicates kept."""
    rows = (spark.read.format("impulse").options(**impulse_options(limit, limit)).load()
            .select("subtask_index", "counter").collect())
    return sorted((int(r[0]), int(r[1])) for r in rows)


def uncommit_last_batch(checkpoint: str | Path) -> int:
    """Delete the last batch's commit marker, as a driver that died after writing it but before marking it
    done would leave it: a restart re-runs that batch with the same id and offsets. Returns the batch id."""
    commits = Path(checkpoint, "commits")
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)
    return last

