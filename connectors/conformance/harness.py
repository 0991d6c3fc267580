"""What every conformance case shares: running impulse into a sink, the events that must land, a namespace per
test, an adapter with other options, and the process trees a case kills. Needs no pytest: the suite's modules
(`connectors.conformance.suite`, `.poison`, `.batch_suite`) import it, it imports none of them."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from connectors.conformance.adapter import SinkAdapter
from connectors.faults import stalled_among
from connectors.partitions import split_limit
from connectors.registry import connector

__all__ = ["PARTITIONS", "Verdict", "compare", "expected_events", "impulse_stream", "start_query", "await_query",
           "run_query", "failure_of", "read_metrics", "fresh_namespace", "Override", "data_source_class",
           "descendants", "wait_for_stall", "kill_tree"]

#: the impulse partitions every case writes from
PARTITIONS = 2


@dataclass(frozen=True)
class Verdict:
    """What landed against what was expected, as counts of events."""

    landed: int
    expected: int
    lost: int
    duplicated: int
    unexpected: int
    examples: str

    def __str__(self) -> str:
        return (f"{self.lost} events lost, {self.duplicated} duplicated, {self.unexpected} unexpected "
                f"({self.landed} landed, {self.expected} expected){self.examples}")


def compare(landed: list[tuple[int, int]], expected: list[tuple[int, int]]) -> Verdict:
    """Compare two multisets of events: lost (expected copies that never landed), duplicated (copies beyond
    the expected count) and unexpected (events not expected at all)."""
    got, want = Counter(landed), Counter(expected)
    lost = sorted(e for e in want if got[e] < want[e])
    duplicated = sorted(e for e in want if got[e] > want[e])
    unexpected = sorted(e for e in got if e not in want)
    examples = "".join(f"; first {what}: {items[:5]}" for what, items in
                       (("lost", lost), ("duplicated", duplicated), ("unexpected", unexpected)) if items)
    return Verdict(len(landed), len(expected), sum(want[e] - got[e] for e in lost),
                   sum(got[e] - want[e] for e in duplicated), sum(got[e] for e in unexpected), examples)


def expected_events(limit: int, partitions: int = PARTITIONS) -> list[tuple[int, int]]:
    """The ``(subtask_index, counter)`` of impulse with `limit` events: the remainder goes to low partitions."""
    return sorted((i, c) for i, count in enumerate(split_limit(limit, partitions)) for c in range(count))


def impulse_stream(spark, limit: int, per_trigger: int | None = None):
    """Impulse events that are all due at once (start in 1970), replayable; a restart keeps the pinned timeline."""
    reader = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000)
              .option("numPartitions", PARTITIONS).option("startTime", "0").option("limit", limit))
    if per_trigger:
        reader = reader.option("maxEventsPerTrigger", per_trigger)
    return reader.load()


def start_query(spark, adapter: SinkAdapter, namespace: str, checkpoint: Path, *, limit: int,
                per_trigger: int | None = None, options: Mapping[str, str] | None = None, where: str | None = None,
                columns: list[str] | None = None, repartition: int | None = None):
    """Start impulse → sink with ``Trigger.AvailableNow``; returns the running query.

    `where` filters the impulse rows, `columns` (SQL expressions) replaces them, `repartition` shuffles
    them into that many partitions before the sink (round-robin, deterministic on a replay).
    """
    frame = impulse_stream(spark, limit, per_trigger)
    if where:
        frame = frame.where(where)
    if columns:
        frame = frame.selectExpr(*columns)
    if repartition:
        frame = frame.repartition(repartition)
    frame = adapter.frame(frame)
    return (frame.writeStream.format(adapter.format).options(**adapter.options(namespace))
            .options(**dict(options or {})).option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def await_query(query, timeout: float = 180.0):
    """Wait until `query` ends; raise what it raised, or `AssertionError` after `timeout` seconds."""
    try:
        if not query.awaitTermination(timeout):
            raise AssertionError(f"the query did not end within {timeout}s")
    finally:
        query.stop()
    return query


def run_query(spark, adapter: SinkAdapter, namespace: str, checkpoint: Path, *, limit: int,
              per_trigger: int | None = None, options: Mapping[str, str] | None = None,
              where: str | None = None, columns: list[str] | None = None, repartition: int | None = None,
              timeout: float = 180.0):
    """Run impulse → sink with ``Trigger.AvailableNow`` until it ends; raise what the query raised."""
    query = start_query(spark, adapter, namespace, checkpoint, limit=limit, per_trigger=per_trigger,
                        options=options, where=where, columns=columns, repartition=repartition)
    return await_query(query, timeout)


def failure_of(fn) -> BaseException | None:
    """What calling `fn` raised (a query's failure, as Spark reports it), None when it returned."""
    try:
        fn()
    except Exception as exc:  # the query's failure, as Spark reports it
        return exc
    return None


def read_metrics(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@contextmanager
def fresh_namespace(adapter: SinkAdapter) -> Iterator[str]:
    """A new namespace (``t`` and 10 hex digits: always 11 characters, so runs send as many bytes), prepared
    by the adapter, cleaned up on exit."""
    name = "t" + uuid.uuid4().hex[:10]
    adapter.prepare(name)
    try:
        yield name
    finally:
        adapter.cleanup(name)


class Override(SinkAdapter):
    """An adapter whose options are replaced (for the unreachable-target case)."""

    def __init__(self, inner: SinkAdapter, options: Mapping[str, str]) -> None:
        self.inner, self._options, self.format = inner, options, inner.format

    def options(self, namespace: str) -> Mapping[str, str]:
        return self._options

    def frame(self, frame):
        return self.inner.frame(frame)

    def read_back(self, namespace: str) -> list[tuple[int, int]]:
        return self.inner.read_back(namespace)

    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        return self._options


def data_source_class(spark, adapter: SinkAdapter) -> type:
    """The adapter's `data_source` class, else this project's registered one of that format."""
    explicit = getattr(adapter, "data_source", None)
    if explicit is not None:
        return explicit
    return connector(adapter.format).data_source_class()


def children() -> dict[int, list[int]]:
    """Each process's children, from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return parents


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it."""
    parents, found, todo = children(), [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, []))
    return found


def wait_for_stall(query, timeout: float) -> int:
    """The pid of this process's Python worker stalled by the ``stall`` fault action (`connectors.faults`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = stalled_among(descendants(os.getpid()))
        if pid is not None:
            return pid
        if not query.isActive:
            raise AssertionError(f"the query ended before the stall: {query.exception()}")
        time.sleep(0.05)
    raise AssertionError(f"no stalled write within {timeout}s")


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant, including PySpark's worker daemon (its own process group)."""
    for victim in descendants(pid):
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
