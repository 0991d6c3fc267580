"""How the Redis sink reaches Redis: one interface, `Writer`, and its two implementations, chosen once per sink
(`sinks.redis.sink.RedisSink.writer`): `NodeWriter` for a single node (a partition and its commit record are one
``MULTI … EXEC`` under ``WATCH`` of the record) and `SlotWriter` for a Redis Cluster (one atomic script per hash
slot, each with its own record, then the partition's summary record: `sinks.redis.cluster`).

A writer holds the sink's options only, so it travels to the executors with the sink. `Writer.open` gives a
partition's connection, which the executor-side operations take: ``(client, connection)`` on a single node (the
connection holds the partition's WATCH and transaction), a `sinks.redis.cluster.ClusterWriter` on a cluster. The
sink translates redis-py's errors around every call (`sinks.redis.client.mapped`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from connectors.errors import DeliveryError, FencedError, OptionError
from connectors.protocol import WriteIdentity
from connectors.redact import redact_url
from sinks.redis.client import connect
from sinks.redis.cluster import ClusterWriter, plan
from sinks.redis.options import RedisOptions
from sinks.redis.resp import command, command_over, packed
from sinks.redis.slots import check_commit_key_prefix, group_by_slot, key_slot, key_slots

__all__ = ["Writer", "NodeWriter", "SlotWriter", "PartitionWrite", "REFUSED"]


# KEYS: the keys to check; ARGV[1]: the type they need. Returns {index, type, ...} of the keys holding another.
_WRONG_TYPES = b"local bad = {} for i = 1, #KEYS do local t = redis.call('TYPE', KEYS[i])['ok'] " \
               b"if t ~= ARGV[1] and t ~= 'none' then bad[#bad + 1] = i bad[#bad + 1] = t end end return bad"

# The last command of a partition's transaction. KEYS: the partition's record, the set of partitions, then every
# key the transaction wrote, the dead-letter stream last when it took entries; ARGV: the record, the partition id,
# the type the written keys need, the refusal's prefix, how many trailing keys are dead-letter streams (0 or 1).
# Writes the record only if every key holds its type (or is gone): a key of another type means one of this
# transaction's commands was refused after the check before queueing (another client changed the key's type in
# between), and the rest applied; the record then says so, and every replay of the partition fails.
_RECORD = b"local rows = #KEYS - tonumber(ARGV[5]) for i = 3, #KEYS do local t = redis.call('TYPE', KEYS[i])['ok'] " \
          b"local want = ARGV[3] if i > rows then want = 'stream' end " \
          b"if t ~= want and t ~= 'none' then redis.call('SET', KEYS[1], ARGV[4] .. KEYS[i]) " \
          b"redis.call('SADD', KEYS[2], ARGV[2]) return {KEYS[i], t} end end " \
          b"redis.call('SET', KEYS[1], ARGV[1]) redis.call('SADD', KEYS[2], ARGV[2]) return 0"
REFUSED = " refused "  # the record of a partition whose transaction Redis applied in part: "<batch> refused <key>"

# Commit record of a whole batch, written by the driver: the highest committed batch id, never lowered.
_RAISE_TO = "local v = tonumber(redis.call('GET', KEYS[1]) or '-1') " \
            "if v < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end return v"


@dataclass(frozen=True)
class PartitionWrite:
    """A partition as `Writer.write` takes it (`sinks.redis.sink.RedisSink.write` makes it)."""

    identity: WriteIdentity
    #: each non-empty record batch as its commands, the keys they write and its dead letters (``XADD`` to
    #: ``deadLetterKey``), made as they are consumed (`sinks.redis.sink.RedisSink._prepared`)
    commands: Iterator[tuple[pa.Array, pa.Array, pa.Array]]
    record_value: Callable[[], bytes]  #: the commit record's value, known once `commands` is consumed
    record_key: bytes      #: ``<Q>:<P>``: the partition's commit record (on a cluster its summary record)
    partitions_key: bytes  #: ``<Q>:partitions``: the set of the partition ids that ever wrote
    expected: str          #: the type the written keys must hold (`sinks.redis.sink.KEY_TYPES`); "" for any


class Writer(ABC):
    """What the Redis sink does on Redis, on the driver (the batch record, the partitions' records) and on the
    executors (a partition's connection, its record, its keys' types, its write)."""

    def __init__(self, options: RedisOptions) -> None:
        self.options = options

    @abstractmethod
    def check_options(self) -> None:
        """Raise `OptionError` for an option this kind of target cannot take (on the driver, as the query starts)."""

    @abstractmethod
    def raise_batch_record(self, key: bytes, batch_id: int) -> None:
        """Set the batch record `key` to `batch_id` unless it holds a higher one (the driver's commit of a batch)."""

    @abstractmethod
    def partition_records(self, partitions_key: bytes, record_key: Callable[[int], bytes],
                          first: int) -> list[tuple[int, bytes | None]]:
        """Each partition id from `first` up in the set `partitions_key`, ascending, with its commit record
        (``record_key(id)``; None when it has none)."""

    @abstractmethod
    def open(self) -> Any:
        """A partition's connection (see the module docstring)."""

    @abstractmethod
    def close(self, conn: Any) -> None:
        """Drop the partition's connection, and with it anything it left half done (a WATCH, a MULTI)."""

    @abstractmethod
    def read_record(self, conn: Any, key: bytes) -> bytes | None:
        """The partition's commit record `key` (on a single node WATCHed from now on, for the transaction)."""

    @abstractmethod
    def wrong_types(self, conn: Any, keys: pa.Array, expected: bytes) -> tuple[list, Any]:
        """Which of the distinct `keys` hold a type other than `expected` (or none): ``[1-based index into keys,
        type, …]``; and when some do and ``deadLetterKey`` is set, the type that key holds (else ``b"none"``)."""

    @abstractmethod
    def write(self, conn: Any, partition: PartitionWrite) -> int:
        """Write `partition` and its commit record, atomically on a single node, per hash slot on a cluster; returns
        how many rows went to ``deadLetterKey``. `FencedError` when another attempt wrote the record meanwhile,
        `DeliveryError` when Redis refused commands."""


class NodeWriter(Writer):
    """A single Redis node: a partition and its commit record in one ``MULTI … EXEC``, under ``WATCH`` of the
    record (`read_record`), so that two attempts of a partition cannot both commit."""

    def check_options(self) -> None:
        opts = self.options
        if opts.address_map:
            raise OptionError("addressMap", ",".join(f"{a[0]}:{a[1]}={r[0]}:{r[1]}" for a, r in opts.address_map),
                              f"no value: {redact_url(opts.url)} is a single node (not a cluster), which announces "
                              "no other nodes")
        if opts.min_replicas:
            raise OptionError("minReplicas", opts.min_replicas, f"0: {redact_url(opts.url)} is a single node (not a "
                              "cluster), where the sink does not WAIT for replicas")

    def _client(self):
        return connect(self.options.url, self.options.timeout_s)

    def raise_batch_record(self, key: bytes, batch_id: int) -> None:
        client = self._client()
        try:
            client.eval(_RAISE_TO, 1, key, batch_id)
        finally:
            client.close()

    def partition_records(self, partitions_key: bytes, record_key: Callable[[int], bytes],
                          first: int) -> list[tuple[int, bytes | None]]:
        client = self._client()
        try:
            beyond = sorted(p for p in map(int, client.smembers(partitions_key)) if p >= first)
            if not beyond:
                return []
            return list(zip(beyond, client.mget([record_key(p) for p in beyond])))
        finally:
            client.close()

    def open(self) -> tuple[Any, Any]:
        client = self._client()
        return client, client.connection_pool.get_connection()

    def close(self, conn: tuple[Any, Any]) -> None:
        client, connection = conn
        connection.disconnect()  # drops any WATCH or half-sent MULTI with it
        client.close()

    def read_record(self, conn: tuple[Any, Any], key: bytes) -> bytes | None:
        _, connection = conn
        connection.send_command("WATCH", key)
        connection.read_response()
        connection.send_command("GET", key)
        return connection.read_response()

    def wrong_types(self, conn: tuple[Any, Any], keys: pa.Array, expected: bytes) -> tuple[list, Any]:
        """Asked on a second connection of the pool: the partition's own holds its WATCH."""
        client, _ = conn
        letters = self.options.dead_letter_key
        probe = client.connection_pool.get_connection()
        try:
            reply = _call(probe, command_over((b"EVAL", _WRONG_TYPES, str(len(keys)).encode()), keys, (expected,)))
            letters_type = _call(probe, command(b"TYPE", letters.encode())) if reply and letters else b"none"
        finally:
            client.connection_pool.release(probe)
        return reply, letters_type

    def write(self, conn: tuple[Any, Any], partition: PartitionWrite) -> int:
        _, connection = conn
        identity, expected = partition.identity, partition.expected
        written: list[pa.Array] = []  # the distinct keys written of each record batch, their types checked
        dead = 0
        _call(connection, command(b"MULTI"))
        for encoded, kept, letters in partition.commands:
            if expected:
                written.append(pc.unique(kept))
            connection.send_packed_command([packed(encoded), packed(letters)], check_health=False)
            for _ in range(len(encoded) + len(letters)):
                _expect_queued(connection)
            dead += len(letters)
        value = partition.record_value()
        if dead:
            written.append(pa.array([self.options.dead_letter_key.encode()], pa.binary()))
        written_keys = pa.concat_arrays(written) if written else pa.array([], pa.binary())
        record = command_over((b"EVAL", _RECORD, str(2 + len(written_keys)).encode(), partition.record_key,
                               partition.partitions_key), written_keys,
                              (value, str(identity.partition_id).encode(), expected.encode(),
                               f"{identity.batch_id}{REFUSED}".encode(), b"1" if dead else b"0"))
        connection.send_packed_command([record + command(b"EXEC")], check_health=False)
        _expect_queued(connection)
        results = connection.read_response()
        if results is None:
            raise FencedError(f"redis-sink: the commit record of {identity} changed while writing: another attempt "
                              "of this partition wrote it; this attempt wrote nothing")
        *applied, recorded = results
        errors = [r for r in applied if isinstance(r, Exception)]
        if recorded != 0:
            key, kind = (part.decode("utf-8", "replace") for part in recorded)
            needs = "the dead-letter stream needs a stream" if dead and key == self.options.dead_letter_key \
                else f"target '{self.options.target}' needs a {expected}"
            raise DeliveryError(
                f"redis-sink: Redis refused {len(errors)} commands of {identity} on key {key!r}, which another client "
                f"made a {kind} while the partition was written ({needs}), and applied the rest: the partition is "
                f"recorded as refused, and every replay of it fails instead of duplicating or losing rows. "
                f"First refusal: {errors[0] if errors else '?'}")
        if errors:
            raise DeliveryError(f"redis-sink: {len(errors)} of {len(results)} commands failed, first: {errors[0]}")
        return dead


class SlotWriter(Writer):
    """A Redis Cluster: a partition's commands grouped by hash slot, each group one atomic script with its own commit
    record in its slot (`sinks.redis.cluster`), then the partition's summary record ``<Q>:<P>`` and its id in
    ``<Q>:partitions``. A replay skips the partition on its summary, else exactly the groups recorded."""

    def check_options(self) -> None:
        opts = self.options
        if not opts.url.startswith(("redis://", "rediss://")):
            raise OptionError("url", redact_url(opts.url), "a redis:// or rediss:// URL in cluster mode (a cluster "
                              "is reached over TCP: unix sockets are not supported)")
        try:
            check_commit_key_prefix(opts.commit_key_prefix)
        except ValueError as exc:
            raise OptionError("commitKeyPrefix", opts.commit_key_prefix,
                              "a prefix without '{' in cluster mode (each commit record is '<commitKeyPrefix>"
                              "{<slot tag>}<commit id>:<partition>', its first '{' the slot tag's)") from exc

    def raise_batch_record(self, key: bytes, batch_id: int) -> None:
        with self.open() as writer:
            writer.run([(key_slot(key), command(b"EVAL", _RAISE_TO.encode(), b"1", key, str(batch_id).encode()), 1)])

    def partition_records(self, partitions_key: bytes, record_key: Callable[[int], bytes],
                          first: int) -> list[tuple[int, bytes | None]]:
        with self.open() as writer:
            [[members]] = writer.run([(key_slot(partitions_key), command(b"SMEMBERS", partitions_key), 1)])
            beyond = sorted(p for p in map(int, members) if p >= first)
            records = [record_key(p) for p in beyond]
            replies = writer.run([(key_slot(r), command(b"GET", r), 1) for r in records])
        return [(p, record) for p, [record] in zip(beyond, replies)]

    def open(self) -> ClusterWriter:
        opts = self.options
        return ClusterWriter(opts.url, timeout_s=opts.timeout_s, min_replicas=opts.min_replicas,
                             address_map=dict(opts.address_map))

    def close(self, conn: ClusterWriter) -> None:
        conn.close()

    def read_record(self, conn: ClusterWriter, key: bytes) -> bytes | None:
        """The summary record, written once all the partition's groups are."""
        [[committed]] = conn.run([(key_slot(key), command(b"GET", key), 1)])
        return committed

    def wrong_types(self, conn: ClusterWriter, keys: pa.Array, expected: bytes) -> tuple[list, Any]:
        letters = self.options.dead_letter_key
        reply = _wrong_types_by_slot(conn, keys, expected)
        letters_type = conn.run([(key_slot(letters), command(b"TYPE", letters.encode()), 1)])[0][0] \
            if reply and letters else b"none"
        return reply, letters_type

    def write(self, conn: ClusterWriter, partition: PartitionWrite) -> int:
        """The whole partition is grouped before its first group is written (memory: its size)."""
        identity, opts = partition.identity, self.options
        encoded_all: list[pa.Array] = []
        keys_all: list[pa.Array] = []
        dead = 0
        for encoded, kept, letters in partition.commands:
            encoded_all += [encoded, letters]
            keys_all += [_command_keys(kept, len(encoded)),
                         pa.array([(opts.dead_letter_key or "").encode()] * len(letters), pa.binary())]
            dead += len(letters)
        value = partition.record_value()
        if encoded_all:
            writes = plan(pa.concat_arrays(keys_all), pa.concat_arrays(encoded_all),
                          commit_key_prefix=opts.commit_key_prefix, commit_id=identity.commit_id,
                          partition=identity.partition_id, batch_id=identity.batch_id, record_value=value)
            conn.write(writes)
        summary, partitions = partition.record_key, partition.partitions_key
        replies = conn.run([(key_slot(partitions), command(b"SADD", partitions, str(identity.partition_id).encode()), 1),
                            (key_slot(summary), command(b"SET", summary, value), 1)])
        errors = [r for [r] in replies if isinstance(r, Exception)]
        if errors:
            raise DeliveryError(f"redis-sink: the summary record of {identity} was refused: {errors[0]}")
        return dead


def _command_keys(keys: pa.Array, count: int) -> pa.Array:
    """The key of each of `count` commands (`sinks.redis.sink.RedisSink._commands`): the rows' `keys`, then for each
    per-key command kind (``LTRIM``, ``ZREMRANGEBYRANK``, ``EXPIRE``) the distinct keys again, in `pc.unique` order."""
    if count == len(keys):
        return keys
    distinct = pc.unique(keys)
    return pa.concat_arrays([keys, *[distinct] * ((count - len(keys)) // len(distinct))])


def _wrong_types_by_slot(writer: ClusterWriter, keys: pa.Array, expected: bytes) -> list:
    """`_WRONG_TYPES` over distinct `keys` of any slots: one script per slot (on its node, pipelined per node); the
    reply as one script over all of them would give (1-based indexes into `keys`, then the type)."""
    groups = group_by_slot(key_slots(keys))
    requests = [(int(slot), command_over((b"EVAL", _WRONG_TYPES, str(len(groups.rows(g))).encode()),
                                         groups.take(keys, g), (expected,)), 1) for g, slot in enumerate(groups.slots)]
    out: list = []
    for g, [reply] in enumerate(writer.run(requests)):
        if isinstance(reply, Exception):
            raise DeliveryError(f"redis-sink: Redis refused the key-type check: {reply}")
        rows = groups.rows(g)
        for index, kind in zip(reply[::2], reply[1::2]):
            out += [int(rows[int(index) - 1]) + 1, kind]
    return out


def _call(connection, packed_command: bytes):
    connection.send_packed_command([packed_command], check_health=False)
    return connection.read_response()


def _expect_queued(connection) -> None:
    reply = connection.read_response()
    if reply not in (b"QUEUED", "QUEUED"):
        raise DeliveryError(f"redis-sink: Redis refused a command of the transaction: {reply!r}")
