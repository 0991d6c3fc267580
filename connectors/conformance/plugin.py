"""pytest plugin for running the conformance suite outside this repository's tests.

``pytest_plugins = ["connectors.conformance.plugin"]`` gives a session ``spark`` fixture (``local[2,2]``:
two cores, one task retry, every data source of this project registered); a conftest that defines its own
``spark`` fixture wins over this one.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from connectors import register_all

    session = (SparkSession.builder.master("local[2,2]").appName("conformance")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register_all(session)
    yield session
    session.stop()
