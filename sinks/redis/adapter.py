"""The Redis sink's conformance adapter (see `connectors.conformance.adapter.SinkAdapter`)."""

from __future__ import annotations

import argparse
import functools
from contextlib import contextmanager
from typing import Iterator, Mapping

from connectors.conformance.adapter import Poison, SinkAdapter, events_from_json, host_port, unused_port, with_address
from connectors.options import OptionReader
from connectors.readback import CannotReadBack, TargetReader
from connectors.servers.tap import UP, Tap
from sinks.redis.client import import_redis
from sinks.redis.cluster import cluster_enabled
from sinks.redis.options import RedisOptions

__all__ = ["RedisAdapter", "RedisReader"]

#: the targets read back: each keeps every row as its value (a set or sorted set would merge equal rows)
READABLE = ("string", "list", "hash", "stream")


class RedisAdapter(SinkAdapter):
    """The Redis sink writing to `target` (default ``list``: appends, where a duplicate would show).

    `server`, optional, is the redis-server behind `url` when the caller runs it (anything with a
    ``restart()`` that keeps the data, as `connectors.servers.RedisServer`): it makes `restart_target` work.
    `cluster`: `url` names a node of a Redis Cluster (the sink finds out itself, ``cluster=auto``, and so does the
    reader of its target, `RedisReader`, which reads back through redis-py's ``RedisCluster``). Rows then go to `LANES` keys ``<namespace>:{<counter % LANES>}``
    (`list`, `hash`, `stream`), whose hash tags put them on every primary of a cluster split as
    ``redis-cli --cluster create`` splits it, in the same slots whatever the namespace: a partition's write is
    several slot groups, on several nodes, and a recorded conversation has the same sizes in every namespace. The
    network cases put the proxy in front of the primary serving lane ``{0}``, and the sink reaches that node through
    it wherever the cluster announces it (option ``addressMap``); the other nodes directly.
    """

    format = "redis-sink"
    #: cluster mode: how many keys (hash tags) the rows are spread over
    LANES = 8

    def __init__(self, url: str, target: str = "list", server=None, cluster: bool = False) -> None:
        self.url, self.target, self.target_server, self.cluster = url, target, server, cluster
        redis = import_redis()
        self.client = redis.RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
        if cluster and target != "string":
            self.extra_columns = (f"concat('{{', CAST(counter % {self.LANES} AS STRING), '}}') AS cluster_lane",)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--url", required=True, help="redis:// URL of the target")
        parser.add_argument("--target", default="list", choices=("list", "string", "hash", "stream"),
                            help="the Redis data type to write (default: list)")
        parser.add_argument("--cluster", action="store_true", help="the URL names a node of a Redis Cluster")

    @classmethod
    @contextmanager
    def from_arguments(cls, args: argparse.Namespace) -> Iterator["RedisAdapter"]:
        yield cls(args.url, target=args.target, cluster=args.cluster)

    def options(self, namespace: str) -> Mapping[str, str]:
        lanes = {"keyColumn": "cluster_lane"} if self.extra_columns else {}
        return {"url": self.url, "target": self.target, "keyPrefix": f"{namespace}:",
                "commitKeyPrefix": f"commit:{namespace}:", **lanes}

    @functools.cached_property
    def _routed_primary(self) -> str:
        """Cluster mode: ``host:port`` of the primary serving lane ``{0}``'s slot when first asked (the node `url`
        names may be a replica by then, after a failover): every partition writes some of its groups there."""
        node = self.client.get_node_from_key("{0}")
        return f"{node.host}:{node.port}"

    def network_route(self) -> tuple[str, str | None] | None:
        return (self._routed_primary if self.cluster else host_port(self.url)), None

    def options_via(self, namespace: str, address: str) -> Mapping[str, str]:
        if self.cluster:  # the primary announces its own address: the sink reaches it through `address` instead
            return {**self.options(namespace), "addressMap": f"{self._routed_primary}={address}"}
        return {**self.options(namespace), "url": with_address(self.url, address)}

    @functools.cached_property
    def network_handshake(self) -> int:
        """redis-py's round trips when it connects, before the sink's first command (``HELLO``, ``CLIENT …``, as
        this redis-py and server have it): counted once, on a connection of its own through a tap, around a PING."""
        with Tap(host_port(self.url)) as tap:
            client = import_redis().Redis.from_url(with_address(self.url, tap.address))
            try:
                client.ping()
            finally:
                client.close()
            [conversation] = tap.snapshot()
        return sum(direction == UP for direction, _ in conversation.turns) - 1

    @classmethod
    def reader(cls, options: Mapping[str, str], receiver=None) -> "RedisReader":
        return RedisReader(options)

    def poison(self, namespace: str) -> Poison:
        """Lists per lane (``counter % 10``) whose lane 3 key holds a string: Redis refuses those rows (WRONGTYPE);
        ``deadLetterKey`` is the namespace's stream ``<namespace>:dead``."""
        lanes, refused_lane = f"{namespace}:lane:", 3
        self.client.set(f"{lanes}{refused_lane}", "a plain string")
        dead = f"{namespace}:dead"

        def landed() -> list[tuple[int, int]]:
            keys = [k for k in self.client.scan_iter(match=f"{lanes}*", count=10_000) if self.client.type(k) == b"list"]
            return events_from_json([v for key in keys for v in self.client.lrange(key, 0, -1)])

        return Poison(columns=["counter", "subtask_index", "timestamp", "CAST(counter % 10 AS STRING) AS lane"],
                      options={"url": self.url, "target": "list", "keyPrefix": lanes, "keyColumn": "lane",
                               "commitKeyPrefix": f"commit:{namespace}:"},
                      dead_letter={"deadLetterKey": dead}, refused=lambda event: event[1] % 10 == refused_lane,
                      read_back=landed,
                      read_dead_letters=lambda: events_from_json([f[b"value"] for _, f in self.client.xrange(dead)]),
                      words=("Redis refuses row", f"'{lanes}{refused_lane}' holds a string"))

    def cleanup(self, namespace: str) -> None:
        for pattern in (f"{namespace}:*", f"commit:{namespace}:*"):
            keys = list(self.client.scan_iter(match=pattern, count=10_000))
            for i in range(0, len(keys), 10_000):
                self.client.delete(*keys[i:i + 10_000])

    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        return {**self.options(namespace), "url": f"redis://127.0.0.1:{unused_port()}/0"}

    def bad_options(self) -> list[tuple[Mapping[str, str], str]]:
        return [({"target": "bitmap"}, "target"), ({"url": "http://127.0.0.1:1"}, "url"), ({"ttl": "0"}, "ttl"),
                ({"valueColumn": "no_such_column"}, "valueColumn"), ({"listOperation": "insert"}, "listOperation")]


class RedisReader(TargetReader):
    """redis-sink's keys under ``keyPrefix`` (its commit records under ``commitKeyPrefix`` excluded), each read by its
    type, on a single node or across a Redis Cluster (option ``cluster``; ``auto`` asks the node at ``url``, as the
    sink does; ``addressMap`` is followed). The rows must be the values (no ``valueColumn``) of a string, list, hash
    or stream target."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = RedisOptions.read(OptionReader(options, name="redis-sink"))
        if not self.options.key_prefix:
            raise CannotReadBack("redis-sink's rows are read back under its keyPrefix: set keyPrefix=NAME: (a prefix "
                                 "that holds nothing yet)")
        if self.options.value_column is not None or self.options.target not in READABLE:
            raise CannotReadBack("the rows are compared whole: redis-sink must write each row as its JSON value (no "
                                 f"valueColumn) to target {', '.join(READABLE[:-1])} or {READABLE[-1]}")
        self.keeps_state = ((self.options.target == "string" and self.options.key_column is not None)
                            or (self.options.target == "hash" and self.options.field_column is not None))

    def describe(self) -> str:
        return f"Redis {self.options.target} values under {self.options.key_prefix!r}"

    def _client(self):
        """A client of the node at ``url`` or, in cluster mode, of the whole cluster (connects on first use)."""
        redis, opts = import_redis(), self.options
        cluster = opts.cluster == "true" or (opts.cluster == "auto" and cluster_enabled(opts.url, opts.timeout_s))
        if not cluster:
            return redis.Redis.from_url(opts.url, socket_timeout=opts.timeout_s)
        remap = dict(opts.address_map)
        return redis.RedisCluster.from_url(opts.url, socket_timeout=opts.timeout_s,
                                           address_remap=lambda address: remap.get(address, address))

    def _keys(self, client) -> list[bytes]:
        commit = self.options.commit_key_prefix.encode()
        return [k for k in client.scan_iter(match=f"{self.options.key_prefix}*", count=10_000)
                if not k.startswith(commit)]

    def prepare(self) -> None:
        client = self._client()
        try:
            keys = self._keys(client)
        finally:
            client.close()
        if keys:
            raise CannotReadBack(f"redis-sink's keyPrefix {self.options.key_prefix!r} already holds {len(keys):,} keys "
                                 f"(e.g. {keys[0].decode(errors='replace')!r}); everything under it is read back: use "
                                 "a fresh keyPrefix")

    def values(self) -> list[bytes]:
        client = self._client()
        try:
            keys = self._keys(client)
            types = client.pipeline(transaction=False)
            for key in keys:
                types.type(key)
            kinds = types.execute() if keys else []
            out: list[bytes] = []
            strings = []
            for key, kind in zip(keys, kinds):
                if kind == b"string":
                    strings.append(key)
                elif kind == b"list":
                    out += client.lrange(key, 0, -1)
                elif kind == b"hash":
                    out += client.hvals(key)
                elif kind == b"stream":
                    out += [fields[b"value"] for _, fields in client.xrange(key)]
            mget = getattr(client, "mget_nonatomic", client.mget)  # a cluster's keys span slots
            for i in range(0, len(strings), 10_000):
                out += [v for v in mget(strings[i:i + 10_000]) if v is not None]
            return out
        finally:
            client.close()
