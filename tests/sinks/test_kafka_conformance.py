"""The Kafka sink passes the conformance suite under each of its delivery guarantees (read back with a
read_committed consumer): exactly_once fails on any duplicate; at_least_once fails on a loss and counts
duplicates (the test's ``duplicates`` property in the JUnit report)."""

import pytest

from connectors.conformance import SinkConformance
from connectors.conformance.batch_suite import BatchWriteConformance
from sinks.kafka.adapter import KafkaAdapter

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


class TestKafkaConformance(SinkConformance, BatchWriteConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, kafka_broker):
        return KafkaAdapter(kafka_broker.bootstrap, broker=kafka_broker if kafka_broker.managed else None)


class TestKafkaAtLeastOnceConformance(SinkConformance):
    """at_least_once, on a reduced matrix for CI time (exactly_once runs all of it): the plain write, the replayed
    batch, an executor crash after the write and a driver failure before the commit, the metrics."""

    fault_cases = (("after_write", "crash", 0), ("before_commit", "fail", None))
    test_large_batch = test_driver_killed_mid_stream = test_empty_partition = test_batches_without_rows = None
    test_unknown_option_fails_at_start = test_bad_fault_plan_fails_at_start = test_bad_options_fail_at_start = None
    test_unreachable_target_fails_at_start = test_commit_twice = test_unusual_data = None
    test_repartition_after_crash = test_target_restarted_mid_batch = test_slow_target = None

    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, kafka_broker):
        return KafkaAdapter(kafka_broker.bootstrap, guarantee="at_least_once")


class TestKafkaAvroConformance(SinkConformance):
    """value.format=avro through the Schema Registry, read back by decoding every record, on a reduced matrix
    for CI time (the write path below the encoding is the one the exactly_once class covers in full): the plain
    write, the replayed batch, one crash after the write, poison records, metrics; a driver killed mid-stream with
    ``IMPULSE_FULL_SWEEP=1`` (its recovery is the exactly_once class's, whatever the record format)."""

    pytestmark = pytest.mark.schema_registry
    fault_cases = (("after_write", "crash", 0),)
    full_sweep_only = ("test_driver_killed_mid_stream",)
    test_large_batch = test_empty_partition = test_batches_without_rows = test_unusual_data = None
    test_unknown_option_fails_at_start = test_bad_fault_plan_fails_at_start = test_bad_options_fail_at_start = None
    test_unreachable_target_fails_at_start = test_commit_twice = test_two_commit_ids_into_one_target = None
    test_repartition_after_crash = test_target_restarted_mid_batch = test_slow_target = None

    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, kafka_broker, schema_registry):
        return KafkaAdapter(kafka_broker.bootstrap, registry_url=schema_registry.url)
