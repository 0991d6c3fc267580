"""The conformance suite's batch-write cases (``df.write.format(<sink>).mode("append").save()``).

A mixin: a test class that already subclasses `SinkConformance` (and so has its ``adapter``,
``namespace`` and ``check_landed``) adds it to run these cases too::

    class TestMySinkConformance(SinkConformance, BatchWriteConformance):
        ...

Every case writes a batch DataFrame of impulse-shaped rows (``subtask_index``, ``counter``,
``timestamp``; ``(subtask_index, counter)`` unique) in `PARTITIONS` Spark partitions and reads back
what landed with the adapter's own client. The cases (see `connectors.batch` for the identity of a
batch write):

1. a batch write lands exactly once; a re-run with the same ``commitId`` lands nothing new (and,
   for a sink that finds its commit records, writes nothing); a re-run without ``commitId`` is a
   new write (everything lands twice);
2. an executor crash in the middle of a partition, on the first attempt: Spark's task retry
   finishes the write, exactly once; a failure on every attempt fails the write, and a re-run
   with the same ``commitId`` completes it exactly once;
3. one large write (`large_batch` rows, with a task killed mid-write and retried, then re-run with the
   same ``commitId``): the acceptance case of each sink;
4. bad options, ``overwrite`` and Spark's default ``errorifexists`` mode: a clear error, nothing written.
"""

from __future__ import annotations

from typing import Mapping

import pytest

from connectors.conformance.adapter import SinkAdapter
from connectors.conformance.harness import PARTITIONS, expected_events, failure_of, read_metrics

__all__ = ["BatchWriteConformance", "batch_frame", "write_batch"]


def batch_frame(spark, rows: int, partitions: int = PARTITIONS):
    """`rows` impulse-shaped rows in `partitions` partitions: row i is event ``(i % partitions, i // partitions)``.

    The same events as `expected_events` (rows, partitions); deterministic, so a retried task or a
    re-run writes the same rows in the same partitions.
    """
    return (spark.range(0, rows, 1, partitions)
            .selectExpr(f"CAST(id DIV {partitions} AS BIGINT) AS counter", f"CAST(id % {partitions} AS INT) AS subtask_index",
                        "timestamp_micros(1700000000000000 + id) AS timestamp"))


def write_batch(spark, adapter: SinkAdapter, namespace: str, rows: int, *, options: Mapping[str, str] | None = None,
                mode: str | None = "append") -> None:
    """Write `rows` rows (`batch_frame`) to the adapter's target in one batch job; raise what the job raised.

    ``mode=None`` leaves Spark's default save mode (``errorifexists``).
    """
    writer = (adapter.frame(batch_frame(spark, rows)).write.format(adapter.format)
              .options(**adapter.options(namespace)).options(**dict(options or {})))
    if mode is not None:
        writer = writer.mode(mode)
    writer.save()


class BatchWriteConformance:
    """The batch-write cases; mix into a `SinkConformance` subclass (see the module docstring)."""

    #: rows of the ordinary batch cases, and of the large one
    batch_rows = 3_000
    large_batch = 1_000_000

    # 1 -------------------------------------------------------------------------------------------
    def test_batch_write_lands_once(self, spark, adapter, namespace, tmp_path):
        metrics = tmp_path / "metrics.jsonl"
        write_batch(spark, adapter, namespace, self.batch_rows, options={"metricsPath": str(metrics)})
        self.check_landed(adapter, namespace, self.batch_rows)
        if adapter.reports_metrics:
            [batch] = read_metrics(metrics)
            assert (batch["batchId"], batch["rows"], batch["partitions"]) == (0, self.batch_rows, PARTITIONS)
            assert batch["commitId"].startswith("batch-"), batch["commitId"]

    def test_batch_rerun_with_same_commit_id_lands_nothing_new(self, spark, adapter, namespace, tmp_path):
        metrics = tmp_path / "metrics.jsonl"
        options = {"commitId": f"{namespace}-job", "metricsPath": str(metrics)}
        write_batch(spark, adapter, namespace, self.batch_rows, options=options)
        first = sorted(adapter.read_back(namespace))
        write_batch(spark, adapter, namespace, self.batch_rows, options=options)
        assert sorted(adapter.read_back(namespace)) == first, "the re-run with the same commitId changed the target"
        self.check_landed(adapter, namespace, self.batch_rows)
        if adapter.reports_metrics and adapter.skips_replays:
            rerun = read_metrics(metrics)[-1]
            assert rerun["writtenRows"] == 0 and rerun["skippedPartitions"] == PARTITIONS, rerun

    def test_batch_rerun_without_commit_id_is_a_new_write(self, spark, adapter, namespace, tmp_path):
        write_batch(spark, adapter, namespace, self.batch_rows)
        write_batch(spark, adapter, namespace, self.batch_rows)
        self.check_landed(adapter, namespace, self.batch_rows, expected=expected_events(self.batch_rows) * 2)

    # 2 -------------------------------------------------------------------------------------------
    def test_batch_task_crash_is_retried_exactly_once(self, spark, adapter, namespace, tmp_path):
        if not adapter.supports_fault_injection:
            pytest.skip(f"{adapter.format} has no faultInjection option")
        metrics = tmp_path / "metrics.jsonl"
        write_batch(spark, adapter, namespace, self.batch_rows, options={
            "faultInjection": "point=mid_write,action=crash,batch=0,partition=0,attempt=0", "metricsPath": str(metrics)})
        self.check_landed(adapter, namespace, self.batch_rows)
        if adapter.reports_metrics:
            [batch] = read_metrics(metrics)
            assert batch["retriedPartitions"] == 1, "the fault never fired"

    def test_batch_failing_every_attempt_then_rerun(self, spark, adapter, namespace, tmp_path):
        if not adapter.supports_fault_injection:
            pytest.skip(f"{adapter.format} has no faultInjection option")
        options = {"commitId": f"{namespace}-job"}
        failure = failure_of(lambda: write_batch(spark, adapter, namespace, self.batch_rows, options={
            **options, "faultInjection": "point=after_write,action=fail,batch=0,partition=0"}))
        assert failure is not None, "the write survived a fault on every attempt"
        assert "injected fault" in str(failure), str(failure)[-2000:]
        write_batch(spark, adapter, namespace, self.batch_rows, options=options)
        self.check_landed(adapter, namespace, self.batch_rows)

    # 3 -------------------------------------------------------------------------------------------
    def test_batch_large_write(self, spark, adapter, namespace, tmp_path):
        """The acceptance case: a task killed mid-write is retried, and a re-run changes nothing."""
        options = {"commitId": f"{namespace}-large"}
        faults = {"faultInjection": "point=mid_write,action=crash,batch=0,partition=1,attempt=0"} \
            if adapter.supports_fault_injection else {}
        write_batch(spark, adapter, namespace, self.large_batch, options={**options, **faults})
        landed = self.check_landed(adapter, namespace, self.large_batch)
        write_batch(spark, adapter, namespace, self.large_batch, options=options)
        again = adapter.read_back(namespace)
        assert len(again) == len(landed), "the re-run with the same commitId changed the target"
        self.check_landed(adapter, namespace, self.large_batch, landed=again)

    # 4 -------------------------------------------------------------------------------------------
    def test_batch_bad_options_fail(self, spark, adapter, namespace, tmp_path):
        cases = [({"noSuchOption": "1"}, "noSuchOption"), *adapter.bad_options()]
        for overrides, word in cases:
            self._expect_failure(adapter, namespace, lambda: write_batch(spark, adapter, namespace, 10,
                                                                         options=overrides), word)  # noqa: B023 - called within this iteration

    def test_batch_overwrite_mode_fails(self, spark, adapter, namespace):
        message = self._expect_failure(adapter, namespace, lambda: write_batch(spark, adapter, namespace, 10,
                                                                               mode="overwrite"), "overwrite")
        assert "option 'mode'" in message and 'mode("append")' in message, message[-2000:]

    def test_batch_default_and_ignore_modes_fail(self, spark, adapter, namespace):
        """Spark refuses these modes for any Python data source, naming the mode (what a user sees)."""
        for mode, word in ((None, "ErrorIfExists"), ("ignore", "Ignore")):
            message = self._expect_failure(adapter, namespace, lambda: write_batch(spark, adapter, namespace, 10,
                                                                                   mode=mode), word)  # noqa: B023 - called within this iteration
            assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" in message, message[-2000:]

    def _expect_failure(self, adapter: SinkAdapter, namespace: str, fn, word: str) -> str:
        failure = failure_of(fn)
        assert failure is not None, f"{self.case}: the write succeeded, expected an error naming {word!r}"
        message = str(failure)
        assert word.lower() in message.lower(), f"the error does not name {word!r}: {message[-2000:]}"
        assert adapter.read_back(namespace) == [], "rows were written despite the error"
        return message
