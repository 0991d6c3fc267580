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
    """Against a Redis Cluster (3 primaries, 3 replicas): the sink finds out itself (``cluster=auto``).

    In CI, the cases where a cluster changes what the sink does: writes and commit records across slots and nodes
    (plain, large, empty, replayed), every kind of recovery, the cuts, metrics, poison rows (the target restart
    case is skipped: the adapter cannot restart a cluster). The cases whose code path a cluster does not change
    (option checks, a killed driver's recovery, slow and bad networks, two commit ids) run with
    ``IMPULSE_FULL_SWEEP=1``."""

    full_sweep_only = ("test_driver_killed_mid_stream", "test_unknown_option_fails_at_start",
                       "test_bad_fault_plan_fails_at_start", "test_bad_options_fail_at_start",
                       "test_unreachable_target_fails_at_start", "test_slow_target", "test_bad_network",
                       "test_commit_twice", "test_batches_without_rows", "test_two_commit_ids_into_one_target")

    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, redis_cluster):
        return RedisAdapter(redis_cluster.url, target="list", cluster=True)
