"""Shared fixtures: one Spark session for the whole run, and the real servers the sinks write to."""

from __future__ import annotations

import os
import sys

import pytest

# Spark's Python workers must run this interpreter (with the project installed), not whatever is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    """A ``local[2,2]`` session (2 cores; a failed task is retried once), shared by every test."""
    from connectors.session import local_session

    session = local_session("local[2,2]", "impulse-tests", **{
        "spark.sql.shuffle.partitions": 2, "spark.sql.streaming.stopTimeout": "30s", "spark.driver.memory": "2g"})
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


# --- real servers (tests/servers.py). Session-scoped and lazy: a server starts only when a test asks for it,
# so `pytest tests/impulse` starts no Kafka. REDIS_URL / KAFKA_BROKERS point the tests at servers someone else
# runs instead. A server that cannot start fails the tests loudly; nothing is skipped.


def _serving(server):
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def redis_server():
    """A ``tests.servers.RedisServer`` (``.url``, ``.client()``, ``.restart()``), without persistence."""
    from tests.servers import RedisServer

    yield from _serving(RedisServer.from_env())


@pytest.fixture(scope="session")
def kafka_broker():
    """A ``tests.servers.KafkaBroker`` (``.bootstrap``, ``.create_topic()``, ``.consume_all()``, ``.restart()``)."""
    from tests.servers import KafkaBroker

    yield from _serving(KafkaBroker.from_env())


@pytest.fixture(scope="session")
def http_receiver():
    """A ``tests.servers.HttpReceiver`` (``.url``, ``.accepted``, ``.fail_next()``...). Shared by the session:
    call ``http_receiver.reset()`` at the start of a test that counts requests."""
    from tests.servers import HttpReceiver

    yield from _serving(HttpReceiver())
