"""The conformance suite can fail: every mutant of `tests.conformance.mutants` must fail it, counted.

`mutant_suites.py` runs in a subprocess (its own Spark session with Spark's Kafka connector, this run's
Redis and Kafka) and writes a JUnit report; each test below reads that report for one mutant and
checks which cases caught it and that the message names the case and the count of lost or
duplicated events. Expected counts follow from the suite's own parameters: a replayed batch is
``per_trigger`` events, a crashed partition of it ``per_trigger / PARTITIONS``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from sinks.webhook.adapter import WebhookAdapter
from connectors.conformance.harness import PARTITIONS
from connectors.conformance.suite import SinkConformance

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BATCH = SinkConformance.per_trigger
PARTITION = BATCH // PARTITIONS
REPLAY = "test_replayed_batch_is_skipped"
AFTER_WRITE = "test_fault_injection[after_write-crash-first-attempt]"
MID_WRITE = "test_fault_injection[mid_write-crash-first-attempt]"
REPARTITION = "test_repartition_after_crash[2-to-5]"
CUT = "test_cut_at_every_round_trip"
#: what one cut can break: a partition of a network case's run, or one webhook request of it
CUT_PARTITION = SinkConformance.network_limit // PARTITIONS
CUT_REQUEST = int(WebhookAdapter.network_options["batchSize"])

# mutant class in mutant_suites.py -> {case that must catch it: (what, events)}
CAUGHT = {
    "TestRedisWithoutCommitCheck": {REPLAY: ("duplicated", BATCH)},
    "TestRedisRecordFirst": {MID_WRITE: ("lost", PARTITION)},
    # 2 → 5 partitions, batch 1 (1000 events) half committed: the rows partition 1 now holds are skipped
    # (measured, deterministic: Spark's round-robin repartition sorts its input first)
    "TestRedisWithoutFingerprint": {REPARTITION: ("lost", 100)},
    "TestKafkaWithoutTransactions": {REPLAY: ("duplicated", BATCH), AFTER_WRITE: ("duplicated", PARTITION)},
    "TestWebhookFreshKeys": {REPLAY: ("duplicated", BATCH)},
    "TestSparkKafkaSink": {REPLAY: ("duplicated", BATCH)},
    # a window between two round trips: some cut duplicates (or loses) whole partitions (requests)
    "TestRedisRecordAfterExec": {CUT: ("duplicated", CUT_PARTITION)},
    "TestKafkaOffsetsAfterData": {CUT: ("duplicated", CUT_PARTITION)},
    "TestWebhookCutCounted": {CUT: ("lost", CUT_REQUEST)},
}
COUNTS = re.compile(r"(?P<case>test_\S+): (?P<lost>\d+) events lost, (?P<duplicated>\d+) duplicated")
CUT_COUNTS = re.compile(r"^(?P<cut>(?:cut|reset|stall) .+ after \d+ bytes\)): (?P<lost>\d+) events lost, (?P<duplicated>\d+) duplicated",
                        re.MULTILINE)


@pytest.fixture(scope="module")
def report(redis_server, kafka_broker, toxiproxy, tmp_path_factory) -> dict[str, dict[str, str | None]]:
    """{mutant class: {case: None if it passed, else the failure message}} from one run of the mutant suites."""
    junit = tmp_path_factory.mktemp("mutants") / "junit.xml"
    env = {**os.environ, "REDIS_URL": redis_server.url, "KAFKA_BROKERS": kafka_broker.bootstrap,
           "TOXIPROXY_URL": toxiproxy.url, "KAFKA_PROXY_ROUTE": ",".join(kafka_broker.proxy_route or ())}
    done = subprocess.run([sys.executable, "-m", "pytest", str(Path(__file__).with_name("mutant_suites.py")),
                           "-o", "addopts=", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert junit.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 1, f"the suite passed every mutant:\n{done.stdout[-3000:]}"
    out: dict[str, dict[str, str | None]] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        problem = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        if problem is not None and problem.tag == "skipped":  # Spark's Kafka sink: no faultInjection option
            continue
        if problem is not None and problem.tag != "failure":
            pytest.fail(f"{case.get('classname')}::{case.get('name')} {problem.tag}: {problem.get('message')}")
        message = None if problem is None else f"{problem.get('message')}\n{problem.text or ''}"
        out.setdefault(case.get("classname").rsplit(".", 1)[-1], {})[case.get("name")] = message
    return out


@pytest.mark.parametrize("mutant", sorted(CAUGHT))
def test_the_suite_fails_the_mutant_and_counts_the_damage(report, mutant):
    cases = report.get(mutant)
    assert cases, f"{mutant} did not run: {sorted(report)}"
    assert cases["test_basic_write"] is None, f"{mutant} failed even the plain write: {cases['test_basic_write']}"
    for case, (what, events) in CAUGHT[mutant].items():
        message = cases.get(case)
        assert message is not None, f"a hole in the suite: {case} let {mutant} through"
        if case == CUT:  # one line per cut that broke the guarantee, naming the cut point
            counts = [int(found[what]) for found in CUT_COUNTS.finditer(message)]
            assert f"{CUT}: " in message and any(counts), f"{mutant}: no cut counts {what} events: {message[:800]}"
            assert all(n % events == 0 for n in counts), f"{mutant}: {what} {counts}, not whole units of {events}"
            continue
        found = COUNTS.search(message)
        assert found, f"{mutant} {case}: the message counts no events: {message[:500]}"
        assert found["case"] == case and int(found[what]) == events, f"{mutant}: {found[0]}"
    for case, message in cases.items():  # whatever else caught it also names the case and counts
        if message is not None and case != CUT:
            found = COUNTS.search(message)
            assert found and found["case"] == case and int(found["lost"]) + int(found["duplicated"]) > 0, message[:500]
