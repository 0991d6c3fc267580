"""A local Spark session with every data source of this project registered.

One builder for the tests, the conformance plugin and driver, the load harness and the benchmarks::

    from connectors.session import local_session
    spark = local_session("local[2,2]", "my-tests", **{"spark.driver.memory": "2g"})

Python workers run this interpreter (``PYSPARK_PYTHON`` defaults to ``sys.executable``, which has the
project installed), the UI and console progress bar are off and the log level is ERROR. If a session
is already active its settings stay (Spark's ``getOrCreate``) and the data sources are registered on it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import pyspark
from pyspark import SparkContext
from pyspark.find_spark_home import _find_spark_home
from pyspark.sql import SparkSession

from connectors import register_all

__all__ = ["local_session", "spark_kafka_session", "kafka_package", "SPARK_KAFKA_ARTIFACT"]

SPARK_KAFKA_ARTIFACT = "org.apache.spark:spark-sql-kafka-0-10_2.13"
RESOLVE_TIMEOUT_S = 600.0   # a first resolution downloads the connector and kafka-clients


def local_session(master: str = "local[*]", app_name: str = "impulse", **conf: Any):
    """A ``SparkSession`` on `master` with `conf` (Spark property name → value) and our sources registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_all(spark)
    return spark


def spark_kafka_session(master: str = "local[*]", app_name: str = "impulse", fallback: str = "4.2.0",
                        **conf: Any):
    """`local_session` with Spark's own Kafka connector: ``(session, package coordinates used)``.

    The coordinates are `kafka_package`'s, decided before the session's JVM starts, so a PySpark release whose
    connector is not published yet starts with the `fallback` version without a failed ``spark-submit`` printing
    its Java stack trace. A session that is already running is returned as it is (its packages cannot change).
    """
    if SparkContext._active_spark_context is not None:
        package = f"{SPARK_KAFKA_ARTIFACT}:{pyspark.__version__}"
    else:
        package = kafka_package(fallback, conf)
    packages = ",".join(filter(None, (str(conf.get("spark.jars.packages", "")), package)))  # the caller's kept
    return local_session(master, app_name, **{**conf, "spark.jars.packages": packages}), package


def kafka_package(fallback: str | None = "4.2.0", conf: Mapping[str, Any] | None = None) -> str:
    """The coordinates of `SPARK_KAFKA_ARTIFACT` a new session gets: at this PySpark's version when Spark's
    resolver can have it, else at `fallback`.

    This PySpark's version is taken when its jar is in the local Ivy cache (``spark.jars.ivy`` of `conf`, default
    ``~/.ivy2.5.2``) or Maven repository (``~/.m2``), or else when a child ``spark-submit`` resolves it with the
    ``spark.jars.*`` settings of `conf` (the repositories Spark is configured for; its output is discarded, never
    shown). Without a `fallback`, or when it is this version, that version is returned unchecked.
    """
    own = f"{SPARK_KAFKA_ARTIFACT}:{pyspark.__version__}"
    if not fallback or fallback == pyspark.__version__:
        return own
    conf = conf or {}
    if _in_local_cache(pyspark.__version__, conf) or _resolves(own, conf):
        return own
    return f"{SPARK_KAFKA_ARTIFACT}:{fallback}"


def _in_local_cache(version: str, conf: Mapping[str, Any]) -> bool:
    """Whether the connector's jar at `version` was resolved on this machine before (Ivy cache, Maven repository)."""
    group, artifact = SPARK_KAFKA_ARTIFACT.split(":")
    ivy = Path(str(conf.get("spark.jars.ivy") or Path.home() / ".ivy2.5.2"))
    jar = f"{artifact}-{version}.jar"
    return ((ivy / "cache" / group / artifact / "jars" / jar).is_file()
            or (Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version / jar).is_file())


def _resolves(package: str, conf: Mapping[str, Any]) -> bool:
    """Whether Spark's resolver finds `package`: a ``spark-submit`` that resolves it, then runs only ``--version``
    (exit 0), or fails to (exit 1: unresolved dependency); its output discarded."""
    settings = [arg for key, value in conf.items() if key.startswith("spark.jars.") and key != "spark.jars.packages"
                for arg in ("--conf", f"{key}={value}")]
    command = [os.path.join(_find_spark_home(), "bin", "spark-submit"), "--conf", f"spark.jars.packages={package}",
               *settings, "--class", "org.apache.spark.deploy.SparkSubmit", "spark-internal", "--version"]
    try:
        return subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=RESOLVE_TIMEOUT_S).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
