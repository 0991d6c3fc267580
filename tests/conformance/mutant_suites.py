"""The conformance suite run against the mutants of `tests.conformance.mutants`: every class here must FAIL.

Not collected by the normal run (no ``test_`` prefix): ``test_mutants.py`` runs this file in a
subprocess, the way a sink author runs the suite, and reads its JUnit report. The subprocess has its
own Spark session, with Spark's Kafka connector (``spark.jars.packages``) for `SparkKafkaAdapter`, and
uses the servers of the outer run (``REDIS_URL``, ``KAFKA_BROKERS``).

The reduced matrix (CI time): `test_basic_write` (which every mutant passes: they break only under
faults), `test_replayed_batch_is_skipped` (a driver crash before Spark logged the batch's commit), and
one executor crash on the first attempt of partition 0 of batch 1: mid-write for the Redis and webhook
mutants, after the write for the Kafka one (a crash before librdkafka sent anything leaves no trace).
Spark's Kafka sink takes no faultInjection option: its fault case is skipped. The Redis mutant without
input fingerprints runs `test_basic_write` and `test_repartition_after_crash` (2 → 5 partitions) only.
The three mutants
with a window between two round trips run `test_basic_write` and `test_cut_at_every_round_trip` only, on
one kind of cut point each (CI time: a third of the sweep): a close after each reply for Redis and a
stall after each reply for Kafka (the window follows a reply; librdkafka hides a close by resending on a
new connection), a close one byte short of each request for the webhook (the request never arrives). The
full suite's other cases (the other 7 faults, the driver kill, the 1M-row batch, bad options, the bad
network…) run against the real sinks.
"""

from __future__ import annotations

import os

import pytest

from connectors.conformance import SinkConformance
from connectors.servers.receiver import Receiver
from connectors.session import spark_kafka_session
from sinks.webhook.adapter import WebhookAdapter
from tests.conformance.mutants import MUTANTS, SparkKafkaAdapter, mutant_adapter

pytestmark = [pytest.mark.integration]

CASES = ("test_basic_write", "test_replayed_batch_is_skipped", "test_fault_injection")
MID_WRITE, AFTER_WRITE = ("mid_write", "crash", 0), ("after_write", "crash", 0)


@pytest.fixture(scope="session")
def spark():
    session, _ = spark_kafka_session("local[2,2]", "conformance-mutants", **{
        "spark.sql.shuffle.partitions": 2, "spark.sql.streaming.stopTimeout": "30s"})
    yield session
    session.stop()


def only_cases(cls: type, cases: tuple[str, ...] = CASES) -> type:
    """`cls` with the suite's tests other than `cases` switched off."""
    for name in dir(SinkConformance):
        if name.startswith("test_") and name not in cases:
            setattr(cls, name, None)
    return cls


def mutant_suite(kind: str, fault: tuple[str, str, int | None], cases: tuple[str, ...] = CASES,
                 cut_kinds: tuple[str, ...] = ()) -> type:
    """The suite's `cases` against the mutant `kind` of `MUTANTS`, with `fault` as its whole fault matrix
    and `cut_kinds` as the cut points of the sweep."""

    class Suite(SinkConformance):
        fault_cases = (fault,)
        repartitions = ((2, 5),)

        @pytest.fixture(scope="class")
        @classmethod
        def adapter(cls, spark, request):
            base, source = MUTANTS[kind]
            spark.dataSource.register(source)
            adapter = mutant_adapter(base, source)
            if base is WebhookAdapter:
                with Receiver(record=True) as receiver:
                    yield adapter(receiver)
                return
            if kind.startswith("redis"):
                yield adapter(request.getfixturevalue("redis_server").url)
                return
            route = os.environ.get("KAFKA_PROXY_ROUTE")  # the outer run's broker listener behind a proxy
            broker = request.getfixturevalue("kafka_broker")
            yield adapter(broker.bootstrap, proxy_route=tuple(route.split(",")) if route else broker.proxy_route)

    Suite.cut_kinds = cut_kinds
    return only_cases(Suite, cases)


TestRedisWithoutCommitCheck = mutant_suite("redis-no-check", MID_WRITE)
TestRedisRecordFirst = mutant_suite("redis-record-first", MID_WRITE)
TestRedisWithoutFingerprint = mutant_suite("redis-no-fingerprint", MID_WRITE,
                                           ("test_basic_write", "test_repartition_after_crash"))
TestKafkaWithoutTransactions = mutant_suite("kafka-no-transactions", AFTER_WRITE)
TestWebhookFreshKeys = mutant_suite("webhook-fresh-keys", MID_WRITE)
CUT_CASES = ("test_basic_write", "test_cut_at_every_round_trip")
TestRedisRecordAfterExec = mutant_suite("redis-record-after-exec", MID_WRITE, CUT_CASES, ("after_reply",))
TestKafkaOffsetsAfterData = mutant_suite("kafka-offsets-after-data", MID_WRITE, CUT_CASES, ("stall_after_reply",))
TestWebhookCutCounted = mutant_suite("webhook-cut-counted", MID_WRITE, CUT_CASES, ("inside_request",))


@only_cases
class TestSparkKafkaSink(SinkConformance):
    """Spark's own Kafka sink: no faultInjection option (its fault case is skipped)."""

    fault_cases = (MID_WRITE,)

    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, kafka_broker):
        return SparkKafkaAdapter(kafka_broker.bootstrap)
