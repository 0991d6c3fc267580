"""The Redis sink passes the conformance suite (list target: an append would show any duplicate)."""

import pytest

from connectors.conformance import SinkConformance
from connectors.conformance.batch_suite import BatchWriteConformance
from sinks.redis.adapter import RedisAdapter

pytestmark = [pytest.mark.integration, pytest.mark.redis]


class TestRedisConformance(SinkConformance, BatchWriteConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, redis_server):
        return RedisAdapter(redis_server.url, target="list", server=redis_server if redis_server.managed else None)


class TestRedisClusterConformance(SinkConformance):
    """Against a Redis Cluster (3 primaries, 3 replicas): the sink finds out itself (``cluster=auto``)."""

    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, redis_cluster):
        return RedisAdapter(redis_cluster.url, target="list", cluster=True)
