"""The Redis sink's cluster mode (`sinks.redis.sink.RedisSink` with ``cluster``): a partition's rows written as one
atomic, fenced script per hash slot, each with its own commit record in that slot (the layout of
`sinks.redis.slots`), on the node serving the slot.

`plan` turns a partition (each row's key and its RESP-encoded command, `sinks.redis.resp.commands`) into `SlotWrite`s;
`ClusterWriter.write` applies them. On one connection per primary, all of a node's groups in one write:

1. each group is one ``EVAL`` of `_GROUP` (`group_script`) declaring the group's record and every key its commands
   touch: it reads the record and, when it holds this batch or a later one, does nothing (the group was applied by
   an earlier or a concurrent attempt: skipped); otherwise it runs the group's commands and sets the record. A
   script runs whole or not at all (Redis runs nothing else meanwhile), so the check and the write cannot be
   separated by another attempt, as WATCH would otherwise have to ensure;
2. a redirection means nothing of the group ran. ``MOVED`` (the slot has a new owner), ``TRYAGAIN`` (the slot is
   migrating and the group's keys are split between the two nodes) and ``CLUSTERDOWN`` (a failover under way): the
   group is sent again to the slot's owner once the slot map is refreshed. ``ASK`` (the slot is migrating and the
   source lacks a key the script declares; Redis 7.2 and later answer ``TRYAGAIN`` when it lacks only some): the
   group is sent at once to the importing node named in the reply, after ``ASKING``; that node runs it only when
   it holds every declared key, else it answers ``TRYAGAIN`` and the group waits. A key lives on one node at a
   time (``MIGRATE`` moves it atomically), so a group never writes a list or a stream in two places. A command
   Redis refused inside the script (the rest ran, and the record is set) is a `DeliveryError`;
3. with ``min_replicas`` ≥ 1, once a node's groups are done: one more write (a group's record set to itself), then
   ``WAIT <min_replicas> <timeout>``; fewer replicas acknowledging is a `TransientError` (the caller's retry then
   finds the groups' records and skips them, or rewrites those a failover lost, and WAITs again: the extra write
   makes that WAIT cover records an earlier connection wrote), so an acknowledged partition is on a replica before
   Spark hears of it.

Redirections are followed for up to ``redirect_timeout_s`` (polling the slot map). A lost connection is never
guessed about: it raises `TransientError`, and the retry reads each group's record first. ``address_map`` maps the
addresses the cluster announces (in ``CLUSTER SLOTS`` and ``ASK``) to where this process reaches them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping, Sequence
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.errors import DeliveryError, TransientError
from sinks.redis.client import connect, import_redis, node_settings
from sinks.redis.resp import command, packed
from sinks.redis.slots import SLOTS, commit_record_keys, group_by_slot, key_slots

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
    keys: pa.Array | None = None  #: the distinct keys the commands touch (declared to the group's script)
    args: pa.Array | None = None  #: `commands` as script arguments (`script_args`); None: computed when sent
    argv: int | None = None  #: how many bulk strings `args` holds (`_bulk_strings`); None: counted when sent


@dataclass
class WriteReport:
    """What `ClusterWriter.write` did: groups applied now, groups skipped (an earlier attempt applied them),
    redirections followed (MOVED/ASK/TRYAGAIN/CLUSTERDOWN replies met)."""

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
    ordered = encoded.take(pa.array(groups.order))  # each group's commands a contiguous (zero-copy) slice
    args = script_args(ordered)
    counts = _bulk_strings(args)
    argv = np.add.reduceat(counts, groups.bounds[:-1]).tolist() if len(groups) else []
    distinct = pc.unique(keys)
    by_slot = group_by_slot(key_slots(distinct))  # the same slots as `groups`, in the same (ascending) order
    distinct = distinct.take(pa.array(by_slot.order))
    out = []
    for g, slot in enumerate(groups.slots.tolist()):
        start, end = int(groups.bounds[g]), int(groups.bounds[g + 1])
        first, last = int(by_slot.bounds[g]), int(by_slot.bounds[g + 1])
        out.append(SlotWrite(slot=slot, commands=ordered.slice(start, end - start), record_key=records[g],
                             record_value=record_value, batch_id=batch_id, keys=distinct.slice(first, last - first),
                             args=args.slice(start, end - start), argv=argv[g]))
    return out


def script_args(encoded: pa.Array) -> pa.Array:
    """RESP-encoded commands as `_GROUP`'s arguments: each command's ``*<argc>`` header turned into a bulk string
    ``<argc>`` (its arguments are bulk strings already), so a group's commands pass as they are, vectorised."""
    args = pc.replace_substring_regex(encoded, r"^\*(\d)\r\n", "$1\r\n\\1\r\n")
    return pc.replace_substring_regex(args, r"^\*(\d\d)\r\n", "$2\r\n\\1\r\n")


# A slot group's transaction. KEYS: the group's record, then every key its commands touch; ARGV: the batch, the
# record's value, then each command as its argument count followed by its arguments. Returns -1 when the record
# holds this batch or a later one (nothing done), else the errors of the commands Redis refused (empty: all applied).
_GROUP = (b"local r = redis.call('GET', KEYS[1]) "
          b"if r and tonumber(string.match(r, '^%d+')) >= tonumber(ARGV[1]) then return -1 end "
          b"local errors = {} local i = 3 local n = #ARGV "
          b"while i <= n do local argc = tonumber(ARGV[i]) "
          b"local reply = redis.pcall(unpack(ARGV, i + 1, i + argc)) "
          b"if type(reply) == 'table' and reply.err then errors[#errors + 1] = reply.err end "
          b"i = i + argc + 1 end "
          b"redis.call('SET', KEYS[1], ARGV[2]) return errors")


def group_script(group: SlotWrite) -> bytes:
    """The ``EVAL`` of `_GROUP` for `group`, RESP-encoded (its commands as `script_args`)."""
    args = group.args if group.args is not None else script_args(group.commands)
    keys = group.keys if group.keys is not None else pa.array([], pa.binary())
    argv = group.argv if group.argv is not None else int(_bulk_strings(args).sum())
    head = command(b"EVAL", _GROUP, str(1 + len(keys)).encode(), group.record_key, *keys.to_pylist(),
                   str(group.batch_id).encode(), group.record_value)
    count, _, rest = head.partition(b"\r\n")
    return b"*" + str(int(count[1:]) + argv).encode() + b"\r\n" + rest + bytes(packed(args))


def _bulk_strings(args: pa.Array) -> np.ndarray:
    """How many bulk strings each command of `script_args` is (int64): 1 + its argument count, read from its
    header bulk (``$1\r\n<n>`` or ``$2\r\n<nn>``)."""
    if not len(args):
        return np.zeros(0, np.int64)
    offsets = np.frombuffer(args.buffers()[1], dtype=np.int32)[args.offset:args.offset + len(args)]
    raw = np.frombuffer(args.buffers()[2], dtype=np.uint8)
    width = raw[offsets + 1] - ord("0")  # digits of the argument count: 1 or 2
    tens = np.where(width == 2, raw[offsets + 4] - ord("0"), 0).astype(np.int64)
    ones = np.where(width == 2, raw[offsets + 5], raw[offsets + 4]).astype(np.int64) - ord("0")
    return 1 + tens * 10 + ones


# KEYS[1]: a commit record. Sets it to its own value (a no-op write that is replicated like any other).
_RESET = b"local v = redis.call('GET', KEYS[1]) if v then redis.call('SET', KEYS[1], v) end return 0"


def cluster_enabled(url: str, timeout_s: float = 10.0) -> bool:
    """Whether the node at `url` runs in cluster mode (``INFO cluster`` → ``cluster_enabled:1``): what option
    ``cluster=auto`` asks once, on the driver. Connection errors propagate (redis-py's)."""
    client = connect(url, timeout_s)
    try:
        return bool(client.info("cluster").get("cluster_enabled"))
    finally:
        client.close()


class ClusterWriter:
    """Writes `SlotWrite`s to a Redis Cluster, one connection per primary (executor side; not picklable).

    Parameters
    ----------
    url : str
        ``redis://host:port`` or ``rediss://`` (TLS) of any node (a startup node; the others are learned from
        ``CLUSTER SLOTS``); its user info and query (``ssl_ca_certs``…) apply to every node (`node_settings`).
    timeout_s : float, seconds, default 10
        Socket timeout of every call.
    min_replicas : int ≥ 0, default 0
        Replicas that must acknowledge a node's writes (``WAIT``, for up to half of ``timeout_s``) before `write`
        returns.
    redirect_timeout_s : float, seconds, default 30
        How long a group may keep meeting redirections (a slot migrating, a failover under way) before
        `TransientError`.
    address_map : mapping of ``(host, port)`` to ``(host, port)``, default none
        Where to connect for a node the cluster announces at another address (option ``addressMap``).
    """

    def __init__(self, url: str, *, timeout_s: float = 10.0, min_replicas: int = 0,
                 redirect_timeout_s: float = 30.0,
                 address_map: Mapping[tuple[str, int], tuple[str, int]] | None = None) -> None:
        parts = urlsplit(url)
        self.startup = [(parts.hostname or "127.0.0.1", parts.port or 6379)]
        self.settings = node_settings(url)  # connection class (TLS for rediss://), ACL user, TLS settings
        self.timeout_s = timeout_s
        self.min_replicas = min_replicas
        self.redirect_timeout_s = redirect_timeout_s
        self.address_map = dict(address_map or {})
        self._connections: dict[tuple[str, int], object] = {}
        self.nodes: list[tuple[str, int]] = []
        self.owners = np.zeros(0, np.int32)
        self.redirects = 0  #: redirections met by this writer so far (all calls)

    # -- connections and the slot map ---------------------------------------------------------------
    def _connection(self, address: tuple[str, int]):
        conn = self._connections.get(address)
        if conn is None:
            redis = import_redis()
            settings = dict(self.settings)
            connection_class = settings.pop("connection_class", redis.connection.Connection)
            conn = connection_class(host=address[0], port=address[1], **settings, socket_timeout=self.timeout_s,
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
        """Disconnect from every node."""
        for address in list(self._connections):
            self._drop(address)

    def refresh(self) -> np.ndarray:
        """Read ``CLUSTER SLOTS`` from a known node; sets `nodes` (primaries' ``(host, port)``) and `owners` (the
        index in `nodes` of each slot's primary, -1 for a slot no one serves) and returns `owners`."""
        redis = import_redis()
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
                where = self._reachable(host, int(primary[1]))
                if where not in nodes:
                    nodes.append(where)
                owners[int(first):int(last_slot) + 1] = nodes.index(where)
            self.nodes, self.owners = nodes, owners
            return owners
        raise TransientError(f"redis-sink: no node of the cluster answered CLUSTER SLOTS (last error: {last!r})")

    def _reachable(self, host: str, port: int) -> tuple[str, int]:
        """Where to connect for the node the cluster announces at ``host:port`` (`address_map`)."""
        return self.address_map.get((host, port), (host, port))

    def _by_owner(self, items: list, slots: list[int]) -> dict:
        """`items` grouped by the address of their slot's primary (`slots[i]` is item i's), in order; key None: the
        slots no primary serves now (a failover under way)."""
        out: dict = {}
        for item, slot in zip(items, slots):
            owner = int(self.owners[slot])
            out.setdefault(self.nodes[owner] if owner >= 0 else None, []).append(item)
        return out

    def _asked_to(self, reply: Exception) -> tuple[str, int] | None:
        """Where an ``ASK`` reply sends the command (reachable, `address_map`); None for any other reply."""
        redis = import_redis()
        if isinstance(reply, redis.exceptions.AskError) and not isinstance(reply, redis.exceptions.MovedError):
            return self._reachable(reply.host, reply.port)
        return None

    def run(self, requests: Sequence[tuple[int, bytes, int]]) -> list[list]:
        """Send idempotent commands (reads, a ``SET`` of a fixed value, a script that only reads) to the owners of
        their slots: each request is ``(slot, RESP-encoded commands, how many replies)``; one write per node. A
        request redirected is sent again as `write` sends a group (a one-command request answered ``ASK`` at once to
        the importing node, after ``ASKING``), for up to ``redirect_timeout_s``. Returns each request's replies (an
        error reply as its exception), in the order of `requests`. Raises `TransientError` when a node is lost or
        still redirects."""
        redis = import_redis()
        if not len(self.owners):
            self.refresh()
        out: list[list | None] = [None] * len(requests)
        pending = list(range(len(requests)))
        deadline = time.monotonic() + self.redirect_timeout_s
        while pending:
            by_node = self._by_owner(pending, [requests[i][0] for i in pending])
            retry = by_node.pop(None, [])
            asked: dict[tuple[str, int], list[int]] = {}
            for rounds in (by_node, asked):
                asking = 1 if rounds is asked else 0  # the ASKING before each request, and its reply
                for address, indexes in rounds.items():
                    try:
                        conn = self._connection(address)
                        conn.send_packed_command([_ASKING * asking + requests[i][1] for i in indexes],
                                                 check_health=False)
                        for i in indexes:
                            replies = _replies(conn, requests[i][2] + asking)[asking:]
                            ask = next((r for r in replies if isinstance(r, Exception) and _redirect(r)), None)
                            if ask is None:
                                out[i] = replies
                                continue
                            self.redirects += 1
                            target = self._asked_to(ask)
                            if not asking and requests[i][2] == 1 and target is not None:
                                asked.setdefault(target, []).append(i)
                            else:
                                retry.append(i)
                    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                        self._drop(address)
                        self.owners = np.zeros(0, np.int32)
                        raise TransientError(f"redis-sink: lost the cluster node {address[0]}:{address[1]} "
                                             f"({exc})") from exc
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
        the same writes), `DeliveryError`."""
        report = WriteReport()
        if not len(self.owners):
            self.refresh()
        pending = list(writes)
        deadline = time.monotonic() + self.redirect_timeout_s
        while pending:
            by_node = self._by_owner(pending, [group.slot for group in pending])
            retry = by_node.pop(None, [])  # slots no primary serves now: a failover under way
            asked: dict[tuple[str, int], list[SlotWrite]] = {}
            for address, groups in by_node.items():
                retry += self._write_node(address, groups, report, asked)
            for address, groups in asked.items():  # ASK: at once to the importing node, after ASKING
                retry += self._write_node(address, groups, report, None)
            pending = retry
            if pending:
                if time.monotonic() >= deadline:
                    raise TransientError(
                        f"redis-sink: {len(pending)} slot group(s) still redirected after {self.redirect_timeout_s:g}s "
                        f"(slot {pending[0].slot} migrating or failing over); nothing of them was applied")
                time.sleep(0.05)  # a migration or a failover in progress: poll the slot map
                self.refresh()
        return report

    def _write_node(self, address: tuple[str, int], groups: list[SlotWrite], report: WriteReport,
                    asked: dict[tuple[str, int], list[SlotWrite]] | None) -> list[SlotWrite]:
        """The groups of the node at `address`, each one `_GROUP` script, all sent in one write (one round trip for
        the node). Groups answered ``ASK`` go to `asked` by importing node; `asked` None: the groups are sent there,
        each after ``ASKING``. Returns the groups to send again later (nothing of them applied)."""
        redis = import_redis()
        try:
            conn = self._connection(address)
            prefix = _ASKING if asked is None else b""
            conn.send_packed_command([b"".join(prefix + group_script(group) for group in groups)], check_health=False)
            replies = _replies(conn, len(groups) * (1 if asked is not None else 2))
            if asked is None:
                replies = replies[1::2]  # each ASKING's OK, then its group's reply
            return self._judge(conn, groups, replies, report, asked)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            self._drop(address)
            self.owners = np.zeros(0, np.int32)  # refreshed by the retry
            raise TransientError(f"redis-sink: lost the cluster node {address[0]}:{address[1]} while writing "
                                 f"({exc}); the retry reads each group's commit record first") from exc
        except BaseException:
            self._drop(address)  # replies of a group already sent may be unread: the connection is out of step
            raise

    def _judge(self, conn, groups: list[SlotWrite], replies: list, report: WriteReport,
               asked: dict[tuple[str, int], list[SlotWrite]] | None) -> list[SlotWrite]:
        """Count each group's reply into `report`; returns the groups to send again (see `_write_node`), after
        ``WAIT`` for the others when `min_replicas` asks for it."""
        again: list[SlotWrite] = []
        done: list[SlotWrite] = []
        for group, reply in zip(groups, replies):
            if isinstance(reply, Exception):
                if not _redirect(reply):
                    raise DeliveryError(f"redis-sink: Redis refused slot {group.slot}'s group: {reply}")
                report.redirects += 1
                self.redirects += 1
                target = self._asked_to(reply)
                if asked is not None and target is not None:
                    asked.setdefault(target, []).append(group)
                else:
                    again.append(group)
                continue
            done.append(group)
            if reply == -1:
                report.skipped += 1
            elif reply:
                raise DeliveryError(f"redis-sink: Redis applied slot {group.slot}'s group in part: {len(reply)} of "
                                    f"{len(group.commands)} commands failed, first: {reply[0]!r}")
            else:
                report.applied += 1
        if self.min_replicas and done:
            self._wait_for_replicas(conn, done[0].record_key)
        return again

    def _wait_for_replicas(self, conn, record_key: bytes) -> None:
        """``WAIT`` for `min_replicas` replicas of this connection's writes; `TransientError` when fewer acknowledge.

        WAIT counts this connection's writes only. A retry that found every group recorded wrote nothing, yet those
        records may be the ones an earlier WAIT found unreplicated: one write of this connection (`record_key` set to
        itself, atomically) first makes the WAIT cover them (replication is in order)."""
        barrier = command(b"EVAL", _RESET, b"1", record_key)
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


_ASKING = command(b"ASKING")


def _redirect(exc: Exception) -> bool:
    """Whether `exc` is a reply that says "not here, not now" — nothing of the command (or transaction) ran."""
    redis = import_redis()
    return isinstance(exc, (redis.exceptions.AskError, redis.exceptions.TryAgainError,  # MovedError is an AskError
                            redis.exceptions.ClusterDownError, redis.exceptions.ExecAbortError))


def _replies(conn, count: int) -> list:
    """`count` replies, an error reply as its exception object (the stream stays in step)."""
    redis = import_redis()
    out = []
    for _ in range(count):
        try:
            out.append(conn.read_response())
        except redis.ResponseError as exc:
            out.append(exc)
    return out
