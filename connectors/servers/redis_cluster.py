"""A Redis Cluster on loopback (`RedisCluster`): 3 primaries and 3 replicas of ``redis-server --cluster-enabled yes``
joined by ``redis-cli --cluster create``, and what the tests do to it (kill a primary, migrate a slot)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

from connectors.servers.base import ClientLibrary, Server, ServerError, free_port, wait_until
from connectors.servers.redis import RedisServer
from connectors.servers.tls import ServerTls

__all__ = ["ClusterNode", "RedisCluster"]


@dataclass(frozen=True)
class ClusterNode:
    """One node as ``CLUSTER NODES`` describes it: its id, address, role, its primary's id (replicas) and the
    slot ranges it serves (primaries; inclusive ``(first, last)`` pairs)."""

    id: str
    host: str
    port: int
    primary: bool
    primary_id: str | None
    connected: bool
    slots: tuple[tuple[int, int], ...]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def serves(self, slot: int) -> bool:
        return any(first <= slot <= last for first, last in self.slots)


class RedisCluster(Server):
    """A Redis Cluster of ``primaries`` primaries with ``replicas`` replicas each, one ``redis-server`` per node
    (`RedisServer` with ``--cluster-enabled yes``: its own dir, port and ``nodes.conf``), on free loopback ports.

    ``start()`` creates the cluster with ``redis-cli --cluster create … --cluster-replicas R --cluster-yes`` the
    first time and waits (polling) until every node reports ``cluster_state:ok``, knows every other node and every
    replica's link to its primary is up. ``stop()`` stops every node (``SHUTDOWN NOSAVE`` without persistence);
    ``start()`` after it brings the same nodes back from their ``nodes.conf`` (data kept only with
    ``persistence``, an fsync-always AOF per node); ``close()`` also deletes the dirs.

    ``node_timeout_ms`` is ``cluster-node-timeout``: how long a primary must be unreachable before its replica
    takes over (`kill_primary`). ``RedisCluster.external(url)`` (or ``REDIS_CLUSTER_URL``) wraps a cluster
    someone else runs: `url`, `client` and the topology queries work, start/stop are no-ops and the helpers that
    kill or restart nodes raise `ServerError`.

    With `tls` every node listens on TLS only, and talks TLS to the others (``tls-cluster``, ``tls-replication``):
    `url` is ``rediss://…?ssl_ca_certs=<the CA>``. `acl` adds the same ACL users to every node (`RedisServer`).
    """

    name = "redis-cluster"
    external_env = "REDIS_CLUSTER_URL"
    client_library = ClientLibrary("redis", "redis", "redis")

    def __init__(self, primaries: int = 3, replicas: int = 1, persistence: bool = False,
                 node_timeout_ms: int = 3000, tls: ServerTls | None = None, acl: Sequence[str] = ()) -> None:
        super().__init__()
        self.tls = tls
        self.acl = list(acl)
        if primaries < 3:
            raise ValueError(f"primaries={primaries}: redis-cli --cluster create needs at least 3 primaries")
        self.primaries_count = primaries
        self.replicas_per_primary = replicas
        self.persistence = persistence
        self.node_timeout_ms = node_timeout_ms
        self.nodes: list[RedisServer] = []
        self._created = False

    # -- external clusters (`Server.external`, `Server.from_env`: any one node's ``redis://host:port``) ---------
    def _managed_only(self, what: str) -> None:
        if not self.managed:
            raise ServerError(f"{self.name}: cannot {what} a cluster this process did not start ({self._external}); "
                              f"unset {self.external_env}")

    # -- addresses and clients -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>`` of the first node that is running: a startup node for cluster clients."""
        if self._external is not None:
            return self._external
        return self.user_url()

    def user_url(self, user: str | None = None, password: str | None = None) -> str:
        """`url` as ACL user `user` with `password`."""
        if self._external is not None:
            return self._external
        for node in self.nodes:
            if node.running:
                return node.user_url(user, password) if self.tls or user else f"redis://{node.host}:{node.port}"
        raise ServerError(f"{self.name}: no node is running")

    def _tls_options(self) -> dict[str, Any]:
        return {} if self.tls is None else {"ssl": True, "ssl_ca_certs": str(self.tls.ca)}

    def _cli_tls(self) -> list[str]:
        return [] if self.tls is None else ["--tls", "--cacert", str(self.tls.ca)]

    @property
    def urls(self) -> list[str]:
        """``redis://host:port`` of every node this process started (primaries and replicas, as started)."""
        return [node.url if self.tls else f"redis://{node.host}:{node.port}" for node in self.nodes]

    def client(self, **kwargs):
        """A ``redis.cluster.RedisCluster`` on this cluster (keyword arguments pass through)."""
        from redis.cluster import RedisCluster as ClusterClient  # noqa: PLC0415 - the redis extra's client

        return ClusterClient.from_url(self.url, **kwargs)

    def node_client(self, address: str, **kwargs):
        """A plain ``redis.Redis`` on one node (``host:port``), for commands aimed at that node."""
        import redis  # noqa: PLC0415 - the redis extra's client

        host, _, port = address.rpartition(":")
        return redis.Redis(host=host, port=int(port), socket_timeout=10, socket_connect_timeout=5,
                           **{**self._tls_options(), **kwargs})

    def execute(self, *command, address: str | None = None):
        """Run `command` on `address`, or on the first running node that answers; the reply as Redis sent it.
        An error reply raises ``redis.ResponseError``; no node answering raises `ServerError`."""
        import redis  # noqa: PLC0415 - the redis extra's client

        addresses = [address] if address else self._live_addresses()
        last: Exception | None = None
        for where in addresses:
            client = self.node_client(where)
            try:  # on a raw connection: the reply unparsed (redis-py turns CLUSTER INFO/NODES into dicts)
                connection = client.connection_pool.get_connection()
                try:
                    connection.send_command(*command)
                    return connection.read_response()
                finally:
                    client.connection_pool.release(connection)
            except redis.ResponseError:
                raise
            except redis.RedisError as exc:
                last = exc
            finally:
                client.close()
        raise ServerError(f"{self.name}: no node answered {command[0]!r} (last error: {last!r})")

    def cli(self, *args: str, commands: list[str] | None = None, address: str | None = None) -> str:
        """The output of ``redis-cli -c --no-raw`` (it follows MOVED and ASK itself: a reader independent of
        redis-py) on `address` (default: a running node): one command from `args`, or many, one per line of
        `commands` (fed on stdin: one process for a whole read-back). Replies as redis-cli prints them (strings
        quoted), without its "-> Redirected to …" notices."""
        where = address or self._live_addresses()[0]
        host, _, port = where.rpartition(":")
        result = subprocess.run(["redis-cli", "-c", "-h", host, "-p", port, *self._cli_tls(), "--no-raw", *args], capture_output=True,
                                text=True, timeout=300, check=False,
                                input="\n".join(commands) + "\n" if commands is not None else None)
        if result.returncode != 0:
            raise ServerError(f"{self.name}: redis-cli {' '.join(args)} failed (exit {result.returncode}): "
                              f"{result.stderr[-2000:]}")
        return "\n".join(line for line in result.stdout.strip().splitlines() if not line.startswith("-> Redirected to"))

    def _live_addresses(self) -> list[str]:
        if self._external is not None:
            parts = urlsplit(self._external)
            return [f"{parts.hostname}:{parts.port or 6379}"]
        return [f"{node.host}:{node.port}" for node in self.nodes if node.running]

    # -- topology ------------------------------------------------------------------------------------
    def topology(self, address: str | None = None) -> list[ClusterNode]:
        """Every node as `address` (default: any running node) sees it in ``CLUSTER NODES``; failed nodes are
        listed with ``connected`` false."""
        text = self.execute("CLUSTER NODES", address=address)
        if isinstance(text, bytes):
            text = text.decode()
        nodes = []
        for line in text.strip().splitlines():
            fields = line.split()
            node_id, endpoint, flags, primary_id, link = fields[0], fields[1], fields[2].split(","), fields[3], fields[7]
            host, _, port = endpoint.split("@")[0].rpartition(":")
            slots = []
            for part in fields[8:]:
                if part.startswith("["):  # a slot being migrated or imported: [slot->-id] / [slot-<-id]
                    continue
                first, _, last = part.partition("-")
                slots.append((int(first), int(last or first)))
            nodes.append(ClusterNode(id=node_id, host=host, port=int(port), primary="master" in flags,
                                     primary_id=None if primary_id == "-" else primary_id,
                                     connected=link == "connected" and "fail" not in flags, slots=tuple(slots)))
        return nodes

    def primaries(self) -> list[ClusterNode]:
        """The primaries that are up, by port."""
        return sorted((n for n in self.topology() if n.primary and n.connected), key=lambda n: n.port)

    def replicas_of(self, primary: ClusterNode | str) -> list[ClusterNode]:
        """The connected replicas of `primary` (a node or its id)."""
        primary_id = primary.id if isinstance(primary, ClusterNode) else primary
        return [n for n in self.topology() if not n.primary and n.primary_id == primary_id and n.connected]

    def node_for_slot(self, slot: int) -> ClusterNode:
        """The primary serving `slot` (0..16383) now."""
        for node in self.topology():
            if node.primary and node.connected and node.serves(slot):
                return node
        raise ServerError(f"{self.name}: no connected primary serves slot {slot}")

    def node_for_key(self, key: bytes | str) -> ClusterNode:
        """The primary serving `key`'s slot (``CLUSTER KEYSLOT``, computed by the server)."""
        return self.node_for_slot(int(self.execute("CLUSTER KEYSLOT", key)))

    def server_of(self, node: ClusterNode) -> RedisServer:
        """The `RedisServer` process behind `node` (clusters this process started)."""
        self._managed_only("find the process of a node of")
        for server in self.nodes:
            if server.port == node.port:
                return server
        raise ServerError(f"{self.name}: no node of ours listens on {node.address}")

    # -- life cycle ----------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return (not self.managed) or (bool(self.nodes) and all(node.running for node in self.nodes))

    def start(self):
        if not self.managed:
            return self
        return super().start()

    def stop(self, timeout: float = 30.0) -> None:
        if self.managed:
            super().stop(timeout)

    def restart(self, timeout: float = 30.0):
        self._managed_only("restart")
        return super().restart(timeout)

    def _start(self) -> None:
        if shutil.which("redis-cli") is None:
            raise ServerError("redis-cli is not installed: run `apt-get install -y redis-server` (tests/run does this)")
        if not self.nodes:
            # the bus port given: by default it is the port + 10000, impossible for a free port above 55535
            args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", str(self.node_timeout_ms)]
            if self.tls is not None:
                args += ["--tls-cluster", "yes", "--tls-replication", "yes"]
            self.nodes = [RedisServer(persistence=self.persistence, tls=self.tls, acl=self.acl,
                                      extra_args=[*args, "--cluster-port", str(free_port())])
                          for _ in range(self.primaries_count * (1 + self.replicas_per_primary))]
        try:
            for node in self.nodes:
                if not node.running:
                    node.start()
            if not self._created:
                self._create()
            self.wait_healthy()
        except BaseException:
            for node in self.nodes:
                with contextlib.suppress(Exception):
                    node.stop(timeout=5)
            raise

    def _create(self) -> None:
        addresses = [f"{node.host}:{node.port}" for node in self.nodes]
        result = subprocess.run(
            ["redis-cli", *self._cli_tls(), "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas_per_primary),
             "--cluster-yes"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        (self.dir / "create.out").write_text(result.stdout + result.stderr)
        if result.returncode != 0:
            raise ServerError(f"{self.name}: redis-cli --cluster create failed (exit {result.returncode}):\n"
                              f"{(result.stdout + result.stderr)[-3000:]}")
        self._created = True

    def _stop(self, timeout: float) -> None:
        for node in self.nodes:
            node.stop(timeout)

    def close(self) -> None:
        self.stop()
        for node in self.nodes:
            node.close()
        super().close()

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Block until every running node reports ``cluster_state:ok`` with all 16384 slots served, sees every
        running node connected, agrees with the others about which primary serves which slots, and every
        replica's link to its primary is up (`TimeoutError` otherwise)."""
        import redis  # noqa: PLC0415 - the redis extra's client

        last: list[str] = []

        def healthy() -> bool:
            last.clear()
            addresses = self._live_addresses()
            views = set()
            for address in addresses:
                try:
                    info = self.execute("CLUSTER INFO", address=address)
                    info = info.decode() if isinstance(info, bytes) else info
                    if "cluster_state:ok" not in info or "cluster_slots_assigned:16384" not in info:
                        last.append(f"{address}: {info.splitlines()[0]}")
                        return False
                    topology = self.topology(address)
                    views.add(tuple(sorted((n.id, n.slots) for n in topology if n.slots)))
                    seen = [n for n in topology if n.connected]
                    if len(seen) < len(addresses):
                        last.append(f"{address} sees {len(seen)} of {len(addresses)} nodes connected")
                        return False
                    replication = self.execute("INFO", "replication", address=address)
                    replication = replication.decode() if isinstance(replication, bytes) else replication
                    if "role:slave" in replication and "master_link_status:up" not in replication:
                        last.append(f"{address}: replica link to its primary not up")
                        return False
                except (ServerError, redis.RedisError) as exc:
                    last.append(str(exc))
                    return False
            if len(views) > 1:  # gossip has not spread the last change of owners yet (redis-cli refuses to reshard)
                last.append(f"the nodes disagree about the slots' owners ({len(views)} views)")
                return False
            return True

        wait_until(healthy, timeout, 0.1, lambda: f"a healthy {self.name} ({'; '.join(last)})")

    # -- what tests do to it -------------------------------------------------------------------------
    def kill_primary(self, slot: int, timeout: float = 60.0) -> ClusterNode:
        """SIGKILL the primary serving `slot`, wait until one of its replicas is promoted and the cluster is
        healthy again (its other nodes), and return the new primary of `slot`. The killed node stays down: bring it
        back with `revive` (it rejoins as a replica)."""
        self._managed_only("kill a node of")
        primary = self.node_for_slot(slot)
        if not self.replicas_of(primary):
            raise ServerError(f"{self.name}: primary {primary.address} of slot {slot} has no connected replica")
        server = self.server_of(primary)
        server._kill()

        def promoted() -> ClusterNode | None:
            with contextlib.suppress(ServerError):
                node = self.node_for_slot(slot)
                if node.id != primary.id:
                    return node
            return None

        new = wait_until(promoted, timeout, 0.1, f"a replica of {primary.address} to take over slot {slot}")
        self.wait_healthy(timeout)
        return new

    def revive(self, timeout: float = 60.0) -> None:
        """Start every node that is down (killed by `kill_primary`) on its port and dir; wait until healthy."""
        self._managed_only("restart a node of")
        for node in self.nodes:
            if not node.running:
                node.start()
        self.wait_healthy(timeout)

    def migrate_slot(self, slot: int, to: ClusterNode | str, *, finish: bool = True, batch: int = 100) -> None:
        """Move `slot` and its keys to primary `to` (a node or its id) by hand, as ``redis-cli --cluster reshard``
        does: ``CLUSTER SETSLOT slot IMPORTING`` on the target, ``MIGRATING`` on the source, ``MIGRATE`` of its
        keys `batch` at a time, then ``SETSLOT slot NODE`` on every primary. With ``finish=False`` it stops after
        MIGRATING/IMPORTING: the slot is half-moved (clients get ASK for keys not on the source); call
        `finish_migration` to complete it."""
        source = self.node_for_slot(slot)
        target_id = to.id if isinstance(to, ClusterNode) else to
        target = next(n for n in self.topology() if n.id == target_id)
        if target.id == source.id:
            return
        self.execute("CLUSTER", "SETSLOT", slot, "IMPORTING", source.id, address=target.address)
        self.execute("CLUSTER", "SETSLOT", slot, "MIGRATING", target.id, address=source.address)
        if finish:
            self.finish_migration(slot, source, target, batch=batch)

    def finish_migration(self, slot: int, source: ClusterNode, target: ClusterNode, *, batch: int = 100) -> None:
        """Move the keys of `slot` still on `source` to `target`, then give the slot to `target` everywhere."""
        while True:
            keys = self.execute("CLUSTER", "GETKEYSINSLOT", slot, batch, address=source.address)
            if not keys:
                break
            self.execute("MIGRATE", target.host, target.port, "", 0, 10_000, "KEYS", *keys, address=source.address)
        for node in [target, source, *(n for n in self.primaries() if n.id not in (source.id, target.id))]:
            self.execute("CLUSTER", "SETSLOT", slot, "NODE", target.id, address=node.address)
        self.wait_healthy()

    def reshard(self, slots: int, source: ClusterNode | str, target: ClusterNode | str, timeout: float = 300) -> str:
        """Move `slots` slots (and their keys) from `source` to `target` (nodes or ids) with
        ``redis-cli --cluster reshard``; returns its output."""
        source_id = source.id if isinstance(source, ClusterNode) else source
        target_id = target.id if isinstance(target, ClusterNode) else target
        result = subprocess.run(
            ["redis-cli", *self._cli_tls(), "--cluster", "reshard", self._live_addresses()[0], "--cluster-from", source_id,
             "--cluster-to", target_id, "--cluster-slots", str(slots), "--cluster-yes"],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise ServerError(f"{self.name}: redis-cli --cluster reshard failed (exit {result.returncode}):\n"
                              f"{(result.stdout + result.stderr)[-3000:]}")
        self.wait_healthy()
        return result.stdout

    @property
    def log_paths(self) -> list[Path]:
        return [node.log_path for node in self.nodes]

