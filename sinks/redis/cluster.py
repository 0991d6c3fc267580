"""The Redis sink's cluster mode (`sinks.redis.sink.RedisSink` with ``cluster``): a partition's rows written as one fenced MULTI/EXEC per hash slot,
each with its own commit record in that slot (the layout of `sinks.redis.slots`), on the node serving the slot.

`plan` turns a partition (each row's key and its RESP-encoded command, `sinks.redis.resp.commands`) into `SlotWrite`s;
`ClusterWriter.write` applies them. Per slot group, on one connection to the slot's primary:

1. ``WATCH <record>``, ``GET <record>``, ``MULTI``, the group's commands, ``SET <record> <value>`` — sent in one
   write (together with the previous group's ``EXEC``: one round trip per group);
2. the replies decide: the record holds this batch or a later one → ``DISCARD`` (the group was applied by an
   earlier attempt: skipped); a redirection (``MOVED``, ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN``) of any of them →
   ``DISCARD``, nothing of the group was applied, the group is retried on the slot's owner once the slot map is
   refreshed; otherwise ``EXEC``;
3. ``EXEC`` answers nil when the record changed since WATCH (another attempt of the partition wrote it):
   `FencedError`; ``EXECABORT`` (a redirection found at EXEC) → retried as in 2.; an error inside the result means
   Redis applied part of the group: `DeliveryError`.
4. With ``min_replicas`` ≥ 1, once a node's groups are done: one more write (a group's record set to itself), then
   ``WAIT <min_replicas> <timeout>``; fewer replicas acknowledging is a `TransientError` (the caller's retry then
   finds the groups' records and skips them, or rewrites those a failover lost, and WAITs again: the extra write
   makes that WAIT cover records an earlier connection wrote), so an acknowledged partition is on a replica before
   Spark hears of it.

``ASK`` is not followed into the importing node: a group's keys may still be split between the two nodes while
its slot moves (the source answers ASK for the record, absent there, while the data keys are still there), and
writing the group on the target would split a list or a stream in two. The group waits (polling the slot map,
bounded by ``redirect_timeout_s``) until the migration ends and ``MOVED`` names the new owner. A lost
connection is never guessed about: it raises `TransientError`, and the retry reads each group's record first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
from urllib.parse import urlsplit

from connectors.errors import DeliveryError, FencedError, TransientError
from connectors.registry import import_extra
from sinks.redis.slots import SLOTS, commit_record_keys, group_by_slot, key_slots
from sinks.redis.resp import command, packed

__all__ = ["ClusterWriter", "SlotWrite", "WriteReport", "cluster_enabled", "plan"]


@dataclass(frozen=True, eq=False)
class SlotWrite:
    """One slot group of a partition: its RESP-encoded commands (every key in `slot`) and its commit record.
    Compared by identity."""

    slot: int
    commands: pa.Array   #: binary, one complete RESP command per value
    record_key: bytes    #: `sinks.redis.slots.commit_record_key` of the slot
    record_value: bytes  #: ``b"<batch> <fingerprint>"`` (the single-node sink's record text)
    batch_id: int


@dataclass
class WriteReport:
    """What `ClusterWriter.write` did: groups applied now, groups skipped (an earlier attempt applied them),
    redirections followed (MOVED/ASK/TRYAGAIN/CLUSTERDOWN/EXECABORT replies met)."""

    applied: int = 0
    skipped: int = 0
    redirects: int = 0


def plan(keys: pa.Array, encoded: pa.Array, *, commit_key_prefix: str, commit_id: str, partition: int,
         batch_id: int, record_value: bytes) -> list[SlotWrite]:
    """Split a partition into slot groups: row i writes key ``keys[i]`` with command ``encoded[i]``; each group keeps
    its rows' input order and gets the record ``<commit_key_prefix>{<slot tag>}<commit_id>:<partition>``."""
    if len(keys) != len(encoded):
        raise ValueError(f"{len(keys)} keys for {len(encoded)} commands: one key per command")
    groups = group_by_slot(key_slots(keys))
    records = commit_record_keys(commit_key_prefix, commit_id, partition, groups.slots).to_pylist()
    return [SlotWrite(slot=int(slot), commands=groups.take(encoded, g), record_key=records[g],
                      record_value=record_value, batch_id=batch_id) for g, slot in enumerate(groups.slots)]


# KEYS[1]: a commit record. Sets it to its own value (a no-op write that is replicated like any other).
_RESET = b"local v = redis.call('GET', KEYS[1]) if v then redis.call('SET', KEYS[1], v) end return 0"


def cluster_enabled(url: str, timeout_s: float = 10.0) -> bool:
    """Whether the node at `url` runs in cluster mode (``INFO cluster`` → ``cluster_enabled:1``): what option
    ``cluster=auto`` asks once, on the driver. Connection errors propagate (redis-py's)."""
    redis = _import_redis()
    client = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=min(timeout_s, 5.0))
    try:
        return bool(client.info("cluster").get("cluster_enabled"))
    finally:
        client.close()


def _import_redis():
    return import_extra("redis", "redis", "the redis sink", "redis-py")


class ClusterWriter:
    """Writes `SlotWrite`s to a Redis Cluster, one connection per primary (executor side; not picklable).

    Parameters
    ----------
    url : str
        ``redis://host:port`` of any node (a startup node; the others are learned from ``CLUSTER SLOTS``).
    timeout_s : float, seconds, default 10
        Socket timeout of every call.
    min_replicas : int ≥ 0, default 0
        Replicas that must acknowledge a node's writes (``WAIT``, for up to half of ``timeout_s``) before `write`
        returns.
    redirect_timeout_s : float, seconds, default 30
        How long a group may keep meeting redirections (a slot migrating, a failover under way) before
        `TransientError`.
    """

    def __init__(self, url: str, *, timeout_s: float = 10.0, min_replicas: int = 0,
                 redirect_timeout_s: float = 30.0) -> None:
        parts = urlsplit(url)
        self.startup = [(parts.hostname or "127.0.0.1", parts.port or 6379)]
        self.password = parts.password
        self.username = parts.username
        self.timeout_s = timeout_s
        self.min_replicas = min_replicas
        self.redirect_timeout_s = redirect_timeout_s
        self._connections: dict[tuple[str, int], object] = {}
        self.nodes: list[tuple[str, int]] = []
        self.owners = np.zeros(0, np.int32)
        self.redirects = 0  #: redirections met by this writer so far (all calls)

    # -- connections and the slot map ---------------------------------------------------------------
    def _connection(self, address: tuple[str, int]):
        conn = self._connections.get(address)
        if conn is None:
            redis = _import_redis()
            conn = redis.connection.Connection(host=address[0], port=address[1], username=self.username,
                                               password=self.password, socket_timeout=self.timeout_s,
                                               socket_connect_timeout=min(self.timeout_s, 5.0))
            conn.connect()
            self._connections[address] = conn
        return conn

    def _drop(self, address: tuple[str, int]) -> None:
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.disconnect()

    def __enter__(self) -> "ClusterWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Disconnect from every node (drops any WATCH or open MULTI with the connection)."""
        for address in list(self._connections):
            self._drop(address)

    def refresh(self) -> np.ndarray:
        """Read ``CLUSTER SLOTS`` from a known node; sets `nodes` (primaries' ``(host, port)``) and `owners` (the
        index in `nodes` of each slot's primary, -1 for a slot no one serves) and returns `owners`."""
        redis = _import_redis()
        last: Exception | None = None
        for address in [*self.nodes, *self.startup]:
            try:
                conn = self._connection(address)
                conn.send_command("CLUSTER", "SLOTS")
                reply = conn.read_response()
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                self._drop(address)
                last = exc
                continue
            nodes: list[tuple[str, int]] = []
            owners = np.full(SLOTS, -1, np.int32)
            for first, last_slot, primary, *_ in reply:
                host = primary[0].decode() if isinstance(primary[0], bytes) else primary[0]
                where = (host, int(primary[1]))
                if where not in nodes:
                    nodes.append(where)
                owners[int(first):int(last_slot) + 1] = nodes.index(where)
            self.nodes, self.owners = nodes, owners
            return owners
        raise TransientError(f"redis-sink: no node of the cluster answered CLUSTER SLOTS (last error: {last!r})")

    def run(self, requests: Sequence[tuple[int, bytes, int]]) -> list[list]:
        """Send idempotent commands (reads, a ``SET`` of a fixed value, a script that only reads) to the owners of
        their slots: each request is ``(slot, RESP-encoded commands, how many replies)``; one write per node. A
        request redirected (``MOVED``, ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN``) is sent again once the slot map is
        refreshed, for up to ``redirect_timeout_s``. Returns each request's replies (an error reply as its
        exception), in the order of `requests`. Raises `TransientError` when a node is lost or still redirects."""
        redis = _import_redis()
        if not len(self.owners):
            self.refresh()
        out: list[list | None] = [None] * len(requests)
        pending = list(range(len(requests)))
        deadline = time.monotonic() + self.redirect_timeout_s
        while pending:
            by_node: dict[int, list[int]] = {}
            for i in pending:
                by_node.setdefault(int(self.owners[requests[i][0]]), []).append(i)
            retry = by_node.pop(-1, [])
            for node, indexes in by_node.items():
                address = self.nodes[node]
                try:
                    conn = self._connection(address)
                    conn.send_packed_command([requests[i][1] for i in indexes], check_health=False)
                    for i in indexes:
                        replies = _replies(conn, requests[i][2])
                        if any(isinstance(r, Exception) and _redirect(r) for r in replies):
                            self.redirects += 1
                            retry.append(i)
                        else:
                            out[i] = replies
                except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                    self._drop(address)
                    self.owners = np.zeros(0, np.int32)
                    raise TransientError(f"redis-sink: lost the cluster node {address[0]}:{address[1]} ({exc})") from exc
            pending = retry
            if pending:
                if time.monotonic() >= deadline:
                    raise TransientError(f"redis-sink: slot {requests[pending[0]][0]} still redirected after "
                                         f"{self.redirect_timeout_s:g}s (migrating or failing over)")
                time.sleep(0.05)
                self.refresh()
        return out  # type: ignore[return-value]

    # -- writing ------------------------------------------------------------------------------------
    def write(self, writes: Sequence[SlotWrite]) -> WriteReport:
        """Apply every group not applied yet (see the module docstring); returns what was done. Raises
        `TransientError` (connection lost, redirections beyond ``redirect_timeout_s``, ``WAIT`` shortfall: retry
        the same writes), `FencedError`, `DeliveryError`."""
        redis = _import_redis()
        report = WriteReport()
        if not len(self.owners):
            self.refresh()
        pending = list(writes)
        deadline = time.monotonic() + self.redirect_timeout_s
        while pending:
            by_node: dict[int, list[SlotWrite]] = {}
            for group in pending:
                by_node.setdefault(int(self.owners[group.slot]), []).append(group)
            if -1 in by_node:  # slots no primary serves now: a failover under way
                retry = by_node.pop(-1)
            else:
                retry = []
            for node, groups in by_node.items():
                address = self.nodes[node]
                try:
                    retry += self._write_node(self._connection(address), groups, report)
                except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                    self._drop(address)
                    self.owners = np.zeros(0, np.int32)  # refreshed by the retry
                    raise TransientError(f"redis-sink: lost the cluster node {address[0]}:{address[1]} while "
                                         f"writing ({exc}); the retry reads each group's commit record first") from exc
                except BaseException:
                    self._drop(address)  # replies of a group already sent are unread: the connection is out of step
                    raise
            pending = retry
            if pending:
                if time.monotonic() >= deadline:
                    raise TransientError(
                        f"redis-sink: {len(pending)} slot group(s) still redirected after {self.redirect_timeout_s:g}s "
                        f"(slot {pending[0].slot} migrating or failing over); nothing of them was applied")
                time.sleep(0.05)  # a migration or a failover in progress: poll the slot map
                self.refresh()
        return report

    def _write_node(self, conn, groups: list[SlotWrite], report: WriteReport) -> list[SlotWrite]:
        """The groups of one node, one round trip each (a group's EXEC or DISCARD travels with the next group's
        start). Returns the groups redirected (nothing of them applied)."""
        redirected: list[SlotWrite] = []
        decision = b""
        decision_group: SlotWrite | None = None
        for group in [*groups, None]:
            start = self._start(group) if group is not None else b""
            if decision or start:
                conn.send_packed_command([decision, start], check_health=False)
            if decision:
                self._finish(conn, decision_group, decision, report, redirected)
            if group is None:
                break
            decision, decision_group = self._decide(conn, group, report, redirected), group
        done = [g for g in groups if g not in redirected]
        if self.min_replicas and done:
            # WAIT counts this connection's writes only. A retry that found every group recorded wrote nothing, yet
            # those records may be the ones an earlier WAIT found unreplicated: one write of this connection (a
            # record set to itself, atomically) after them makes the WAIT cover them (replication is in order).
            barrier = command(b"EVAL", _RESET, b"1", done[0].record_key)
            wait_s = self.timeout_s / 2  # the reply must come back before the socket times out
            conn.send_packed_command([barrier, command(b"WAIT", str(self.min_replicas).encode(),
                                                       str(max(1, int(wait_s * 1000))).encode())], check_health=False)
            reset = _replies(conn, 1)[0]
            if isinstance(reset, Exception):
                raise TransientError(f"redis-sink: the write before WAIT on {conn.host}:{conn.port} failed: {reset}")
            acknowledged = conn.read_response()
            if acknowledged < self.min_replicas:
                raise TransientError(
                    f"redis-sink: only {acknowledged} replica(s) of {conn.host}:{conn.port} acknowledged the writes "
                    f"within {wait_s:g}s, minReplicas is {self.min_replicas}: a failover now could lose them; "
                    "retrying (the groups applied are skipped through their records)")
        return redirected

    @staticmethod
    def _start(group: SlotWrite) -> bytes:
        return (command(b"WATCH", group.record_key) + command(b"GET", group.record_key) + command(b"MULTI")
                + bytes(packed(group.commands)) + command(b"SET", group.record_key, group.record_value))

    def _decide(self, conn, group: SlotWrite, report: WriteReport, redirected: list[SlotWrite]) -> bytes:
        """Read the replies of a group's start; the command that ends it: EXEC, or DISCARD (skipped, redirected)."""
        replies = _replies(conn, 3 + len(group.commands) + 1)
        watch, record, multi, *queued = replies
        errors = [r for r in replies if isinstance(r, Exception)]
        if errors:
            if any(_redirect(e) for e in errors):
                report.redirects += 1
                self.redirects += 1
                redirected.append(group)
                return command(b"DISCARD") if not isinstance(multi, Exception) else command(b"UNWATCH")
            raise DeliveryError(f"redis-sink: Redis refused a command of slot {group.slot}'s group: {errors[0]}")
        if record is not None and int(record.split(b" ")[0]) >= group.batch_id:
            report.skipped += 1
            return command(b"DISCARD")
        return command(b"EXEC")

    def _finish(self, conn, group: SlotWrite, decision: bytes, report: WriteReport,
                redirected: list[SlotWrite]) -> None:
        reply = _replies(conn, 1)[0]
        if decision != command(b"EXEC"):
            return
        if reply is None:
            raise FencedError(f"redis-sink: the commit record {group.record_key!r} changed while slot {group.slot}'s "
                              "group was written: another attempt of this partition wrote it; this one wrote nothing")
        if isinstance(reply, Exception):
            if _redirect(reply):
                report.redirects += 1
                self.redirects += 1
                redirected.append(group)
                return
            raise DeliveryError(f"redis-sink: EXEC of slot {group.slot}'s group failed: {reply}")
        errors = [r for r in reply if isinstance(r, Exception)]
        if errors:
            raise DeliveryError(f"redis-sink: Redis applied slot {group.slot}'s group in part: {len(errors)} of "
                                f"{len(reply)} commands failed, first: {errors[0]}")
        report.applied += 1


def _redirect(exc: Exception) -> bool:
    redis = _import_redis()
    """Whether `exc` is a reply that says "not here, not now" — nothing of the command (or transaction) ran."""
    return isinstance(exc, (redis.exceptions.AskError, redis.exceptions.TryAgainError,  # MovedError is an AskError
                            redis.exceptions.ClusterDownError, redis.exceptions.ExecAbortError))


def _replies(conn, count: int) -> list:
    """`count` replies, an error reply as its exception object (the stream stays in step)."""
    redis = _import_redis()
    out = []
    for _ in range(count):
        try:
            out.append(conn.read_response())
        except redis.ResponseError as exc:
            out.append(exc)
    return out
