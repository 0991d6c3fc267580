"""``impulse-load --check`` into a Redis Cluster: the rows land on several primaries, and the check reads them all
back through the Redis sink's adapter (`sinks.redis.adapter.RedisReader`), the reader the conformance suite uses.
A pipeline that loses and duplicates rows fails the check (exit 99) with the counts found independently here."""

from __future__ import annotations

import uuid

import pytest

from tests.loadtest.helpers import run_cli
from tests.loadtest.test_transform import PIPELINES, RUN

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def _cluster_sink(redis_cluster, prefix: str, *extra: str) -> list[str]:
    return ["--sink", "redis-sink", "-o", f"url={redis_cluster.url}", "-o", "cluster=true", "-o", f"keyPrefix={prefix}",
            *extra]


def _keys_per_primary(redis_cluster, prefix: str) -> list[int]:
    return [len(redis_cluster.cli("--scan", "--pattern", f"{prefix}*", address=p.address).split())
            for p in redis_cluster.primaries()]


def test_check_reads_every_primary_of_a_redis_cluster_back_and_passes(spark, redis_cluster, tmp_path, capsys):
    prefix = f"check-{uuid.uuid4().hex[:8]}:"
    code, out, report = run_cli(capsys, tmp_path, *RUN, *_cluster_sink(redis_cluster, prefix), "--check")
    assert code == 0, out
    assert report["check"] == {"passed": True, "expected": 1_600, "delivered": 1_600, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    per_primary = _keys_per_primary(redis_cluster, prefix)  # a read of one node would have missed the others' rows
    assert sum(per_primary) == 1_600 and sum(1 for n in per_primary if n) > 1, per_primary


def test_check_of_a_wrong_answer_in_a_redis_cluster_fails_with_the_counts(spark, redis_cluster, tmp_path, capsys):
    prefix = f"lossy-{uuid.uuid4().hex[:8]}:"  # lists per counter: a duplicate is kept, on whichever primary
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:loses_and_duplicates", "--check",
                                *_cluster_sink(redis_cluster, prefix, "-o", "target=list", "-o", "keyColumn=counter"))
    assert code == 99, out
    assert sum(1 for n in _keys_per_primary(redis_cluster, prefix) if n) > 1
    # 1,600 events, counter % 50: 7 dropped (64), 11 written twice (32), 13 with a wrong counter (32)
    assert report["check"] == {"passed": False, "expected": 1_600, "delivered": 1_600, "lost": 64, "duplicated": 32,
                               "unexpected": 32}
