"""Helpers shared by the impulse tests that run Spark queries."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Callable

COLUMNS = "counter, subtask_index, unix_micros(timestamp) AS ts"


def impulse(spark, **options):
    """`spark.readStream.format("impulse")` with the options (values turned into strings)."""
    return spark.readStream.format("impulse").options(**{k: str(v) for k, v in options.items()}).load()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def run_available_now(spark, checkpoint: str | Path | None = None, *, timeout: float = 120, **options):
    """Run a bounded stream to the memory sink with Trigger.AvailableNow; return (table name, query)."""
    name = unique("impulse")
    writer = impulse(spark, **options).writeStream.format("memory").queryName(name).trigger(availableNow=True)
    if checkpoint is not None:
        writer = writer.option("checkpointLocation", str(checkpoint))
    query = writer.start()
    assert query.awaitTermination(timeout), "Trigger.AvailableNow did not end the query"
    if query.exception() is not None:
        raise query.exception()
    return name, query


def rows(spark, table: str, columns: str = COLUMNS) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT {columns} FROM {table}").collect())


def poll(condition: Callable[[], object], timeout: float = 60, interval: float = 0.05, what: str = "condition"):
    """Wait until `condition()` is truthy and return it; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def checkpoint_offsets(checkpoint: str | Path) -> dict[int, dict]:
    """The source offset of every batch in `<checkpoint>/offsets` (batch id -> end offset)."""
    out = {}
    for path in Path(checkpoint, "offsets").iterdir():
        if path.name.isdigit():
            lines = path.read_text().splitlines()
            out[int(path.name)] = json.loads(lines[2])
    return dict(sorted(out.items()))


def committed_batches(checkpoint: str | Path) -> list[int]:
    """The batch ids in `<checkpoint>/commits` (none before the query made that folder)."""
    commits = Path(checkpoint, "commits")
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else []


def uncommit_last_batch(checkpoint: str | Path) -> int:
    """Make the last batch look as if the query crashed before committing it: a restart re-runs it."""
    last = committed_batches(checkpoint)[-1]
    Path(checkpoint, "commits", str(last)).unlink()
    crc = Path(checkpoint, "commits", f".{last}.crc")
    if crc.exists():
        crc.unlink()
    return last


class BatchRecorder:
    """A foreachBatch function that keeps every call's rows, replays included: batch id -> [rows, ...].

    A row is ``(counter, subtask_index, timestamp µs, payload or None)``.
    """

    def __init__(self) -> None:
        self.calls: dict[int, list[list[tuple]]] = {}

    def __call__(self, df, batch_id: int) -> None:
        payload = "payload" if "payload" in df.columns else "CAST(NULL AS BINARY) AS payload"
        got = sorted((r[0], r[1], r[2], None if r[3] is None else bytes(r[3]))
                     for r in df.selectExpr("counter", "subtask_index", "unix_micros(timestamp)", payload).collect())
        self.calls.setdefault(batch_id, []).append(got)

    def runs(self) -> int:
        """How many times the function was called, replays included."""
        return sum(len(runs) for runs in self.calls.values())

    def rows(self) -> list[tuple]:
        """Every row of every batch, each batch counted once (its first run)."""
        return [row for runs in self.calls.values() for row in runs[0]]


def poll_query(query, condition: Callable[[], object], timeout: float = 120, interval: float = 0.05,
               what: str = "condition"):
    """`poll`, failing at once with the query's error if it stops."""
    def check():
        if not query.isActive:
            raise AssertionError(f"query stopped while waiting for {what}: {query.exception()}")
        return condition()
    return poll(check, timeout=timeout, interval=interval, what=what)
