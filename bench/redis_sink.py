"""Throughput of the Redis sink against a plain pipelined redis-py loop, same rows, same local server.

One run starts one ``redis-server`` (no persistence) and writes the same impulse rows (``SET
<prefix><subtask_index>:<counter> <row as JSON>``) three ways, flushing the database in between:

- ``plain``: a redis-py ``pipeline(transaction=False)`` loop over prebuilt keys and values, executed
  every ``--chunk`` commands, one connection (building the values is not timed);
- ``sink``: the Redis sink's own write path (`RedisSink.write`: RESP encoded with pyarrow, one
  MULTI/EXEC per partition with its commit record) on one connection, fed the same record batches;
- ``spark``: impulse → ``redis-sink`` through Spark (``local[2]``, 2 partitions), steady-state
  micro-batches only: rows / Σ triggerExecution (source generation and Spark's overhead included).

With ``--cluster`` it also starts a Redis Cluster (3 primaries, 3 replicas, `connectors.servers.RedisCluster`)
and writes the same rows there two more ways, the cluster's keys deleted in between:

- ``cluster_plain``: a redis-py ``RedisCluster`` ``pipeline()`` loop (it splits each execute by node) over the
  prebuilt keys and values, executed every ``--chunk`` commands;
- ``cluster_sink``: the sink's write path in cluster mode (``cluster=true``: the partition grouped by slot, one
  atomic script with its commit record per slot group, a node's groups in one write: `sinks.redis.cluster`), fed
  the same record batches.

Example::

    python bench/redis_sink.py --rows 1000000 --payload-bytes 100 --json
    python bench/redis_sink.py --rows 300000 --skip-spark --cluster
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from connectors.options import OptionReader  # noqa: E402
from connectors.protocol import WriteIdentity  # noqa: E402
from connectors.rows import json_objects  # noqa: E402
from connectors.servers import RedisCluster, RedisServer  # noqa: E402
from connectors.session import local_session
from impulse.events import EventLayout, event_batches  # noqa: E402
from impulse.schedule import Schedule  # noqa: E402
from sinks.redis.options import RedisOptions
from sinks.redis.sink import RedisSink  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows written by each contender (rows)")
    parser.add_argument("--payload-bytes", type=int, default=100, help="impulse payloadBytes (bytes per row)")
    parser.add_argument("--chunk", type=int, default=10_000, help="commands per pipeline execute() of the plain loop")
    parser.add_argument("--spark-batches", type=int, default=4, help="measured micro-batches of the Spark run")
    parser.add_argument("--skip-spark", action="store_true", help="measure plain and sink only")
    parser.add_argument("--cluster", action="store_true", help="also write to a Redis Cluster (cluster_plain, "
                                                                    "cluster_sink)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return parser.parse_args(argv)


def impulse_batches(rows: int, payload_bytes: int, partition: int = 0):
    layout = EventLayout(0, Schedule(0, 1.0), 0, None, payload_bytes)
    return list(event_batches(partition, 0, rows, layout))


def run_plain(client, batches, chunk: int) -> float:
    keys = [f"b:{k}" for b in batches for k in _ids(b)]
    values = [v for b in batches for v in json_objects(b).to_pylist()]
    start = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    for i, (key, value) in enumerate(zip(keys, values), 1):
        pipe.set(key, value)
        if i % chunk == 0:
            pipe.execute()
    pipe.execute()
    return time.perf_counter() - start


def _ids(batch):
    return [f"{s}:{c}" for s, c in zip(batch.column("subtask_index").to_pylist(), batch.column("counter").to_pylist())]


def run_sink(url: str, batches, **options: str) -> tuple[float, RedisSink, WriteIdentity]:
    sink = RedisSink(RedisOptions.read(OptionReader({"url": url, "keyPrefix": "b:", **options}, name="redis sink")))
    identity = WriteIdentity("bench", 0, 0, 0)
    start = time.perf_counter()
    conn = sink.open(identity)
    try:
        assert not sink.is_committed(conn, identity)
        sink.write(conn, identity, iter(batches))
    finally:
        sink.close(conn)
    return time.perf_counter() - start, sink, identity


def check_sink_keys(client, sink: RedisSink, identity: WriteIdentity, rows: int) -> None:
    """Every row landed under the key prefix, and the only other keys are the sink's commit records (however
    many it keeps), the partition's among them."""
    records = {key.decode() for key in client.scan_iter(match=f"{sink.options.commit_key_prefix}*", count=10_000)}
    assert sink.partition_key(identity) in records, sorted(records)
    assert client.dbsize() == rows + len(records), (client.dbsize(), rows, sorted(records))


def run_spark(url: str, rows: int, payload_bytes: int, batches: int) -> tuple[float, dict]:
    spark = local_session("local[2]", "bench-redis-sink")
    warmup = 2
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (spark.readStream.format("impulse").option("delay", "1us").option("numPartitions", 2)
                 .option("startTime", "0").option("payloadBytes", payload_bytes)
                 .option("limit", rows * (warmup + batches)).option("maxEventsPerTrigger", rows).load()
                 .writeStream.format("redis-sink").option("url", url).option("keyPrefix", "s:")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        progress = [p for p in query.recentProgress if p["numInputRows"]][warmup:]
    spark.stop()
    seconds = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    phases = {k: sum(p["durationMs"].get(k, 0) for p in progress) / len(progress)
              for k in ("addBatch", "latestOffset", "queryPlanning", "walCommit", "commitOffsets")}
    return sum(p["numInputRows"] for p in progress) / seconds, phases


def run_cluster(args, batches) -> dict:
    """The cluster contenders: rows/s of the redis-py RedisCluster pipeline loop and of the sink's cluster write
    path, each checked by counting the keys on every primary."""
    cluster = RedisCluster()
    cluster.start()
    try:
        client = cluster.client()
        plain_s = run_plain(client, batches, args.chunk)
        assert _count(client, "b:*") == args.rows
        _flush(client)
        sink_s, sink, identity = run_sink(cluster.url, batches, cluster="true")
        assert _count(client, "b:*") == args.rows
        assert client.get(sink.partition_key(identity)) is not None  # the partition's summary record
        client.close()
    finally:
        cluster.close()
    result = {"cluster_plain_rows_per_s": args.rows / plain_s, "cluster_sink_rows_per_s": args.rows / sink_s}
    result["cluster_sink_vs_plain"] = result["cluster_sink_rows_per_s"] / result["cluster_plain_rows_per_s"]
    return result


def _count(client, pattern: str) -> int:
    return sum(1 for _ in client.scan_iter(match=pattern, count=10_000, target_nodes=client.PRIMARIES))


def _flush(client) -> None:
    client.flushall(target_nodes=client.PRIMARIES)


def main(argv=None) -> int:
    args = parse_args(argv)
    server = RedisServer()
    server.start()
    try:
        client = server.client()
        batches = impulse_batches(args.rows, args.payload_bytes)
        mb = sum(b.nbytes for b in batches) / 1e6
        plain_s = run_plain(client, batches, args.chunk)
        assert client.dbsize() == args.rows
        client.flushdb()
        sink_s, sink, identity = run_sink(server.url, batches)
        check_sink_keys(client, sink, identity, args.rows)
        client.flushdb()
        result = {"rows": args.rows, "payload_bytes": args.payload_bytes,
                  "plain_rows_per_s": args.rows / plain_s, "sink_rows_per_s": args.rows / sink_s,
                  "arrow_mb": mb}
        result["sink_vs_plain"] = result["sink_rows_per_s"] / result["plain_rows_per_s"]
        if not args.skip_spark:
            rate, phases = run_spark(server.url, args.rows, args.payload_bytes, args.spark_batches)
            result.update(spark_rows_per_s=rate, spark_vs_plain=rate / result["plain_rows_per_s"],
                          spark_phase_ms=phases)
        if args.cluster:
            result.update(run_cluster(args, batches))
    finally:
        server.close()
    if args.json:
        print(json.dumps(result))
    else:
        print(f"rows {args.rows}, payload {args.payload_bytes} B ({mb:.0f} MB of Arrow)")
        print(f"plain redis-py pipeline loop : {result['plain_rows_per_s']:>12,.0f} rows/s")
        print(f"redis-sink write path        : {result['sink_rows_per_s']:>12,.0f} rows/s  "
              f"({result['sink_vs_plain']:.2f}x plain)")
        if "spark_rows_per_s" in result:
            print(f"impulse -> redis-sink, Spark : {result['spark_rows_per_s']:>12,.0f} rows/s  "
                  f"({result['spark_vs_plain']:.2f}x plain; 2 partitions, micro-batches of {args.rows} rows)")
        if "cluster_plain_rows_per_s" in result:
            print(f"cluster: redis-py RedisCluster pipeline loop : {result['cluster_plain_rows_per_s']:>12,.0f} rows/s")
            print(f"cluster: redis-sink write path (cluster=true): {result['cluster_sink_rows_per_s']:>12,.0f} rows/s  "
                  f"({result['cluster_sink_vs_plain']:.2f}x the cluster loop)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
