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
import sys
from typing import Any

import pyspark
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from connectors import register_all

__all__ = ["local_session", "spark_kafka_session", "SPARK_KAFKA_ARTIFACT"]

SPARK_KAFKA_ARTIFACT = "org.apache.spark:spark-sql-kafka-0-10_2.13"


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

    Spark's resolver (``spark.jars.packages``, with the repositories Spark is configured for) fetches
    `SPARK_KAFKA_ARTIFACT` at this PySpark's version; when that cannot be resolved (a PySpark release
    whose connector is not published yet) the session starts with the `fallback` version instead. A
    session that is already running is returned as it is (its packages cannot change).
    """
    versions = [pyspark.__version__] + ([fallback] if fallback and fallback != pyspark.__version__ else [])
    for i, version in enumerate(versions):
        package = f"{SPARK_KAFKA_ARTIFACT}:{version}"
        try:
            return local_session(master, app_name, **{**conf, "spark.jars.packages": package}), package
        except PySparkRuntimeError:  # JAVA_GATEWAY_EXITED: spark-submit could not resolve the package
            if i == len(versions) - 1:
                raise
    raise AssertionError("unreachable")
