"""The offset-commit protocol shared by every sink: a replayed micro-batch never loses or duplicates data.

Identity of a write: the commit id *Q* (the streaming query id, stable across restarts from one
checkpoint, or the user's ``commitId`` option), the batch id *B* and the Spark partition id *P*.
Both ids are task-local properties, read inside ``write()`` through ``TaskContext``.

The call sequence of one micro-batch:

1. Driver, at every batch: ``streamWriter()`` parses the options (`OptionError` on a bad one) and
   calls `Sink.check` (a clear `SinkError` if the target cannot be reached): nothing is written.
   A check that passed is not repeated for the same sink and options in the same process for
   `CHECK_EVERY_S` (10 s): it opened a connection per micro-batch on the latency path; a target lost
   in between fails the write with the same kind of error (retried, then naming the target).
   Spark asks for the writer before it says what for: a failed check is raised when the writer is
   shipped to the tasks (pickled: the query fails as it starts) or commits, and never stops an abort.
2. Executor, for each partition P, task attempt A — `ProtocolWriter.write`:
   a. fault point ``before_write``;
   b. `Sink.open`, then `Sink.is_committed`: if the target's own record says (Q, P) already committed
      batch B, the partition is skipped (an earlier attempt or run of this batch finished it) — once
      its input was read to the end and found to be the input that record was written from (below);
   c. otherwise `Sink.write` writes the rows **and** the record "(Q, P) committed B from input F" to
      the target in one atomic step (a Redis MULTI/EXEC, a Kafka transaction) or, for a target that
      cannot do that, with keys that make a repeat harmless (the webhook's idempotency keys);
      fault point ``mid_write`` fires after part of the partition was handed to the sink;
   d. a `TransientError` (connection lost, broker restarting) retries from b. with backoff: the
      partition's record batches are kept in memory until the task ends, so a retry resends them;
   e. fault point ``after_write``; return a `CommitMessage` (rows, bytes, skipped,
      latency from each event's ``timestamp`` to the target's acknowledgement).
3. Driver — `ProtocolWriter.commit(messages, B)`: a ``None`` message (failed task) raises
   `CommitError`; `Sink.committed_beyond` names partitions ≥ this run's count that hold a record of
   B (`PartitioningChangedError`); fault point ``before_commit``; `Sink.commit_batch` writes the batch's durable
   record (idempotent: Spark may call commit twice); fault point ``after_commit``; the batch's
   metrics are logged and, with ``metricsPath``, appended to that JSON-lines file.
4. Driver — `ProtocolWriter.abort(messages, B)`: `Sink.abort_batch` undoes what can be undone (for
   example fencing a producer); partitions already committed stay, and are skipped on replay.

Guarantee: **exactly-once in the target for each (Q, P, B)** when the rows of a partition are the
same every time the batch runs — true for a deterministic source such as impulse, whose replayed
batches have identical offsets and rows, and the same partitioning before the sink. A sink's readers
may see one partition of a batch before another (partitions commit independently).

The input fingerprint F (`Fingerprint`: the partition's row count and a SHA-256 digest (96 bits kept) of its Arrow
buffers, computed as the rows stream past) is what lets a replay notice that the rows of a partition
changed: a restart with another partitioning before the sink (``repartition(2)`` → ``repartition(5)``,
another ``spark.sql.shuffle.partitions``, a ``coalesce``) or a non-deterministic input. Skipping such
a partition would lose its new rows and writing it would duplicate the old ones, so it fails with a
`PartitioningChangedError` (not retried) naming the batch, the partition, the rows then and now, the
likely cause and what to do. What this does **not** catch, honestly:

- partitions of the replayed batch that have no record (they had not committed, or did not exist in
  the earlier run) write before another partition refuses: the query fails, but their rows landed and
  may duplicate rows that other partitions of the earlier run committed;
- a run with *fewer* partitions, none of which has a record, writes everything; the driver then finds
  the earlier run's records of partitions ≥ its count (`Sink.committed_beyond`) and fails the batch
  instead of committing it — after the duplicates landed; a sink that cannot list such records
  (default) does not notice at all;
- a sink whose records carry no fingerprint (``is_committed`` returning ``True``, as older sinks do)
  skips as before; a target that dedupes by key (the webhook) relies on the receiver refusing a key
  reused with another body (HTTP 422, as the project's reference receiver does);
- input whose rows changed but whose Arrow buffers did not (impossible for real data, but a digest
  is not a proof). The other way round, the digest covers Spark's Arrow batches as they come: the same
  rows cut into other batches (``spark.sql.execution.arrow.maxRecordsPerBatch`` changed between the
  runs) are refused too — a false alarm, never a loss.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from connectors.errors import CommitError, ConnectorError, PartitioningChangedError, SinkError, map_errors
from connectors.faults import FaultPlan
from connectors.latency import LatencyHistogram
from connectors.options import OptionReader
from connectors.retry import Backoff, Retry
from connectors.worker import freeze_gc_once

__all__ = ["WriteIdentity", "CommitMessage", "ProtocolOptions", "Sink", "ProtocolWriter", "stream_writer",
           "read_sink_options", "CHECK_EVERY_S", "Fingerprint", "PartitionInput", "fingerprint_of", "CHANGED_INPUT_CAUSE",
           "CHANGED_INPUT_REMEDY"]

CHECK_EVERY_S = 10.0
_checked: dict[tuple, float] = {}   # (sink name, options) → time.monotonic() of the last check that passed

log = logging.getLogger("impulse.connectors")


def _now_us() -> int:
    return time.time_ns() // 1_000


@dataclass(frozen=True)
class WriteIdentity:
    """Who writes: commit id (query), batch, Spark partition and task attempt."""

    commit_id: str
    batch_id: int
    partition_id: int
    attempt: int

    @classmethod
    def current(cls, commit_id: str | None = None, batch_id: int | None = None) -> "WriteIdentity":
        """The identity of the running task (executor only).

        A streaming write reads the query id and batch id from the task's local properties; a batch
        write (`connectors.batch`) passes both, fixed on the driver.
        """
        ctx = TaskContext.get()
        if ctx is None:
            raise SinkError("the commit protocol's write() must run inside a Spark task")
        query = commit_id or ctx.getLocalProperty("sql.streaming.queryId")
        batch = ctx.getLocalProperty("streaming.sql.batchId") if batch_id is None else batch_id
        if not query or batch is None:
            raise SinkError("no streaming query id or batch id in this task, and no batch write identity")
        return cls(str(query), int(batch), ctx.partitionId(), ctx.attemptNumber())

    def __str__(self) -> str:
        return f"batch {self.batch_id} partition {self.partition_id} attempt {self.attempt} of {self.commit_id}"


@dataclass(frozen=True)
class Fingerprint:
    """What a partition's input was: its rows and a digest of its Arrow data, as kept in a commit record.

    Its text form (``str``) is ``<rows>:<hex digest>``, without spaces; `parse` reads it back.
    """

    rows: int
    digest: str

    def __str__(self) -> str:
        return f"{self.rows}:{self.digest}"

    @classmethod
    def parse(cls, text: str | bytes | None) -> "Fingerprint | None":
        """The fingerprint written as `text`, or None for anything else (a record of an older version)."""
        if isinstance(text, bytes):
            text = text.decode("ascii", "replace")
        # The digest is 24 hex digits: what follows it is not ours (a C string's terminator, or bytes a
        # client read past the end of a Kafka offset's metadata, seen as "<digest>.pri0").
        found = re.match(r"(\d+):([0-9a-f]{24})", text or "")
        return cls(int(found.group(1)), found.group(2)) if found else None


@dataclass
class CommitMessage(WriterCommitMessage):
    """What a task reports to the driver. Primitives only (picklable)."""

    commit_id: str
    batch_id: int
    partition_id: int
    attempt: int
    rows: int = 0                  # rows of the partition, whether this attempt wrote them or found them committed
    bytes: int = 0                 # Arrow bytes of those rows
    skipped: bool = False          # already committed by an earlier attempt or run: nothing written now
    dead_lettered: int = 0         # rows the target refused for good, written to the sink's dead-letter target
    started_us: int = 0
    acked_us: int = 0
    latency: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ProtocolOptions:
    """The options every sink accepts.

    commitId : str, optional — overrides the query id in the target's commit records (a query
        re-created on purpose with a new checkpoint, or two queries sharing one target).
    writeRetries : int ≥ 0, default 5 — retries of a partition after a `TransientError`, with
        exponential backoff from ``retryBackoff`` (default 200ms) capped at ``retryBackoffMax`` (10s).
        A sink that retries its own requests inside a partition multiplies with this (see the
        webhook's ``maxRetries``).
    metricsPath : path, optional — the driver appends one JSON line per committed batch.
    faultInjection : str, optional — testing aid, see `connectors.faults`.
    """

    commit_id: str | None = None
    retry: Retry = Retry()
    metrics_path: str | None = None
    faults: FaultPlan | None = None

    @classmethod
    def read(cls, reader: OptionReader) -> "ProtocolOptions":
        retries = reader.integer("writeRetries", 5, minimum=0, maximum=1000)
        base = reader.duration_us("retryBackoff", 200_000)
        cap = reader.duration_us("retryBackoffMax", 10_000_000)
        return cls(
            commit_id=reader.string("commitId"),
            retry=Retry(retries + 1, Backoff(base / 1e6, max(cap, base) / 1e6)),
            metrics_path=reader.string("metricsPath"),
            faults=FaultPlan.parse(reader.string("faultInjection")),
        )


class Sink(ABC):
    """What a sink supplies to the protocol: how to write, look up and commit in its own system.

    A sink object is built on the driver from options and pickled to executors: it must hold only
    options (no client, socket or lock). Executor hooks get a connection from `open`.
    """

    name: ClassVar[str]

    def check(self) -> None:
        """Driver, for every micro-batch: raise a `SinkError` naming the target if it cannot be reached.

        Raise `TransientError` for what may pass (connection refused): it is retried with the
        protocol's backoff before the query fails.
        """

    @abstractmethod
    def open(self, identity: WriteIdentity) -> Any:
        """Executor: connect to the target; the result is passed to the other executor hooks."""

    @abstractmethod
    def is_committed(self, conn: Any, identity: WriteIdentity) -> "bool | Fingerprint":
        """Executor: whether the target records (commit id, partition) as having committed this batch.

        Return the `Fingerprint` the record holds when it is the record of this very batch: the
        protocol then compares it with this run's input and refuses a partition whose rows changed.
        ``True`` (committed, input unknown: a later batch's record, or a record without fingerprint)
        skips the partition unchecked; ``False``: not committed.
        """

    @abstractmethod
    def write(self, conn: Any, identity: WriteIdentity, batches: Iterator[pa.RecordBatch]) -> int | None:
        """Executor: write every batch and the commit record atomically.

        Send each record batch to the target before asking for the next one. Raise `TransientError`
        for what a retry may fix, another `SinkError` for what it cannot. Once `batches` is
        exhausted, ``fingerprint_of(batches)`` is the input's `Fingerprint`: store it in the record.
        Return how many rows went to the sink's dead-letter target instead (None: 0).
        """

    def close(self, conn: Any) -> None:
        """Executor: release the connection (also after a failure)."""

    def committed_beyond(self, commit_id: str, batch_id: int, partitions: int) -> list[int]:
        """Driver, before `commit_batch`: the partition ids ≥ `partitions` whose record says they committed
        `batch_id` (or a later batch): the earlier run of a replayed batch had more partitions than this
        one. Default: ``[]``, not checked (a sink that cannot list its records cheaply)."""
        return []

    def commit_batch(self, commit_id: str, batch_id: int, messages: Sequence[CommitMessage]) -> None:
        """Driver: make the batch final and record it; must be idempotent."""

    def abort_batch(self, commit_id: str | None, batch_id: int, messages: Sequence[CommitMessage | None]) -> None:
        """Driver: undo what can be undone after a failed batch; `messages` may hold ``None``."""


class PartitionInput(Iterator[pa.RecordBatch]):
    """The record batches a sink's `Sink.write` gets; once they are exhausted, `fingerprint` is what they were."""

    def __init__(self, feed: "_Feed") -> None:
        self._feed = feed
        self._batches = feed.batches()

    def __next__(self) -> pa.RecordBatch:
        return next(self._batches)

    @property
    def fingerprint(self) -> Fingerprint:
        return self._feed.fingerprint()


def fingerprint_of(batches: Iterator[pa.RecordBatch]) -> Fingerprint | None:
    """The `Fingerprint` of the exhausted `batches` a sink was given; None when they are not the protocol's
    (a test calling `Sink.write` directly): the sink then writes a record without one."""
    return batches.fingerprint if isinstance(batches, PartitionInput) else None


class _Feed:
    """The partition's record batches as the sink sees them: counted and digested once, kept for a retry.

    With a ``mid_write`` fault armed for this task, the first batch is split in two and the fault
    fires when the sink asks for the second half. The digest is taken over each batch as Spark gave
    it (before such a split), so it does not depend on the fault.
    """

    def __init__(self, source: Iterator[pa.RecordBatch], on_split: Callable[[], None] | None) -> None:
        self._source = source
        self._seen: list[pa.RecordBatch] = []
        self._on_split = on_split
        self.rows = 0
        self.bytes = 0
        self._timestamps: list[np.ndarray] = []
        self._digest = hashlib.sha256()  # faster than BLAKE2b where the CPU has SHA extensions (bench/README.md)

    def __call__(self) -> PartitionInput:
        return PartitionInput(self)

    def batches(self) -> Iterator[pa.RecordBatch]:
        yield from self._seen
        for batch in self._source:
            self._digest_batch(batch)
            if self._on_split is not None:
                fire, self._on_split = self._on_split, None
                half = max(1, batch.num_rows // 2)
                self._remember(batch.slice(0, half))
                yield batch.slice(0, half)
                fire()
                batch = batch.slice(half)
            self._remember(batch)
            yield batch
        if self._on_split is not None:
            self._on_split()

    def _remember(self, batch: pa.RecordBatch) -> None:
        self._seen.append(batch)
        self.rows += batch.num_rows
        self.bytes += batch.nbytes
        index = batch.schema.get_field_index("timestamp")
        if index >= 0 and pa.types.is_timestamp(batch.schema.field(index).type):
            column = batch.column(index).cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            self._timestamps.append(column.to_numpy(zero_copy_only=False))

    def _digest_batch(self, batch: pa.RecordBatch) -> None:
        """Add a batch's row count and its columns' Arrow buffers to the digest (no per-row work)."""
        self._digest.update(batch.num_rows.to_bytes(8, "little"))
        for column in batch.columns:
            for buffer in column.buffers():
                if buffer is not None:
                    self._digest.update(buffer)

    def drain(self) -> None:
        """Consume the rest of the input without sending it (the partition was already committed)."""
        for batch in self._source:
            self._digest_batch(batch)
            self.rows += batch.num_rows
            self.bytes += batch.nbytes

    def fingerprint(self) -> Fingerprint:
        """The input read so far (all of it once the sink or `drain` exhausted it)."""
        return Fingerprint(self.rows, self._digest.hexdigest()[:24])

    def latency(self, acked_us: int) -> LatencyHistogram:
        histogram = LatencyHistogram()
        for timestamps in self._timestamps:
            histogram.record(acked_us - timestamps)
        return histogram


class ProtocolWriter(DataSourceStreamArrowWriter):
    """The stream writer of every sink: runs the protocol above around a `Sink`'s hooks."""

    def __init__(self, sink: Sink, options: ProtocolOptions, batch_id: int | None = None,
                 refused: Exception | None = None) -> None:
        self.sink = sink
        self.options = options
        self.batch_id = batch_id   # None: streaming (from the task); else a batch write's (`connectors.batch`)
        #: the driver's check of the target failed with this: the writer cannot be shipped to tasks (pickled)
        #: nor commit, where the error is raised as the check raised it; `abort` runs regardless
        self.refused = refused

    def _raise_refused(self) -> None:
        if self.refused is not None:
            raise self.refused

    def __getstate__(self) -> dict:
        self._raise_refused()  # the query starts (Spark pickles the writer for its tasks): fail it now, intact
        return self.__dict__

    def _fault(self, point: str, batch: int, partition: int | None = None, attempt: int | None = None) -> None:
        if self.options.faults is not None:
            self.options.faults.hit(point, batch, partition, attempt)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CommitMessage:
        freeze_gc_once()
        identity = WriteIdentity.current(self.options.commit_id, self.batch_id)
        fault = lambda point: self._fault(point, identity.batch_id, identity.partition_id, identity.attempt)  # noqa: E731 - binds this write's identity
        fault("before_write")
        plan = self.options.faults
        arm = plan is not None and plan.matches("mid_write", identity.batch_id, identity.partition_id, identity.attempt)
        feed = _Feed(iterator, (lambda: fault("mid_write")) if arm else None)
        started = _now_us()
        dead_lettered = 0

        def attempt() -> bool | Fingerprint:
            """What the target's record says (the partition is skipped), or False: it is written now."""
            nonlocal dead_lettered
            conn = self.sink.open(identity)
            try:
                committed = self.sink.is_committed(conn, identity)
                if committed:
                    return committed
                dead_lettered = self.sink.write(conn, identity, feed()) or 0
                return False
            finally:
                self.sink.close(conn)

        with _context(f"{self.sink.name}: writing {identity}"):
            committed = self.options.retry.call(attempt, what=f"{self.sink.name} write of {identity}")
        acked = _now_us()
        skipped = bool(committed)
        if skipped:
            feed.drain()
            if isinstance(committed, Fingerprint) and committed != feed.fingerprint():
                raise PartitioningChangedError(_changed(self.sink.name, identity, committed, feed.fingerprint()))
            log.info("%s: %s already committed, skipped", self.sink.name, identity)
        fault("after_write")
        return CommitMessage(
            identity.commit_id, identity.batch_id, identity.partition_id, identity.attempt,
            rows=feed.rows, bytes=feed.bytes, skipped=skipped, dead_lettered=dead_lettered,
            started_us=started, acked_us=acked, latency={} if skipped else feed.latency(acked).to_dict(),
        )

    def commit(self, messages: Sequence[CommitMessage | None], batchId: int) -> None:
        self._raise_refused()
        failed = [i for i, m in enumerate(messages) if m is None]
        if failed:
            raise CommitError(f"{self.sink.name}: batch {batchId} cannot commit: tasks of partitions {failed} failed")
        commit_id = messages[0].commit_id if messages else self.options.commit_id
        if commit_id is not None and messages:
            with _context(f"{self.sink.name}: checking the partitions of batch {batchId} of {commit_id}"):
                beyond = self.options.retry.call(
                    lambda: self.sink.committed_beyond(commit_id, batchId, len(messages)),
                    what=f"{self.sink.name} check of batch {batchId}'s partitions")
            if beyond:
                raise PartitioningChangedError(_fewer(self.sink.name, commit_id, batchId, len(messages), beyond))
        self._fault("before_commit", batchId)
        if commit_id is not None:
            with _context(f"{self.sink.name}: committing batch {batchId} of {commit_id}"):
                self.options.retry.call(lambda: self.sink.commit_batch(commit_id, batchId, messages),
                                        what=f"{self.sink.name} commit of batch {batchId}")
        self._fault("after_commit", batchId)
        self._report(batchId, commit_id, messages)

    def abort(self, messages: Sequence[CommitMessage | None], batchId: int) -> None:
        commit_id = next((m.commit_id for m in messages if m is not None), self.options.commit_id)
        log.warning("%s: batch %d of %s aborted (%d of %d partitions reported)", self.sink.name, batchId,
                    commit_id, sum(m is not None for m in messages), len(messages))
        if self.refused is not None:  # e.g. the topic was deleted: abort anyway, without its check
            log.warning("%s: aborting batch %d although the target's check failed: %s", self.sink.name, batchId,
                        self.refused)
        with _context(f"{self.sink.name}: aborting batch {batchId} of {commit_id}"):
            self.sink.abort_batch(commit_id, batchId, messages)

    def _report(self, batch_id: int, commit_id: str | None, messages: Sequence[CommitMessage]) -> None:
        summary = batch_summary(batch_id, commit_id, messages)
        log.info("%s: committed batch %d: %d rows (%d written now), %d bytes, %d partitions (%d already committed)",
                 self.sink.name, batch_id, summary["rows"], summary["writtenRows"], summary["bytes"],
                 summary["partitions"], summary["skippedPartitions"])
        if summary["deadLettered"]:
            log.warning("%s: batch %d: %d rows dead-lettered (refused by the target for good)", self.sink.name,
                        batch_id, summary["deadLettered"])
        if self.options.metrics_path:
            with open(self.options.metrics_path, "a", encoding="utf-8") as out:
                out.write(json.dumps(summary) + "\n")


def batch_summary(batch_id: int, commit_id: str | None, messages: Sequence[CommitMessage]) -> dict:
    """The metrics of one committed batch, as written to ``metricsPath``."""
    latency = LatencyHistogram()
    for message in messages:
        latency.merge(LatencyHistogram.from_dict(message.latency))
    skipped = sum(m.skipped for m in messages)
    return {
        "batchId": batch_id,
        "commitId": commit_id,
        "rows": sum(m.rows for m in messages),
        "bytes": sum(m.bytes for m in messages),
        "writtenRows": sum(m.rows for m in messages if not m.skipped),
        "deadLettered": sum(m.dead_lettered for m in messages),
        "partitions": len(messages),
        "skippedPartitions": skipped,
        "retriedPartitions": sum(m.attempt > 0 for m in messages),
        "retriedRows": sum(m.rows for m in messages if m.attempt > 0),
        "replayed": bool(messages) and skipped == len(messages),
        "writeStartUs": min((m.started_us for m in messages), default=0),
        "ackUs": max((m.acked_us for m in messages), default=0),
        "committedUs": _now_us(),
        "latency": latency.to_dict(),
        # per partition written now: [acknowledgement µs, rows], the "delivery" part of each event's latency
        "acks": [[m.acked_us, m.rows] for m in messages if not m.skipped],
    }


#: the likely cause and the remedy of a replayed partition whose input changed (every sink's message says it)
CHANGED_INPUT_CAUSE = ("the partitioning before the sink changed since that run (repartition, coalesce, "
                       "spark.sql.shuffle.partitions, a changed query) or the input is not deterministic")
CHANGED_INPUT_REMEDY = ("Restore the partitioning the earlier run had (or make the input deterministic) until this "
                        "batch is committed, then change it; or start over with a new checkpoint and a new 'commitId' "
                        "(the target then receives the stream again under the new id).")


def _changed(sink: str, identity: WriteIdentity, then: Fingerprint, now: Fingerprint) -> str:
    """The message of a replayed partition whose input differs from what its commit record was written from."""
    return (f"{sink}: batch {identity.batch_id} partition {identity.partition_id} of {identity.commit_id} was "
            f"committed by an earlier run from {then.rows} rows (digest {then.digest}), but this run gives that "
            f"partition {now.rows} rows (digest {now.digest}): the replayed batch's rows no longer map to the same "
            f"partitions. Likely cause: {CHANGED_INPUT_CAUSE}. Skipping the partition would lose rows and writing "
            "it would duplicate rows, so the sink refuses. " + CHANGED_INPUT_REMEDY)


def _fewer(sink: str, commit_id: str, batch_id: int, partitions: int, beyond: list[int]) -> str:
    """The message of a replayed batch with fewer partitions than the run whose records the target holds."""
    return (f"{sink}: batch {batch_id} of {commit_id} ran with {partitions} partitions, but the target holds "
            f"commit records of this batch from partitions {beyond[:10]} written by an earlier run with more "
            f"partitions: {CHANGED_INPUT_CAUSE}. This run's rows are already written "
            "and may duplicate rows of that run; the batch is not committed. " + CHANGED_INPUT_REMEDY)


def _context(where: str):
    """Name where an error happened; wrap a client error that escaped a sink in `SinkError`."""
    return map_errors(lambda exc: SinkError(f"{where} failed: {type(exc).__name__}: {exc}"), note=where)


def read_sink_options(options: Mapping[str, object], *, name: str,
                      build: Callable[[OptionReader], Sink]) -> tuple[ProtocolOptions, Sink]:
    """A sink's options parsed, its own (`build`) and the protocol's, unknown ones rejected (`OptionError`); the
    target is not checked here (`build` may ask it what it is, as the Redis sink's ``cluster=auto`` does)."""
    reader = OptionReader(options, name=name)
    protocol = ProtocolOptions.read(reader)
    sink = build(reader)
    reader.finish()
    return protocol, sink


def stream_writer(options: Mapping[str, object], *, name: str, build: Callable[[OptionReader], Sink]) -> ProtocolWriter:
    """Parse a sink's options (`read_sink_options`), check the target.

    Runs on the driver each time Spark asks a sink's DataSource for its ``streamWriter()``.
    """
    protocol, sink = read_sink_options(options, name=name, build=build)
    # Spark makes a writer for every micro-batch: a target that is briefly down (restarting) mid-stream
    # must not fail the query, so a TransientError from the check is retried like a write.
    key = (sink.name, tuple(sorted((str(k).lower(), str(v)) for k, v in options.items())))
    if time.monotonic() - _checked.get(key, float("-inf")) >= CHECK_EVERY_S:
        try:
            protocol.retry.call(sink.check, what=f"{sink.name} reachability check")
        except ConnectorError as exc:
            # Spark asks for a writer before it says what for: to ship to the tasks (pickled), to commit or to
            # abort. A failed check fails the first two (`ProtocolWriter.refused`); an abort still runs, since
            # undoing a batch must not depend on the target being as the query found it (a deleted topic).
            return ProtocolWriter(sink, protocol, refused=exc)
        _checked[key] = time.monotonic()
    return ProtocolWriter(sink, protocol)
