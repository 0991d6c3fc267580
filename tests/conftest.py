"""Shared fixtures: one Spark session for the whole run, and the real servers the sinks write to."""

from __future__ import annotations

import os
import sys

import pytest

# Spark's Python workers must run this interpreter (with the project installed), not whatever is on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    """A ``local[2,2]`` session (2 cores; a failed task is retried once), shared by every test."""
    from pyspark.sql import SparkSession

    from connectors import register_all

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("impulse-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register_all(session)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()
