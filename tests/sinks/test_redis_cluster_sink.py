"""The Redis sink in cluster mode against a real Redis Cluster (3 primaries, 3 replicas), read back with
`redis-cli -c`: every target and option as on one node, a replay after a crash between slot groups, the options
refused at start. The streaming runs (SIGKILL of the driver, a primary killed, a slot migrated) are at the end."""

from __future__ import annotations

import contextlib
import json
import re
import uuid

import pyarrow as pa
import pytest

from connectors.errors import OptionError
from connectors.options import OptionReader
from connectors.protocol import WriteIdentity
from connectors.servers.tap import UP
from sinks.redis.cluster import plan
from sinks.redis.resp import commands
from sinks.redis.sink import RedisSink, RedisSinkDataSource
from sinks.redis.slots import key_slot
from tests.impulse.helpers import poll
from tests.readme import DOCS, python_block
from tests.sinks import poison_driver

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def sink(url: str, **options) -> RedisSink:
    """The sink as the driver builds it (`RedisSinkDataSource.build`: cluster=auto resolved, options checked)."""
    reader = OptionReader({"url": url, **options}, name="redis sink")
    return RedisSinkDataSource.build(RedisSinkDataSource.__new__(RedisSinkDataSource), reader,
                                     _Schema(["k", "f", "v", "op", "score"]))


class _Schema:
    """The little of a Spark schema `RedisSinkDataSource.build` reads: the column names."""

    def __init__(self, names):
        self.names = names

    def fieldNames(self):  # noqa: N802 - Spark's name
        return self.names

    def __getitem__(self, name):
        from pyspark.sql.types import DoubleType, StructField
        return StructField(name, DoubleType())


def write(target: RedisSink, batch: pa.RecordBatch, commit_id: str, batch_id: int = 0, partition: int = 0) -> int:
    identity = WriteIdentity(commit_id, batch_id, partition, 0)
    conn = target.open(identity)
    try:
        if target.is_committed(conn, identity):
            return -1
        return target.write(conn, identity, iter([batch]))
    finally:
        target.close(conn)


def rows(n: int, keys: int, **extra) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"k": [f"k{i % keys}" for i in range(n)], "f": [f"f{i}" for i in range(n)],
                                       "v": [f"v{i}" for i in range(n)], **extra})


def cli_lines(cluster, *command: str) -> list[str]:
    out = cluster.cli(*command)
    if out in ("(empty array)", "(nil)", "(empty list or set)"):
        return []
    return [line.split(") ", 1)[1].strip('"') if ") " in line else line.strip('"') for line in out.splitlines()]


def stream_values(cluster, key: str) -> list[str]:
    """The values (``v<n>``) of a stream's entries, in order, as redis-cli -c prints them."""
    return re.findall(r'"(v\d+)"$', cluster.cli("XRANGE", key, "-", "+"), re.MULTILINE)


def namespace() -> str:
    return f"cs{uuid.uuid4().hex[:8]}:"


def test_auto_finds_the_cluster_once_and_refuses_what_a_cluster_cannot_take(redis_cluster, redis_server):
    assert sink(redis_cluster.url).cluster is True
    assert sink(redis_server.url).cluster is False
    with pytest.raises(OptionError, match="commitKeyPrefix.*without '{'"):
        sink(redis_cluster.url, commitKeyPrefix="c{x}:")
    sink(redis_server.url, commitKeyPrefix="c{x}:")  # one node: any prefix
    with pytest.raises(OptionError, match="minReplicas.*single node"):
        sink(redis_server.url, minReplicas="1")
    with pytest.raises(OptionError, match="cluster"):
        sink(redis_cluster.url, cluster="maybe")
    with pytest.raises(OptionError, match="url.*redis:// or rediss:// URL in cluster mode"):
        sink("unix:///tmp/redis.sock", cluster="true")
    with pytest.raises(OptionError, match="addressMap.*single node"):
        sink(redis_server.url, addressMap="10.0.0.1:6379=127.0.0.1:6379")
    for bad in ("10.0.0.1:6379", "10.0.0.1=127.0.0.1:1", "a:1=b:1,a:1=c:2", "a:1=b:70000"):
        with pytest.raises(OptionError, match="addressMap") as error:
            sink(redis_cluster.url, addressMap=bad)
        assert "host:port" in str(error.value)


def test_address_map_sends_a_node_s_traffic_where_the_map_says(redis_cluster):
    """Every primary announced at its own port is reached through a forwarder of its own (a cluster behind port
    forwarding): the rows land once, and every node's writes went through its forwarder."""
    from connectors.servers.tap import Tap

    ns = namespace()
    primaries = redis_cluster.primaries()
    with contextlib.ExitStack() as stack:
        taps = {p.address: stack.enter_context(Tap(p.address)) for p in primaries}
        mapping = ",".join(f"{announced}={tap.address}" for announced, tap in taps.items())
        seed = next(iter(taps.values())).address
        target = sink(f"redis://{seed}", target="list", keyPrefix=ns, keyColumn="k", valueColumn="v",
                      commitKeyPrefix=ns + "c:", addressMap=mapping)
        batch = rows(300, 30)
        assert write(target, batch, "q") == 0
        carried = {announced: sum(c.total(UP) for c in tap.snapshot()) for announced, tap in taps.items()}
    assert all(carried.values()), f"a primary was reached around its forwarder: {carried}"
    for k in range(30):
        assert cli_lines(redis_cluster, "LRANGE", f"{ns}k{k}", "0", "-1") == [f"v{i}" for i in range(k, 300, 30)]


def test_a_list_partition_lands_once_on_all_primaries_and_a_replay_skips_it(redis_cluster):
    ns = namespace()
    target = sink(redis_cluster.url, target="list", keyPrefix=ns, keyColumn="k", valueColumn="v",
                  commitKeyPrefix=ns + "c:", maxLength="1000", ttl="600")
    batch = rows(600, 60)
    assert len({redis_cluster.node_for_key(f"{ns}k{i}").id for i in range(60)}) == 3
    assert write(target, batch, "q") == 0
    assert write(target, batch, "q") == -1  # the summary record: skipped whole
    for key in range(60):
        assert cli_lines(redis_cluster, "LRANGE", f"{ns}k{key}", "0", "-1") == [f"v{i}" for i in range(key, 600, 60)]
        assert 0 < int(redis_cluster.cli("TTL", f"{ns}k{key}").split()[-1]) <= 600
    assert redis_cluster.cli("GET", f"{ns}c:q:0") == '"0"'  # the summary (no fingerprint outside the protocol)


def test_a_replay_after_a_crash_between_groups_writes_only_the_groups_missing(redis_cluster):
    ns = namespace()
    options = dict(target="list", keyPrefix=ns, keyColumn="k", valueColumn="v", commitKeyPrefix=ns + "c:")
    target = sink(redis_cluster.url, **options)
    batch = rows(300, 30)
    # the first attempt died after a third of its groups: apply those alone, as the writer had
    keys = pa.array([f"{ns}k{i % 30}".encode() for i in range(300)], pa.binary())
    writes = plan(keys, commands(b"RPUSH", keys, batch.column(2).cast(pa.binary())), commit_key_prefix=ns + "c:",
                  commit_id="q", partition=0, batch_id=0, record_value=b"0 300:x")
    writer = target.open(WriteIdentity("q", 0, 0, 0))
    try:
        writer.write(writes[::3])
    finally:
        target.close(writer)
    assert write(target, batch, "q") == 0
    for key in range(30):
        assert cli_lines(redis_cluster, "LRANGE", f"{ns}k{key}", "0", "-1") == [f"v{i}" for i in range(key, 300, 30)]


@pytest.mark.parametrize("target", ["string", "hash", "stream", "set", "zset"])
def test_every_target_writes_as_on_one_node(redis_cluster, target):
    ns = namespace()
    extra = {"scoreColumn": "score", "maxLength": "2"} if target == "zset" else \
        {"maxLength": "3"} if target == "stream" else {}
    if target in ("string", "hash"):
        extra["opColumn"] = "op"
    if target != "string":
        extra["fieldColumn"] = "f"
    options = {"target": target, "keyPrefix": ns, "keyColumn": "k", "valueColumn": "v", "commitKeyPrefix": ns + "c:",
               **({k: v for k, v in extra.items() if not (k == "fieldColumn" and target != "hash")})}
    n = 40
    ops = ["delete" if i >= 36 else "insert" for i in range(n)]
    batch = rows(n, 12, op=ops, score=[float(i) for i in range(n)])
    write(sink(redis_cluster.url, **options), batch, "q")
    for key in range(12):
        name = f"{ns}k{key}"
        mine = [i for i in range(key, n, 12)]
        if target == "string":
            last = mine[-1]
            assert cli_lines(redis_cluster, "GET", name) == ([] if last >= 36 else [f"v{last}"])
        elif target == "hash":
            got = cli_lines(redis_cluster, "HGETALL", name)
            assert dict(zip(got[::2], got[1::2])) == {f"f{i}": f"v{i}" for i in mine if i < 36}
        elif target == "stream":
            assert stream_values(redis_cluster, name) == [f"v{i}" for i in mine[-3:]]
        elif target == "set":
            assert sorted(cli_lines(redis_cluster, "SMEMBERS", name)) == sorted(f"v{i}" for i in mine)
        else:
            assert cli_lines(redis_cluster, "ZRANGE", name, "0", "-1") == [f"v{i}" for i in mine[-2:]]


def test_refused_rows_go_to_the_dead_letter_stream_in_its_own_slot(redis_cluster):
    ns = namespace()
    redis_cluster.cli("SET", f"{ns}k3", "a plain string")
    dead = f"dead{ns}"
    target = sink(redis_cluster.url, target="list", keyPrefix=ns, keyColumn="k", valueColumn="v",
                  commitKeyPrefix=ns + "c:", deadLetterKey=dead)
    assert write(target, rows(100, 10), "q") == 10
    assert write(target, rows(100, 10), "q") == -1
    assert sorted(stream_values(redis_cluster, dead)) == sorted(f"v{i}" for i in range(3, 100, 10))
    assert cli_lines(redis_cluster, "LRANGE", f"{ns}k4", "0", "-1") == [f"v{i}" for i in range(4, 100, 10)]
    assert key_slot(dead) != key_slot(f"{ns}k3")


def test_the_readme_cluster_block_runs(spark, redis_cluster, tmp_path):
    """The README's Redis Cluster block as written, after the blocks it builds on, with the cluster's address, a key
    prefix of the test's own and its checkpoint: the events land once, read back with redis-cli -c."""
    ns = namespace()

    def filled(block: str) -> str:
        return (block.replace("redis://localhost:7000", redis_cluster.url).replace('"events:"', f'"{ns}"')
                .replace('"/tmp/ck-cluster"', f'"{tmp_path / "ck"}"'))

    blocks = [python_block("## Register the formats", page=DOCS / "how-to" / "install.md"),
              python_block("## A stream at a fixed rate", page=DOCS / "how-to" / "impulse-source.md"),
              python_block("## Point the sink at any node", page=DOCS / "how-to" / "redis-cluster.md")]
    assert f'"{ns}"' in filled(blocks[2]) and redis_cluster.url in filled(blocks[2])
    namespace_: dict = {}
    before = {q.id for q in spark.streams.active}
    for block in blocks:
        exec(compile(filled(block), "README.md", "exec"), namespace_)  # noqa: S102 - the README's own examples
    [query] = [q for q in spark.streams.active if q.id not in before]
    try:
        poll(lambda: read_lanes(redis_cluster, ns, 4), timeout=120, interval=0.5, what="events in the lists")
    finally:
        query.stop()
    events = read_lanes(redis_cluster, ns, 4)
    assert events and len(set(events)) == len(events)
    assert {subtask for subtask, _ in events} <= set(range(4))


# --- streaming runs, read back with redis-cli -c ---------------------------------------------------------------

def read_lanes(cluster, prefix: str, lanes: int) -> list[tuple[int, int]]:
    """Every (subtask_index, counter) of the lane lists, as `redis-cli -c` returns them (one process)."""
    out = cluster.cli(commands=[f"LRANGE {prefix}{lane} 0 -1" for lane in range(lanes)])
    events = []
    for line in out.splitlines():
        if ") " in line and "{" in line:
            value = json.loads(json.loads(line.split(") ", 1)[1]))
            events.append((value["subtask_index"], value["counter"]))
    return events


def lanes_options(cluster, ns: str, **extra) -> dict:
    return {"url": cluster.url, "target": "list", "keyPrefix": f"{ns}lane:", "keyColumn": "lane",
            "commitKeyPrefix": f"{ns}c:", "cluster": "true", **extra}


LANE_COLUMNS = ["counter", "subtask_index", "timestamp", "CAST(counter % 30 AS STRING) AS lane"]


def expect_once(events: list[tuple[int, int]], rows: int) -> None:
    assert len(events) == rows and len(set(events)) == rows, (len(events), len(set(events)))


@pytest.mark.slow
def test_200000_events_exactly_once_through_a_sigkill_of_the_driver(spark, redis_cluster, tmp_path):
    ns = namespace()
    assert len({redis_cluster.node_for_key(f"{ns}lane:{lane}").id for lane in range(30)}) == 3
    args = {"format": "redis-sink", "options": lanes_options(redis_cluster, ns), "rows": 200_000,
            "perTrigger": 20_000, "checkpoint": str(tmp_path / "ck"), "columns": LANE_COLUMNS}
    poison_driver.kill_mid_batch(args)
    query = poison_driver.start(spark, "redis-sink", args["options"], 200_000, 20_000, args["checkpoint"], LANE_COLUMNS)
    assert query.awaitTermination(300) and query.exception() is None
    expect_once(read_lanes(redis_cluster, f"{ns}lane:", 30), 200_000)


@pytest.mark.slow
def test_a_primary_killed_mid_run_with_min_replicas_loses_no_acknowledged_event(spark, redis_cluster, tmp_path):
    ns = namespace()
    options = lanes_options(redis_cluster, ns, minReplicas="1", writeRetries="20", retryBackoff="500ms")
    rows_total = 60_000
    query = poison_driver.start(spark, "redis-sink", options, rows_total, 3_000, str(tmp_path / "ck"), LANE_COLUMNS)
    try:
        poll(lambda: len(query.recentProgress) >= 2, timeout=120, what="two batches")
        redis_cluster.kill_primary(key_slot(f"{ns}lane:0"))  # its replica promoted, with no replica of its own:
        redis_cluster.revive()  # WAIT 1 fails (retried) until the killed node is back, a replica of the new primary
        assert query.awaitTermination(300) and query.exception() is None
    finally:
        query.stop()
        redis_cluster.revive()
    expect_once(read_lanes(redis_cluster, f"{ns}lane:", 30), rows_total)


@pytest.mark.slow
def test_slots_resharded_during_a_run_keep_it_exactly_once(spark, redis_cluster, tmp_path):
    ns = namespace()
    rows_total = 60_000
    options = lanes_options(redis_cluster, ns, writeRetries="20")
    source = redis_cluster.node_for_key(f"{ns}lane:0")
    target = next(p for p in redis_cluster.primaries() if p.id != source.id)
    # reshard moves a source's slots lowest first: those up to the lowest slot of a lane there (not all of them: an
    # emptied primary turns into a replica), so that lane's list moves mid-run
    slot = min(key_slot(f"{ns}lane:{lane}") for lane in range(30) if source.serves(key_slot(f"{ns}lane:{lane}")))
    moved = sum(max(0, min(last, slot) - first + 1) for first, last in source.slots)
    query = poison_driver.start(spark, "redis-sink", options, rows_total, 3_000, str(tmp_path / "ck"), LANE_COLUMNS)
    try:
        poll(lambda: len(query.recentProgress) >= 1, timeout=120, what="a batch")
        redis_cluster.reshard(moved, source, target)
        assert redis_cluster.node_for_slot(slot).id == target.id
        assert query.awaitTermination(300) and query.exception() is None
    finally:
        query.stop()
        if redis_cluster.node_for_slot(slot).id == target.id:  # as many slots back to the source
            redis_cluster.reshard(moved, target, source)
    expect_once(read_lanes(redis_cluster, f"{ns}lane:", 30), rows_total)
