"""What every test server shares: free loopback ports, polling, the life cycle and the download cache.

Every server has ``start()``, ``stop()`` (graceful, killed after a timeout), ``restart()`` (same ports and
same data dir, for restart tests), ``close()`` (stop and delete its temp dir) and context-manager support.
Readiness is polled with real clients; nothing synchronises on fixed sleeps. Standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, NamedTuple

from connectors.errors import SinkError
from connectors.registry import import_extra

__all__ = ["LOOPBACK", "ROOT", "ClientLibrary", "Server", "ServerError", "ProcessServer", "cache_root", "fetch_once",
           "free_port", "unclaimed_port", "java", "maven", "quiet_logger", "tail", "wait_until"]

ROOT = Path(__file__).resolve().parents[2]   # what holds the connectors package (a checkout or site-packages)
LOOPBACK = "127.0.0.1"


class ServerError(RuntimeError):
    """A test server could not be fetched, started or stopped."""


class ClientLibrary(NamedTuple):
    """The Python client a server is polled and driven with (imported when it starts), and the extra of this
    project that installs it."""

    module: str      # what is imported, e.g. confluent_kafka
    package: str     # what pip knows it by, e.g. confluent-kafka
    extra: str       # the extra of setup.cfg that brings it, e.g. kafka

    def require(self, needed_by: str) -> None:
        """Import `module`; `ServerError` ``"<needed_by> needs <package>: pip install 'impulse-connectors[<extra>]'"``
        when it cannot be imported here (`connectors.registry.import_extra`, the one gate of an extra)."""
        try:
            import_extra(self.module, self.extra, needed_by, self.package)
        except SinkError as exc:
            raise ServerError(str(exc)) from None


# --------------------------------------------------------------------------------------------- helpers


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def unclaimed_port() -> int:
    """A TCP port on 127.0.0.1, free now and below the OS's ephemeral range: for a port reserved now and bound much
    later (a proxy's, advertised by a broker), which a `free_port` could lose meanwhile to the local end of any
    outgoing connection, since the OS hands those out from that range."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        port = random.randrange(max(1024, low - 12_000), low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    return free_port()


def java() -> str:
    """``$JAVA_HOME/bin/java`` when there is one, else the ``java`` on the PATH; `ServerError` saying how to install
    it when there is neither."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ServerError("Java is not installed: run `apt-get install -y openjdk-17-jre-headless`")
    return found


def maven() -> str:
    """The ``mvn`` on the PATH, which fetches the servers' jars; `ServerError` saying how to install it."""
    found = shutil.which("mvn")
    if found is None:
        raise ServerError("Maven is not installed: run `apt-get install -y maven` (tests/run does this)")
    return found


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


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or f"(empty log at {path})"


def quiet_logger(name: str) -> logging.Logger:
    """A logger that swallows librdkafka's connection-refused chatter while a server is coming up."""
    logger = logging.getLogger(f"impulse.connectors.servers.{name}")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


_LIVE: "weakref.WeakSet[Server]" = weakref.WeakSet()


@atexit.register
def _stop_leftovers() -> None:  # a crashed test session must not leave JVMs or redis-servers behind
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop(timeout=10)


class Server:
    """Shared life cycle: a temp dir, ``start/stop/restart/close`` and the context-manager protocol; and
    ``external(address)``, a server someone else runs instead (the address comes from the environment variable
    `external_env`: `from_env`), which this process neither starts nor stops (`managed` is False)."""

    name = "server"
    client_library: ClientLibrary | None = None   # what starting it imports beyond the standard library
    external_env = ""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"impulse-{self.name}-"))
        self._lock = threading.RLock()
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
        """Whether this process starts and stops it (not one `external` wraps)."""
        return self._external is None

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


class ProcessServer(Server):
    """A server that is a child process whose stdout/stderr go to ``<dir>/<name>.out``.

    One that ``external(address)`` wraps: the client helpers work, start/stop are no-ops and ``restart()`` fails.
    """

    def __init__(self) -> None:
        super().__init__()
        self.proc: subprocess.Popen | None = None
        self.out_path = self.dir / f"{self.name}.out"

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
        parts.append(f"\n--- tail of {self.out_path} ---\n{tail(self.out_path)}")
        if self.log_path != self.out_path:
            parts.append(f"\n--- tail of {self.log_path} ---\n{tail(self.log_path)}")
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




def cache_root() -> Path:
    """``$IMPULSE_CACHE`` or ``~/.cache/impulse``: downloaded Kafka jars, the built Toxiproxy, tests/run's stamp and
    the tests' JVM class archive."""
    return Path(os.environ.get("IMPULSE_CACHE") or Path.home() / ".cache" / "impulse").expanduser()


def fetch_once(target: Path, stamp: str, fill: Callable[[Path], None]) -> Path:
    """`target`, filled once: `fill(staging)` writes a fresh folder beside it, which then replaces `target` whole.

    ``target/.complete`` holds `stamp` once a fill finished, so an interrupted fill is redone, and so is one made
    for another stamp (e.g. another pom). Concurrent callers, in any process, serialise on a lock file beside it.
    """
    marker = target / ".complete"

    def done() -> bool:
        return marker.is_file() and marker.read_text().strip() == stamp

    if done():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            fill(staging)
            (staging / ".complete").write_text(stamp + "\n")
            staging.chmod(0o755)
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
