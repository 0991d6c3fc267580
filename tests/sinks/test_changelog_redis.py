"""A changelog applied to Redis with ``opColumn``: the README's accounts cookbook, its driver SIGKILLed mid-run
and restarted, leaves exactly the changelog's final state (read back with redis-cli)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pyarrow as pa
import pytest

from connectors.errors import OptionError
from connectors.options import OptionReader
from connectors.protocol import WriteIdentity
from sinks.redis.options import RedisOptions
from sinks.redis.sink import RedisSink
from tests.impulse.test_changelog_stream import final_state
from tests.readme import README
from tests.sinks.poison_driver import kill_driver_mid_batch
from tests.sinks.redis_changelog_driver import cookbook

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def redis_cli_hash(url: str, key: str) -> dict[str, str]:
    out = subprocess.run(["redis-cli", "-u", url, "HGETALL", key], check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    return dict(zip(lines[::2], lines[1::2]))


def expected_state(spark) -> tuple[dict[str, str], dict[int, list[str]]]:
    """The final state from the batch read of the same stream (id → balance as Spark writes it as text), and each
    key's ops in order."""
    namespace = {"spark": spark}  # the block's frame only, read as a batch
    frame = cookbook("redis://unused:1/0", "/unused").split("query = ")[0].replace("spark.readStream", "spark.read")
    frame = frame.replace('.schema("id BIGINT', '.schema("subtask_index BIGINT, counter BIGINT, id BIGINT')  # the order
    assert "subtask_index" in frame  # built-in columns: the other values stay the same
    exec(compile(frame, "README.md", "exec"), namespace)  # noqa: S102
    rows = namespace["accounts"].selectExpr("subtask_index", "counter", "id", "op",
                                            "CAST(balance AS STRING)").collect()
    ops: dict[int, list[str]] = {}
    for row in sorted(rows):
        ops.setdefault(row.id, []).append(row.op)
    return {str(k): v[0] for k, v in final_state(tuple(r) for r in rows).items()}, ops


def test_the_accounts_cookbook_killed_and_restarted_leaves_exactly_the_final_state(spark, redis_server, tmp_path):
    redis_server.client().delete("accounts")
    checkpoint = tmp_path / "ck"
    args = json.dumps({"url": redis_server.url, "checkpoint": str(checkpoint)})
    kill_driver_mid_batch([sys.executable, "-m", "tests.sinks.redis_changelog_driver", args], checkpoint, 10,
                          cwd=README.parent)
    namespace = {"spark": spark}
    exec(compile(cookbook(redis_server.url, str(checkpoint)), "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["query"].awaitTermination(240) and namespace["query"].exception() is None
    expected, ops = expected_state(spark)
    # the block's comment: "5 changes a key, half deleted" (a key's last change is a delete by a coin flip); the
    # keys still changing when the stream ends (limit 20,000) have fewer
    whole = [o for o in ops.values() if len(o) == 5]
    assert len(whole) > 3_000 and all(len(o) <= 5 for o in ops.values())
    deleted = sum(o[-1] == "delete" for o in whole)
    assert abs(deleted - len(whole) / 2) < 5 * (len(whole) / 4) ** 0.5, (deleted, len(whole))
    assert redis_cli_hash(redis_server.url, "accounts") == expected


# --- opColumn, without Spark: the sink's write against the real server --------------------------------------

def redis_sink(url: str, **options):
    return RedisSink(RedisOptions.read(OptionReader({"url": url, **options}, name="redis sink")))


def write(sink, batch, batch_id: int = 0) -> None:
    identity = WriteIdentity("q" + uuid.uuid4().hex[:6], batch_id, 0, 0)
    conn = sink.open(identity)
    try:
        sink.write(conn, identity, iter([batch]))
    finally:
        sink.close(conn)


CHANGES = pa.RecordBatch.from_pydict({
    "id": ["a", "b", "a", "c", "b", "a", "c"],
    "op": ["insert", "insert", "update", "insert", "delete", "delete", None],
    "balance": ["1", "2", "3", "4", "5", "6", "7"]})


def test_a_delete_removes_the_key_in_row_order(redis_server):
    prefix = "s" + uuid.uuid4().hex[:6] + ":"
    client = redis_server.client()
    client.set(prefix + "b", "old")
    write(redis_sink(redis_server.url, keyPrefix=prefix, keyColumn="id", valueColumn="balance", opColumn="op",
                     commitKeyPrefix=f"commit:{prefix}"), CHANGES)
    assert sorted(client.keys(prefix + "*")) == [(prefix + "c").encode()]  # a, b deleted after their writes
    assert client.get(prefix + "c") == b"7"  # a null op writes as usual


def test_a_delete_removes_the_field_of_a_hash(redis_server):
    key = "h" + uuid.uuid4().hex[:6]
    write(redis_sink(redis_server.url, target="hash", keyPrefix=key, fieldColumn="id", valueColumn="balance",
                     opColumn="op", commitKeyPrefix=f"commit:{key}:"), CHANGES)
    assert redis_server.client().hgetall(key) == {b"c": b"7"}


@pytest.mark.parametrize("target", ["list", "stream"])
def test_op_column_is_refused_where_a_delete_means_nothing(redis_server, target):
    with pytest.raises(OptionError) as err:
        redis_sink(redis_server.url, target=target, keyPrefix="x", opColumn="op")
    assert err.value.option == "opColumn" and "string (DEL) or hash (HDEL)" in str(err.value)
