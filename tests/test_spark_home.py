"""tests/spark_home.py: the tests' Spark home links PySpark's own but for its zipped Python sources, and Spark's
Python processes then import the installed PySpark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import spark_home


def test_the_home_links_everything_but_the_zipped_sources(tmp_path):
    home = tmp_path / "pyspark"
    for folder in ("bin", "jars", "python/lib", "python/pyspark"):
        (home / folder).mkdir(parents=True)
    (home / "python" / "lib" / "pyspark.zip").write_bytes(b"")
    (home / "jars" / "spark-core.jar").write_bytes(b"")
    target = tmp_path / "home"
    target.mkdir()

    spark_home.fill(home, target)

    assert sorted(p.name for p in target.iterdir()) == ["bin", "jars", "python"]
    assert (target / "jars" / "spark-core.jar").exists() and (target / "bin").resolve() == home / "bin"
    assert sorted(p.name for p in (target / "python").iterdir()) == ["pyspark"]


def test_the_made_home_has_what_spark_launches_with():
    made = spark_home.ensure()
    assert (made / "bin" / "spark-submit").is_file() and any((made / "jars").glob("spark-core_*.jar"))
    assert not (made / spark_home.ZIPPED).exists()
    assert (spark_home.package_home() / spark_home.ZIPPED / "pyspark.zip").exists(), \
        "PySpark no longer ships its zipped sources: tests/spark_home.py has nothing left to leave out"
    assert spark_home.ensure() == made  # made once


@pytest.mark.integration
def test_sparks_python_workers_import_the_installed_pyspark(spark):
    if Path(os.environ.get("SPARK_HOME", "/nonexistent")) != spark_home.ensure():
        pytest.skip("SPARK_HOME is not tests/spark_home.py's: tests/run exports it")

    def origin(_):
        import pyspark
        yield pyspark.__file__

    found = spark.sparkContext.parallelize([0], 1).mapPartitions(origin).collect()
    assert found == [str(spark_home.package_home() / "__init__.py")]
