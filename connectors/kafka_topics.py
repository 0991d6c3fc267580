"""Create a Kafka topic and wait until it can be written to, and read one back to its end: the one copy of each,
used by the Kafka sink's opt-in topic creation (``impulse-load --create-topic``), the test broker and the
conformance suite.

``confluent_kafka`` is imported inside the functions, so importing this module needs no Kafka client.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Mapping

__all__ = ["create_topic", "end_offsets", "read_topic", "READER_GROUPS", "group_refused"]

#: the prefix of the consumer groups the readers here take (``impulse-<purpose>-<random>``): librdkafka's consumer
#: needs a group id and looks its coordinator up, although they read by assignment and commit nothing
READER_GROUPS = "impulse-"


def create_topic(admin: Any, name: str, partitions: int, replication_factor: int = -1,
                 config: Mapping[str, str] | None = None, timeout_s: float = 30.0, exist_ok: bool = False) -> bool:
    """Create topic `name` with `partitions` partitions through `admin` (a ``confluent_kafka.admin.AdminClient``)
    and wait until every partition has a leader: a producer's first write then finds one.

    `replication_factor` -1 takes the broker's default; `config` holds topic configs (``max.message.bytes`` …).
    Returns True when the topic was created; False when it existed already and `exist_ok` (left as it is, its
    partitions not checked). Raises ``confluent_kafka.KafkaException`` when the broker refuses the topic (an
    existing one too, unless `exist_ok`) and TimeoutError when its partitions have no leaders after `timeout_s`
    seconds."""
    from confluent_kafka import KafkaError, KafkaException  # noqa: PLC0415 - the kafka extra's client
    from confluent_kafka.admin import NewTopic  # noqa: PLC0415 - the kafka extra's client

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


def end_offsets(config: Mapping[str, Any], topic: str, isolation: str = "read_committed",
                timeout_s: float = 30.0) -> dict[int, int]:
    """``{partition: end offset}`` of every partition of `topic`, for a consumer of `isolation`: the high watermark
    for ``read_uncommitted``, the last stable offset (below the first record of a transaction still open) for
    ``read_committed``. `config`: the client's settings (``bootstrap.servers`` …)."""
    consumer = _consumer(config, "offsets", isolation)
    try:
        return _ends(consumer, topic, timeout_s)
    finally:
        consumer.close()


def _consumer(config: Mapping[str, Any], purpose: str, isolation: str, **extra: Any) -> Any:
    from confluent_kafka import Consumer  # noqa: PLC0415 - the kafka extra's client

    return Consumer({**config, "group.id": f"{READER_GROUPS}{purpose}-{uuid.uuid4().hex}", "isolation.level": isolation,
                     "enable.auto.commit": False, **extra})


def group_refused(config: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
    """The broker's words when the principal of `config` (a client's settings) may not use a group of
    `READER_GROUPS` (Describe, asked for a group of a reader's form); None when it may, or when that cannot be told
    (an unreachable broker is the reader's own error)."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 - the kafka extra's client
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - the kafka extra's client

    group = f"{READER_GROUPS}read-{uuid.uuid4().hex}"
    admin = AdminClient(dict(config))
    try:
        admin.describe_consumer_groups([group], request_timeout=timeout_s)[group].result(timeout_s)
    except KafkaException as exc:
        error = exc.args[0]
        return error.str() if error.name() == "GROUP_AUTHORIZATION_FAILED" else None
    except Exception:  # noqa: BLE001 - a timeout: the read itself tells
        return None
    return None


#: the errors of a partition whose leader is not elected or not yet known to the broker asked (a topic created a
#: moment ago, a leader moving): asked again until the read's timeout
_LEADER_MOVING = ("NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE")


def _ends(consumer: Any, topic: str, timeout_s: float) -> dict[int, int]:
    """`end_offsets` as `consumer` (its isolation level) sees them. A missing topic raises at once; a partition whose
    leader is moving or not yet elected (`_LEADER_MOVING`) is asked again until `timeout_s` has passed."""
    from confluent_kafka import KafkaException, TopicPartition  # noqa: PLC0415 - the kafka extra's client

    found = consumer.list_topics(topic, timeout=timeout_s).topics[topic]
    if found.error is not None:
        raise KafkaException(found.error)
    deadline = time.monotonic() + timeout_s
    ends: dict[int, int] = {}
    for p in sorted(found.partitions):
        while p not in ends:
            try:
                ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s, cached=False)[1]
            except KafkaException as exc:
                if exc.args[0].name() not in _LEADER_MOVING or time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
    return ends


def read_topic(config: Mapping[str, Any], topic: str, isolation: str = "read_committed", timeout_s: float = 60.0,
               settle_s: float = 5.0) -> list:
    """Every record of `topic` from its beginning to its end (`end_offsets`), as ``confluent_kafka.Message``
    objects in partition order, then offset order.

    A producer's ``commit_transaction`` returns before the transaction's commit markers are written to the topic's
    partitions (the coordinator writes them afterwards), so right after a transactional write the last stable
    offset can still stand before it (seen in tests reading a 2-partition topic right after the commit). For
    ``read_committed`` the end is therefore taken once it equals the high watermark (no transaction open), waiting
    up to `settle_s` seconds; past that (a transaction left open, by a producer that was killed and not
    replaced) the read ends at the last stable offset. Raises TimeoutError when the records up to the end cannot
    be read within `timeout_s` seconds, ``KafkaException`` on an error that is not retriable."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition  # noqa: PLC0415 - the kafka extra's client

    consumer = _consumer(config, "read", isolation, **{
        "enable.partition.eof": True, "auto.offset.reset": "earliest",
        # larger fetches than the defaults (1 MiB a partition): a million records read a quarter faster
        "max.partition.fetch.bytes": 16 << 20, "fetch.max.bytes": 64 << 20})
    try:
        ends = _ends(consumer, topic, timeout_s)
        if isolation == "read_committed":
            latest = _consumer(config, "offsets", "read_uncommitted")
            try:
                settled = time.monotonic() + settle_s
                while ends != _ends(latest, topic, timeout_s) and time.monotonic() < settled:
                    time.sleep(0.05)
                    ends = _ends(consumer, topic, timeout_s)
            finally:
                latest.close()
        by_partition: dict[int, list] = {p: [] for p in ends}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() >= deadline:
                got = {p: len(v) for p, v in by_partition.items()}
                raise TimeoutError(f"topic '{topic}': partitions {sorted(pending)} not read up to {ends} within "
                                   f"{timeout_s:g}s (records so far: {got})")
            for message in consumer.consume(10_000, 0.2):  # a list per call: a million records in seconds
                error, partition = message.error(), message.partition()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if message.offset() >= ends[partition]:
                            pending.discard(partition)
                    elif not (error.retriable() or error.code() == KafkaError._TRANSPORT):
                        raise KafkaException(error)
                    continue
                # read_committed skips aborted records and the control records: the last one read may be below
                # end - 1, and end-of-partition then finishes the partition
                if message.offset() < ends[partition]:
                    by_partition[partition].append(message)
                if message.offset() + 1 >= ends[partition]:
                    pending.discard(partition)
    finally:
        consumer.close()
    return [m for p in sorted(by_partition) for m in by_partition[p]]
