"""The Redis sink picks its writer once, from option ``cluster``, and each writer refuses the options its kind of
target cannot take (no server needed: ``cluster`` given, nothing is asked). The writers' writes are the subject
of tests/sinks/test_redis.py (a single node) and tests/sinks/test_redis_cluster_sink.py (a cluster)."""

from __future__ import annotations

import pickle

import pytest

from connectors.errors import OptionError
from connectors.options import OptionReader
from sinks.redis.options import RedisOptions
from sinks.redis.sink import RedisSink
from sinks.redis.writers import NodeWriter, SlotWriter


def sink(**options: str) -> RedisSink:
    return RedisSink(RedisOptions.read(OptionReader({"url": "redis://127.0.0.1:1/0", **options}, name="redis sink")))


def test_the_writer_is_chosen_once_by_option_cluster_and_travels_with_the_sink():
    single, cluster = sink(cluster="false"), sink(cluster="true")
    assert type(single.writer) is NodeWriter and type(cluster.writer) is SlotWriter
    assert single.writer is single.writer  # chosen once
    shipped = pickle.loads(pickle.dumps(cluster))  # as the executors get it
    assert type(shipped.writer) is SlotWriter and shipped.writer.options == cluster.options


@pytest.mark.parametrize("options,option,words", [
    ({"cluster": "true", "url": "unix:///tmp/redis.sock"}, "url", "a redis:// or rediss:// URL in cluster mode"),
    ({"cluster": "true", "commitKeyPrefix": "c{x}:"}, "commitKeyPrefix", "a prefix without '{'"),
    ({"cluster": "auto", "minReplicas": "1"}, "minReplicas", "is a single node"),
    ({"cluster": "auto", "addressMap": "10.0.0.1:6379=127.0.0.1:6379"}, "addressMap", "is a single node"),
])
def test_each_writer_refuses_what_its_target_cannot_take(options, option, words):
    target = sink(**options)
    writer = (SlotWriter if options["cluster"] == "true" else NodeWriter)(target.options)
    with pytest.raises(OptionError) as error:
        writer.check_options()
    assert error.value.option == option and words in str(error.value), str(error.value)
    other = (NodeWriter if options["cluster"] == "true" else SlotWriter)(target.options)
    other.check_options()  # the other kind of target takes it
