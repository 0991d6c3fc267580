"""The protocol's driver side and its pieces, with an in-memory sink (no Spark, no server)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pyarrow as pa
import pytest

from connectors.errors import CommitError, OptionError, PartitioningChangedError, TransientError
from connectors.faults import FaultPlan, InjectedFault
from connectors.protocol import (CommitMessage, Fingerprint, ProtocolOptions, ProtocolWriter, Sink, WriteIdentity, _Feed,
                                 fingerprint_of, stream_writer)
from connectors.retry import Backoff, Retry


class MemorySink(Sink):
    name = "memory-test"

    def __init__(self, checks_failing: int = 0):
        self.batches: list[tuple[str, int]] = []
        self.aborted: list[int] = []
        self.checks_failing = checks_failing

    def check(self):
        if self.checks_failing:
            self.checks_failing -= 1
            raise TransientError("memory-test: cannot reach the target")

    def open(self, identity):
        return None

    def is_committed(self, conn, identity):
        return False

    def write(self, conn, identity, batches):
        return None

    def commit_batch(self, commit_id, batch_id, messages):
        self.batches.append((commit_id, batch_id))

    def abort_batch(self, commit_id, batch_id, messages):
        self.aborted.append(batch_id)


def _message(partition, rows=10, skipped=False, attempt=0, dead_lettered=0):
    return CommitMessage("q1", 7, partition, attempt, rows=rows, bytes=rows * 8, skipped=skipped,
                         dead_lettered=dead_lettered, started_us=1, acked_us=2)


def test_commit_records_the_batch_and_appends_metrics(tmp_path):
    sink, metrics = MemorySink(), tmp_path / "m.jsonl"
    writer = ProtocolWriter(sink, ProtocolOptions(metrics_path=str(metrics)))
    writer.commit([_message(0, dead_lettered=3), _message(1, skipped=True, attempt=1)], 7)
    assert sink.batches == [("q1", 7)]
    [line] = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert (line["batchId"], line["rows"], line["writtenRows"], line["deadLettered"]) == (7, 20, 10, 3)
    assert (line["skippedPartitions"], line["retriedPartitions"], line["replayed"]) == (1, 1, False)


def test_a_failed_task_blocks_the_commit():
    sink = MemorySink()
    with pytest.raises(CommitError, match="partitions \\[1\\]"):
        ProtocolWriter(sink, ProtocolOptions()).commit([_message(0), None], 7)
    assert sink.batches == []


def test_abort_reaches_the_sink_with_none_messages():
    sink = MemorySink()
    ProtocolWriter(sink, ProtocolOptions()).abort([None, _message(1)], 7)
    assert sink.aborted == [7]


@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_driver_fault_points(point):
    sink = MemorySink()
    writer = ProtocolWriter(sink, ProtocolOptions(faults=FaultPlan(point, "fail", batch=7)))
    with pytest.raises(InjectedFault):
        writer.commit([_message(0)], 7)
    assert sink.batches == ([("q1", 7)] if point == "after_commit" else [])
    writer.commit([_message(0)], 8)  # another batch: no fault
    assert sink.batches[-1] == ("q1", 8)


def test_fault_plan_parsing():
    plan = FaultPlan.parse("point=mid_write,action=crash,batch=1,partition=0,attempt=0")
    assert plan == FaultPlan("mid_write", "crash", 1, 0, 0)
    assert plan.matches("mid_write", 1, 0, 0) and not plan.matches("mid_write", 1, 0, 1)
    assert FaultPlan.parse("point=after_commit,action=fail").matches("after_commit", 99)
    assert FaultPlan.parse(None) is None
    for bad in ("point=nowhere,action=fail", "point=mid_write", "point=mid_write,action=fail,batch=x", "garbage"):
        with pytest.raises(OptionError, match="faultInjection"):
            FaultPlan.parse(bad)


def _batches(*sizes):
    start = 0
    for size in sizes:
        yield pa.RecordBatch.from_pydict({"x": pa.array(np.arange(start, start + size))})
        start += size


def test_feed_counts_once_and_replays_for_a_retry():
    feed = _Feed(_batches(3, 4), None)
    first = iter(feed())
    assert next(first).num_rows == 3  # a sink that failed after the first batch
    again = [b.num_rows for b in feed()]
    assert again == [3, 4] and feed.rows == 7


def test_feed_splits_the_first_batch_for_a_mid_write_fault():
    fired = []
    feed = _Feed(_batches(10, 5), lambda: fired.append(True))
    seen = []
    for batch in feed():
        seen.append((batch.num_rows, bool(fired)))
    assert seen == [(5, False), (5, True), (5, True)]
    assert feed.rows == 15


def test_check_is_retried_while_transient(tmp_path):
    sink = MemorySink(checks_failing=2)
    fast = {"writeRetries": "3", "retryBackoff": "1ms", "retryBackoffMax": "2ms"}
    writer = stream_writer(fast, name="memory sink", build=lambda reader: sink)
    assert writer.sink is sink and sink.checks_failing == 0
    refused = stream_writer({**fast, "writeRetries": "0"}, name="memory sink", build=lambda reader: MemorySink(1))
    with pytest.raises(TransientError, match="cannot reach"):
        pickle.dumps(refused)  # Spark ships the writer to its tasks: the query fails as it starts


def test_a_failed_check_fails_the_start_and_the_commit_but_not_the_abort():
    """Spark asks for a writer before it says whether to ship it, commit or abort: an abort after the target
    changed (a topic deleted) must not fail on the check that found the change."""
    sink = MemorySink(checks_failing=1)
    writer = stream_writer({"writeRetries": "0"}, name="memory sink", build=lambda reader: sink)
    with pytest.raises(TransientError, match="cannot reach"):
        pickle.dumps(writer)
    with pytest.raises(TransientError, match="cannot reach"):
        writer.commit([_message(0)], 7)
    writer.abort([None, _message(1)], 7)
    assert sink.aborted == [7] and sink.batches == []


def test_unknown_option_is_named():
    with pytest.raises(OptionError, match="noSuchOption"):
        stream_writer({"noSuchOption": "1"}, name="memory sink", build=lambda reader: MemorySink())


def test_retry_is_bounded_and_honours_retry_after():
    calls, waits = [], []

    def flaky():
        calls.append(1)
        error = TransientError("busy")
        error.retry_after_s = 0.5 if len(calls) == 1 else None
        raise error

    retry = Retry(attempts=3, backoff=Backoff(0.01, 0.04))
    with pytest.raises(TransientError):
        retry.call(flaky, sleep=waits.append)
    assert len(calls) == 3 and waits[0] == 0.16 and 0.005 <= waits[1] <= 0.04


def test_backoff_is_capped():
    backoff = Backoff(0.1, 1.0)
    assert all(0.5 <= backoff.delay(n) <= 1.0 for n in range(5, 40))


def _fingerprint(feed: _Feed, consume: bool = True) -> Fingerprint:
    if consume:
        for _ in feed():
            pass
    else:
        feed.drain()
    return feed.fingerprint()


def test_the_fingerprint_is_the_input_whatever_the_split_or_the_way_it_was_read():
    plain = _fingerprint(_Feed(_batches(10, 5), None))
    assert plain == _fingerprint(_Feed(_batches(10, 5), lambda: None))  # a mid_write split
    assert plain == _fingerprint(_Feed(_batches(10, 5), None), consume=False)  # skipped: drained
    assert plain.rows == 15 and Fingerprint.parse(str(plain)) == plain
    assert _fingerprint(_Feed(_batches(7, 8), None)) != plain  # same rows, other batches: another input
    assert _fingerprint(_Feed(_batches(10, 4), None)).rows == 14
    assert Fingerprint.parse(b"12") is None and Fingerprint.parse(None) is None
    assert Fingerprint.parse(str(plain) + ".pri0") == plain == Fingerprint.parse(str(plain) + "\x00")  # bytes past ours


class _RecordedSink(MemorySink):
    """Holds one record of batch 7 partition 0, written from `recorded`."""

    def __init__(self, recorded):
        super().__init__()
        self.recorded, self.written = recorded, None

    def is_committed(self, conn, identity):
        return self.recorded or False

    def write(self, conn, identity, batches):
        for _ in batches:
            pass
        self.written = fingerprint_of(batches)


@pytest.fixture
def in_a_task(monkeypatch):
    monkeypatch.setattr(WriteIdentity, "current", classmethod(lambda cls, commit_id=None, batch_id=None: WriteIdentity("q1", 7, 0, 0)))


def test_a_replayed_partition_with_other_rows_is_refused_and_the_same_rows_are_skipped(in_a_task):
    first = _RecordedSink(None)
    ProtocolWriter(first, ProtocolOptions()).write(_batches(10, 5))
    assert first.written == _fingerprint(_Feed(_batches(10, 5), None))  # what the record keeps
    same = ProtocolWriter(_RecordedSink(first.written), ProtocolOptions()).write(_batches(10, 5))
    assert same.skipped and same.rows == 15
    with pytest.raises(PartitioningChangedError, match="batch 7 partition 0 .* from 15 rows .* 6 rows.*"
                                                       "partitioning before the sink changed"):
        ProtocolWriter(_RecordedSink(first.written), ProtocolOptions()).write(_batches(6))
    legacy = ProtocolWriter(_RecordedSink(True), ProtocolOptions()).write(_batches(6))  # a record without one
    assert legacy.skipped


def test_the_driver_refuses_a_batch_whose_records_show_more_partitions():
    class Wider(MemorySink):
        def committed_beyond(self, commit_id, batch_id, partitions):
            return [p for p in (2, 3, 4) if p >= partitions]

    sink = Wider()
    with pytest.raises(PartitioningChangedError, match="batch 7 of q1 ran with 2 partitions.*\\[2, 3, 4\\].*"
                                                       "partitioning before the sink changed"):
        ProtocolWriter(sink, ProtocolOptions()).commit([_message(0), _message(1)], 7)
    assert sink.batches == []
    ProtocolWriter(sink, ProtocolOptions()).commit([_message(p) for p in range(5)], 7)
    assert sink.batches == [("q1", 7)]
