"""The real test servers themselves (connectors/servers/) do what the sink tests rely on."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from connectors.servers import (
    KAFKA_VERSION,
    RedisServer,
    fetch_kafka,
    free_port,
    kafka_jars_dir,
    wait_until,
)

# ------------------------------------------------------------------------------------------- helpers


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_wait_until_returns_value_and_times_out():
    start = time.monotonic()
    assert wait_until(lambda: time.monotonic() - start > 0.1 and "done", timeout=5) == "done"
    with pytest.raises(TimeoutError, match="the impossible"):
        wait_until(lambda: False, timeout=0.2, message="the impossible")


def test_kafka_version_is_pinned_in_the_pom():
    pom = (Path(__file__).parent / "kafka" / "pom.xml").read_text()
    assert f"<kafka.version>{KAFKA_VERSION}</kafka.version>" in pom
    assert KAFKA_VERSION == "4.1.1"


# --------------------------------------------------------------------------------------------- Redis


@pytest.mark.integration
@pytest.mark.redis
def test_redis_set_get(redis_server):
    client = redis_server.client()
    key = f"test-servers:{uuid.uuid4().hex}"
    client.set(key, b"value")
    assert client.get(key) == b"value"
    assert redis_server.url.startswith("redis://")


@pytest.mark.integration
@pytest.mark.redis
def test_redis_restart_with_persistence_keeps_data():
    with RedisServer(persistence=True) as server:
        port = server.port
        server.client().set("k", "v")
        server.restart()
        assert server.port == port
        assert server.client().get("k") == b"v"


@pytest.mark.integration
@pytest.mark.redis
def test_redis_without_persistence_keeps_data_over_a_restart_not_over_a_stop():
    with RedisServer() as server:
        server.client().set("k", "v")
        server.restart()  # SHUTDOWN SAVE: a snapshot the new process loads
        assert server.client().get("k") == b"v"
        server.stop()  # SHUTDOWN NOSAVE
        (server.dir / "dump.rdb").unlink()
        server.start()
        assert server.client().get("k") is None


# --------------------------------------------------------------------------------------------- Kafka


def _transactional_producer(broker, name):
    producer = broker.producer(**{"transactional.id": f"test-servers-{name}-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    return producer


@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_jars_fetched_once_into_the_cache():
    jars = fetch_kafka()
    assert jars == kafka_jars_dir()
    assert (jars / ".complete").is_file()
    assert (jars / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file()
    start = time.monotonic()
    assert fetch_kafka() == jars
    assert time.monotonic() - start < 1  # cached: no Maven run


@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_committed_visible_aborted_invisible(kafka_broker):
    topic = kafka_broker.create_topic(f"servers-txn-{uuid.uuid4().hex[:8]}", partitions=2)
    producer = _transactional_producer(kafka_broker, "txn")

    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"committed-{i}".encode(), key=str(i).encode(), partition=i % 2)
    producer.commit_transaction(30)

    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)  # the aborted records really reach the log before the abort
    producer.abort_transaction(30)

    committed = sorted(m.value() for m in kafka_broker.consume_all(topic))
    assert committed == [f"committed-{i}".encode() for i in range(4)]
    everything = sorted(m.value() for m in kafka_broker.consume_all(topic, isolation="read_uncommitted"))
    assert everything == sorted([f"committed-{i}".encode() for i in range(4)] + [f"aborted-{i}".encode() for i in range(3)])


@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_open_transaction_is_not_read(kafka_broker):
    topic = kafka_broker.create_topic(f"servers-open-{uuid.uuid4().hex[:8]}")
    producer = _transactional_producer(kafka_broker, "open")
    producer.begin_transaction()
    producer.produce(topic, value=b"pending")
    producer.flush(30)
    assert kafka_broker.consume_all(topic, timeout=20) == []
    producer.commit_transaction(30)
    assert [m.value() for m in kafka_broker.consume_all(topic)] == [b"pending"]


@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_restart_keeps_committed_data(kafka_broker):
    if not kafka_broker.managed:
        pytest.skip("KAFKA_BROKERS points at an external broker, which these tests cannot restart")
    topic = kafka_broker.create_topic(f"servers-restart-{uuid.uuid4().hex[:8]}")
    producer = _transactional_producer(kafka_broker, "restart")
    producer.begin_transaction()
    producer.produce(topic, value=b"before-restart")
    producer.commit_transaction(30)
    bootstrap = kafka_broker.bootstrap

    kafka_broker.restart()

    assert kafka_broker.bootstrap == bootstrap
    assert [m.value() for m in kafka_broker.consume_all(topic)] == [b"before-restart"]
    after = _transactional_producer(kafka_broker, "after-restart")  # the coordinator works again
    after.begin_transaction()
    after.produce(topic, value=b"after-restart")
    after.commit_transaction(30)
    # commit_transaction returns once the coordinator logged the commit; the markers reach the partition
    # after that (and a restarted broker is slower), so the record becomes visible to read_committed soon.
    values = lambda: [m.value() for m in kafka_broker.consume_all(topic)]  # noqa: E731
    wait_until(lambda: values() == [b"before-restart", b"after-restart"], timeout=30,
               message=lambda: f"read_committed sees {values()}")


