"""Real servers on free loopback ports, for the tests, the benchmarks and a sink author's conformance runs:
Redis, an Apache Kafka broker, a Spark standalone cluster, a Spark Connect server. Importable as
``connectors.servers`` (no ``sys.path`` edits); the HTTP receiver is the project's one receiver,
`impulse.loadtest.receiver.Receiver`.

Every server has ``start()``, ``stop()`` (graceful, killed after a timeout), ``restart()`` (same ports and
same data dir, for restart tests), ``close()`` (stop and delete its temp dir) and context-manager support.
Readiness is polled with real clients; nothing synchronises on fixed sleeps.

Only the standard library is imported at module level; ``redis`` and ``confluent_kafka`` are imported when
a server needs them, so ``python -m connectors.servers fetch-kafka`` works before the clients are installed.

The Kafka version is pinned in ``tests/kafka/pom.xml`` of the checkout (``kafka.version``) and read from
there at import (`KAFKA_VERSION`, None outside a checkout): the broker needs a checkout (Maven fetches its
jars by that pom); Redis and Spark servers do not.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
import base64
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable, Iterable

__all__ = [
    "KAFKA_VERSION",
    "KafkaBroker",
    "RedisServer",
    "ServerError",
    "SparkConnectServer",
    "SparkStandaloneCluster",
    "cache_root",
    "fetch_kafka",
    "free_port",
    "kafka_jars_dir",
    "processes_under",
    "wait_until",
]

ROOT = Path(__file__).resolve().parent.parent   # the checkout: its tests/kafka/pom.xml pins the Kafka version
KAFKA_POM = ROOT / "tests" / "kafka" / "pom.xml"
LOOPBACK = "127.0.0.1"


class ServerError(RuntimeError):
    """A test server could not be fetched, started or stopped."""


# --------------------------------------------------------------------------------------------- helpers


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 30.0,
    interval: float = 0.05,
    message: str | Callable[[], str] | None = None,
) -> Any:
    """Poll ``predicate()`` until it returns something truthy, and return that; ``TimeoutError`` otherwise.

    ``message`` (a string, or a callable evaluated on timeout for up-to-date details) explains what was awaited.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {text or getattr(predicate, '__name__', 'condition')}")
        time.sleep(interval)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or f"(empty log at {path})"


def _quiet_logger(name: str) -> logging.Logger:
    """A logger that swallows librdkafka's connection-refused chatter while a server is coming up."""
    logger = logging.getLogger(f"impulse.connectors.servers.{name}")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


_LIVE: "weakref.WeakSet[_Server]" = weakref.WeakSet()


@atexit.register
def _stop_leftovers() -> None:  # a crashed test session must not leave JVMs or redis-servers behind
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop(timeout=10)


class _Server:
    """Shared life cycle: a temp dir, ``start/stop/restart/close`` and the context-manager protocol."""

    name = "server"

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"impulse-{self.name}-"))
        self._lock = threading.RLock()

    # subclasses implement these
    def _start(self) -> None:
        raise NotImplementedError

    def _stop(self, timeout: float) -> None:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        raise NotImplementedError

    def start(self):
        """Start (on the ports of the previous run, if any) and block until the server answers."""
        with self._lock:
            if not self.running:
                self._start()
                _LIVE.add(self)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully; kill it if it is still running after ``timeout`` seconds. Keeps the data dir."""
        with self._lock:
            self._stop(timeout)
            _LIVE.discard(self)

    def restart(self, timeout: float = 30.0):
        """Stop, then start again on the same ports with the same data dir."""
        with self._lock:
            self.stop(timeout)
            return self.start()

    def close(self) -> None:
        """Stop and delete the temp dir (set ``IMPULSE_KEEP_SERVER_DIRS=1`` to keep it for a post-mortem)."""
        self.stop()
        if not os.environ.get("IMPULSE_KEEP_SERVER_DIRS"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()


class _ProcessServer(_Server):
    """A server that is a child process whose stdout/stderr go to ``<dir>/<name>.out``.

    ``external(address)`` wraps one someone else runs instead (the address comes from the environment
    variable `external_env`): the client helpers work, start/stop are no-ops and ``restart()`` fails.
    """

    external_env = ""

    def __init__(self) -> None:
        super().__init__()
        self.proc: subprocess.Popen | None = None
        self.out_path = self.dir / f"{self.name}.out"
        self._external: str | None = None

    @classmethod
    def external(cls, address: str):
        server = cls()
        server._external = address
        return server

    @classmethod
    def from_env(cls):
        """The server named by `external_env` if that variable is set, else a new one to start here."""
        address = os.environ.get(cls.external_env)
        return cls.external(address) if address else cls()

    @property
    def managed(self) -> bool:
        return self._external is None

    def _address(self, local: Callable[[], str]) -> str:
        """The external address if this wraps one, else `local()` once a port was picked."""
        if self._external is not None:
            return self._external
        if getattr(self, "port", None) is None:
            raise ServerError(f"{self.name}: not started yet (no port)")
        return local()

    @property
    def running(self) -> bool:
        return (not self.managed) or (self.proc is not None and self.proc.poll() is None)

    def stop(self, timeout: float = 30.0) -> None:
        if self.managed:
            super().stop(timeout)

    def restart(self, timeout: float = 30.0):
        if not self.managed:
            raise ServerError(f"{self.name}: cannot restart a server this process did not start ({self._external}); "
                              f"unset {self.external_env}")
        return super().restart(timeout)

    @property
    def log_path(self) -> Path:
        return self.out_path

    def _spawn(self, cmd: list[str], **kwargs) -> None:
        with open(self.out_path, "ab") as out:
            out.write(f"\n=== {time.strftime('%H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir, **kwargs
            )

    def _fail(self, what: str) -> ServerError:
        parts = [f"{self.name}: {what}"]
        if self.proc is not None and self.proc.poll() is not None:
            parts.append(f"(process exited with code {self.proc.returncode})")
        parts.append(f"\n--- tail of {self.out_path} ---\n{_tail(self.out_path)}")
        if self.log_path != self.out_path:
            parts.append(f"\n--- tail of {self.log_path} ---\n{_tail(self.log_path)}")
        return ServerError(" ".join(parts))

    def _wait_ready(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        last_error: BaseException | None = None
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise self._fail(f"died while starting (last readiness error: {last_error!r})")
            try:
                if check():
                    return
            except Exception as exc:  # not ready yet
                last_error = exc
            if time.monotonic() >= deadline:
                self._kill()
                raise self._fail(f"not ready after {timeout:g}s: {what} (last error: {last_error!r})")
            time.sleep(0.1)

    def _terminate(self, timeout: float) -> None:
        """SIGTERM, then SIGKILL after ``timeout``."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._kill()

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


# ----------------------------------------------------------------------------------------------- Redis


class RedisServer(_ProcessServer):
    """``redis-server`` on a free loopback port; with ``persistence`` an fsync-always AOF in its temp dir.

    ``restart()`` keeps the data either way: without persistence it stops with ``SHUTDOWN SAVE`` (an RDB
    snapshot in its dir, which the new process loads); ``stop()`` and ``close()`` save nothing.

    ``RedisServer.external(url)`` wraps a server someone else runs (``REDIS_URL``).
    """

    name = "redis"
    external_env = "REDIS_URL"

    def __init__(self, persistence: bool = False, port: int | None = None) -> None:
        super().__init__()
        self.persistence = persistence
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
        return self._address(lambda: f"redis://{self.host}:{self.port}/0")

    def client(self, **kwargs):
        """A ``redis.Redis`` connected to this server (``decode_responses`` etc. pass through)."""
        import redis

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
            cmd = [
                binary,
                "--bind", LOOPBACK,
                "--port", str(self.port),
                "--dir", str(self.dir),
                "--logfile", str(self.log_path_),
                "--daemonize", "no",
                "--save", "",
            ]
            if self.persistence:
                cmd += ["--appendonly", "yes", "--appendfsync", "always"]
            else:
                cmd += ["--appendonly", "no"]
            self._spawn(cmd)
            try:
                self._wait_ready(self._ping, 20, f"PING on {self.url}")
                return
            except ServerError:
                in_use = "Address already in use" in _tail(self.log_path_, 5)
                if fixed_port or not in_use or attempt == 4:
                    raise

    def _ping(self) -> bool:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        client = redis.Redis(host=self.host, port=self.port, socket_connect_timeout=1, socket_timeout=2,
                             retry=Retry(NoBackoff(), 0))
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
        with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=timeout) as sock:
            sock.sendall(command)
            while sock.recv(4096):  # an error reply, or EOF once the server has exited
                pass
        self._terminate(timeout)


# ----------------------------------------------------------------------------------------------- Kafka


def _read_kafka_version() -> str:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(KAFKA_POM).getroot()
    node = root.find("m:properties/m:kafka.version", ns)
    if node is None or not (node.text or "").strip():
        raise ServerError(f"no <kafka.version> property in {KAFKA_POM}")
    return node.text.strip()


KAFKA_VERSION = _read_kafka_version() if KAFKA_POM.exists() else None  # None: not a checkout (no broker)


def cache_root() -> Path:
    """``$IMPULSE_CACHE`` or ``~/.cache/impulse``: downloaded Kafka jars and tests/run's install stamp."""
    return Path(os.environ.get("IMPULSE_CACHE") or Path.home() / ".cache" / "impulse").expanduser()


def kafka_jars_dir() -> Path:
    if KAFKA_VERSION is None:
        raise ServerError(f"no {KAFKA_POM}: the Kafka broker needs the project's checkout (its pom pins the version)")
    return cache_root() / f"kafka-{KAFKA_VERSION}"


def fetch_kafka(quiet: bool = False) -> Path:
    """Download the Kafka broker jars from Maven Central (via ``mvn``) unless already there; return their dir.

    A marker file holding the pom's sha256 is written after a complete download, so an interrupted or stale
    fetch is redone. Concurrent callers serialise on a lock file.
    """
    target = kafka_jars_dir()
    marker = target / ".complete"
    pom_sha = hashlib.sha256(KAFKA_POM.read_bytes()).hexdigest()
    if marker.is_file() and marker.read_text().strip() == pom_sha:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text().strip() == pom_sha:
            return target
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ServerError("Maven is not installed: run `apt-get install -y maven` (tests/run does this)")
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise ServerError("Java is not installed: run `apt-get install -y openjdk-17-jre-headless`")
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            if not quiet:
                print(f"fetching Apache Kafka {KAFKA_VERSION} from Maven Central into {target} ...", file=sys.stderr)
            cmd = [
                mvn, "-q", "-B", "-f", str(KAFKA_POM),
                "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
            ]
            result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
            jars = sorted(p.name for p in staging.glob("*.jar"))
            if result.returncode != 0 or f"kafka_2.13-{KAFKA_VERSION}.jar" not in jars:
                raise ServerError(
                    f"`{' '.join(cmd)}` failed (exit {result.returncode}, jars: {len(jars)}):\n{result.stdout[-4000:]}"
                )
            (staging / ".complete").write_text(pom_sha + "\n")
            staging.chmod(0o755)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="error" shutdownHook="disable">
  <Appenders>
    <File name="file" fileName="{log}" append="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="WARN"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


class KafkaBroker(_ProcessServer):
    """A single-node Apache Kafka (KRaft, broker and controller in one JVM) on free loopback ports.

    ``KafkaBroker.external("host:port")`` wraps a broker someone else runs (``KAFKA_BROKERS``).
    """

    name = "kafka"
    external_env = "KAFKA_BROKERS"
    READY_TIMEOUT = 120.0

    # C1-only JIT: the JVM starts ~30% faster; steady-state speed is plenty for tests (pass [] to a benchmark).
    DEFAULT_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1",)

    def __init__(self, config: dict[str, Any] | None = None, heap: str = "512m",
                 jvm_options: Iterable[str] | None = None) -> None:
        super().__init__()
        self.extra_config = dict(config or {})
        self.heap = heap
        self.jvm_options = list(self.DEFAULT_JVM_OPTIONS if jvm_options is None else jvm_options)
        self.port: int | None = None
        self.controller_port: int | None = None
        self.log_dir = self.dir / "data"
        self.properties_path = self.dir / "server.properties"
        self.broker_log = self.dir / "broker.log"
        self.startup_seconds: float | None = None  # time the last start() took until transactions worked

    @property
    def log_path(self) -> Path:
        return self.broker_log

    @property
    def bootstrap(self) -> str:
        return self._address(lambda: f"{LOOPBACK}:{self.port}")

    # --- life cycle

    def _properties(self) -> dict[str, Any]:
        props: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{LOOPBACK}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},CONTROLLER://{LOOPBACK}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",
            "transaction.max.timeout.ms": 3_600_000,
            "log.flush.interval.messages": 1,  # survive a SIGKILL in crash tests too
            "num.network.threads": 2,
            "num.io.threads": 4,
            "log.retention.hours": 168,
        }
        props.update(self.extra_config)
        return props

    def _java(self) -> str:
        home = os.environ.get("JAVA_HOME")
        if home and (Path(home) / "bin" / "java").exists():
            return str(Path(home) / "bin" / "java")
        java = shutil.which("java")
        if java is None:
            raise ServerError("Java is not installed: run `apt-get install -y openjdk-17-jre-headless`")
        return java

    def _java_cmd(self, jars: Path, main: str, *args: str, heap: str | None = None) -> list[str]:
        cmd = [self._java()]
        if heap:
            cmd += [f"-Xmx{heap}", "-Xms256m"]
        cmd += [
            *self.jvm_options,
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.dir / 'log4j2.xml'}",
            "-cp", f"{jars}/*",
            main, *args,
        ]
        return cmd

    def _start(self) -> None:
        started = time.monotonic()
        jars = fetch_kafka()
        fixed_ports = self.port is not None
        for attempt in range(3):
            if not fixed_ports:  # first start: pick ports; a restart keeps them
                self.port, self.controller_port = free_port(), free_port()
                while self.controller_port == self.port:
                    self.controller_port = free_port()
            self.properties_path.write_text(
                "".join(f"{key}={value}\n" for key, value in self._properties().items())
            )
            (self.dir / "log4j2.xml").write_text(_LOG4J2_XML.format(log=self.broker_log))
            if not (self.log_dir / "meta.properties").exists():
                self._format(jars)
            self._spawn(self._java_cmd(jars, "kafka.Kafka", str(self.properties_path), heap=self.heap))
            try:
                self._wait_ready(self._ready, self.READY_TIMEOUT, f"metadata and transactions on {self.bootstrap}")
                break
            except ServerError as exc:
                # Another process took a port between free_port() and the bind: try other ports.
                if fixed_ports or attempt == 2 or "Address already in use" not in str(exc):
                    raise
        self.startup_seconds = time.monotonic() - started

    def _format(self, jars: Path) -> None:
        # Kafka's own Uuid.randomUuid() never starts with "-": the CLI parser would take such an id for an option.
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        cmd = self._java_cmd(
            jars, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.properties_path), heap="256m"
        )
        result = subprocess.run(cmd, cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        with open(self.out_path, "a") as out:
            out.write(f"=== format: {' '.join(cmd)}\n{result.stdout}\n")
        if result.returncode != 0:
            raise ServerError(f"kafka: formatting {self.log_dir} failed (exit {result.returncode}):\n{result.stdout}")

    def _ready(self) -> bool:
        from confluent_kafka import Producer

        # A plain TCP connect first: librdkafka backs off after "connection refused", which would cost seconds.
        socket.create_connection((LOOPBACK, self.port), timeout=1).close()
        metadata = self.admin().list_topics(timeout=5)
        if metadata.cluster_id != self.cluster_id:  # someone else's server on "our" port
            raise ServerError(f"{self.bootstrap} answers for cluster {metadata.cluster_id}, not {self.cluster_id}")
        # The transaction coordinator loads its state topic after the broker answers metadata; until then
        # InitProducerId fails with COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR. Retry a fresh producer.
        producer = Producer(
            self._client_config(
                {"transactional.id": f"impulse-readiness-{uuid.uuid4().hex[:8]}", "transaction.timeout.ms": 10_000}
            )
        )
        try:
            producer.init_transactions(10)
            return True
        finally:
            producer.flush(1)
            del producer

    @property
    def cluster_id(self) -> str | None:
        """The cluster id written by the storage format (``None`` before the first start)."""
        with contextlib.suppress(OSError):
            for line in (self.log_dir / "meta.properties").read_text().splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
        return None

    def _stop(self, timeout: float) -> None:
        self._terminate(timeout)

    def kill(self) -> None:
        """SIGKILL the broker (crash test); ``start()`` brings it back on the same ports and log dir."""
        with self._lock:
            self._kill()

    # --- client helpers

    def _client_config(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "logger": _quiet_logger("kafka")}
        conf.update(extra or {})
        return conf

    def admin(self, **conf):
        from confluent_kafka.admin import AdminClient

        return AdminClient(self._client_config(conf))

    def producer(self, **conf):
        """A ``confluent_kafka.Producer`` for this broker; keys use librdkafka spelling with ``_`` for ``.``."""
        from confluent_kafka import Producer

        return Producer(self._client_config({k.replace("_", "."): v for k, v in conf.items()}))

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     timeout: float = 30.0) -> str:
        """Create a topic and wait until every partition has a leader. Returns ``name``."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))],
            operation_timeout=timeout, request_timeout=timeout,
        )
        futures[name].result(timeout)

        def ready() -> bool:
            topic = admin.list_topics(name, timeout=5).topics.get(name)
            return (
                topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.leader >= 0 and p.error is None for p in topic.partitions.values())
            )

        wait_until(ready, timeout, 0.1, f"topic {name} to have {partitions} partitions with leaders")
        return name

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        admin = self.admin()
        admin.delete_topics([name], operation_timeout=timeout)[name].result(timeout)
        wait_until(lambda: name not in admin.list_topics(timeout=5).topics, timeout, 0.1, f"topic {name} to go")

    def end_offsets(self, topic: str, isolation: str = "read_committed", timeout: float = 30.0) -> dict[int, int]:
        """``{partition: end offset}``; for ``read_committed`` the end is the last stable offset."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(self._client_config({
            "group.id": f"impulse-offsets-{uuid.uuid4().hex}", "isolation.level": isolation,
            "enable.auto.commit": False,
        }))
        try:
            meta = consumer.list_topics(topic, timeout=timeout).topics[topic]
            if meta.error is not None:
                raise ServerError(f"kafka: topic {topic}: {meta.error}")
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)[1]
                for p in sorted(meta.partitions)
            }
        finally:
            consumer.close()

    def consume_all(self, topic: str, isolation: str = "read_committed", timeout: float = 60.0) -> list:
        """Every message of ``topic`` from the beginning up to its current end offsets (read with
        ``isolation``), in partition order then offset order. Returns ``confluent_kafka.Message`` objects.

        The end offsets are taken once at the start (watermarks, or the last stable offset for
        ``read_committed``); a partition is finished when the consumer reports end-of-partition at or past it.
        """
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        ends = self.end_offsets(topic, isolation, timeout)
        consumer = Consumer(self._client_config({
            "group.id": f"impulse-consume-all-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }))
        by_partition: dict[int, list] = {p: [] for p in ends}
        pending = {p for p, end in ends.items() if end > 0}
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
            deadline = time.monotonic() + timeout
            while pending:
                if time.monotonic() >= deadline:
                    got = {p: len(v) for p, v in by_partition.items()}
                    raise TimeoutError(f"consume_all({topic!r}): partitions {sorted(pending)} not read up to "
                                       f"{ends} within {timeout:g}s (messages so far: {got})")
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= ends[msg.partition()]:
                            pending.discard(msg.partition())
                        continue
                    if err.retriable() or err.code() == KafkaError._TRANSPORT:
                        continue
                    raise ServerError(f"consume_all({topic!r}): {err}")
                partition = msg.partition()
                if msg.offset() < ends[partition]:
                    by_partition[partition].append(msg)
                if msg.offset() + 1 >= ends[partition]:
                    pending.discard(partition)
        finally:
            consumer.close()
        return [m for p in sorted(by_partition) for m in by_partition[p]]


# ----------------------------------------------------------------------------------------------- Spark


def processes_under(folder: Path) -> dict[int, str]:
    """``{pid: command line}`` of every live process whose working directory is `folder` or below it.

    Spark's executors run in their worker's work dir and their Python workers inherit it, and a Connect
    server's Python workers run in the server's dir: so this finds what a cluster or server left behind,
    daemons that left the process group included. Linux only (``/proc``); zombies do not count.
    """
    root = str(Path(folder).resolve())
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            if cwd != root and not cwd.startswith(root + os.sep):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def spark_home() -> Path:
    """The installed ``pyspark`` package folder: it holds ``bin/spark-class`` and the jars."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServerError("pyspark is not installed: run `pip install -e .[test]` (tests/run does this)")
    return Path(spec.origin).parent


class _SparkServer(_ProcessServer):
    """JVMs launched with the installed PySpark's ``bin/spark-class`` on loopback; Python workers run this
    interpreter with this checkout first on ``PYTHONPATH``. Stopping also waits until no process is left
    in the server's dir (executors, Python daemons and workers) and fails naming any that had to be killed.
    """

    def _spark_env(self) -> dict[str, str]:
        root = str(ROOT)
        python_path = os.pathsep.join(dict.fromkeys(filter(None, [root, os.environ.get("PYTHONPATH")])))
        return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": LOOPBACK,
                "SPARK_LOCAL_HOSTNAME": "localhost", "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
                "PYTHONPATH": python_path, "SPARK_LOG_DIR": str(self.dir),
                "SPARK_CONF_DIR": str(self._conf_dir())}

    def _conf_dir(self) -> Path:
        conf = self.dir / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "log4j2.properties").write_text(
            "rootLogger.level = warn\nrootLogger.appenderRef.stdout.ref = console\n"
            "appender.console.type = Console\nappender.console.name = console\n"
            "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n\n")
        return conf

    def _spark_class(self, main: str, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), main, *args]

    def _ensure_nothing_left(self, timeout: float) -> None:
        """Wait for the processes in the server's dir to end; SIGKILL stragglers and fail naming them."""
        try:
            wait_until(lambda: not processes_under(self.dir), timeout, 0.2)
        except TimeoutError:
            left = processes_under(self.dir)
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            raise ServerError(f"{self.name}: processes left behind after stop (killed now): {left}") from None


class SparkStandaloneCluster(_SparkServer):
    """A Spark standalone master and `workers` workers (one core and `worker_memory` each) on loopback.

    An application submitted to ``master_url`` gets one executor JVM per worker, each in its own process
    with its own Python workers. ``SPARK_MASTER_URL`` brings your own cluster (then the executors must see
    this checkout themselves, e.g. ``spark.executorEnv.PYTHONPATH``). ``executor_pids()`` lists the
    executor JVMs this cluster runs, for kill tests.
    """

    name = "spark-cluster"
    external_env = "SPARK_MASTER_URL"
    READY_TIMEOUT = 90.0

    def __init__(self, workers: int = 2, worker_memory: str = "1g") -> None:
        super().__init__()
        self.worker_count = workers
        self.worker_memory = worker_memory
        self.port: int | None = None
        self.webui_port: int | None = None
        self.workers: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return self._address(lambda: f"spark://{LOOPBACK}:{self.port}")

    def state(self) -> dict:
        """The master's JSON status page (workers, applications)."""
        import urllib.request

        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.webui_port}/json/", timeout=5) as answer:
            return json.loads(answer.read())

    def _alive_workers(self) -> bool:
        if any(w.poll() is not None for w in self.workers):
            raise ServerError(f"a worker exited with code {[w.poll() for w in self.workers]}")
        return sum(w.get("state") == "ALIVE" for w in self.state().get("workers", [])) >= self.worker_count

    def _start(self) -> None:
        # the master and workers only schedule: a small heap, and C1 only (starts faster; see KafkaBroker)
        env = {**self._spark_env(), "SPARK_DAEMON_MEMORY": "256m",
               "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
        for attempt in range(3):
            self.port, self.webui_port = free_port(), free_port()
            self._spawn(self._spark_class("org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                                          "--port", str(self.port), "--webui-port", str(self.webui_port)), env=env)
            self.workers = []
            try:
                self._wait_ready(lambda: self.state() is not None, self.READY_TIMEOUT, f"master on {self.master_url}")
                for index in range(self.worker_count):
                    work = self.dir / f"worker-{index}"
                    work.mkdir(exist_ok=True)
                    cmd = self._spark_class("org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                                            "--cores", "1", "--memory", self.worker_memory, "--webui-port", "0",
                                            "--work-dir", str(work), self.master_url)
                    with open(self.out_path, "ab") as out:
                        self.workers.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                                             stderr=subprocess.STDOUT, cwd=work, env=env))
                self._wait_ready(self._alive_workers, self.READY_TIMEOUT,
                                 f"{self.worker_count} ALIVE workers on {self.master_url}")
                return
            except ServerError as exc:
                self._stop(10)
                if attempt == 2 or "Address already in use" not in str(exc) + _tail(self.out_path, 80):
                    raise

    def _stop(self, timeout: float) -> None:
        for worker in self.workers:  # workers first: each kills its executors on SIGTERM
            if worker.poll() is None:
                worker.terminate()
        for worker in self.workers:
            try:
                worker.wait(timeout)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(30)
        self._terminate(timeout)
        self._ensure_nothing_left(timeout)

    def executor_pids(self) -> list[int]:
        """Process ids of the live executor JVMs (``CoarseGrainedExecutorBackend``) of this cluster."""
        return sorted(pid for pid, cmd in processes_under(self.dir).items()
                      if "CoarseGrainedExecutorBackend" in cmd)


class SparkConnectServer(_SparkServer):
    """The Spark Connect server that ships with PySpark (``SparkConnectServer`` through ``SparkSubmit``),
    running queries on `master` (default ``local[2,2]``: two cores, a failed task retried once), gRPC on a
    free loopback port. ``SPARK_REMOTE`` (``sc://host:port``) brings your own server. ``session()`` is a
    client ``SparkSession`` for it.
    """

    name = "spark-connect"
    external_env = "SPARK_REMOTE"
    READY_TIMEOUT = 120.0

    def __init__(self, master: str = "local[2,2]", conf: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.master = master
        self.conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                     "spark.sql.streaming.stopTimeout": "30s", **(conf or {})}
        self.port: int | None = None

    @property
    def url(self) -> str:
        return self._address(lambda: f"sc://{LOOPBACK}:{self.port}")

    def session(self):
        """A new Spark Connect client session on this server (``SparkSession.builder.remote(url)``)."""
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        return RemoteSparkSession.builder.remote(self.url).create()

    def _listening(self) -> bool:  # the gRPC port opens last, once the server's Spark session is up
        socket.create_connection((LOOPBACK, self.port), timeout=1).close()
        return True

    def _start(self) -> None:
        env = self._spark_env()
        for attempt in range(3):
            self.port = free_port()
            conf = {**self.conf, "spark.connect.grpc.binding.port": self.port,
                    "spark.connect.grpc.binding.address": LOOPBACK}
            args = ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", self.master,
                    "--name", "impulse-connect-server", "--driver-memory", "1g"]
            for key, value in conf.items():
                args += ["--conf", f"{key}={value}"]
            self._spawn(self._spark_class("org.apache.spark.deploy.SparkSubmit", *args, "spark-internal"), env=env)
            try:
                self._wait_ready(self._listening, self.READY_TIMEOUT, f"gRPC on {self.url}")
                return
            except ServerError as exc:
                if attempt == 2 or "Address already in use" not in str(exc):
                    raise

    def _stop(self, timeout: float) -> None:
        self._terminate(timeout)
        self._ensure_nothing_left(timeout)


# ------------------------------------------------------------------------------------------------- CLI


def _main(argv: Iterable[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m connectors.servers", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch-kafka", help="download the Kafka jars into the cache (no-op when present)")
    serve = sub.add_parser("serve", help="run one server in the foreground until Ctrl-C")
    serve.add_argument("kind", choices=["kafka", "redis", "http", "spark-cluster", "spark-connect"])
    args = parser.parse_args(list(argv))
    if args.command == "fetch-kafka":
        print(fetch_kafka())
        return 0
    if args.kind == "http":
        from impulse.loadtest.receiver import Receiver

        with Receiver() as receiver:
            print(f"http ready at {receiver.url}; Ctrl-C to stop", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    server = {"kafka": KafkaBroker, "redis": RedisServer, "spark-cluster": SparkStandaloneCluster,
              "spark-connect": SparkConnectServer}[args.kind]()
    with server:
        address = {"kafka": "bootstrap", "spark-cluster": "master_url"}.get(args.kind, "url")
        address = getattr(server, address)
        print(f"{args.kind} ready at {address} (dir {server.dir}); Ctrl-C to stop", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
