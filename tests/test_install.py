"""A regular install, as a user gets it: ``pip wheel --no-deps .``, then the wheel in a fresh virtual environment,
first with no extras, then with every extra. Nothing of this checkout is on the path there (the scripts run from
a temporary directory with no PYTHONPATH), so a module the wheel lacks or an extra that forgets a dependency
fails here.

The environments' dependencies are installed once per packaging hash under ``$IMPULSE_CACHE/venvs``
(`tests.venvs`); a rerun only rebuilds and reinstalls the wheel (about 20 s, Spark startups included).
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from connectors.registry import connectors, sinks
from connectors.servers.kafka import KAFKA_POM
from tests.venvs import FEATURE_EXTRAS, wheel, wheel_env

pytestmark = [pytest.mark.install, pytest.mark.slow]

_PLAIN = """
import json
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", 1).getOrCreate())
out = {"rows": spark.read.format("impulse").option("eventsPerSecond", 1000).option("limit", 1000).load().count(),
       "errors": {}}
for name in %(sinks)r:
    try:
        spark.range(3).write.format(name).mode("append").option("url", "x").save()
        out["errors"][name] = None
    except Exception as exc:
        out["errors"][name] = str(exc)
print("RESULT " + json.dumps(out))
spark.stop()
"""

# which distribution provides each module a feature imports, checked against what its extra installs
_CLOSURE = """
import json, re, sys
from importlib.metadata import distribution, packages_distributions
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
def closure(name, extras=()):
    seen, todo = set(), [(name, tuple(extras))]
    while todo:
        dist, extra = todo.pop()
        key = re.sub(r"[-_.]+", "-", dist).lower()
        if (key, extra) in seen:
            continue
        seen.add((key, extra))
        for line in distribution(dist).requires or []:
            req = Requirement(line)
            env = [{"extra": e} for e in extra] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(e) for e in env):
                todo.append((req.name, tuple(req.extras)))
    return {k for k, _ in seen}
providers = {m: {re.sub(r"[-_.]+", "-", d).lower() for d in ds} for m, ds in packages_distributions().items()}
wants = json.loads(sys.argv[1])
print(json.dumps({extra: sorted(m for m in modules if not providers.get(m, set()) & closure("impulse-connectors", [extra]))
                  for extra, modules in wants.items()}))
"""


def _run(exe: Path, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `exe` (the environment's python, or a script beside it) with that environment's python for Spark's
    workers, nothing of this checkout on the path and that environment's own Spark home."""
    python = exe.parent / "python"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python))
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_ships_the_pom_the_kafka_broker_is_fetched_by(built):
    """`connectors.servers.fetch_kafka` runs Maven on the pom beside its module, not on a file of the checkout."""
    with zipfile.ZipFile(built) as wheel_file:
        pom = wheel_file.read("connectors/servers/kafka-pom.xml")
    assert pom == KAFKA_POM.read_bytes()


def test_without_extras_every_format_registers_and_a_sink_names_its_extra(built, tmp_path):
    exe = wheel_env(built)
    done = _run(exe, "-c", _PLAIN % {"sinks": [row.name for row in sinks()]}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["rows"] == 1000  # spark.read.format("impulse"): auto-registration found the formats
    for row in sinks():
        assert f"impulse-connectors[{row.extra}]" in (result["errors"][row.name] or ""), (row.name, result)
    helped = _run(exe.parent / "impulse-load", "--help", cwd=tmp_path, timeout=120)
    assert helped.returncode == 0 and "usage: impulse-load" in helped.stdout, helped.stderr[-2000:]


def test_each_extra_installs_what_its_feature_imports(built, tmp_path):
    """With every extra installed, each extra's own dependency closure (read from the installed metadata)
    provides every module its feature imports: a sink's client libraries and the latency histograms, and for
    ``load`` the harness's; then ``impulse-load`` runs a 2-second load into the noop sink."""
    exe = wheel_env(built, FEATURE_EXTRAS)
    wants = {row.extra: [*row.preload, "hdrh"] for row in connectors() if row.extra}
    wants["load"] = ["requests", "matplotlib", "hdrh", "prometheus_client", "plotly"]
    wants["report"] = ["plotly", "hdrh"]
    wants["connect"] = ["grpc", "grpc_status", "zstandard"]  # what pyspark.sql.connect imports
    done = _run(exe, "-c", _CLOSURE, json.dumps(wants), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {extra: [] for extra in wants}
    ran = _run(exe.parent / "impulse-load", "--sink", "noop", "--rate", "100", "--duration", "2s", "--no-warmup",
               "--output", str(tmp_path / "out"), cwd=tmp_path, timeout=300)
    causes = [line for line in ran.stderr.splitlines() if "Error" in line or "Exception" in line][:8]
    assert ran.returncode == 0, (ran.stdout[-2000:], causes)
    assert "summary" in ran.stdout
    assert (tmp_path / "out" / "report.html").stat().st_size > 1_000_000  # plotly.js inlined
