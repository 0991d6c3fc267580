"""The conformance suite: pytest tests that prove a sink keeps the offset-commit protocol, against a real target.

To run it for a sink, subclass `SinkConformance` in a test module and provide an ``adapter`` fixture
returning a `connectors.conformance.adapter.SinkAdapter`; a session-scoped ``spark`` fixture must
exist (``pytest_plugins = ["connectors.conformance.plugin"]`` in a conftest gives one)::

    class TestMySinkConformance(SinkConformance):
        @pytest.fixture(scope="class")
        def adapter(self):
            return MySinkAdapter(url=...)

Every test writes impulse events — ``(subtask_index, counter)`` is each one's unique key — and reads
back everything that landed: the check is always the exact multiset, so a lost event and a duplicate
both fail. The cases (after Flink's connector test framework, Airbyte's acceptance tests and Spark's
StreamTest):

1. basic write over several micro-batches, with a partition left empty;
2. micro-batches with no rows at all, one large micro-batch (1M rows), and unusual data (nulls, empty
   strings, non-ASCII text, a 1 MiB value, column names with spaces and dots);
3. the fault-injection points (`connectors.faults`): an executor crash on the first attempt (Spark's
   task retry recovers), a failure on every attempt and driver-side faults (the query fails and is
   restarted from its checkpoint) — each kind of recovery once (`QUICK_FAULT_CASES`), every point with
   every action with ``IMPULSE_FULL_SWEEP=1``;
4. the driver process killed with SIGKILL mid-stream (with its Python workers), then restarted; a
   crash mid-write that leaves a batch partly committed, then a restart whose input has another
   number of partitions (``repartition(2)`` → ``repartition(5)``, and 5 → 2 with ``IMPULSE_FULL_SWEEP=1``): exactly-once, or the
   query fails naming the changed partitioning (silent loss or duplication fails); the target restarted
   (`SinkAdapter.restart_target`; skipped without it) while a partition is stalled half-written, then
   resumed; a slow target (every partition's write delayed): all lands once, or a clear timeout;
5. a batch replayed by Spark after its commit was lost, and commit called twice for one batch;
6. bad options and an unreachable target: a clear error at query start and nothing written;
7. metrics: the rows and batches the sink reports equal what landed, and so does the query's
   ``numOutputRows``;
8. two queries with different ``commitId``s writing the same events into one target at once: each
   query's copy lands once;
9. the network (`connectors.conformance.network`: a Toxiproxy proxy between the sink and its target;
   skipped for an adapter without `SinkAdapter.network_route`): a cut at every round trip of one
   partition's write — a close one byte short of each request, right after each request (the last one
   too: the write applied, its acknowledgement lost), right after each reply; a reset after each request;
   a stall after each request or reply, held until the sink gives up (the adapter's `cut_kinds` pick the
   kinds, all with ``IMPULSE_FULL_SWEEP=1``) — each in its own run, the protocol and Spark retrying (and
   the query restarted from its checkpoint if it failed): exactly-once after each; and a bad network
   (latency with jitter, a bandwidth cap, a slow close on every connection): the
   query keeps up, or fails with an error naming the sink and completes once restarted, exactly-once
   either way;
10. poison records (`connectors.conformance.poison`; skipped for an adapter without `SinkAdapter.poison`):
   rows the target refuses for good go to the sink's dead-letter target exactly once and all others land
   once, across a crash in the middle of the write and its replay; without that target the query fails
   naming the row, with nothing of the batch committed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from connectors.conformance.adapter import SinkAdapter
from connectors.conformance.harness import (
    PARTITIONS,
    Override,
    Verdict,
    await_query,
    compare,
    data_source_class,
    expected_events,
    failure_of,
    fresh_namespace,
    impulse_stream,
    kill_tree,
    read_metrics,
    run_query,
    start_query,
    wait_for_stall,
)
from connectors.conformance.network import CUT_KINDS, DOWN, FULL_SWEEP_ENV, UP, Cut, cut_points, network_for
from connectors.conformance.poison import PoisonRecordConformance
from connectors.partitions import split_limit
from connectors.protocol import CommitMessage

# the harness's names a suite author uses, offered here as before (their home is `connectors.conformance.harness`)
__all__ = ["SinkConformance", "PARTITIONS", "Verdict", "compare", "expected_events", "run_query", "start_query",
           "await_query"]

EXACTLY_ONCE, AT_LEAST_ONCE = "exactly_once", "at_least_once"


EXECUTOR_POINTS = ("before_write", "mid_write", "after_write")
DRIVER_POINTS = ("before_commit", "after_commit")
FAULT_CASES = ([(p, "crash", 0) for p in EXECUTOR_POINTS] + [(p, "fail", None) for p in EXECUTOR_POINTS]
               + [(p, a, None) for p in DRIVER_POINTS for a in ("fail", "crash")])
#: the fault matrix without ``IMPULSE_FULL_SWEEP=1`` (CI time): every kind of recovery once — Spark's task retry
#: over a partly and over a wholly written partition, a query restarted over a partly written partition, a
#: whole batch replayed after the driver failed before and after the commit record. Left out: the faults before
#: the write (nothing to recover) and the second action at a point whose recovery another case already takes.
QUICK_FAULT_CASES = (("mid_write", "crash", 0), ("after_write", "crash", 0), ("mid_write", "fail", None),
                     ("before_commit", "crash", None), ("after_commit", "fail", None))
#: (partitions before the crash, after the restart) of `test_repartition_after_crash`; the first only without
#: ``IMPULSE_FULL_SWEEP=1``
REPARTITIONS = ((2, 5), (5, 2))


def full_sweep() -> bool:
    """Whether ``IMPULSE_FULL_SWEEP=1`` asks for the full matrices (faults, repartitions, cut kinds)."""
    return os.environ.get(FULL_SWEEP_ENV) == "1"


def _fault_id(case: tuple[str, str, int | None]) -> str:
    point, action, attempt = case
    return f"{point}-{action}-{'first-attempt' if attempt == 0 else 'every-attempt'}"


class SinkConformance(PoisonRecordConformance):
    """The suite; subclass it and provide an ``adapter`` fixture (see the module docstring)."""

    #: the fault matrix of `test_fault_injection`: (point, action, attempt or None for every attempt); None:
    #: `QUICK_FAULT_CASES`, every case of `FAULT_CASES` with ``IMPULSE_FULL_SWEEP=1``
    fault_cases: tuple[tuple[str, str, int | None], ...] | None = None

    def pytest_generate_tests(self, metafunc) -> None:
        if "fault_case" in metafunc.fixturenames:
            cases = metafunc.cls.fault_cases or (FAULT_CASES if full_sweep() else QUICK_FAULT_CASES)
            metafunc.parametrize("fault_case", cases, ids=[_fault_id(c) for c in cases])
        if "repartition" in metafunc.fixturenames:
            cases = metafunc.cls.repartitions or (REPARTITIONS if full_sweep() else REPARTITIONS[:1])
            metafunc.parametrize("repartition", cases, ids=[f"{a}-to-{b}" for a, b in cases])

    #: events of the standard run, and events per micro-batch (so the run has several batches)
    limit = 3_000
    per_trigger = 1_000
    #: events of the large micro-batch
    large = 1_000_000

    @pytest.fixture
    def namespace(self, adapter: SinkAdapter):
        """A fresh namespace per test, prepared before and cleaned after."""
        with fresh_namespace(adapter) as name:
            yield name

    @pytest.fixture(scope="class")
    @classmethod
    def network(cls, adapter: SinkAdapter, request):
        """The proxy in front of the adapter's target (`connectors.conformance.network.Network`); the
        ``toxiproxy`` fixture is asked for only when the adapter can be routed."""
        if adapter.network_route() is None:
            pytest.skip(f"{type(adapter).__name__} has no network_route: the network cases need a proxy in front "
                        "of its target")
        with network_for(adapter, request.getfixturevalue("toxiproxy")) as network:
            yield network

    #: cases this class runs only with ``IMPULSE_FULL_SWEEP=1`` (skipped, saying so, without it): for a class that
    #: repeats another's matrix over a variant (a cluster, a record format) where those cases test nothing the
    #: variant changes
    full_sweep_only: tuple[str, ...] = ()

    @pytest.fixture(autouse=True)
    def _case(self, request):
        """The running case's name (``test_fault_injection[mid_write-crash-first-attempt]``), for messages."""
        self.case = request.node.name
        self.node = request.node
        if request.node.originalname in self.full_sweep_only and not full_sweep():
            pytest.skip(f"{type(self).__name__} runs {request.node.originalname} only with {FULL_SWEEP_ENV}=1 "
                        "(the reduced matrix for CI time)")

    def breaks_guarantee(self, adapter: SinkAdapter, verdict: Verdict) -> bool:
        """Whether `verdict` breaks the adapter's guarantee: a loss or an unexpected event always, a
        duplicate unless the guarantee is ``at_least_once``."""
        at_least_once = getattr(adapter, "guarantee", EXACTLY_ONCE) == AT_LEAST_ONCE
        return bool(verdict.lost or verdict.unexpected or (verdict.duplicated and not at_least_once))

    def check_landed(self, adapter: SinkAdapter, namespace: str, limit: int,
                     expected: list[tuple[int, int]] | None = None,
                     landed: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
        """Fail unless exactly the `expected` events (default: impulse's first `limit`) landed, each once;
        return what landed, sorted (`landed`: what the caller already read back, default: read it now).

        The message names the case and counts the lost and the duplicated events. Under the
        adapter's ``at_least_once`` guarantee duplicates are allowed: counted (the test's
        ``duplicates`` property in the report), not failed.
        """
        landed = sorted(adapter.read_back(namespace) if landed is None else landed)
        expected = expected_events(limit) if expected is None else sorted(expected)
        verdict = compare(landed, expected)
        self.node.user_properties.append(("duplicates", verdict.duplicated))
        if self.breaks_guarantee(adapter, verdict):
            pytest.fail(f"{self.case}: {verdict}", pytrace=False)
        return landed

    # 1 -------------------------------------------------------------------------------------------
    def test_basic_write(self, spark, adapter, namespace, tmp_path):
        query = run_query(spark, adapter, namespace, tmp_path / "ck", limit=self.limit, per_trigger=self.per_trigger)
        assert sum(p["numInputRows"] for p in query.recentProgress) == self.limit
        self.check_landed(adapter, namespace, self.limit)

    def test_empty_partition(self, spark, adapter, namespace, tmp_path):
        run_query(spark, adapter, namespace, tmp_path / "ck", limit=self.limit, where="subtask_index = 0")
        landed = sorted(adapter.read_back(namespace))
        assert landed == [e for e in expected_events(self.limit) if e[0] == 0]

    # 2 -------------------------------------------------------------------------------------------
    def test_batches_without_rows(self, spark, adapter, namespace, tmp_path):
        metrics = tmp_path / "metrics.jsonl"
        query = run_query(spark, adapter, namespace, tmp_path / "ck", limit=self.limit, per_trigger=self.per_trigger,
                          where="counter < 0", options={"metricsPath": str(metrics)})
        assert len(query.recentProgress) >= 2
        assert adapter.read_back(namespace) == []
        assert [m["rows"] for m in read_metrics(metrics)] == [0] * len(read_metrics(metrics))

    def test_unusual_data(self, spark, adapter, namespace, tmp_path):
        """Nulls, empty strings, non-ASCII text, one large value per partition, column names with spaces and dots."""
        big = adapter.large_value_bytes
        columns = ["counter", "subtask_index", "timestamp",
                   "CASE WHEN counter % 3 = 0 THEN NULL ELSE 'grüße, 東京, emoji 🚀, back\\\\slash, \"quoted\"' END AS `text with spaces`",
                   "'' AS `dotted.name`", "CAST(NULL AS BIGINT) AS `null long`",
                   f"CASE WHEN counter = 1 THEN repeat('x', {big}) END AS large"]
        run_query(spark, adapter, namespace, tmp_path / "ck", limit=self.limit, per_trigger=self.per_trigger,
                  columns=columns)
        self.check_landed(adapter, namespace, self.limit)

    def test_large_batch(self, spark, adapter, namespace, tmp_path):
        query = run_query(spark, adapter, namespace, tmp_path / "ck", limit=self.large, timeout=600)
        assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [self.large]
        self.check_landed(adapter, namespace, self.large)

    # 3 -------------------------------------------------------------------------------------------
    def test_fault_injection(self, spark, adapter, namespace, tmp_path, fault_case):
        if not adapter.supports_fault_injection:
            pytest.skip(f"{adapter.format} has no faultInjection option")
        point, action, attempt = fault_case
        checkpoint, metrics = tmp_path / "ck", tmp_path / "metrics.jsonl"
        fault = f"point={point},action={action},batch=1,partition=0" + ("" if attempt is None else f",attempt={attempt}")
        failure = failure_of(lambda: run_query(spark, adapter, namespace, checkpoint, limit=self.limit,
                                               per_trigger=self.per_trigger,
                                               options={"faultInjection": fault, "metricsPath": str(metrics)}))
        if attempt is None:
            assert failure is not None, f"the query survived a fault on every attempt at {point}"
        else:
            assert failure is None, f"Spark's task retry should have recovered from {point}: {failure}"
            batch = [m for m in read_metrics(metrics) if m["batchId"] == 1]
            assert batch and batch[0]["retriedPartitions"] >= 1, "the fault never fired"
        run_query(spark, adapter, namespace, checkpoint, limit=self.limit, per_trigger=self.per_trigger,
                  options={"metricsPath": str(metrics)})
        self.check_landed(adapter, namespace, self.limit)
        reported = sum(m["rows"] for m in read_metrics(metrics))
        assert reported == self.limit, f"metrics report {reported} rows committed, {self.limit} landed"

    #: (partitions before the crash, partitions after the restart) of `test_repartition_after_crash`; None:
    #: 2 → 5, and 5 → 2 too with ``IMPULSE_FULL_SWEEP=1``
    repartitions: tuple[tuple[int, int], ...] | None = None
    #: words of the error a sink must give when it refuses a replayed batch whose partitioning changed
    repartition_words = ("partitioning before the sink changed",)

    def test_repartition_after_crash(self, spark, adapter, namespace, tmp_path, repartition):
        """A crash mid-write leaves batch 1 partly committed; the restart's input has another number of partitions.

        Pass: everything landed exactly once (at least once under that guarantee), or the restarted query
        failed with an error naming the cause (`repartition_words`). Silent loss or duplication fails.
        """
        if not adapter.supports_fault_injection:
            pytest.skip(f"{adapter.format} has no faultInjection option")
        before, after = repartition
        checkpoint = tmp_path / "ck"
        fault = "point=mid_write,action=crash,batch=1,partition=0"
        failure = failure_of(lambda: run_query(spark, adapter, namespace, checkpoint, limit=self.limit,
                                               per_trigger=self.per_trigger, repartition=before,
                                               options={"faultInjection": fault}))
        assert failure is not None, "the query survived a crash on every attempt of batch 1 partition 0"
        failure = failure_of(lambda: run_query(spark, adapter, namespace, checkpoint, limit=self.limit,
                                               per_trigger=self.per_trigger, repartition=after))
        self.node.user_properties.append(("refused", failure is not None))
        if failure is None:
            self.check_landed(adapter, namespace, self.limit)
            return
        text = str(failure)
        if not any(word.lower() in text.lower() for word in self.repartition_words):
            verdict = compare(sorted(adapter.read_back(namespace)), expected_events(self.limit))
            pytest.fail(f"{self.case}: the restart with {after} partitions failed without naming the changed "
                        f"partitioning ({verdict}): {text[-1500:]}", pytrace=False)

    def test_target_restarted_mid_batch(self, spark, adapter, namespace, tmp_path):
        """The target restarts (same address, same data) while a partition of batch 1 is half written.

        The task is stalled at ``mid_write`` (`connectors.faults`, action ``stall``), the adapter restarts
        the target, then the task resumes on its now-broken connection: the protocol's retries carry it.
        """
        if not adapter.supports_fault_injection:
            pytest.skip(f"{adapter.format} has no faultInjection option")
        if not adapter.restarts_target:
            pytest.skip(f"{type(adapter).__name__} cannot restart its target (SinkAdapter.restart_target)")
        options = {"faultInjection": "point=mid_write,action=stall,batch=1,partition=0,attempt=0",
                   "writeRetries": "10", "retryBackoff": "200ms", "retryBackoffMax": "2s"}
        query = start_query(spark, adapter, namespace, tmp_path / "ck", limit=self.limit,
                            per_trigger=self.per_trigger, options=options)
        try:
            stalled = wait_for_stall(query, timeout=120)
            adapter.restart_target()
            os.kill(stalled, signal.SIGUSR1)
            await_query(query)
        finally:
            query.stop()
        self.check_landed(adapter, namespace, self.limit)

    #: the delay of every partition's write in `test_slow_target`
    slow_write_ms = 500

    def test_slow_target(self, spark, adapter, namespace, tmp_path):
        """Every partition's write is delayed mid-write (``action=delay``): a slow target. All events land
        once and every batch commits, or the query fails naming a timeout."""
        if not adapter.supports_fault_injection:
            pytest.skip(f"{adapter.format} has no faultInjection option")
        metrics = tmp_path / "metrics.jsonl"
        fault = f"point=mid_write,action=delay,ms={self.slow_write_ms}"
        failure = failure_of(lambda: run_query(spark, adapter, namespace, tmp_path / "ck", limit=self.limit,
                                               per_trigger=self.per_trigger,
                                               options={"faultInjection": fault, "metricsPath": str(metrics)}))
        self.node.user_properties.append(("failed", failure is not None))
        if failure is not None:
            assert any(word in str(failure).lower() for word in ("timeout", "timed out")), \
                f"{self.case}: the query failed without naming a timeout: {str(failure)[-1500:]}"
            return
        self.check_landed(adapter, namespace, self.limit)
        batches = [m for m in read_metrics(metrics) if m["rows"]]
        assert sum(m["rows"] for m in batches) == self.limit, f"{self.case}: not every batch committed: {batches}"
        slow = [m["ackUs"] - m["writeStartUs"] >= self.slow_write_ms * 1000 for m in batches]
        assert all(slow), f"{self.case}: the delay did not slow every batch's write: {slow}"

    # 4 -------------------------------------------------------------------------------------------
    def test_driver_killed_mid_stream(self, spark, adapter, namespace, tmp_path):
        checkpoint = tmp_path / "ck"
        limit = 20_000
        source = data_source_class(spark, adapter)
        args = {"format": adapter.format, "options": dict(adapter.options(namespace)), "checkpoint": str(checkpoint),
                "limit": limit, "per_trigger": 500, "partitions": PARTITIONS, "columns": list(adapter.extra_columns),
                "data_source": f"{source.__module__}:{source.__qualname__}"}
        process = subprocess.Popen([sys.executable, "-m", "connectors.conformance.driver", json.dumps(args)],
                                   start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        commits = checkpoint / "commits"
        try:
            deadline = time.monotonic() + 180
            while len([f for f in commits.glob("[0-9]*")]) < 3:
                if process.poll() is not None:
                    pytest.fail(f"the driver exited early: {process.stderr.read().decode()[-2000:]}")
                if time.monotonic() > deadline:
                    pytest.fail("the driver committed no 3 batches in 180s")
                time.sleep(0.05)
        finally:
            kill_tree(process.pid)
            process.wait(30)
        landed_before = len(adapter.read_back(namespace))
        assert 0 < landed_before < limit, "the kill came too late to cut the stream"
        run_query(spark, adapter, namespace, checkpoint, limit=limit, per_trigger=5_000)
        self.check_landed(adapter, namespace, limit)

    # 5 -------------------------------------------------------------------------------------------
    def test_replayed_batch_is_skipped(self, spark, adapter, namespace, tmp_path):
        checkpoint, metrics = tmp_path / "ck", tmp_path / "metrics.jsonl"
        metric_options = {"metricsPath": str(metrics)} if adapter.reports_metrics else {}
        run_query(spark, adapter, namespace, checkpoint, limit=self.limit, per_trigger=self.per_trigger)
        last = max(int(f.name) for f in (checkpoint / "commits").glob("[0-9]*"))
        for name in (str(last), f".{last}.crc"):  # as if the driver died before Spark logged the commit
            (checkpoint / "commits" / name).unlink(missing_ok=True)
        run_query(spark, adapter, namespace, checkpoint, limit=self.limit, per_trigger=self.per_trigger,
                  options=metric_options)
        self.check_landed(adapter, namespace, self.limit)
        if not adapter.reports_metrics:
            return
        replay = [m for m in read_metrics(metrics) if m["batchId"] == last]
        assert replay and replay[0]["rows"] > 0, "Spark did not replay the batch"
        if adapter.skips_replays:
            assert replay[0]["writtenRows"] == 0
            assert replay[0]["skippedPartitions"] == replay[0]["partitions"] > 0

    def test_commit_twice(self, spark, adapter, namespace, tmp_path):
        query = run_query(spark, adapter, namespace, tmp_path / "ck", limit=self.limit, per_trigger=self.per_trigger)
        before = sorted(adapter.read_back(namespace))
        source = data_source_class(spark, adapter)
        schema = adapter.frame(impulse_stream(spark, 1)).schema
        writer = source(dict(adapter.options(namespace))).streamWriter(schema, False)
        last = query.lastProgress["batchId"]
        rows = split_limit(query.lastProgress["numInputRows"], PARTITIONS)  # as the tasks reported them
        messages = [CommitMessage(str(query.id), last, p, 0, rows=rows[p], skipped=True) for p in range(PARTITIONS)]
        writer.commit(messages, last)
        writer.commit(messages, last)
        assert sorted(adapter.read_back(namespace)) == before
        self.check_landed(adapter, namespace, self.limit)

    # 6 -------------------------------------------------------------------------------------------
    def test_unknown_option_fails_at_start(self, spark, adapter, namespace, tmp_path):
        self._expect_start_failure(spark, adapter, namespace, tmp_path, {"noSuchOption": "1"}, "noSuchOption")

    def test_bad_fault_plan_fails_at_start(self, spark, adapter, namespace, tmp_path):
        self._expect_start_failure(spark, adapter, namespace, tmp_path, {"faultInjection": "point=nowhere"},
                                   "faultInjection")

    def test_bad_options_fail_at_start(self, spark, adapter, namespace, tmp_path):
        cases = adapter.bad_options()
        assert cases, "the adapter lists no bad options to check"
        for i, (overrides, word) in enumerate(cases):
            self._expect_start_failure(spark, adapter, namespace, tmp_path / str(i), overrides, word)

    def test_unreachable_target_fails_at_start(self, spark, adapter, namespace, tmp_path):
        options = dict(adapter.unreachable_options(namespace))
        failure = failure_of(lambda: run_query(spark, Override(adapter, options), namespace, tmp_path / "ck",
                                               limit=self.limit, timeout=120))
        assert failure is not None, "writing to an unreachable target succeeded"
        assert adapter.unreachable_message.lower() in str(failure).lower(), str(failure)[-2000:]
        assert adapter.read_back(namespace) == []

    def _expect_start_failure(self, spark, adapter, namespace, tmp_path, overrides, word) -> None:
        failure = failure_of(lambda: run_query(spark, adapter, namespace, tmp_path / "ck", limit=self.limit,
                                               options=overrides))
        assert failure is not None, f"options {overrides} were accepted"
        assert word.lower() in str(failure).lower(), f"the error does not name {word!r}: {str(failure)[-2000:]}"
        assert adapter.read_back(namespace) == [], "rows were written despite bad options"

    # 7 -------------------------------------------------------------------------------------------
    def test_metrics_match_what_landed(self, spark, adapter, namespace, tmp_path):
        metrics = tmp_path / "metrics.jsonl"
        query = run_query(spark, adapter, namespace, tmp_path / "ck", limit=self.limit, per_trigger=self.per_trigger,
                          options={"metricsPath": str(metrics)})
        reported = read_metrics(metrics)
        landed = adapter.read_back(namespace)
        assert sum(m["rows"] for m in reported) == len(landed) == self.limit
        assert [m["batchId"] for m in reported if m["rows"]] == \
            [p["batchId"] for p in query.recentProgress if p["numInputRows"]]
        for m in reported:
            histogram = m["latency"]
            assert histogram["count"] == m["writtenRows"]
            assert m["writeStartUs"] <= m["ackUs"] <= m["committedUs"]
        output = [p["sink"]["numOutputRows"] for p in query.recentProgress]
        assert sum(output) == len(landed), f"{self.case}: numOutputRows {output} of the query's progress, {len(landed)} landed"

    # 8 -------------------------------------------------------------------------------------------
    def test_two_commit_ids_into_one_target(self, spark, adapter, namespace, tmp_path):
        queries = [start_query(spark, adapter, namespace, tmp_path / name, limit=self.limit, per_trigger=self.per_trigger,
                               options={"commitId": f"{namespace}-{name}"}) for name in ("a", "b")]
        for query in queries:
            await_query(query)
        self.check_landed(adapter, namespace, self.limit, expected=expected_events(self.limit) * 2)

    # 9 -------------------------------------------------------------------------------------------
    #: events of each run of the network cases (one micro-batch over `PARTITIONS` partitions)
    network_limit = 200
    #: the kinds of cut points `test_cut_at_every_round_trip` runs (keys of `connectors.conformance.network.KINDS`),
    #: None: the adapter's `SinkAdapter.cut_kinds`; every kind with ``IMPULSE_FULL_SWEEP=1``
    cut_kinds: tuple[str, ...] | None = None
    #: the bad network, on every connection: (toxic, direction, attributes); ms, KB/s
    bad_network: tuple[tuple[str, str, dict[str, int]], ...] = (
        ("latency", UP, {"latency": 20, "jitter": 15}), ("latency", DOWN, {"latency": 20, "jitter": 15}),
        ("bandwidth", UP, {"rate": 256}), ("bandwidth", DOWN, {"rate": 256}), ("slow_close", DOWN, {"delay": 300}))

    #: runs of one cut point that may miss it (the run's conversation differed before the point) before it counts
    #: as missed
    cut_tries = 3

    def test_cut_at_every_round_trip(self, spark, adapter, network, tmp_path):
        """Record one write's conversation through the proxy (the second: the first warms the client up), then cut
        it at each of its round trips in turn.

        Each cut is its own run in a fresh namespace: a toxic breaks the first connection that reaches the
        point and is removed once it fired (a stall: after `SinkAdapter.network_stall_s`); the protocol and Spark
        retry (a query that failed is restarted from its checkpoint, as a user would); then exactly the events
        of the run must have landed.

        A client's conversation is not the same in every run (a request retried or sent apart under load), so a
        cut is checked to have landed where it was recorded (`Cut.landed`: the same turns before its byte; a stall
        or a reset fires only there). One that did not is run again, up to `cut_tries` times; a run where nothing
        fired adds the points of its own write at bytes not cut yet, so a window that sits at other bytes in
        another shape of the conversation is not skipped because the recording had the first.
        """
        routed, limit = network.cut_adapter, self.network_limit
        network.proxy.clear()
        with fresh_namespace(adapter) as namespace:  # a client's first write in a process talks differently
            run_query(spark, routed, namespace, tmp_path / "warm", limit=limit)  # (librdkafka's, redis-py's)
        with fresh_namespace(adapter) as namespace:
            network.tap.reset()
            run_query(spark, routed, namespace, tmp_path / "recorded", limit=limit)
            self.check_landed(adapter, namespace, limit)
            conversation = network.recorded()
        trace = os.environ.get("IMPULSE_CUT_TRACE")
        if trace:
            print(f"recorded: {conversation.turns}", file=sys.stderr, flush=True)
        full = full_sweep()
        kinds, skip = (CUT_KINDS, 0) if full else (self.cut_kinds or adapter.cut_kinds, adapter.network_handshake)
        recorded = cut_points(conversation, kinds, skip=skip)
        assert recorded, f"the recorded write has no round trip to cut: {conversation.turns}"
        # (cut, its index in `recorded`, or None for a point of another run's write)
        pending: list[tuple[Cut, int | None]] = list(zip(recorded, range(len(recorded)), strict=True))
        landed, broken, runs = [], [], 0
        tries = [0] * len(recorded)  # runs of each recorded point
        fired_once = set()           # recorded points that fired at least once
        while pending and runs < self.cut_tries * len(recorded):  # a bound, should every run differ
            cut, mine = pending.pop(0)
            if mine is None and any(cut.same_point(point) for point in landed):
                continue
            started, runs = time.monotonic(), runs + 1
            fired, whole, failure, verdict = self._cut_run(spark, adapter, network, cut, tmp_path / f"cut-{runs}")
            hit = fired is not None and cut.landed(fired)
            if mine is not None:
                tries[mine] += 1
                if fired is not None:
                    fired_once.add(mine)
                if not hit and tries[mine] < self.cut_tries:
                    pending.append((cut, mine))
            if hit:
                landed.append(cut)
            for point in cut_points(whole, kinds, skip=skip) if whole else ():  # its points at bytes not cut yet
                if not any(point.same_point(done) for done in landed) and \
                        not any(point.same_place(other) for other in [*recorded, *(c for c, _ in pending)]):
                    pending.append((point, None))
            if trace:
                print(f"{cut}: {'landed' if hit else 'fired elsewhere' if fired else 'missed'} "
                      f"failed={failure is not None} {time.monotonic() - started:.1f}s"
                      f"{'' if fired is None else f' on {fired.turns}'}", file=sys.stderr, flush=True)
            if self.breaks_guarantee(adapter, verdict) or failure is not None:  # wherever the cut fell
                again = "" if failure is None else f"; the query failed again after a restart: {str(failure)[-500:]}"
                broken.append(f"{cut}: {verdict}{again}")
        missed = [str(cut) for i, cut in enumerate(recorded) if i not in fired_once]
        self.node.user_properties.append(("cuts", len(recorded)))
        self.node.user_properties.append(("cuts_fired", len(recorded) - len(missed)))
        self.node.user_properties.append(("cuts_landed", sum(any(cut.same_place(done) for done in landed)
                                                             for cut in recorded)))
        self.node.user_properties.append(("cut_runs", runs))
        if broken:
            pytest.fail(f"{self.case}: {len(broken)} of {runs} cuts broke the guarantee:\n" + "\n".join(broken),
                        pytrace=False)
        assert len(missed) <= len(recorded) // 2, \
            f"{len(missed)} of {len(recorded)} cuts never fired in {self.cut_tries} runs each (the write's conversation " \
            f"changed between runs): {missed}"

    def _cut_run(self, spark, adapter, network, cut, checkpoint):
        """One run of the sweep with `cut` armed, in a fresh namespace: (the conversation it fired on or None, the
        run's write when nothing fired, the failure left after a restart from the checkpoint or None, the verdict)."""
        routed, limit = network.cut_adapter, self.network_limit
        with fresh_namespace(adapter) as namespace:
            network.arm(cut)
            try:
                query = start_query(spark, routed, namespace, checkpoint, limit=limit)
                fired = network.await_cut(cut, lambda: query.isActive, timeout=120)
            finally:
                network.proxy.clear()
            failure = failure_of(lambda: await_query(query))
            whole = network.recorded() if fired is None else None  # nothing cut: this run's write, as it went
            if failure is not None:  # restarted from its checkpoint, as Spark's users do
                failure = failure_of(lambda: run_query(spark, routed, namespace, checkpoint, limit=limit))
            return fired, whole, failure, compare(sorted(adapter.read_back(namespace)), expected_events(limit))

    def test_bad_network(self, spark, adapter, network, namespace, tmp_path):
        """Latency with jitter, a bandwidth cap and a slow close on every connection: the query keeps up,
        or fails with an error naming the sink and completes once restarted on a good network; exactly
        once either way."""
        checkpoint = tmp_path / "ck"
        network.proxy.clear()
        for kind, stream, attributes in self.bad_network:
            network.proxy.add_toxic(kind, stream, **attributes)
        try:
            failure = failure_of(lambda: run_query(spark, network.adapter, namespace, checkpoint, limit=self.limit,
                                                   per_trigger=self.per_trigger, timeout=300))
        finally:
            network.proxy.clear()
        self.node.user_properties.append(("kept_up", failure is None))
        if failure is not None:
            text = str(failure)
            assert adapter.format in text, f"{self.case}: the error does not name the sink {adapter.format}: {text[-2000:]}"
            run_query(spark, network.adapter, namespace, checkpoint, limit=self.limit, per_trigger=self.per_trigger)
        self.check_landed(adapter, namespace, self.limit)
