"""A single-node Apache Kafka broker (`KafkaBroker`, KRaft) and the Maven fetcher of its jars (`fetch_kafka`).

The broker's version is `KAFKA_VERSION`. Maven resolves its jars from ``kafka-pom.xml`` beside this module
(`KAFKA_POM`, shipped with the package, so an installed package fetches them as a checkout does), whose
``kafka.version`` is the same (tests/test_servers.py checks it and the README against `KAFKA_VERSION`).
``confluent_kafka`` is imported only by the client helpers, so ``python -m connectors.servers fetch-kafka`` works
before the clients are installed.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import socket
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterable

from connectors.kafka_topics import create_topic, end_offsets, read_topic
from connectors.servers.base import (
    LOOPBACK,
    ClientLibrary,
    ProcessServer,
    ServerError,
    cache_root,
    fetch_once,
    free_port,
    java,
    maven,
    quiet_logger,
    unclaimed_port,
    wait_until,
)

__all__ = ["KAFKA_POM", "KAFKA_VERSION", "KafkaBroker", "fetch_kafka", "kafka_jars_dir", "pom_digest"]

KAFKA_VERSION = "4.1.1"
KAFKA_POM = Path(__file__).with_name("kafka-pom.xml")


def pom_digest(pom: Path = KAFKA_POM) -> str:
    """The sha256 of `pom` without its comments and formatting (canonical XML): what decides the jars Maven
    resolves, so editing a comment of the pom neither moves nor refetches the cached jars."""
    try:
        canonical = ET.canonicalize(from_file=str(pom), with_comments=False, strip_text=True)
    except OSError as exc:
        raise ServerError(f"cannot read {pom} ({exc}): reinstall impulse-connectors, whose package data it is") from exc
    return hashlib.sha256(canonical.encode()).hexdigest()


def kafka_jars_dir() -> Path:
    """Where the broker's jars are cached: ``<cache>/kafka-<KAFKA_VERSION>-<12 hex digits of pom_digest()>``, one
    folder per pom, so checkouts sharing the cache with another pom do not refetch each other's jars."""
    return cache_root() / f"kafka-{KAFKA_VERSION}-{pom_digest()[:12]}"


def fetch_kafka(quiet: bool = False) -> Path:
    """Download the Kafka broker jars from Maven Central (via ``mvn``, by `KAFKA_POM`) unless already there; return
    their dir (`kafka_jars_dir`).

    A marker file holding `pom_digest` is written after a complete download, so an interrupted fetch is redone.
    Concurrent callers serialise on a lock file (`connectors.servers.base.fetch_once`).
    """
    target = kafka_jars_dir()

    def fill(staging: Path) -> None:
        mvn = maven()
        java()  # the broker runs on it: say so now rather than after the download
        if not quiet:
            print(f"fetching Apache Kafka {KAFKA_VERSION} from Maven Central into {target} ...", file=sys.stderr)
        cmd = [
            mvn, "-q", "-B", "-f", str(KAFKA_POM),
            "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
        ]
        result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
        jars = sorted(p.name for p in staging.glob("*.jar"))
        if result.returncode != 0:
            raise ServerError(
                f"`{' '.join(cmd)}` failed (exit {result.returncode}, jars: {len(jars)}):\n{result.stdout[-4000:]}"
            )
        if f"kafka_2.13-{KAFKA_VERSION}.jar" not in jars:
            raise ServerError(f"`{' '.join(cmd)}` fetched no kafka_2.13-{KAFKA_VERSION}.jar ({len(jars)} jars): the "
                              f"pom's kafka.version must be KAFKA_VERSION of {__name__}")

    return fetch_once(target, pom_digest(), fill)


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


class KafkaBroker(ProcessServer):
    """A single-node Apache Kafka (KRaft, broker and controller in one JVM) on free loopback ports.

    With `proxy_listener`, a second listener (``PROXIED``, on `proxied_port`) advertises another free port,
    `proxy_port`, where a proxy is expected: a client bootstrapping at the proxy is told the broker is
    there too, so its whole conversation goes through the proxy (`proxy_route`).

    ``KafkaBroker.external("host:port")`` wraps a broker someone else runs (``KAFKA_BROKERS``).
    """

    name = "kafka"
    external_env = "KAFKA_BROKERS"
    client_library = ClientLibrary("confluent_kafka", "confluent-kafka", "kafka")
    READY_TIMEOUT = 120.0

    # C1-only JIT: the JVM starts ~30% faster; steady-state speed is plenty for tests (pass [] to a benchmark).
    DEFAULT_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1",)

    def __init__(self, config: dict[str, Any] | None = None, heap: str = "512m",
                 jvm_options: Iterable[str] | None = None, proxy_listener: bool = False) -> None:
        super().__init__()
        self.proxy_listener = proxy_listener
        self.proxied_port: int | None = None
        self.proxy_port: int | None = None
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

    @property
    def proxy_route(self) -> tuple[str, str] | None:
        """``(listener, advertised)``: where a proxy forwards to and where it must listen (None without
        `proxy_listener`)."""
        if not self.proxy_listener or self.proxied_port is None:
            return None
        return f"{LOOPBACK}:{self.proxied_port}", f"{LOOPBACK}:{self.proxy_port}"

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
        if self.proxy_listener:
            props["listeners"] += f",PROXIED://{LOOPBACK}:{self.proxied_port}"
            props["advertised.listeners"] += f",PROXIED://{LOOPBACK}:{self.proxy_port}"
            props["listener.security.protocol.map"] += ",PROXIED:PLAINTEXT"
        props.update(self.extra_config)
        return props

    def _java_cmd(self, jars: Path, main: str, *args: str, heap: str | None = None) -> list[str]:
        cmd = [java()]
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
                ports: set[int] = set()
                while len(ports) < 3:
                    ports.add(free_port())
                self.port, self.controller_port, self.proxied_port = ports
                self.proxy_port = unclaimed_port()  # bound only when a proxy is made, maybe minutes later
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
            jars, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.properties_path),
            *self._format_args(), heap="256m"
        )
        result = subprocess.run(cmd, cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        with open(self.out_path, "a") as out:
            out.write(f"=== format: {' '.join(cmd)}\n{result.stdout}\n")
        if result.returncode != 0:
            raise ServerError(f"kafka: formatting {self.log_dir} failed (exit {result.returncode}):\n{result.stdout}")

    def _format_args(self) -> list[str]:
        """More arguments of the storage format (SCRAM credentials: `connectors.servers.kafka_secure`)."""
        return []

    def _ready(self) -> bool:
        from confluent_kafka import Producer  # noqa: PLC0415 - the kafka extra's client

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
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "logger": quiet_logger("kafka")}
        conf.update(extra or {})
        return conf

    def admin(self, **conf):
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415 - the kafka extra's client

        return AdminClient(self._client_config(conf))

    def producer(self, **conf):
        """A ``confluent_kafka.Producer`` for this broker; keys use librdkafka spelling with ``_`` for ``.``."""
        from confluent_kafka import Producer  # noqa: PLC0415 - the kafka extra's client

        return Producer(self._client_config({k.replace("_", "."): v for k, v in conf.items()}))

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     timeout: float = 30.0) -> str:
        """Create a topic and wait until every partition has a leader. Returns ``name``."""
        create_topic(self.admin(), name, partitions, 1, config, timeout)
        return name

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        admin = self.admin()
        admin.delete_topics([name], operation_timeout=timeout)[name].result(timeout)
        wait_until(lambda: name not in admin.list_topics(timeout=5).topics, timeout, 0.1, f"topic {name} to go")

    def end_offsets(self, topic: str, isolation: str = "read_committed", timeout: float = 30.0) -> dict[int, int]:
        """``{partition: end offset}``; for ``read_committed`` the end is the last stable offset."""
        from confluent_kafka import KafkaException  # noqa: PLC0415 - the kafka extra's client

        try:
            return end_offsets(self._client_config(), topic, isolation, timeout)
        except KafkaException as exc:
            raise ServerError(f"kafka: topic {topic}: {exc}") from exc

    def consume_all(self, topic: str, isolation: str = "read_committed", timeout: float = 60.0) -> list:
        """Every message of ``topic`` from the beginning up to its end offsets (read with ``isolation``; for
        ``read_committed``, once no transaction is still open, waiting up to 5 s: `connectors.kafka_topics.read_topic`),
        in partition order then offset order. Returns ``confluent_kafka.Message`` objects."""
        return read_topic(self._client_config(), topic, isolation, timeout)

