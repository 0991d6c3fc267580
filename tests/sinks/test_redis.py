"""The Redis sink against a real redis-server: every target and option, and a server restart mid-stream."""

from __future__ import annotations

import json
import uuid

import pytest

from connectors.conformance import expected_events, run_query
from connectors.conformance.adapters import RedisAdapter
from connectors.protocol import Fingerprint
from connectors.servers import RedisServer, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.redis]

LIMIT = 1_000


@pytest.fixture
def prefix():
    return "r" + uuid.uuid4().hex[:8]


def _write(spark, url, prefix, tmp_path, limit=LIMIT, **options):
    adapter = RedisAdapter(url, target=options.pop("target", "string"))
    adapter_options = {**adapter.options(prefix), **options}
    adapter.options = lambda namespace: adapter_options  # this test's options, same target and prefix
    run_query(spark, adapter, prefix, tmp_path / "ck", limit=limit, per_trigger=limit // 2)
    return adapter


@pytest.mark.floor
def test_string_target_keys_are_event_ids(spark, redis_server, prefix, tmp_path):
    adapter = _write(spark, redis_server.url, prefix, tmp_path, ttl="300")
    client = redis_server.client()
    value = json.loads(client.get(f"{prefix}:1:7"))
    assert (value["subtask_index"], value["counter"]) == (1, 7)
    assert 0 < client.ttl(f"{prefix}:1:7") <= 300
    assert sorted(adapter.read_back(prefix)) == expected_events(LIMIT)


def test_hash_target_with_key_field_and_value_columns(spark, redis_server, prefix, tmp_path):
    from pyspark.sql import functions as F

    frame = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("numPartitions", 2)
             .option("startTime", "0").option("limit", 100).load()
             .select(F.concat(F.lit("p"), F.col("subtask_index").cast("string")).alias("part"),
                     F.col("counter").cast("string").alias("field"),
                     F.to_json(F.struct("subtask_index", "counter")).alias("body")))
    query = (frame.writeStream.format("redis-sink").option("url", redis_server.url).option("target", "hash")
             .option("keyPrefix", f"{prefix}:").option("keyColumn", "part").option("fieldColumn", "field")
             .option("valueColumn", "body").option("commitKeyPrefix", f"commit:{prefix}:")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    client = redis_server.client()
    for part in (0, 1):
        stored = client.hgetall(f"{prefix}:p{part}")
        assert sorted(int(k) for k in stored) == list(range(50))
        assert json.loads(stored[b"3"]) == {"subtask_index": part, "counter": 3}


def test_list_prepend_with_max_length(spark, redis_server, prefix, tmp_path):
    _write(spark, redis_server.url, prefix, tmp_path, target="list", listOperation="prepend", maxLength="10")
    newest_first = [json.loads(v) for v in redis_server.client().lrange(f"{prefix}:", 0, -1)]
    assert len(newest_first) == 10
    last_batch = [(e["subtask_index"], e["counter"]) for e in newest_first]
    assert all(counter >= LIMIT // 2 - 10 for _, counter in last_batch)


def test_stream_target_with_max_length(spark, redis_server, prefix, tmp_path):
    adapter = _write(spark, redis_server.url, prefix, tmp_path, target="stream")
    assert sorted(adapter.read_back(prefix)) == expected_events(LIMIT)
    _write(spark, redis_server.url, prefix + "b", tmp_path / "b", target="stream", maxLength="25")
    assert redis_server.client().xlen(f"{prefix}b:") == 25


@pytest.mark.floor
def test_commit_records_hold_the_last_batch(spark, redis_server, prefix, tmp_path):
    _write(spark, redis_server.url, prefix, tmp_path, commitId="my-pipeline")
    client = redis_server.client()
    assert client.get(f"commit:{prefix}:my-pipeline:batch") == b"1"
    records = [client.get(f"commit:{prefix}:my-pipeline:{p}").split() for p in (0, 1)]
    assert [r[0] for r in records] == [b"1", b"1"]  # the batch, then the fingerprint of its input
    assert [Fingerprint.parse(r[1]).rows for r in records] == [LIMIT // 4] * 2
    assert client.smembers(f"commit:{prefix}:my-pipeline:partitions") == {b"0", b"1"}


def test_the_driver_finds_records_of_partitions_beyond_a_replays_count(redis_server, prefix):
    from sinks.redis import RedisOptions, RedisSink
    from connectors.options import OptionReader

    sink = RedisSink(RedisOptions.read(OptionReader({"url": redis_server.url, "commitKeyPrefix": f"commit:{prefix}:"},
                                                    name="redis sink")))
    client = redis_server.client()
    for partition, record in {0: "3 10:aa", 1: "3 10:bb", 4: "3 10:cc", 5: "2 10:dd"}.items():
        client.set(f"commit:{prefix}:q:{partition}", record)
    client.sadd(f"commit:{prefix}:q:partitions", 0, 1, 4, 5)
    assert sink.committed_beyond("q", 3, 2) == [4]  # partition 5 holds an older batch
    assert sink.committed_beyond("q", 3, 5) == []
    assert sink.committed_beyond("other", 3, 0) == []


def test_password_is_not_in_errors(spark, redis_server, prefix, tmp_path):
    port = redis_server.url.rsplit(":", 1)[1].split("/")[0]
    with pytest.raises(Exception) as failure:
        _write(spark, f"redis://user:s3cret@127.0.0.1:{port}/0", prefix, tmp_path)
    assert "s3cret" not in str(failure.value)
    assert "redis-sink" in str(failure.value)


@pytest.fixture
def persistent_redis():
    server = RedisServer(persistence=True)
    server.start()
    yield server
    server.close()


def test_redis_restart_mid_stream_loses_and_duplicates_nothing(spark, persistent_redis, prefix, tmp_path):
    """A restart of a persistent Redis under a running query: the protocol's retries carry it through."""
    adapter = RedisAdapter(persistent_redis.url, target="list")
    limit = 3_000
    frame = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("numPartitions", 2)
             .option("startTime", "0").option("limit", limit).option("maxEventsPerTrigger", 300).load())
    query = (frame.writeStream.format("redis-sink").options(**adapter.options(prefix))
             .option("retryBackoff", "100ms").option("writeRetries", "10")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="50 milliseconds").start())
    try:
        wait_until(lambda: len(adapter.read_back(prefix)) >= 600, timeout=120, message="first batches")
        persistent_redis.restart()
        adapter = RedisAdapter(persistent_redis.url, target="list")
        wait_until(lambda: not query.isActive or len(adapter.read_back(prefix)) >= limit, timeout=240,
                   message="all events after the restart")
        assert query.exception() is None
    finally:
        query.stop()
    assert sorted(adapter.read_back(prefix)) == expected_events(limit)


def test_connections_do_not_scan_package_metadata(redis_server, monkeypatch):
    """redis-py looks its own version up in the installed packages' metadata for every new connection unless it
    is told: a scan of sys.path that cost 180-330 ms per partition and micro-batch in a Spark Python worker."""
    import importlib.metadata

    from connectors.options import OptionReader
    from connectors.protocol import WriteIdentity
    from sinks.redis import RedisOptions, RedisSink

    lookups = []
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: lookups.append(name) or real(name))
    sink = RedisSink(RedisOptions.read(OptionReader({"url": redis_server.url}, name="redis-sink")))
    sink.check()
    conn = sink.open(WriteIdentity("q", 0, 0, 0))
    try:
        assert not sink.is_committed(conn, WriteIdentity("q", 0, 0, 0))
    finally:
        sink.close(conn)
    assert lookups == []


# -- keys of another type: Redis refuses such a command only at EXEC, and applies the rest of the transaction

LANES = 10


def _lane_sink(url: str, prefix: str, target: str):
    from connectors.options import OptionReader
    from sinks.redis import RedisOptions, RedisSink

    return RedisSink(RedisOptions.read(OptionReader(
        {"url": url, "target": target, "keyPrefix": f"{prefix}:", "keyColumn": "lane",
         "commitKeyPrefix": f"commit:{prefix}:"}, name="redis-sink")))


def _lane_batches(rows: int, per_batch: int):
    import pyarrow as pa

    return [pa.RecordBatch.from_pydict({"lane": pa.array([c % LANES for c in range(s, min(s + per_batch, rows))]),
                             "counter": pa.array(range(s, min(s + per_batch, rows)))})
            for s in range(0, rows, per_batch)]


def _write_partition(sink, identity, batches):
    conn = sink.open(identity)
    try:
        if not sink.is_committed(conn, identity):
            sink.write(conn, identity, iter(batches))
    finally:
        sink.close(conn)


def _lane_contents(client, prefix: str, target: str, lane: int) -> list[int]:
    key = f"{prefix}:{lane}"
    if target == "list":
        values = client.lrange(key, 0, -1)
    elif target == "hash":
        values = client.hvals(key)
    else:
        values = [fields[b"value"] for _, fields in client.xrange(key)]
    return sorted(json.loads(v)["counter"] for v in values)


@pytest.mark.parametrize("target", ["list", "hash", "stream"])
def test_a_key_of_another_type_refuses_the_partition_and_commits_nothing(redis_server, prefix, target):
    """The bug of 'Poison records': EXEC ran the rest of the transaction, record included, so a replay skipped
    the partition and the refused rows were lost. Now nothing of it is applied, each replay fails the same way,
    and once the key is fixed every row lands once."""
    from connectors.errors import DeliveryError
    from connectors.protocol import WriteIdentity

    client = redis_server.client()
    client.set(f"{prefix}:3", "a plain string")
    sink = _lane_sink(redis_server.url, prefix, target)
    identity = WriteIdentity("q", 0, 0, 0)
    batches = _lane_batches(1_000, 250)
    for _ in range(2):  # the first run, then its replay
        with pytest.raises(DeliveryError) as refused:
            _write_partition(sink, identity, batches)
        message = str(refused.value)
        assert f"row 3 of {identity}" in message and f"'{prefix}:3'" in message and "holds a string" in message
        assert "WRONGTYPE" in message and "Nothing of the partition was written" in message
        assert client.keys(f"{prefix}:*") == [f"{prefix}:3".encode()]
        assert client.keys(f"commit:{prefix}:*") == []
    client.delete(f"{prefix}:3")
    _write_partition(sink, identity, batches)
    _write_partition(sink, identity, batches)  # a replay after the commit: skipped
    for lane in range(LANES):
        assert _lane_contents(client, prefix, target, lane) == list(range(lane, 1_000, LANES))


def test_a_key_whose_type_changes_while_writing_marks_the_partition_refused(redis_server, prefix, monkeypatch):
    """Another client changes a key's type after the check and before EXEC: Redis applies the rest of the
    transaction; its commit record then says so, and every replay fails instead of skipping (loss) or writing
    again (duplicates)."""
    from connectors.errors import DeliveryError
    from connectors.protocol import WriteIdentity
    from sinks.redis import RedisSink

    client = redis_server.client()
    check = RedisSink._refuse_wrong_types

    def check_then_change(self, *args, **kwargs):
        check(self, *args, **kwargs)
        client.set(f"{prefix}:3", "changed meanwhile")

    monkeypatch.setattr(RedisSink, "_refuse_wrong_types", check_then_change)
    sink = _lane_sink(redis_server.url, prefix, "list")
    identity = WriteIdentity("q", 0, 0, 0)
    with pytest.raises(DeliveryError, match=f"on key '{prefix}:3', which another client made a string"):
        _write_partition(sink, identity, _lane_batches(100, 100))
    assert _lane_contents(client, prefix, "list", 4) == list(range(4, 100, LANES))  # the rest was applied
    monkeypatch.setattr(RedisSink, "_refuse_wrong_types", check)
    client.delete(f"{prefix}:3")
    with pytest.raises(DeliveryError, match="applied only in part.*not replayed"):
        _write_partition(sink, identity, _lane_batches(100, 100))
    assert _lane_contents(client, prefix, "list", 4) == list(range(4, 100, LANES))  # not written twice


def test_a_refused_key_fails_every_restart_of_the_query_until_it_is_fixed(spark, redis_server, prefix, tmp_path):
    """The issue's run: 20,000 events in batches of 10,000 to ten lists, one key a string. Before the fix run 1
    and run 2 failed, run 3 completed with the 2,000 rows of that list gone."""
    from pyspark.sql import functions as F

    rows = 20_000
    client = redis_server.client()
    client.set(f"{prefix}:3", "a plain string")

    def run():
        frame = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("numPartitions", 2)
                 .option("startTime", "0").option("limit", rows).option("maxEventsPerTrigger", rows // 2).load()
                 .withColumn("lane", F.col("counter") % LANES))
        query = (frame.writeStream.format("redis-sink").option("url", redis_server.url).option("target", "list")
                 .option("keyPrefix", f"{prefix}:").option("keyColumn", "lane")
                 .option("commitKeyPrefix", f"commit:{prefix}:")
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
        try:
            query.awaitTermination(180)
        finally:
            query.stop()

    for _ in range(3):
        with pytest.raises(Exception, match=f"Redis refuses row .* its key '{prefix}:3' holds a string"):
            run()
        assert client.keys(f"{prefix}:*") == [f"{prefix}:3".encode()]
    client.delete(f"{prefix}:3")
    run()
    landed = sorted((e["subtask_index"], e["counter"]) for lane in range(LANES)
                    for e in map(json.loads, client.lrange(f"{prefix}:{lane}", 0, -1)))
    assert landed == expected_events(rows)
