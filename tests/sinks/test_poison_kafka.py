"""Poison records in Kafka: a topic with a small ``max.message.bytes``, deadLetterTopic set,
the driver SIGKILLed while a batch is in flight and the query restarted; read back by an independent
``read_committed`` consumer: every accepted record once, and the dead-letter topic holds exactly the refused ones."""

from __future__ import annotations

import uuid

import pytest

from connectors.conformance import expected_events
from tests.sinks.poison_driver import kill_mid_batch, start

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

ROWS, PER_TRIGGER = 10_000, 1_000
#: every tenth row's value (counter % 10 == 3) is 2,000 bytes, over the topic's 1,000
COLUMNS = ["concat(subtask_index, ':', counter) AS key",
           "CASE WHEN counter % 10 = 3 THEN repeat('x', 2000) ELSE CAST(counter AS STRING) END AS value"]


def _keys(messages) -> list[tuple[int, int]]:
    return sorted(tuple(map(int, m.key().decode().split(":"))) for m in messages)


def test_dead_letters_are_exactly_the_refused_records_across_a_killed_driver(spark, kafka_broker, tmp_path):
    name = uuid.uuid4().hex[:8]
    topic = kafka_broker.create_topic(f"small-{name}", partitions=2, config={"max.message.bytes": "1000"})
    dead = kafka_broker.create_topic(f"dlq-{name}", partitions=1)
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "topic": topic, "deadLetterTopic": dead}
    checkpoint = tmp_path / "ck"
    kill_mid_batch({"format": "kafka-sink", "options": options, "rows": ROWS, "perTrigger": PER_TRIGGER,
                    "checkpoint": str(checkpoint), "columns": COLUMNS})
    query = start(spark, "kafka-sink", options, ROWS, PER_TRIGGER, str(checkpoint), COLUMNS)
    query.awaitTermination(240)
    assert query.exception() is None

    events = expected_events(ROWS)
    refused = [e for e in events if e[1] % 10 == 3]
    assert _keys(kafka_broker.consume_all(topic, isolation="read_committed")) == [e for e in events if e not in refused]
    letters = kafka_broker.consume_all(dead, isolation="read_committed")
    assert _keys(letters) == refused
    assert all(m.value() == b"x" * 2_000 for m in letters)
