"""Shared fixtures: one Spark session for the whole run, and the real servers the sinks write to."""

from __future__ import annotations

import collections
import os
import sys

import pytest

from connectors.registry import sinks
from connectors.servers import KafkaBroker, RedisServer, SparkConnectServer, SparkStandaloneCluster
from connectors.servers.receiver import Receiver
from connectors.servers.toxiproxy import Toxiproxy
from connectors.session import local_session
from sinks.kafka.adapter import KafkaAdapter
from sinks.redis.adapter import RedisAdapter
from sinks.webhook.adapter import WebhookAdapter


def pytest_configure(config):
    # registered here, not in setup.cfg: the test environments are keyed on setup.cfg's hash
    config.addinivalue_line("markers", "delta: writes Delta Lake tables; runs where Delta 4.4.0 runs (PySpark 4.2: "
                                       "bash tests/run --lowest selects it)")


def pytest_collection_modifyitems(config, items):
    """The files that take longest run first. pytest-xdist hands out whole files (``--dist loadfile``, with
    ``--no-loadscope-reorder`` so that it keeps this order) to whichever worker is free: sending the longest out
    first lets the two workers end together instead of one finishing a long file alone (longest-first
    scheduling). A file's weight is a guess from its markers: a ``slow`` test counts 3, any other test that
    starts a server or a Spark query 1, a unit test 0."""
    weight = collections.Counter()
    for item in items:
        weight[item.path] += 3 if item.get_closest_marker("slow") else 1 if item.get_closest_marker("integration") else 0
    items.sort(key=lambda item: -weight[item.path])  # stable: each file's own order is kept


#: seconds spent per test file (setup, call and teardown), summed from every worker's reports
_FILE_SECONDS: collections.Counter = collections.Counter()


def pytest_runtest_logreport(report):
    _FILE_SECONDS[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    """The files that took longest, beside the run's worker time: what CI's time budget is spent on."""
    total = sum(_FILE_SECONDS.values())
    if total < 300:
        return
    terminalreporter.write_sep("=", f"slowest files (of {total / 60:.1f} worker-minutes)")
    for path, seconds in _FILE_SECONDS.most_common(25):
        terminalreporter.write_line(f"{seconds:8.1f}s {100 * seconds / total:5.1f}%  {path}")
    folders = collections.Counter()
    for path, seconds in _FILE_SECONDS.items():
        folders[path.rpartition("/")[0]] += seconds
    terminalreporter.write_line("by folder: " + ", ".join(f"{folder} {seconds:.0f}s" for folder, seconds
                                                          in folders.most_common()))


# Spark's Python workers must run this interpreter (with the project installed), not whatever is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    """A ``local[2,2]`` session (2 cores; a failed task is retried once), shared by every test."""
    session = local_session("local[2,2]", "impulse-tests", **{
        "spark.sql.shuffle.partitions": 2, "spark.sql.streaming.stopTimeout": "30s", "spark.driver.memory": "2g"})
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


# --- real servers (connectors/servers/). Session-scoped and lazy: a server starts only when a test asks for it,
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
    """A ``connectors.servers.RedisServer`` (``.url``, ``.client()``, ``.restart()``), without persistence."""
    yield from _serving(RedisServer.from_env())


@pytest.fixture(scope="session")
def redis_cluster():
    """A ``connectors.servers.RedisCluster``: 3 primaries, 3 replicas (``.url``, ``.client()``, ``.node_for_slot()``,
    ``.kill_primary()``, ``.revive()``, ``.migrate_slot()``, ``.reshard()``); ``REDIS_CLUSTER_URL`` names one
    someone else runs (the tests that kill or move nodes then fail)."""
    from connectors.servers import RedisCluster

    yield from _serving(RedisCluster.from_env())


@pytest.fixture(scope="session")
def kafka_broker():
    """A ``connectors.servers.KafkaBroker`` (``.bootstrap``, ``.create_topic()``, ``.consume_all()``, ``.restart()``)."""
    # a second listener advertised at a proxy's port: the conformance suite's network cases put Toxiproxy there
    yield from _serving(KafkaBroker.external(os.environ["KAFKA_BROKERS"]) if os.environ.get("KAFKA_BROKERS")
                        else KafkaBroker(proxy_listener=True))


@pytest.fixture(scope="session")
def http_receiver():
    """The project's receiver, `connectors.servers.receiver.Receiver`, recording (``.url``, ``.accepted``,
    ``.fail_next()``...). Shared by the session: call ``http_receiver.reset()`` at the start of a test that
    counts requests."""
    yield from _serving(Receiver(record=True))


@pytest.fixture(scope="session")
def toxiproxy():
    """A ``connectors.servers.toxiproxy.Toxiproxy`` (``.proxy(upstream)`` → a proxy to add toxics to)."""
    yield from _serving(Toxiproxy.from_env())


@pytest.fixture(scope="session")
def schema_registry():
    """A ``connectors.servers.SchemaRegistry`` (Apicurio Registry, in memory: ``.url`` is Confluent's API,
    ``.set_compatibility()``, ``.request()``); ``SCHEMA_REGISTRY_URL`` points the tests at one someone else runs."""
    from connectors.servers import SchemaRegistry

    yield from _serving(SchemaRegistry.from_env())


# --- Spark beyond one JVM. One standalone cluster and one Connect server per test worker, started by the
# first test that asks; SPARK_MASTER_URL / SPARK_REMOTE point the tests at ones someone else runs, on this
# machine (the sinks write to loopback servers, checkpoints are local paths). Stopping either fails if a
# process (executor, Python worker) is left behind.


@pytest.fixture(scope="session")
def spark_cluster():
    """A ``connectors.servers.SparkStandaloneCluster``: a master and two one-core workers (``.master_url``)."""
    yield from _serving(SparkStandaloneCluster.from_env())


@pytest.fixture(scope="session")
def spark_connect():
    """A ``connectors.servers.SparkConnectServer`` on ``local[2,2]`` (``.url``, ``.session()``)."""
    yield from _serving(SparkConnectServer.from_env())


@pytest.fixture(scope="session")
def connect_session(spark_connect):
    """A Spark Connect client session on `spark_connect`; it coexists with the classic `spark` session."""
    session = spark_connect.session()
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


#: How each sink's conformance adapter is built on the test servers, by format name: the one place the tests bind a
#: sink to its server. The sinks themselves come from `connectors.registry` (`sink_adapters`).
TEST_ADAPTERS = {
    "redis-sink": lambda request: RedisAdapter(request.getfixturevalue("redis_server").url, target="list"),
    "kafka-sink": lambda request: KafkaAdapter(request.getfixturevalue("kafka_broker").bootstrap),
    "webhook-sink": lambda request: WebhookAdapter(request.getfixturevalue("http_receiver")),
}


def sink_names() -> list[str]:
    """The format name of every sink of `connectors.registry`, in its order: what the tests over every sink take."""
    return [row.name for row in sinks()]


@pytest.fixture(scope="session")
def sink_adapters(request):
    """The conformance adapter of every sink of `connectors.registry` on the test servers, by format name: each has
    ``options(namespace)``, ``prepare``, ``read_back`` (every landed event, duplicates kept) and ``cleanup``."""
    missing = [name for name in sink_names() if name not in TEST_ADAPTERS]
    if missing:
        raise LookupError(f"tests/conftest.py's TEST_ADAPTERS does not say how to build the adapter of "
                          f"{', '.join(missing)} on a test server: add it")
    return {name: TEST_ADAPTERS[name](request) for name in sink_names()}
