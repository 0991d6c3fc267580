"""`connectors.kafka_topics._ends` asks a partition again while its leader is moving or not yet elected (a topic
created a moment ago), and raises other errors, or a missing topic, at once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from connectors.kafka_topics import _ends


class Consumer:
    """A consumer whose partitions answer with `errors` (one per call, in turn) before their end offsets."""

    def __init__(self, partitions: int, errors: list[int], topic_error: KafkaError | None = None) -> None:
        self.partitions, self.errors, self.topic_error, self.calls = partitions, list(errors), topic_error, 0

    def list_topics(self, topic, timeout):
        meta = SimpleNamespace(error=self.topic_error, partitions={p: None for p in range(self.partitions)})
        return SimpleNamespace(topics={topic: meta})

    def get_watermark_offsets(self, partition, timeout, cached):
        self.calls += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 0, 10 + partition.partition


def test_a_partition_without_its_leader_yet_is_asked_again():
    consumer = Consumer(2, [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE])
    assert _ends(consumer, "t", timeout_s=5) == {0: 10, 1: 11}
    assert consumer.calls == 4


def test_other_errors_and_a_missing_topic_are_raised_at_once():
    consumer = Consumer(1, [KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED|[Aa]uthoriz"):
        _ends(consumer, "t", timeout_s=5)
    assert consumer.calls == 1
    missing = Consumer(1, [], topic_error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
    with pytest.raises(KafkaException):
        _ends(missing, "t", timeout_s=5)
    assert missing.calls == 0


def test_a_leader_that_never_comes_is_raised_after_the_timeout():
    consumer = Consumer(1, [KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    with pytest.raises(KafkaException):
        _ends(consumer, "t", timeout_s=0.3)
    assert 1 < consumer.calls < 1000
