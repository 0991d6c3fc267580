"""Spark beyond one JVM on loopback: a standalone cluster (`SparkStandaloneCluster`) and a Spark Connect
server (`SparkConnectServer`), both launched with the installed PySpark's ``bin/spark-class``."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from connectors.servers.base import LOOPBACK, ROOT, ProcessServer, ServerError, free_port, tail, wait_until

__all__ = ["SparkConnectServer", "SparkStandaloneCluster", "processes_under", "spark_home"]


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
    """``$SPARK_HOME`` when set, as for PySpark's own launcher, else the installed ``pyspark`` package folder: it
    holds ``bin/spark-class`` and the jars."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServerError("pyspark is not installed: run `pip install -e .[test]` (tests/run does this)")
    return Path(spec.origin).parent


class _SparkServer(ProcessServer):
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
                if attempt == 2 or "Address already in use" not in str(exc) + tail(self.out_path, 80):
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
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession  # noqa: PLC0415 - the connect extra (grpcio)

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

