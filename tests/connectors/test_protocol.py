"""The protocol's driver side and its pieces, with an in-memory sink (no Spark, no server)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from connectors.errors import CommitError, OptionError, TransientError
from connectors.faults import FaultPlan, InjectedFault
from connectors.protocol import CommitMessage, ProtocolOptions, ProtocolWriter, Sink, _Feed, stream_writer
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


def _message(partition, rows=10, skipped=False, attempt=0):
    return CommitMessage("q1", 7, partition, attempt, rows=rows, bytes=rows * 8, skipped=skipped,
                         started_us=1, acked_us=2)


def test_commit_records_the_batch_and_appends_metrics(tmp_path):
    sink, metrics = MemorySink(), tmp_path / "m.jsonl"
    writer = ProtocolWriter(sink, ProtocolOptions(metrics_path=str(metrics)))
    writer.commit([_message(0), _message(1, skipped=True, attempt=1)], 7)
    assert sink.batches == [("q1", 7)]
    [line] = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert (line["batchId"], line["rows"], line["writtenRows"]) == (7, 20, 10)
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
        yield pa.record_batch({"x": pa.array(np.arange(start, start + size))})
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
    with pytest.raises(TransientError, match="cannot reach"):
        stream_writer({**fast, "writeRetries": "0"}, name="memory sink", build=lambda reader: MemorySink(1))


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
