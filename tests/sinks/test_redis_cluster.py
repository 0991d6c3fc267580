"""The per-slot transactions of the cluster writer prototype against a real Redis Cluster, read back with
`redis-cli -c` (sinks/redis/cluster.py)."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pyarrow as pa
import pytest

from connectors.errors import TransientError
from sinks.redis.cluster import ClusterWriter, cluster_enabled, plan
from sinks.redis.slots import key_slot
from sinks.redis.resp import commands

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def _lists(namespace: str, n_keys: int, rows: int) -> tuple[pa.Array, pa.Array, list[bytes]]:
    """`rows` rows ``RPUSH <key> <row>`` over `n_keys` list keys; returns keys, commands, values."""
    keys = pa.array([f"{namespace}:list:{i % n_keys}".encode() for i in range(rows)], pa.binary())
    values = pa.array([f"v{i}".encode() for i in range(rows)], pa.binary())
    return keys, commands(b"RPUSH", keys, values), values.to_pylist()


def _plan(namespace: str, keys: pa.Array, encoded: pa.Array, batch: int = 0, commit_id: str = "q"):
    return plan(keys, encoded, commit_key_prefix=f"{namespace}:commit:", commit_id=commit_id, partition=0, batch_id=batch,
                record_value=f"{batch} {len(keys)}:x".encode())


def _read_lists(cluster, namespace: str, n_keys: int) -> dict[str, list[str]]:
    """Every list as `redis-cli -c` (an independent reader following MOVED) sees it."""
    out = {}
    for i in range(n_keys):
        key = f"{namespace}:list:{i}"
        lines = cluster.cli("LRANGE", key, "0", "-1").splitlines()
        out[key] = [] if lines == ["(empty array)"] else [line.split(") ", 1)[1].strip('"') for line in lines]
    return out


def _expected(n_keys: int, rows: int, namespace: str) -> dict[str, list[str]]:
    return {f"{namespace}:list:{k}": [f"v{i}" for i in range(k, rows, n_keys)] for k in range(n_keys)}


def test_each_slot_group_lands_once_with_its_record_in_its_slot_on_every_primary(redis_cluster):
    namespace = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace, 40, 400)
    writes = _plan(namespace, keys, encoded)
    assert len({redis_cluster.node_for_slot(w.slot).id for w in writes}) == 3, "groups on all three primaries"
    writer = ClusterWriter(redis_cluster.url)
    try:
        report = writer.write(writes)
        assert (report.applied, report.skipped) == (len(writes), 0)
        again = writer.write(writes)  # the replay of the same batch: every group recorded, nothing written
        assert (again.applied, again.skipped) == (0, len(writes))
    finally:
        writer.close()
    assert _read_lists(redis_cluster, namespace, 40) == _expected(40, 400, namespace)
    client = redis_cluster.client()
    try:
        for w in writes:
            assert key_slot(w.record_key) == w.slot
            assert client.get(w.record_key) == b"0 400:x"
    finally:
        client.close()


def test_a_replay_after_a_crash_between_groups_writes_exactly_the_groups_missing(redis_cluster):
    namespace = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace, 30, 300)
    writes = _plan(namespace, keys, encoded)
    writer = ClusterWriter(redis_cluster.url)
    try:
        done = writer.write(writes[::3])  # the first attempt died after these groups
        replay = writer.write(writes)
    finally:
        writer.close()
    assert done.applied == len(writes[::3])
    assert (replay.applied, replay.skipped) == (len(writes) - done.applied, done.applied)
    assert _read_lists(redis_cluster, namespace, 30) == _expected(30, 300, namespace)


def test_moved_is_followed_when_a_slot_moved_after_the_map_was_read(redis_cluster):
    namespace = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace, 10, 50)
    writes = _plan(namespace, keys, encoded)
    slot = writes[0].slot
    source = redis_cluster.node_for_slot(slot)
    target = next(n for n in redis_cluster.primaries() if n.id != source.id)
    writer = ClusterWriter(redis_cluster.url)
    try:
        writer.refresh()
        redis_cluster.migrate_slot(slot, target)  # the writer's map is now stale for this slot
        report = writer.write(writes)
    finally:
        writer.close()
        redis_cluster.migrate_slot(slot, source)
    assert report.redirects >= 1 and report.applied == len(writes)
    assert _read_lists(redis_cluster, namespace, 10) == _expected(10, 50, namespace)


def test_a_group_whose_slot_is_half_migrated_waits_for_the_move_and_lands_once(redis_cluster):
    namespace = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace, 10, 50)
    first = _plan(namespace, keys.slice(0, 10), encoded.slice(0, 10))  # the lists exist before the move starts
    # another commit id: its records are new, so each group's keys are split (the lists on the source, no record
    # anywhere): the source answers ASK (Redis 7.0) or TRYAGAIN (7.2), and with ASKING the importing node TRYAGAIN
    rest = _plan(namespace, keys.slice(10), encoded.slice(10), commit_id="q2")
    slot = first[0].slot
    source = redis_cluster.node_for_slot(slot)
    target = next(n for n in redis_cluster.primaries() if n.id != source.id)
    writer = ClusterWriter(redis_cluster.url, redirect_timeout_s=60)
    outcome: dict = {}
    try:
        writer.write(first)
        redis_cluster.migrate_slot(slot, target, finish=False)  # MIGRATING/IMPORTING, no key moved yet
        thread = threading.Thread(target=lambda: outcome.update(report=writer.write(rest)))
        thread.start()
        try:
            from connectors.servers import wait_until

            # the writer must wait, not write the group on either node
            wait_until(lambda: not thread.is_alive() or writer.redirects > 0, 30, 0.02,
                       "the writer to meet the half-migrated slot")
            assert thread.is_alive(), f"the write ended while its slot was half-migrated: {outcome}"
        finally:
            redis_cluster.finish_migration(slot, source, target)
            thread.join(90)
    finally:
        writer.close()
        redis_cluster.migrate_slot(slot, source)
    assert outcome["report"].applied == len(rest) and outcome["report"].redirects >= 1
    assert _read_lists(redis_cluster, namespace, 10) == _expected(10, 50, namespace)


def test_ask_is_followed_into_the_importing_node_while_the_slot_is_still_migrating(redis_cluster):
    """Batch 0 lands; the slot starts migrating and all its keys move (the slot is not handed over yet): batch 1's
    groups find none of their keys on the source, which answers ASK; the writer sends them to the importing node
    after ASKING, where they land, while the slot is still migrating."""
    namespace = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace, 10, 50)
    first = _plan(namespace, keys.slice(0, 10), encoded.slice(0, 10))
    second = _plan(namespace, keys.slice(10), encoded.slice(10), batch=1)
    slot = first[0].slot
    source = redis_cluster.node_for_slot(slot)
    target = next(n for n in redis_cluster.primaries() if n.id != source.id)
    writer = ClusterWriter(redis_cluster.url, redirect_timeout_s=60)
    try:
        writer.write(first)
        redis_cluster.migrate_slot(slot, target, finish=False)
        try:
            moved = redis_cluster.execute("CLUSTER", "GETKEYSINSLOT", slot, 1000, address=source.address)
            assert moved, "batch 0 wrote nothing in the slot"
            redis_cluster.execute("MIGRATE", target.host, target.port, "", 0, 10_000, "KEYS", *moved,
                                  address=source.address)
            report = writer.write([w for w in second if w.slot == slot])
            assert redis_cluster.execute("CLUSTER", "COUNTKEYSINSLOT", slot, address=target.address) == len(moved)
            still = redis_cluster.execute("CLUSTER", "NODES", address=source.address)
            assert f"[{slot}->-{target.id}]" in (still.decode() if isinstance(still, bytes) else still), \
                "the slot was handed over before the write: ASK was not what it met"
        finally:
            redis_cluster.finish_migration(slot, source, target)
        writer.write([w for w in second if w.slot != slot])
    finally:
        writer.close()
        redis_cluster.migrate_slot(slot, source)
    assert report.applied == 1 and report.redirects >= 1 and writer.redirects >= 1
    assert _read_lists(redis_cluster, namespace, 10) == _expected(10, 50, namespace)


def test_min_replicas_waits_for_the_replica_and_a_shortfall_is_transient(redis_cluster):
    namespace = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace, 5, 20)
    writes = _plan(namespace, keys, encoded)
    writer = ClusterWriter(redis_cluster.url, min_replicas=1)
    try:
        assert writer.write(writes).applied == len(writes)
    finally:
        writer.close()
    namespace2 = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace2, 5, 20)
    writer = ClusterWriter(redis_cluster.url, min_replicas=2, timeout_s=1)  # each primary has one replica
    try:
        with pytest.raises(TransientError, match=r"only 1 replica\(s\) .* minReplicas is 2"):
            writer.write(_plan(namespace2, keys, encoded))
    finally:
        writer.close()


def test_plan_keeps_each_slot_s_rows_in_input_order():
    keys = pa.array([b"{a}1", b"{b}1", b"{a}2", b"{b}2", b"{a}3"])
    encoded = commands(b"SET", keys, pa.array([b"c0", b"c1", b"c2", b"c3", b"c4"]))
    writes = plan(keys, encoded, commit_key_prefix="p:", commit_id="q", partition=2, batch_id=5, record_value=b"5")
    by_slot = {w.slot: [c.split(b"\r\n")[-2] for c in w.commands.to_pylist()] for w in writes}
    assert by_slot == {key_slot(b"a"): [b"c0", b"c2", b"c4"], key_slot(b"b"): [b"c1", b"c3"]}
    assert {w.slot: sorted(w.keys.to_pylist()) for w in writes} == {key_slot(b"a"): [b"{a}1", b"{a}2", b"{a}3"],
                                                                   key_slot(b"b"): [b"{b}1", b"{b}2"]}
    assert all(w.record_key.endswith(b"q:2") and key_slot(w.record_key) == w.slot for w in writes)
    with pytest.raises(ValueError, match="one key per command"):
        plan(keys, encoded.slice(1), commit_key_prefix="p:", commit_id="q", partition=2, batch_id=5, record_value=b"5")
    assert np.all(np.diff([w.slot for w in writes]) > 0)


def test_another_attempt_that_recorded_a_group_first_makes_this_one_skip_it(redis_cluster):
    namespace = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace, 1, 5)
    writes = _plan(namespace, keys, encoded)
    other = redis_cluster.client()
    try:
        other.set(writes[0].record_key, b"0 5:other")  # the other attempt committed the group first
    finally:
        other.close()
    writer = ClusterWriter(redis_cluster.url)
    try:
        assert (writer.write(writes).skipped, writer.write(writes).skipped) == (1, 1)
    finally:
        writer.close()
    assert _read_lists(redis_cluster, namespace, 1) == {f"{namespace}:list:0": []}  # nothing written twice


def test_a_primary_killed_between_two_writes_loses_no_acknowledged_group_with_min_replicas(redis_cluster):
    namespace = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace, 30, 300)
    writes = _plan(namespace, keys, encoded)
    half = len(writes) // 2
    writer = ClusterWriter(redis_cluster.url, min_replicas=1, timeout_s=2, redirect_timeout_s=60)
    try:
        assert writer.write(writes[:half]).applied == half  # acknowledged: on a replica too
        redis_cluster.kill_primary(writes[0].slot)  # SIGKILL; its replica takes over, with no replica of its own
        with pytest.raises(TransientError, match="lost the cluster node|only 0 replica"):
            writer.write(writes)
        with pytest.raises(TransientError, match="only 0 replica"):  # the promoted primary alone is not enough
            writer.write(writes)
        redis_cluster.revive()  # the killed node rejoins as the replica of the promoted one
        report = writer.write(writes)  # what the commit protocol's writeRetries do: the whole partition again
    finally:
        writer.close()
        redis_cluster.revive()
    assert report.skipped + report.applied == len(writes) and report.skipped >= half
    assert _read_lists(redis_cluster, namespace, 30) == _expected(30, 300, namespace)


def test_cluster_enabled_tells_a_cluster_node_from_a_single_node(redis_cluster, redis_server):
    assert cluster_enabled(redis_cluster.url) is True
    assert cluster_enabled(redis_server.url) is False


def test_a_retry_that_finds_every_group_recorded_still_waits_for_the_replica(redis_cluster):
    """WAIT counts the writes of its own connection: the retry after a shortfall writes nothing new, and must still
    not return before the replica has the records the earlier attempt wrote."""
    import os
    import signal

    namespace = f"cw-{uuid.uuid4().hex[:8]}"
    keys, encoded, _ = _lists(namespace, 1, 5)
    writes = _plan(namespace, keys, encoded)
    primary = redis_cluster.node_for_slot(writes[0].slot)
    replica = redis_cluster.server_of(redis_cluster.replicas_of(primary)[0])
    url = f"redis://{primary.address}"  # not redis_cluster.url: after a failover that may be the replica stopped
    os.kill(replica.proc.pid, signal.SIGSTOP)  # the replica stops acknowledging (too briefly to be failed over)
    try:
        first = ClusterWriter(url)
        try:
            assert first.write(writes).applied == 1  # minReplicas 0: acknowledged by the primary alone
        finally:
            first.close()
        retry = ClusterWriter(url, min_replicas=1, timeout_s=1)
        try:
            with pytest.raises(TransientError, match=r"only 0 replica\(s\)"):
                retry.write(writes)
        finally:
            retry.close()
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    retry = ClusterWriter(redis_cluster.url, min_replicas=1)
    try:
        report = retry.write(writes)
    finally:
        retry.close()
    assert (report.applied, report.skipped) == (0, 1)
    assert _read_lists(redis_cluster, namespace, 1) == _expected(1, 5, namespace)
