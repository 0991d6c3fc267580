"""The Redis sink against a real redis-server: every target and option, and a server restart mid-stream."""

from __future__ import annotations

import importlib.metadata
import json
import uuid

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from connectors.conformance import expected_events, run_query
from connectors.errors import DeliveryError, OptionError
from connectors.options import OptionReader
from connectors.protocol import Fingerprint, WriteIdentity
from connectors.servers import RedisServer, wait_until
from sinks.redis.adapter import RedisAdapter
from sinks.redis.options import RedisOptions
from sinks.redis.sink import RedisSink, RedisSinkDataSource
from tests.readme import DOCS, python_block

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
    is told: a scan of sys.path, long in a Spark Python worker, per partition and micro-batch."""
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


def _lane_sink(url: str, prefix: str, target: str, **options):
    return RedisSink(RedisOptions.read(OptionReader(
        {"url": url, "target": target, "keyPrefix": f"{prefix}:", "keyColumn": "lane",
         "commitKeyPrefix": f"commit:{prefix}:", **options}, name="redis-sink")))


def _lane_batches(rows: int, per_batch: int):
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
    elif target == "set":
        values = client.smembers(key)
    elif target == "zset":
        values = client.zrange(key, 0, -1)
    else:
        values = [fields[b"value"] for _, fields in client.xrange(key)]
    return sorted(json.loads(v)["counter"] for v in values)


@pytest.mark.parametrize("target", ["list", "hash", "stream", "set"])
def test_a_key_of_another_type_refuses_the_partition_and_commits_nothing(redis_server, prefix, target):
    """The bug of 'Poison records': EXEC ran the rest of the transaction, record included, so a replay skipped
    the partition and the refused rows were lost. Now nothing of it is applied, each replay fails the same way,
    and once the key is fixed every row lands once."""
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
    client = redis_server.client()
    check = RedisSink._refusals

    def check_then_change(self, *args, **kwargs):
        reasons = check(self, *args, **kwargs)
        client.set(f"{prefix}:3", "changed meanwhile")
        return reasons

    monkeypatch.setattr(RedisSink, "_refusals", check_then_change)
    sink = _lane_sink(redis_server.url, prefix, "list")
    identity = WriteIdentity("q", 0, 0, 0)
    with pytest.raises(DeliveryError, match=f"on key '{prefix}:3', which another client made a string"):
        _write_partition(sink, identity, _lane_batches(100, 100))
    assert _lane_contents(client, prefix, "list", 4) == list(range(4, 100, LANES))  # the rest was applied
    monkeypatch.setattr(RedisSink, "_refusals", check)
    client.delete(f"{prefix}:3")
    with pytest.raises(DeliveryError, match="applied only in part.*not replayed"):
        _write_partition(sink, identity, _lane_batches(100, 100))
    assert _lane_contents(client, prefix, "list", 4) == list(range(4, 100, LANES))  # not written twice


def test_a_refused_key_fails_every_restart_of_the_query_until_it_is_fixed(spark, redis_server, prefix, tmp_path):
    """20,000 events in batches of 10,000 to ten lists, one key a string: every run fails naming the key (a sink
    that skipped the refused partition's rows would complete a later run with that list's 2,000 rows gone)."""
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


def test_the_readme_redis_block_runs(spark, redis_server, tmp_path):
    """The README's Redis sink block as written, after the blocks it builds on (`spark`, then `events` from "The
    impulse source"), with the test server's address, a key of the test's own and its checkpoint filled in: the
    events land in the list as JSON objects."""
    key = f"events-{uuid.uuid4().hex[:8]}"

    def filled(block: str) -> str:
        return (block.replace("redis://localhost:6379/0", redis_server.url).replace('"keyPrefix", "events"',
                                                                                    f'"keyPrefix", "{key}"')
                .replace('"/tmp/ck"', f'"{tmp_path / "ck"}"'))

    blocks = [python_block("## Register the formats", page=DOCS / "how-to" / "install.md"),
              python_block("## A stream at a fixed rate", page=DOCS / "how-to" / "impulse-source.md"),
              python_block("## A list per query", page=DOCS / "how-to" / "redis-sink.md")]
    namespace: dict = {}
    before = {q.id for q in spark.streams.active}
    for block in blocks:
        exec(compile(filled(block), "README.md", "exec"), namespace)  # noqa: S102 - the README's own examples
    [query] = [q for q in spark.streams.active if q.id not in before]  # the block starts one, unassigned
    client = redis_server.client()
    try:
        wait_until(lambda: client.llen(key) > 0, 120, 0.2, f"events in the list {key}")
    finally:
        query.stop()
    rows = [json.loads(v) for v in client.lrange(key, 0, -1)]
    assert len({(r["subtask_index"], r["counter"]) for r in rows}) == len(rows)  # exactly once: no duplicate
    assert {r["subtask_index"] for r in rows} <= set(range(4))  # the block's numPartitions


def test_the_readme_leaderboard_block_keeps_each_games_ten_best_scores(spark, redis_server, tmp_path):
    """The README's leaderboard block as written (server, key prefix and checkpoint filled in) over a bounded
    `scores` stream: each game's sorted set holds its ten highest scores, as the same rows read in batch say."""
    prefix = f"top-{uuid.uuid4().hex[:8]}:"
    options = {"eventsPerSecond": "1000000", "numPartitions": "2", "startTime": "0", "limit": "400"}

    def scores_of(reader):
        return (reader.format("impulse").options(**options).load()
                .select((F.col("counter") % 3).alias("game"), F.concat(F.lit("p"), F.col("subtask_index"), F.lit("-"),
                                                                       F.col("counter")).alias("player"),
                        ((F.col("counter") * 7919 + F.col("subtask_index")) % 1000).alias("points")))

    block = (python_block("## A leaderboard", page=DOCS / "how-to" / "redis-sink.md")
             .replace("redis://localhost:6379/0", redis_server.url)
             .replace('"keyPrefix", "top:"', f'"keyPrefix", "{prefix}"')
             .replace('"/tmp/ck-top"', f'"{tmp_path / "ck"}"'))
    namespace = {"scores": scores_of(spark.readStream)}
    before = {q.id for q in spark.streams.active}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    [query] = [q for q in spark.streams.active if q.id not in before]
    client = redis_server.client()
    try:
        wait_until(lambda: query.lastProgress is not None and query.lastProgress["numInputRows"] == 0
                   and sum(client.zcard(f"{prefix}{g}") for g in range(3)) == 30, 120, 0.2, "ten scores per game")
    finally:
        query.stop()
    rows = scores_of(spark.read).collect()
    for game in range(3):
        best = sorted(((r["points"], r["player"]) for r in rows if r["game"] == game), reverse=True)[:10]
        got = client.zrange(f"{prefix}{game}", 0, -1, withscores=True)
        assert sorted((int(score), member.decode()) for member, score in got) == sorted(best)


# -- deadLetterKey: the refused rows go to a stream in the partition's transaction

def _dead_letters(client, key: str) -> list[dict]:
    return [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in client.xrange(key)]


@pytest.mark.parametrize("target", ["list", "hash", "stream", "set"])
def test_dead_letter_key_takes_the_refused_rows_once_in_the_partitions_transaction(redis_server, prefix, target):
    client = redis_server.client()
    client.set(f"{prefix}:3", "a plain string")
    client.hset(f"{prefix}:7", "f", "a hash") if target != "hash" else client.rpush(f"{prefix}:7", "a list")
    sink = _lane_sink(redis_server.url, prefix, target, deadLetterKey=f"dead:{prefix}")
    identity = WriteIdentity("q", 4, 1, 0)
    rows = 1_000
    conn = sink.open(identity)
    try:
        assert not sink.is_committed(conn, identity)
        dead = sink.write(conn, identity, iter(_lane_batches(rows, 250)))
    finally:
        sink.close(conn)
    refused = [c for c in range(rows) if c % LANES in (3, 7)]
    assert dead == len(refused)
    _write_partition(sink, identity, _lane_batches(rows, 250))  # the replay: skipped, nothing written twice
    letters = _dead_letters(client, f"dead:{prefix}")
    assert [int(letter["impulse.row"]) for letter in letters] == refused  # row == counter here
    assert [json.loads(letter["value"])["counter"] for letter in letters] == refused
    assert {letter["key"] for letter in letters} == {f"{prefix}:3", f"{prefix}:7"}
    first = letters[0]
    assert (first["impulse.error.code"], first["impulse.commit.id"], first["impulse.batch"],
            first["impulse.partition"]) == ("WRONGTYPE", "q", "4", "1")
    assert first["impulse.error.reason"] == f"the key holds a string, and target '{target}' writes a {target}"
    assert ("field" in first) == (target == "hash")
    for lane in set(range(LANES)) - {3, 7}:
        assert _lane_contents(client, prefix, target, lane) == list(range(lane, rows, LANES))
    assert client.type(f"{prefix}:3") == b"string" and client.get(f"commit:{prefix}:q:1").split()[0] == b"4"


def test_a_dead_letter_key_of_another_type_refuses_the_partition(redis_server, prefix):
    client = redis_server.client()
    client.set(f"{prefix}:3", "a plain string")
    client.set(f"dead:{prefix}", "not a stream")
    sink = _lane_sink(redis_server.url, prefix, "list", deadLetterKey=f"dead:{prefix}")
    with pytest.raises(DeliveryError, match=f"deadLetterKey 'dead:{prefix}' holds a string"):
        _write_partition(sink, WriteIdentity("q", 0, 0, 0), _lane_batches(100, 100))
    assert sorted(client.keys(f"*{prefix}*")) == sorted([f"{prefix}:3".encode(), f"dead:{prefix}".encode()])


@pytest.mark.parametrize("options, allowed", [
    ({"target": "list", "keyPrefix": "events:dead"}, "they go to the key 'events:dead'"),
    ({"target": "list", "keyPrefix": "events:", "keyColumn": "lane"}, "keys starting with 'events:'"),
    ({"target": "string", "keyPrefix": "events:"}, "keys starting with 'events:'"),
    ({"target": "hash", "keyPrefix": "h", "commitKeyPrefix": "events"}, "outside commitKeyPrefix 'events'"),
])
def test_a_dead_letter_key_rows_could_be_written_to_fails_at_start(options, allowed):
    with pytest.raises(OptionError, match=f"events:dead.*deadLetterKey.*{allowed}"):
        RedisOptions.read(OptionReader({"url": "redis://localhost", "deadLetterKey": "events:dead", **options},
                                       name="redis-sink"))


# -- target set (SADD) and zset (ZADD with scoreColumn)

def test_set_and_zset_targets_through_spark_once_across_a_replay(spark, redis_server, prefix, tmp_path):
    """Members per lane, written by a streaming query; the sorted set keeps its 3 highest scores, both expire."""
    rows = 200

    def run(target, **options):
        frame = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("numPartitions", 2)
                 .option("startTime", "0").option("limit", rows).option("maxEventsPerTrigger", rows // 2).load()
                 .select((F.col("counter") % 4).alias("lane"), F.col("counter").cast("string").alias("member"),
                         (F.col("counter") * 2 + F.col("subtask_index") + 0.5).alias("score")))
        writer = (frame.writeStream.format("redis-sink").option("url", redis_server.url).option("target", target)
                  .option("keyPrefix", f"{prefix}:{target}:").option("keyColumn", "lane")
                  .option("valueColumn", "member").option("ttl", "300")
                  .option("commitKeyPrefix", f"commit:{prefix}:{target}:")
                  .option("checkpointLocation", str(tmp_path / target)))
        for name, value in options.items():
            writer = writer.option(name, value)
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(120)
        assert query.exception() is None

    run("set")
    run("zset", scoreColumn="score", maxLength="3")
    client = redis_server.client()
    per_subtask = rows // 2
    for lane in range(4):
        counters = range(lane, per_subtask, 4)
        assert sorted(map(int, client.smembers(f"{prefix}:set:{lane}"))) == list(counters)
        # a member (the counter) of both subtasks keeps the later row's score; the 3 highest are kept
        top = client.zrange(f"{prefix}:zset:{lane}", 0, -1, withscores=True)
        assert len(top) == 3 and [int(m) for m, _ in top] == list(counters)[-3:]
        assert all(score in (int(m) * 2 + 0.5, int(m) * 2 + 1.5) for m, score in top)
        assert 0 < client.ttl(f"{prefix}:zset:{lane}") <= 300 and 0 < client.ttl(f"{prefix}:set:{lane}") <= 300


def test_zset_replay_and_refused_scores(redis_server, prefix):
    """A partition written twice (its replay) changes nothing; a null or NaN score fails the partition before
    anything is applied, or goes to deadLetterKey."""
    client = redis_server.client()
    batch = pa.record_batch({"lane": pa.array([0, 1, 0, 1]), "score": pa.array([1.0, None, float("nan"), 4.0]),
                             "counter": pa.array([0, 1, 2, 3])})
    sink = _lane_sink(redis_server.url, prefix, "zset", scoreColumn="score", valueColumn="counter")
    with pytest.raises(DeliveryError, match=r"row 1 of .*'scoreColumn' 'score'\) is None.*2 row\(s\)"):
        _write_partition(sink, WriteIdentity("q", 0, 0, 0), [batch])
    assert client.keys(f"*{prefix}*") == []
    sink = _lane_sink(redis_server.url, prefix, "zset", scoreColumn="score", valueColumn="counter",
                      deadLetterKey=f"dead:{prefix}")
    for _ in range(2):
        _write_partition(sink, WriteIdentity("q", 0, 0, 0), [batch])
    assert client.zrange(f"{prefix}:0", 0, -1, withscores=True) == [(b"0", 1.0)]
    assert client.zrange(f"{prefix}:1", 0, -1, withscores=True) == [(b"3", 4.0)]
    letters = _dead_letters(client, f"dead:{prefix}")
    assert [(d["impulse.row"], d["value"], d["impulse.error.code"]) for d in letters] == [("1", "1", "ERR"),
                                                                                       ("2", "2", "ERR")]


@pytest.mark.parametrize("options, message", [
    ({"target": "zset"}, "scoreColumn.*a numeric column for target 'zset'"),
    ({"target": "set", "scoreColumn": "score"}, "scoreColumn.*no value for target 'set'"),
    ({"target": "set", "maxLength": "5"}, "maxLength.*list, stream or zset"),
])
def test_set_and_zset_options_fail_at_start(options, message):
    with pytest.raises(OptionError, match=message):
        RedisOptions.read(OptionReader({"url": "redis://localhost", "keyPrefix": "k", **options}, name="redis-sink"))


def test_a_score_column_that_is_not_numeric_fails_at_start():
    schema = StructType([StructField("score", StringType())])
    reader = OptionReader({"url": "redis://localhost", "keyPrefix": "k", "target": "zset", "scoreColumn": "score"},
                          name="redis-sink")
    with pytest.raises(OptionError, match="'score'.*scoreColumn.*numeric column \\(this one is string"):
        RedisSinkDataSource.build(None, reader, schema)
