"""The Kafka connector's coordinates (`connectors.session.kafka_package`) are decided before the session's JVM
starts: from the local caches, else from a child ``spark-submit`` whose output is discarded. A session made as the
harness makes it (in a subprocess, to see its stderr) prints no Java stack trace and can load Spark's Kafka source.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pyspark
import pytest

import connectors.session as session
from connectors.session import SPARK_KAFKA_ARTIFACT, kafka_package

OWN = f"{SPARK_KAFKA_ARTIFACT}:{pyspark.__version__}"
OLDER = "4.0.0" if pyspark.__version__ != "4.0.0" else "3.5.0"


def _cached_jar(root: Path, version: str) -> Path:
    group, artifact = SPARK_KAFKA_ARTIFACT.split(":")
    jar = root / "cache" / group / artifact / "jars" / f"{artifact}-{version}.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK")
    return jar


@pytest.fixture
def no_resolver(monkeypatch, tmp_path):
    """An empty home (no ~/.ivy2.5.2, no ~/.m2) and a resolver that records what it is asked and finds nothing."""
    asked = []
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(session, "_resolves", lambda package, conf: asked.append(package) or False)
    return asked


def test_this_pysparks_connector_is_taken_from_the_ivy_cache_without_resolving(no_resolver, tmp_path):
    _cached_jar(tmp_path / "ivy", pyspark.__version__)
    assert kafka_package(OLDER, {"spark.jars.ivy": str(tmp_path / "ivy")}) == OWN
    assert no_resolver == []


def test_without_it_in_a_cache_the_resolver_decides_and_the_fallback_follows(no_resolver, tmp_path, monkeypatch):
    _cached_jar(tmp_path / "ivy", OLDER)  # another version in the cache does not count
    assert kafka_package(OLDER, {"spark.jars.ivy": str(tmp_path / "ivy")}) == f"{SPARK_KAFKA_ARTIFACT}:{OLDER}"
    assert no_resolver == [OWN]
    monkeypatch.setattr(session, "_resolves", lambda package, conf: package == OWN)
    assert kafka_package(OLDER, {"spark.jars.ivy": str(tmp_path / "ivy")}) == OWN


def test_no_fallback_or_the_same_version_is_not_checked(no_resolver):
    assert kafka_package(None) == kafka_package(pyspark.__version__) == OWN
    assert no_resolver == []


@pytest.mark.integration
def test_a_harness_kafka_session_prints_no_java_trace_and_loads_the_kafka_source():
    """`make_session(kafka=True)`, as ``impulse-load --via`` makes it: the JVM must not print the failed resolution of
    a connector version Maven Central does not have, and Spark must find its ``kafka`` source."""
    script = textwrap.dedent("""
        from impulse.session import make_session
        spark = make_session("local[1]", "kafka-session-test", kafka=True)
        state = spark._jsparkSession.sessionState().conf()
        source = spark._jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource("kafka", state)
        print("package", spark.conf.get("spark.jars.packages"))
        print("source", source.getName())
        spark.stop()
    """)
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-5000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines() if line.startswith(("package ", "source ")))
    assert lines["package"].startswith(f"{SPARK_KAFKA_ARTIFACT}:"), run.stdout
    assert lines["source"] == "org.apache.spark.sql.kafka010.KafkaSourceProvider", run.stdout
    for trace in ("Exception in thread", "unresolved dependency", "UNRESOLVED DEPENDENCIES"):
        assert trace not in run.stderr, run.stderr[-5000:]
