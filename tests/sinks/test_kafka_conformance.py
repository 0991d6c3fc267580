"""The Kafka sink passes the conformance suite (exactly_once, read back with a read_committed consumer)."""

import pytest

from connectors.conformance import SinkConformance
from connectors.conformance.adapters import KafkaAdapter

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


class TestKafkaConformance(SinkConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, kafka_broker):
        return KafkaAdapter(kafka_broker.bootstrap)
