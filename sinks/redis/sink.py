"""The Redis sink: exactly-once writes of a streaming query to Redis strings, lists, hashes, streams, sets or
sorted sets."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import NumericType

from connectors.datasource import SinkDataSource
from connectors.errors import DeliveryError, OptionError, SinkError, TransientError
from connectors.options import OptionReader
from connectors.protocol import CommitMessage, Fingerprint, Sink, WriteIdentity, fingerprint_of
from connectors.redact import redact_url
from connectors.rows import as_binary, json_objects
from sinks.redis.client import connect, import_redis, mapped, security_error
from sinks.redis.cluster import cluster_enabled
from sinks.redis.options import DELETES, RedisOptions
from sinks.redis.resp import commands
from sinks.redis.writers import REFUSED, NodeWriter, PartitionWrite, SlotWriter, Writer

__all__ = ["RedisSinkDataSource", "RedisSink", "RedisOptions", "import_redis", "mapped"]


#: The Redis type a target's commands need their keys to hold (or the key to be absent). Redis refuses a
#: command on a key of another type only when EXEC runs it (WRONGTYPE), and applies the rest of the
#: transaction: so these keys' types are checked before anything is queued, and again inside the
#: transaction before its commit record is written. ``string`` has none: ``SET`` replaces any type.
KEY_TYPES = {"list": "list", "hash": "hash", "stream": "stream", "set": "set", "zset": "zset"}


class RedisSink(Sink):
    """Writes a partition and its commit record through its `writer`: on a single node in one MULTI/EXEC, guarded by
    WATCH on the record; on a cluster one atomic script per hash slot (`sinks.redis.writers`).

    Records, under ``commitKeyPrefix`` and the commit id Q: ``<Q>:<P>`` holds the last batch partition
    P committed and the input it was written from (``"<batch> <rows>:<digest>"``, or ``"<batch>"``
    as older versions wrote it); ``<Q>:partitions`` is the set of partition ids that ever wrote (the
    driver reads it to notice a replay with fewer partitions); ``<Q>:batch`` the last batch committed.
    """

    name = "redis-sink"

    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        self._writer: Writer | None = None

    @property
    def cluster(self) -> bool:
        """Whether `url` names a Redis Cluster: option ``cluster``, or with ``auto`` the node's answer (asked once per
        URL and process: `RedisSinkDataSource.build` asks on the driver and ships the answer)."""
        if self.options.cluster == "auto":
            self.options = replace(self.options, cluster="true" if _cluster_enabled(self.options) else "false")
        return self.options.cluster == "true"

    @property
    def writer(self) -> Writer:
        """How this sink reaches Redis, chosen once from `cluster`: a `SlotWriter` on a cluster, else a `NodeWriter`
        (`RedisSinkDataSource.build` asks on the driver; the executors get the choice with the sink)."""
        if self._writer is None:
            self._writer = (SlotWriter if self.cluster else NodeWriter)(self.options)
        return self._writer

    # -- driver ---------------------------------------------------------------------------------
    def check(self) -> None:
        redis = import_redis()
        client = connect(self.options.url, self.options.timeout_s)
        try:
            client.ping()
        except redis.AuthenticationError as exc:
            raise SinkError(f"redis-sink: authentication failed at {redact_url(self.options.url)}: {exc}; "
                            "check the user name and password in option 'url' (redis[s]://user:password@host:port)"
                            ) from exc
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            refused = security_error(exc, self.options.url)
            if refused is not None:
                raise refused from exc
            raise TransientError(f"redis-sink: cannot reach Redis at {redact_url(self.options.url)} ({exc}); "
                                 "is the server running and the 'url' option right?") from exc
        except redis.RedisError as exc:
            raise SinkError(f"redis-sink: cannot reach Redis at {redact_url(self.options.url)} ({exc}); "
                            "is the server running and the 'url' option right?") from exc
        finally:
            client.close()

    def commit_batch(self, commit_id: str, batch_id: int, messages: Sequence[CommitMessage]) -> None:
        with mapped(self.options.url):
            self.writer.raise_batch_record(self.batch_key(commit_id).encode(), batch_id)

    # -- keys of the commit records -------------------------------------------------------------
    def partition_key(self, identity: WriteIdentity) -> str:
        return f"{self.options.commit_key_prefix}{identity.commit_id}:{identity.partition_id}"

    def batch_key(self, commit_id: str) -> str:
        return f"{self.options.commit_key_prefix}{commit_id}:batch"

    def partitions_key(self, commit_id: str) -> str:
        return f"{self.options.commit_key_prefix}{commit_id}:partitions"

    def committed_beyond(self, commit_id: str, batch_id: int, partitions: int) -> list[int]:
        prefix = f"{self.options.commit_key_prefix}{commit_id}:"
        with mapped(self.options.url):
            records = self.writer.partition_records(self.partitions_key(commit_id).encode(),
                                                    lambda p: f"{prefix}{p}".encode(), partitions)
        return [p for p, record in records if record is not None and int(record.split()[0]) >= batch_id]

    # -- executor -------------------------------------------------------------------------------
    def open(self, identity: WriteIdentity) -> Any:
        with mapped(self.options.url):
            return self.writer.open()

    def close(self, conn: Any) -> None:
        self.writer.close(conn)

    def is_committed(self, conn: Any, identity: WriteIdentity) -> bool | Fingerprint:
        key = self.partition_key(identity)
        with mapped(self.options.url):
            committed = self.writer.read_record(conn, key.encode())
        if committed is None:
            return False
        batch, _, fingerprint = committed.partition(b" ")
        if int(batch) != identity.batch_id:
            return int(batch) > identity.batch_id
        if fingerprint.startswith(REFUSED[1:].encode()):
            key = fingerprint[len(REFUSED) - 1:].decode("utf-8", "replace")
            raise DeliveryError(
                f"redis-sink: an earlier attempt of {identity} was applied only in part: Redis refused its commands "
                f"on key {key!r}, whose type another client changed while the partition was written, and ran the "
                f"rest. Writing the partition again would duplicate those rows and skipping it would lose the "
                f"refused ones, so it is not replayed. Check what landed, then delete the record "
                f"{self.partition_key(identity)!r} to write the partition again, or start over with a new 'commitId'.")
        return Fingerprint.parse(fingerprint) or True

    def write(self, conn: Any, identity: WriteIdentity, batches: Iterator[pa.RecordBatch]) -> int:
        """Write the partition and its commit record (`Writer.write`); returns how many rows went to
        ``deadLetterKey`` (in the same transaction, or slot groups on a cluster)."""
        expected = KEY_TYPES.get(self.options.target, "")
        partition = PartitionWrite(identity, self._prepared(batches, identity, conn, expected),
                                   lambda: _record_value(identity, batches).encode(),
                                   self.partition_key(identity).encode(),
                                   self.partitions_key(identity.commit_id).encode(), expected)
        with mapped(self.options.url):
            return self.writer.write(conn, partition)

    def _refusals(self, conn: Any, identity: WriteIdentity, keys: pa.Array, first_row: int) -> pa.Array | None:
        """Why Redis would refuse each row of a record batch (`keys`: each row's key): None when it refuses none,
        else ``"<error code>: <reason>"`` per row, null for the rows it takes. Without ``deadLetterKey`` a refused row raises
        `DeliveryError` naming the first of them instead.

        Runs before the rows are queued (`Writer.wrong_types` on the partition's `conn`): nothing of the partition is
        applied yet.
        """
        expected = KEY_TYPES[self.options.target]
        dead_letter_key = self.options.dead_letter_key
        distinct = pc.unique(keys)
        reply, letters_type = self.writer.wrong_types(conn, distinct, expected.encode())
        if not reply:
            return None
        wrong = [distinct[int(i) - 1].as_py() for i in reply[::2]]
        kinds = [kind.decode() for kind in reply[1::2]]
        index = pc.index_in(keys, value_set=pa.array(wrong, pa.binary()))
        if dead_letter_key is None:
            row = int(pc.is_valid(index).to_numpy(zero_copy_only=False).argmax())  # the first refused row
            key = keys[row].as_py()
            raise DeliveryError(
                f"redis-sink: Redis refuses row {first_row + row} of {identity}: its key "
                f"{key.decode('utf-8', 'replace')!r} holds a {kinds[index[row].as_py()]}, and target "
                f"'{self.options.target}' writes a {expected} (WRONGTYPE Operation against a key holding the wrong "
                f"kind of value); {len(wrong)} key(s) of this partition are refused. Nothing of the partition was "
                "written, and every replay of this batch meets the same refusal: delete or rename the key, write to "
                "other keys ('keyPrefix', 'keyColumn'), or set 'deadLetterKey' to send such rows to a stream there.")
        if letters_type not in (b"stream", b"none", "stream", "none"):
            kind = letters_type.decode() if isinstance(letters_type, bytes) else letters_type
            raise DeliveryError(
                f"redis-sink: deadLetterKey {dead_letter_key!r} holds a {kind}, and dead letters are stream entries: "
                f"{identity} has rows Redis refuses and nowhere to put them. Nothing of the partition was written; "
                "delete or rename that key, or choose another 'deadLetterKey'.")
        target = self.options.target
        return pc.take(pa.array([f"WRONGTYPE: the key holds a {kind}, and target '{target}' writes a {expected}"
                                 for kind in kinds], pa.string()), index)

    def _score_refusals(self, batch: pa.RecordBatch, identity: WriteIdentity, keys: pa.Array, first_row: int,
                        reasons: pa.Array | None) -> pa.Array | None:
        """`reasons` (see `_refusals`) with the rows whose score Redis refuses (null or NaN: ``ZADD`` fails at EXEC
        with "value is not a valid float"); without ``deadLetterKey`` such a row raises `DeliveryError`."""
        score = _column(batch, self.options.score_column, "scoreColumn")
        bad = pc.is_null(score, nan_is_null=True) if pa.types.is_floating(score.type) else pc.is_null(score)
        if not pc.any(bad).as_py():
            return reasons
        if self.options.dead_letter_key is None:
            row = int(bad.to_numpy(zero_copy_only=False).argmax())
            raise DeliveryError(
                f"redis-sink: Redis refuses row {first_row + row} of {identity} (key "
                f"{keys[row].as_py().decode('utf-8', 'replace')!r}): its score ('scoreColumn' "
                f"{self.options.score_column!r}) is {score[row].as_py()}, not a number (ZADD: value is not a valid "
                f"float); {pc.sum(bad).as_py()} row(s) of this partition are refused. Nothing of the partition was "
                "written, and every replay of this batch meets the same refusal: fill the score, or set "
                "'deadLetterKey' to send such rows to a stream there.")
        why = pc.if_else(bad, pa.scalar("ERR: the score is null or NaN, not a number (value is not a valid float)"),
                         pa.scalar(None, pa.string()))
        return why if reasons is None else pc.coalesce(reasons, why)

    def _prepared(self, batches: Sequence[pa.RecordBatch], identity: WriteIdentity, conn: Any,
                  expected: str) -> Iterator[tuple[pa.Array, pa.Array, pa.Array]]:
        """Each non-empty record batch of a partition, in order, as `_commands` gives it (the commands, the keys
        kept, the dead letters): its keys, its rows refused for a key of another type (asked on the partition's
        `conn` when the target has an `expected` type) or a bad score, and the commands of the others."""
        first_row = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            keys = self._keys(batch, identity, first_row)
            reasons = self._refusals(conn, identity, keys, first_row) if expected else None
            if self.options.score_column:
                reasons = self._score_refusals(batch, identity, keys, first_row, reasons)
            yield self._commands(batch, identity, first_row, keys, reasons)
            first_row += batch.num_rows

    def _keys(self, batch: pa.RecordBatch, identity: WriteIdentity, first_row: int) -> pa.Array:
        """The key each row of a record batch is written to."""
        opts = self.options
        if opts.target == "string":
            return _concat(opts.key_prefix, _key_values(batch, opts.key_column, identity, first_row))
        if opts.key_column:
            return _concat(opts.key_prefix, _column(batch, opts.key_column, "keyColumn"))
        return pa.array([opts.key_prefix.encode()] * batch.num_rows, pa.binary())

    def _commands(self, batch: pa.RecordBatch, identity: WriteIdentity, first_row: int, key: pa.Array,
                  reasons: pa.Array | None) -> tuple[pa.Array, pa.Array, pa.Array]:
        """The commands of one record batch whose rows go to `key`, RESP-encoded: those of the rows Redis takes,
        their keys, and the dead letters (``XADD`` to ``deadLetterKey``) of the rows with a reason in `reasons`."""
        opts = self.options
        value = as_binary(_column(batch, opts.value_column, "valueColumn")) if opts.value_column \
            else json_objects(batch).cast(pa.binary())
        deletes = _deletes(batch, opts.op_column)
        field = None
        if opts.target == "string":
            ttl = (b"EX", str(opts.ttl_s).encode()) if opts.ttl_s else ()
            main = commands(b"SET", key, value, *ttl)
            if deletes is not None:
                main = pc.if_else(deletes, commands(DELETES["string"], key), main)
            return main, key, pa.array([], pa.binary())
        if opts.target == "list":
            main = commands(b"RPUSH" if opts.list_operation == "append" else b"LPUSH", key, value)
        elif opts.target == "hash":
            field = as_binary(_column(batch, opts.field_column, "fieldColumn") if opts.field_column
                              else _key_values(batch, None, identity, first_row))
            main = commands(b"HSET", key, field, value)
            if deletes is not None:
                main = pc.if_else(deletes, commands(DELETES["hash"], key, field), main)
        elif opts.target == "stream":
            trim = (b"MAXLEN", str(opts.max_length).encode()) if opts.max_length else ()
            main = commands(b"XADD", key, *trim, b"*", b"value", value)
        elif opts.target == "set":
            main = commands(b"SADD", key, value)
        else:
            main = commands(b"ZADD", key, _scores(batch, opts.score_column), value)
        letters = pa.array([], pa.binary())
        if reasons is not None:
            refused = pc.is_valid(reasons)
            letters = self._dead_letters(identity, first_row, refused, key, value, field, reasons)
            accepted = pc.invert(refused)
            main, key = main.filter(accepted), key.filter(accepted)
        extra = []
        distinct = pc.unique(key)
        if opts.target == "list" and opts.max_length:
            bounds = (b"0", str(opts.max_length - 1).encode()) if opts.list_operation == "prepend" \
                else (str(-opts.max_length).encode(), b"-1")
            extra.append(commands(b"LTRIM", distinct, *bounds))
        if opts.target == "zset" and opts.max_length:  # keep the N highest scores
            extra.append(commands(b"ZREMRANGEBYRANK", distinct, b"0", str(-opts.max_length - 1).encode()))
        if opts.ttl_s:
            extra.append(commands(b"EXPIRE", distinct, str(opts.ttl_s).encode()))
        encoded = pa.concat_arrays([main, *extra]) if extra else main
        return encoded, key, letters

    def _dead_letters(self, identity: WriteIdentity, first_row: int, refused: pa.Array, key: pa.Array,
                      value: pa.Array, field: pa.Array | None, reasons: pa.Array) -> pa.Array:
        """One ``XADD <deadLetterKey> * …`` per refused row: its key, (hash) field and value, the error's code and
        reason, and where it came from (the fields the Kafka sink's dead letters carry as headers)."""
        why = pc.extract_regex(reasons.filter(refused), r"(?P<code>[^:]*): (?P<reason>.*)")
        rows = pa.array(np.flatnonzero(refused.to_numpy(zero_copy_only=False)) + first_row).cast(pa.string())
        where = (b"impulse.commit.id", identity.commit_id.encode(), b"impulse.batch", str(identity.batch_id).encode(),
                 b"impulse.partition", str(identity.partition_id).encode())
        fields = (b"field", field.filter(refused)) if field is not None else ()
        return commands(b"XADD", self.options.dead_letter_key.encode(), b"*", b"key", key.filter(refused), *fields,
                        b"value", value.filter(refused), b"impulse.error.code", why.field("code").cast(pa.binary()),
                        b"impulse.error.reason", why.field("reason").cast(pa.binary()), *where,
                        b"impulse.row", rows.cast(pa.binary()))


class RedisSinkDataSource(SinkDataSource):
    """Exactly-once streaming and batch writes to Redis.

    Name: ``redis-sink``

    Parameters (option names are case-insensitive)
    ----------
    url : str, required
        ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` for TLS, or ``unix://``.
    target : ``string`` (default) | ``list`` | ``hash`` | ``stream`` | ``set`` | ``zset``
        string: ``SET key value`` per row; list: ``RPUSH``/``LPUSH key value``; hash: ``HSET key field
        value``; stream: ``XADD key * value <value>``; set: ``SADD key value``; zset: ``ZADD key <score>
        value`` (a member's later row sets its score).
    scoreColumn : str, required for target ``zset``, refused for the others
        A numeric column: each member's score. A null or NaN score is refused for good (see
        ``deadLetterKey``).
    keyPrefix : str, default ``""``
        Prepended to every key. For every target but string, without ``keyColumn`` it is the key.
    keyColumn : str, optional
        Column whose value (as text) follows the prefix in the key. Default for ``string``: the
        event's identity ``<subtask_index>:<counter>`` when the input has those columns, else
        ``<commit id>:<batch>:<partition>:<row>`` (stable when the batch is replayed).
    fieldColumn : str, optional
        Hash field; default the event's identity as above.
    valueColumn : str, optional
        Column written as the value (strings as UTF-8, binary as is). Default: the row as JSON
        (`connectors.rows.json_objects`: timestamps ISO-8601, binary base64).
    opColumn : str, optional, target ``string`` or ``hash``
        Applies a changelog: a row whose op is ``delete`` removes its key (``DEL``), or with ``hash``
        its field (``HDEL``), in row order with the other rows and exactly once like them; any other
        op (``insert``, ``update``) writes as usual. The op stays in the default JSON value.
    ttl : int ≥ 1, seconds, optional
        Expiry of every key written (``SET … EX`` for strings, ``EXPIRE`` of the key otherwise: a list,
        hash, stream, set or sorted set expires whole).
    listOperation : ``append`` (default) | ``prepend``
    maxLength : int ≥ 1, optional, target ``list``, ``stream`` or ``zset``
        Lists keep their newest maxLength elements (``LTRIM``); streams ``XADD MAXLEN`` (exact); sorted
        sets their maxLength highest scores (``ZREMRANGEBYRANK key 0 -(maxLength+1)``).
    commitKeyPrefix : str, default ``impulse:commit:``
        Where the commit records live (see *Guarantee*).
    deadLetterKey : str, optional
        A stream taking the rows Redis refuses for good (list, hash, stream: a key holding another
        type, ``WRONGTYPE``; zset: a null or NaN score, ``ERR``) instead of failing the partition: one
        ``XADD <deadLetterKey> * key <key> [field <field>] value <value> impulse.error.code <code>
        impulse.error.reason <why>
        impulse.commit.id <id> impulse.batch <b> impulse.partition <p> impulse.row <r>`` per refused
        row, in the partition's transaction (so once, like the rows). Not trimmed, no ``ttl``. Refused
        at start when rows could go to it (it is the key, or under ``keyPrefix`` with ``keyColumn``)
        or it is under ``commitKeyPrefix``; it must hold a stream or nothing. Target ``string`` never
        uses it (``SET`` replaces any type).
    timeout : duration, default ``10s``
        Socket timeout of every Redis call.
    cluster : ``auto`` (default) | ``true`` | ``false``
        Whether `url` names a node of a Redis Cluster; ``auto`` asks it (``INFO cluster``) once, on the
        driver when the query starts. In cluster mode ``commitKeyPrefix`` must contain no ``{``.
    minReplicas : int ≥ 0, default 0, cluster mode only
        After each node's transactions, ``WAIT`` until this many replicas have them; fewer is a
        `TransientError` (retried: the retry skips the groups recorded and waits again).
    addressMap : str, optional, cluster mode only
        ``ANNOUNCED=REACHABLE`` pairs of ``host:port``, comma-separated: connect to REACHABLE for the node the
        cluster announces (``CLUSTER SLOTS``, ``MOVED``, ``ASK``) as ANNOUNCED — a cluster behind port forwarding,
        NAT or a proxy (redis-py's ``address_remap``). Nodes not named are reached where they are announced.
    commitId, writeRetries, retryBackoff, retryBackoffMax, metricsPath, faultInjection
        The options of the commit protocol (`connectors.protocol.ProtocolOptions`).

    Guarantee
    ---------
    Exactly-once for every target, lists and streams included. Each Spark partition of a batch is
    one ``MULTI … EXEC`` transaction holding its rows and ``SET <commitKeyPrefix><commit id>:<partition>
    <batch id>``, under ``WATCH`` of that key: a replayed batch finds its partitions recorded and
    skips them; a crashed attempt's transaction never reaches EXEC, so nothing of it is applied; two
    concurrent attempts cannot both commit (WATCH aborts the second). For every target but string, the types
    of a record batch's keys are checked before its rows are queued (Redis refuses a command on a key of
    another type only at EXEC, and runs the rest): a key of another type fails the partition with nothing
    of it applied, and every replay fails the same way until the key is fixed (see `KEY_TYPES`); with
    ``deadLetterKey`` such rows go to that stream in the same transaction instead. The driver records the last
    committed batch in ``<commitKeyPrefix><commit id>:batch``. A lost connection is retried
    (``writeRetries``): the retry first looks at the commit record, so an EXEC that was applied but
    whose reply was lost is not repeated. Durability is the server's: with ``appendfsync always``
    an acknowledged EXEC survives a crash of Redis.

    In cluster mode a partition is one atomic script per hash slot its keys fall in, each with its own
    record ``<commitKeyPrefix>{<slot tag>}<commit id>:<partition>`` in that slot, then the summary record
    ``<commitKeyPrefix><commit id>:<partition>`` (the layout: `sinks.redis.slots`; the writing, MOVED and
    ASK: `sinks.redis.cluster`). A replay skips the partition on its summary, else exactly the groups
    recorded. The whole partition is grouped before its first group is written (memory: its size).

    Commands are RESP-encoded with pyarrow for a whole record batch and sent in one write per batch;
    a partition's transaction is held by the server until EXEC (memory: the partition's size).

    Examples
    --------
    >>> (spark.readStream.format("impulse").option("eventsPerSecond", 1000).load()
    ...     .writeStream.format("redis-sink").option("url", "redis://localhost:6379/0")
    ...     .option("target", "list").option("keyPrefix", "events")
    ...     .option("checkpointLocation", "/tmp/ck").start())                 # doctest: +SKIP
    >>> (df.write.format("redis-sink").mode("append").option("url", "redis://localhost:6379/0")
    ...     .option("commitId", "backfill-1").save())   # batch: connectors.batch   # doctest: +SKIP
    """

    label = "redis sink"
    sink_class = RedisSink

    def build(self, reader: OptionReader, schema) -> RedisSink:
        """The sink of the options in `reader`, whose column options must name columns of `schema`."""
        opts = RedisOptions.read(reader)
        for option, column in (("keyColumn", opts.key_column), ("fieldColumn", opts.field_column),
                               ("valueColumn", opts.value_column), ("opColumn", opts.op_column),
                               ("scoreColumn", opts.score_column)):
            if column is not None and column not in schema.fieldNames():
                raise OptionError(option, column, "a column of the input: " + ", ".join(schema.fieldNames()))
        if opts.score_column is not None:
            kind = schema[opts.score_column].dataType
            if not isinstance(kind, NumericType):
                raise OptionError("scoreColumn", opts.score_column, f"a numeric column (this one is {kind.simpleString()}"
                                  "): cast it, e.g. col('x').cast('double')")
        sink = RedisSink(opts)
        try:
            writer = sink.writer  # cluster=auto: asked here, once per URL and driver process
        except TransientError:
            return sink  # unreachable: check() says so; the executors ask again once it is back
        writer.check_options()
        return sink


_CLUSTER_MODE: dict[str, bool] = {}  # url → whether it is a cluster node, as asked by `_cluster_enabled`


def _cluster_enabled(options: RedisOptions) -> bool:
    """Whether the node at ``options.url`` runs in cluster mode, asked once per URL in this process."""
    if options.url not in _CLUSTER_MODE:
        with mapped(options.url):
            _CLUSTER_MODE[options.url] = cluster_enabled(options.url, options.timeout_s)
    return _CLUSTER_MODE[options.url]


def _record_value(identity: WriteIdentity, batches: Sequence[pa.RecordBatch]) -> str:
    """What a commit record holds: the batch id, and the input's fingerprint when there is one."""
    fingerprint = fingerprint_of(batches)
    return f"{identity.batch_id} {fingerprint}" if fingerprint is not None else str(identity.batch_id)


def _scores(batch: pa.RecordBatch, column: str) -> pa.Array:
    """A zset member's score as Redis reads it (``ZADD``): the column's number as text, ``inf``/``-inf`` as is."""
    return _column(batch, column, "scoreColumn").cast(pa.string()).cast(pa.binary())


def _deletes(batch: pa.RecordBatch, op_column: str | None) -> pa.Array | None:
    """Which rows are deletes (their op is ``delete``), or None when there is no op column or no delete."""
    if op_column is None:
        return None
    deletes = pc.fill_null(pc.equal(_column(batch, op_column, "opColumn").cast(pa.string()), "delete"), False)
    return deletes if pc.any(deletes).as_py() else None


def _column(batch: pa.RecordBatch, name: str | None, option: str) -> pa.Array:
    index = batch.schema.get_field_index(name)
    if index < 0:
        raise OptionError(option, name, "a column of the input: " + ", ".join(batch.schema.names))
    return batch.column(index)


def _key_values(batch: pa.RecordBatch, column: str | None, identity: WriteIdentity, first_row: int) -> pa.Array:
    """The key part of each row: a column's text, the event identity, or a stable position."""
    if column:
        return as_binary(_column(batch, column, "keyColumn"))
    names = batch.schema.names
    if "subtask_index" in names and "counter" in names:
        return pc.binary_join_element_wise(as_binary(batch.column(names.index("subtask_index"))), b":",
                                           as_binary(batch.column(names.index("counter"))), b"")
    rows = pa.array(range(first_row, first_row + batch.num_rows), pa.int64())
    prefix = f"{identity.commit_id}:{identity.batch_id}:{identity.partition_id}:".encode()
    return pc.binary_join_element_wise(pa.scalar(prefix, pa.binary()), as_binary(rows), pa.scalar(b"", pa.binary()))


def _concat(prefix: str, values: pa.Array) -> pa.Array:
    values = as_binary(values)
    if not prefix:
        return values
    return pc.binary_join_element_wise(pa.scalar(prefix.encode(), pa.binary()), values, pa.scalar(b"", pa.binary()))
