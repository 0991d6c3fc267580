"""A Schema Registry with Confluent's REST API (`SchemaRegistry`: Apicurio Registry, in-memory storage) and the
Maven fetcher of its server (`fetch_schema_registry`).

Apicurio Registry's ready-to-run server (a Quarkus application: ``apicurio-registry-app-<v>-runner.jar`` and
``lib/``) is the ``tar.gz:all`` artifact of ``io.apicurio:apicurio-registry-app`` on Maven Central. Its parent POM
is not on Maven Central, so the artifact is fetched with maven-dependency-plugin 2.8 (3.x refuses it). The
Confluent-compatible API is at ``<url>/apis/ccompat/v7`` (`SchemaRegistry.url`). Differences from Confluent's
server: the server-wide default compatibility is NONE (set it per subject), and schema ids are content-based
(one schema in two subjects has one id). Standard library only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

from connectors.servers.base import LOOPBACK, ProcessServer, ServerError, cache_root, fetch_once, free_port, java, maven

__all__ = ["APICURIO_VERSION", "SchemaRegistry", "fetch_schema_registry"]

APICURIO_VERSION = "3.0.9"  # 3.1+ needs Java 21; Debian's default JDK here is 17
_ARTIFACT = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"
_CCOMPAT = "/apis/ccompat/v7"


def schema_registry_dir() -> Path:
    """Where the unpacked server lives: ``<cache>/apicurio-registry-<version>``."""
    return cache_root() / f"apicurio-registry-{APICURIO_VERSION}"


def fetch_schema_registry(quiet: bool = False) -> Path:
    """Download and unpack Apicurio Registry from Maven Central (via ``mvn``) unless already there; return its dir.

    The Maven repository used is ``<cache>/m2``. A marker file is written after a complete unpack, so an
    interrupted fetch is redone; concurrent callers serialise on a lock file (`connectors.servers.base.fetch_once`).
    """
    target = schema_registry_dir()

    def fill(staging: Path) -> None:
        mvn = maven()
        repo = cache_root() / "m2"
        if not quiet:
            print(f"fetching Apicurio Registry {APICURIO_VERSION} from Maven Central into {target} ...", file=sys.stderr)
        cmd = [mvn, "-q", "-B", f"-Dmaven.repo.local={repo}",
               "org.apache.maven.plugins:maven-dependency-plugin:2.8:get", f"-Dartifact={_ARTIFACT}",
               "-Dtransitive=false"]
        archive = (repo / "io" / "apicurio" / "apicurio-registry-app" / APICURIO_VERSION /
                   f"apicurio-registry-app-{APICURIO_VERSION}-all.tar.gz")
        if not archive.is_file():
            result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
            if result.returncode != 0 or not archive.is_file():
                raise ServerError(f"`{' '.join(cmd)}` failed (exit {result.returncode}):\n{result.stdout[-4000:]}")
        with tarfile.open(archive) as tar:
            tar.extractall(staging, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(staging)
        runners = list(staging.rglob("*-runner.jar"))
        if len(runners) != 1:
            raise ServerError(f"schema-registry: expected one *-runner.jar in {archive}, found {runners}")
        (staging / ".runner").write_text(str(runners[0].relative_to(staging)) + "\n")

    return fetch_once(target, _ARTIFACT, fill)


class SchemaRegistry(ProcessServer):
    """Apicurio Registry on a free loopback port, in-memory (a restart forgets every schema).

    `url` is the Confluent-compatible base URL to give ``schema.registry.url`` or confluent-kafka's
    ``SchemaRegistryClient``. ``SchemaRegistry.external(url)`` wraps one someone else runs
    (``SCHEMA_REGISTRY_URL``).
    """

    name = "schema-registry"
    external_env = "SCHEMA_REGISTRY_URL"
    READY_TIMEOUT = 120.0

    def __init__(self, heap: str = "512m") -> None:
        super().__init__()
        self.heap = heap
        self.port: int | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>/apis/ccompat/v7`` (Confluent's REST API)."""
        return self._address(lambda: f"http://{LOOPBACK}:{self.port}{_CCOMPAT}")

    def _start(self) -> None:
        home = fetch_schema_registry()
        runner = home / (home / ".runner").read_text().strip()
        fixed_port = self.port is not None
        for attempt in range(3):
            if not fixed_port:
                self.port = free_port()
            self._spawn([java(), f"-Xmx{self.heap}", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                         f"-Dquarkus.http.host={LOOPBACK}", f"-Dquarkus.http.port={self.port}",
                         "-Dquarkus.log.level=WARN", "-jar", str(runner)])
            try:
                self._wait_ready(self._ready, self.READY_TIMEOUT, f"GET {self.url}/subjects")
                return
            except ServerError as exc:  # another process took the port between free_port() and the bind
                if fixed_port or attempt == 2 or "Address already in use" not in str(exc):
                    raise

    def _ready(self) -> bool:
        return isinstance(self.request("GET", "/subjects", timeout=2), list)

    def _stop(self, timeout: float) -> None:
        self._terminate(timeout)

    # --- client helpers (plain HTTP: tests set a subject's compatibility without confluent-kafka)

    def request(self, method: str, path: str, body: object = None, timeout: float = 10.0) -> object:
        """One call to the Confluent API (`path` below `url`, e.g. ``/subjects``); the decoded JSON answer.
        ``ServerError`` quoting the registry's answer for an HTTP error."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise ServerError(f"schema-registry: {method} {path}: HTTP {exc.code}: {exc.read().decode()[:500]}") from exc
        return json.loads(text) if text else None

    def set_compatibility(self, subject: str, level: str) -> None:
        """Set `subject`'s compatibility rule (``BACKWARD``, ``FORWARD``, ``FULL``, ``NONE``, ``*_TRANSITIVE``)."""
        self.request("PUT", f"/config/{subject}", {"compatibility": level})

    def subjects(self) -> list[str]:
        return list(self.request("GET", "/subjects"))  # type: ignore[arg-type]
