"""``redis-server`` on a free loopback port (`RedisServer`)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

from connectors.servers.base import LOOPBACK, ClientLibrary, ProcessServer, ServerError, free_port, tail
from connectors.servers.tls import ServerTls

__all__ = ["RedisServer"]


class RedisServer(ProcessServer):
    """``redis-server`` on a free loopback port; with ``persistence`` an fsync-always AOF in its temp dir.

    ``restart()`` keeps the data either way: without persistence it stops with ``SHUTDOWN SAVE`` (an RDB
    snapshot in its dir, which the new process loads); ``stop()`` and ``close()`` save nothing.

    ``RedisServer.external(url)`` wraps a server someone else runs (``REDIS_URL``). ``extra_args`` are
    appended to the command line (``["--cluster-enabled", "yes"]`` for a cluster node, `RedisCluster`).

    With `tls` (`connectors.servers.tls.ServerTls`) it listens on TLS only (``tls-port``; client certificates
    optional), and `url` is ``rediss://…?ssl_ca_certs=<the CA>``. `acl` adds ACL users, one rule line each
    (``"alice on >secret ~alice:* +@all"``); the ``default`` user stays open to the helpers here (`user_url` gives
    a user's URL).
    """

    name = "redis"
    external_env = "REDIS_URL"
    client_library = ClientLibrary("redis", "redis", "redis")

    def __init__(self, persistence: bool = False, port: int | None = None, extra_args: Sequence[str] = (),
                 tls: ServerTls | None = None, acl: Sequence[str] = ()) -> None:
        super().__init__()
        self.tls = tls
        self.acl = list(acl)
        self.persistence = persistence
        self.extra_args = list(extra_args)
        self.port = port
        self.host = LOOPBACK
        self.log_path_ = self.dir / "redis.log"
        self._save_on_stop = False

    @property
    def log_path(self) -> Path:
        return self.log_path_

    def restart(self, timeout: float = 30.0):
        self._save_on_stop = True
        try:
            return super().restart(timeout)
        finally:
            self._save_on_stop = False

    @property
    def url(self) -> str:
        return self.user_url()

    def user_url(self, user: str | None = None, password: str | None = None) -> str:
        """`url` as ACL user `user` with `password` (both quoted into the URL's user info)."""
        who = f"{quote(user or '', safe='')}:{quote(password or '', safe='')}@" if user or password else ""
        if self.tls is None:
            return self._address(lambda: f"redis://{who}{self.host}:{self.port}/0")
        return self._address(lambda: f"rediss://{who}{self.host}:{self.port}/0?ssl_ca_certs={quote(str(self.tls.ca))}")

    def client_options(self) -> dict[str, Any]:
        """What a ``redis.Redis(host=…, port=…)`` needs beyond the address: TLS and its CA, if any."""
        return {} if self.tls is None else {"ssl": True, "ssl_ca_certs": str(self.tls.ca)}

    def client(self, **kwargs):
        """A ``redis.Redis`` connected to this server (``decode_responses`` etc. pass through)."""
        import redis  # noqa: PLC0415 - the redis extra's client

        return redis.Redis.from_url(self.url, **kwargs)

    def _start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServerError(
                "redis-server is not installed: run `apt-get install -y redis-server` (tests/run does this)"
            )
        fixed_port = self.port is not None
        for attempt in range(5):
            if not fixed_port:
                self.port = free_port()
            if self.tls is None:
                listen = ["--port", str(self.port)]
            else:
                listen = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(self.tls.server.cert),
                          "--tls-key-file", str(self.tls.server.key), "--tls-ca-cert-file", str(self.tls.ca),
                          "--tls-auth-clients", "optional"]
            cmd = [
                binary,
                "--bind", LOOPBACK,
                *listen,
                "--dir", str(self.dir),
                "--logfile", str(self.log_path_),
                "--daemonize", "no",
                "--save", "",
            ]
            if self.persistence:
                cmd += ["--appendonly", "yes", "--appendfsync", "always"]
            else:
                cmd += ["--appendonly", "no"]
            cmd += self.extra_args
            for rule in self.acl:
                cmd += ["--user", *rule.split()]
            self._spawn(cmd)
            try:
                self._wait_ready(self._ping, 20, f"PING on {self.url}")
                return
            except ServerError:
                in_use = "Address already in use" in tail(self.log_path_, 5)
                if fixed_port or not in_use or attempt == 4:
                    raise

    def _ping(self) -> bool:
        import redis  # noqa: PLC0415 - the redis extra's client
        from redis.backoff import NoBackoff  # noqa: PLC0415 - the redis extra's client
        from redis.retry import Retry  # noqa: PLC0415 - the redis extra's client

        client = redis.Redis(host=self.host, port=self.port, socket_connect_timeout=1, socket_timeout=2,
                             retry=Retry(NoBackoff(), 0), **self.client_options())
        try:
            if not client.ping():
                return False
            pid = client.info("server").get("process_id")
            if pid != self.proc.pid:  # someone else's server on "our" port
                raise ServerError(f"{self.url} is redis-server pid {pid}, not ours ({self.proc.pid})")
            return True
        finally:
            client.close()

    def _stop(self, timeout: float) -> None:
        if not self.running:
            return
        # SHUTDOWN over a raw socket: redis-py treats the closed connection as an error and retries with backoff.
        if self.persistence:
            command = b"*1\r\n$8\r\nSHUTDOWN\r\n"
        elif self._save_on_stop:
            command = b"*2\r\n$8\r\nSHUTDOWN\r\n$4\r\nSAVE\r\n"
        else:
            command = b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n"
        with contextlib.suppress(OSError), self._socket(timeout) as sock:
            sock.sendall(command)
            while sock.recv(4096):  # an error reply, or EOF once the server has exited
                pass
        self._terminate(timeout)


    def _socket(self, timeout: float) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        if self.tls is None:
            return sock
        return ssl.create_default_context(cafile=str(self.tls.ca)).wrap_socket(sock, server_hostname=self.host)
