"""Create a Kafka topic and wait until it can be written to: the one copy used by the Kafka sink's opt-in topic
creation (``impulse-load --create-topic``), the test broker and the conformance suite.

``confluent_kafka`` is imported inside the function, so importing this module needs no Kafka client.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

__all__ = ["create_topic"]


def create_topic(admin: Any, name: str, partitions: int, replication_factor: int = -1,
                 config: Mapping[str, str] | None = None, timeout_s: float = 30.0, exist_ok: bool = False) -> bool:
    """Create topic `name` with `partitions` partitions through `admin` (a ``confluent_kafka.admin.AdminClient``)
    and wait until every partition has a leader: a producer's first write then finds one.

    `replication_factor` -1 takes the broker's default; `config` holds topic configs (``max.message.bytes`` …).
    Returns True when the topic was created; False when it existed already and `exist_ok` (left as it is, its
    partitions not checked). Raises ``confluent_kafka.KafkaException`` when the broker refuses the topic (an
    existing one too, unless `exist_ok`) and TimeoutError when its partitions have no leaders after `timeout_s`
    seconds."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=dict(config or {}))
    future = admin.create_topics([topic], operation_timeout=timeout_s, request_timeout=timeout_s)[name]
    try:
        future.result(timeout_s)
    except KafkaException as exc:
        if exist_ok and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise
    deadline = time.monotonic() + timeout_s
    while True:  # created: its partitions get leaders a moment later
        found = admin.list_topics(name, timeout=min(timeout_s, 10)).topics.get(name)
        if found is not None and found.error is None and len(found.partitions) == partitions \
                and all(p.leader >= 0 and p.error is None for p in found.partitions.values()):
            return True
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topic '{name}' was created but has no leader for each of its {partitions} "
                               f"partitions after {timeout_s:g}s")
        time.sleep(0.1)
