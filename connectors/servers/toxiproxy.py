"""Shopify's Toxiproxy, a TCP proxy that injects network faults, on loopback (`Toxiproxy`), and the build of
its server from the Go module proxy (`fetch_toxiproxy`).

``fetch_toxiproxy()`` runs ``go install github.com/Shopify/toxiproxy/v2/cmd/server@<TOXIPROXY_VERSION>``
once into ``$IMPULSE_CACHE/toxiproxy-<version>/`` (like the Kafka jars; ``tests/run`` does it; the Go
toolchain must be installed). The server's HTTP API is driven directly (standard library only): a
`Proxy` listens on a free loopback port and forwards to an upstream ``host:port``; toxics are added to
one direction of it (``upstream``: client to server, ``downstream``: server to client) and apply to every
connection through it, open ones included:

- ``limit_data`` (``bytes``): passes that many bytes of a connection in that direction, then closes it;
- ``reset_peer`` (``timeout`` ms), ``timeout`` (``timeout`` ms; 0: drop everything until removed);
- ``latency`` (``latency``, ``jitter`` ms), ``bandwidth`` (``rate`` KB/s), ``slow_close`` (``delay`` ms).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from connectors.servers.base import LOOPBACK, ProcessServer, ServerError, cache_root, free_port, tail

__all__ = ["TOXIPROXY_VERSION", "Proxy", "Toxiproxy", "fetch_toxiproxy"]

TOXIPROXY_VERSION = "v2.12.0"
TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"


def _go() -> str:
    go = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if os.access(p, os.X_OK)),
                                    None)
    if go is None:
        raise ServerError("Go is not installed: Toxiproxy is built with `go install`; run `apt-get install -y "
                          "golang-go` or install Go from go.dev (tests/run does the first)")
    return go


def fetch_toxiproxy(quiet: bool = False) -> Path:
    """Build the pinned Toxiproxy server unless already in the cache; return the path of its binary.

    Modules and build cache go to a temporary GOPATH removed afterwards; only the binary is kept.
    Concurrent callers serialise on a lock file.
    """
    target = cache_root() / f"toxiproxy-{TOXIPROXY_VERSION}"
    binary = target / "toxiproxy-server"
    if binary.is_file():
        return binary
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():
            return binary
        go = _go()
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            if not quiet:
                print(f"building Toxiproxy {TOXIPROXY_VERSION} with `go install` into {target} ...", file=sys.stderr)
            env = {**os.environ, "GOPATH": str(work / "gopath"), "GOCACHE": str(work / "cache"),
                   "GOBIN": str(work / "bin"), "GOFLAGS": "-modcacherw", "CGO_ENABLED": "0"}
            cmd = [go, "install", f"{TOXIPROXY_MODULE}@{TOXIPROXY_VERSION}"]
            result = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    timeout=1800)
            built = work / "bin" / "server"
            if result.returncode != 0 or not built.is_file():
                raise ServerError(f"`{' '.join(cmd)}` failed (exit {result.returncode}):\n{result.stdout[-4000:]}")
            target.mkdir(exist_ok=True)
            built.rename(binary)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return binary


class Proxy:
    """One proxy of a `Toxiproxy` server: ``listen`` (``host:port`` clients connect to) → ``upstream``."""

    def __init__(self, server: "Toxiproxy", name: str, listen: str, upstream: str) -> None:
        self.server, self.name, self.listen, self.upstream = server, name, listen, upstream

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    def add_toxic(self, kind: str, stream: str = "downstream", toxicity: float = 1.0, name: str | None = None,
                  **attributes: int) -> str:
        """Add a toxic of type `kind` to the `stream` direction (``upstream``: client → server,
        ``downstream``: server → client), applied to a `toxicity` fraction of connections; returns its name."""
        if stream not in ("upstream", "downstream"):
            raise ValueError(f"stream must be 'upstream' or 'downstream', not {stream!r}")
        name = name or f"{kind}-{stream}-{uuid.uuid4().hex[:6]}"
        self.server.api("POST", f"/proxies/{self.name}/toxics", {
            "name": name, "type": kind, "stream": stream, "toxicity": toxicity, "attributes": attributes})
        return name

    def remove_toxic(self, name: str) -> None:
        self.server.api("DELETE", f"/proxies/{self.name}/toxics/{name}")

    def toxics(self) -> list[dict[str, Any]]:
        return self.server.api("GET", f"/proxies/{self.name}/toxics")

    def clear(self) -> None:
        """Remove every toxic of this proxy."""
        for toxic in self.toxics():
            self.remove_toxic(toxic["name"])

    def delete(self) -> None:
        self.server.api("DELETE", f"/proxies/{self.name}")


class Toxiproxy(ProcessServer):
    """A ``toxiproxy-server`` (built by `fetch_toxiproxy`) with its HTTP API on a free loopback port.

    ``TOXIPROXY_URL`` (``http://host:port`` of its API) brings one someone else runs; its proxies must
    still listen where the clients can reach them.
    """

    name = "toxiproxy"
    external_env = "TOXIPROXY_URL"

    def __init__(self) -> None:
        super().__init__()
        self.port: int | None = None

    @property
    def url(self) -> str:
        return self._address(lambda: f"http://{LOOPBACK}:{self.port}")

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """One call of the HTTP API; the decoded JSON answer (None when empty). `ServerError` on an error status."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                text = answer.read()
        except urllib.error.HTTPError as exc:
            raise ServerError(f"toxiproxy: {method} {path} answered {exc.code}: {exc.read()[:500]!r}") from None
        return json.loads(text) if text.strip() else None

    def proxy(self, upstream: str, listen: str | None = None, name: str | None = None) -> Proxy:
        """A new proxy forwarding to `upstream` (``host:port``), listening on `listen` (default: a free loopback port)."""
        name = name or f"p{uuid.uuid4().hex[:10]}"
        for attempt in range(5):
            address = listen or f"{LOOPBACK}:{free_port()}"
            try:
                self.api("POST", "/proxies", {"name": name, "listen": address, "upstream": upstream, "enabled": True})
                return Proxy(self, name, address, upstream)
            except ServerError as exc:  # a free port taken meanwhile: another one (a given port is not retried)
                if listen or attempt == 4 or "address already in use" not in str(exc).lower():
                    raise
        raise AssertionError("unreachable")

    def _start(self) -> None:
        binary = fetch_toxiproxy()
        for attempt in range(3):
            self.port = free_port()
            self._spawn([str(binary), "-host", LOOPBACK, "-port", str(self.port)])
            try:
                self._wait_ready(lambda: self.api("GET", "/proxies") is not None, 20, f"GET {self.url}/proxies")
                return
            except ServerError:
                if attempt == 2 or "address already in use" not in tail(self.out_path, 10).lower():
                    raise

    def _stop(self, timeout: float) -> None:
        self._terminate(timeout)
