"""Real servers on free loopback ports for the tests, the benchmarks and a sink author's conformance runs.

One module per server: `connectors.servers.redis` (redis-server), `connectors.servers.redis_cluster` (a Redis
Cluster of redis-servers), `connectors.servers.kafka` (an Apache Kafka broker and the Maven fetcher of its
jars), `connectors.servers.receiver` (the project's reference HTTP receiver), `connectors.servers.schema_registry`
(Apicurio Registry, Confluent's Schema Registry API), `connectors.servers.spark` (a Spark standalone cluster, a
Spark Connect server) and `connectors.servers.toxiproxy` (Shopify's Toxiproxy, a fault-injecting TCP proxy, and
its build) with `connectors.servers.tap` (a recording TCP relay); `connectors.servers.base` holds what they
share. ``python -m connectors.servers`` is their command line (``fetch-kafka``,
``fetch-schema-registry``, ``fetch-toxiproxy``, ``serve <kind>``).

Only the standard library is imported at module level; ``redis`` and ``confluent_kafka`` are imported when
a server needs them, so the fetch commands work before the clients are installed.
"""

from connectors.servers.base import LOOPBACK, ServerError, cache_root, free_port, wait_until
from connectors.servers.kafka import KAFKA_VERSION, KafkaBroker, fetch_kafka, kafka_jars_dir
from connectors.servers.receiver import Receiver
from connectors.servers.redis import RedisServer
from connectors.servers.redis_cluster import ClusterNode, RedisCluster
from connectors.servers.schema_registry import APICURIO_VERSION, SchemaRegistry, fetch_schema_registry
from connectors.servers.spark import SparkConnectServer, SparkStandaloneCluster, processes_under, spark_home
from connectors.servers.tap import Tap
from connectors.servers.toxiproxy import TOXIPROXY_VERSION, Toxiproxy, fetch_toxiproxy

__all__ = [
    "APICURIO_VERSION",
    "SchemaRegistry",
    "fetch_schema_registry",
    "KAFKA_VERSION",
    "ClusterNode",
    "KafkaBroker",
    "LOOPBACK",
    "Receiver",
    "RedisCluster",
    "RedisServer",
    "ServerError",
    "SparkConnectServer",
    "SparkStandaloneCluster",
    "TOXIPROXY_VERSION",
    "Tap",
    "Toxiproxy",
    "cache_root",
    "fetch_kafka",
    "fetch_toxiproxy",
    "free_port",
    "kafka_jars_dir",
    "processes_under",
    "spark_home",
    "wait_until",
]
