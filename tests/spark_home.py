"""A Spark home for the tests: the installed PySpark's, without its zipped Python sources.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and Py4J's zip first on the ``PYTHONPATH`` of every Python
process it starts: the worker daemons, the planner processes of a Python data source and the process that runs a
streaming source for each streaming query. Python keeps no bytecode for what it imports from a zip, so each of those
processes compiles PySpark's sources again: ~1 CPU-second each, most of a streaming source process's CPU (2.3 →
0.9 CPU-s per query measured on the Redis conformance cases, whose CPU fell by a third; bench/README.md, "The test
suite and CI"). The installed package holds the same sources with their bytecode cache.

``python3 -m tests.spark_home`` prints a folder (made once under ``$IMPULSE_CACHE``) that links every entry of the
installed ``pyspark`` package except ``python/lib``; `tests/run` exports it as ``SPARK_HOME``. Spark's launcher,
jars and scripts are then PySpark's own, and its Python processes import the installed PySpark. Nothing depends
on it but speed: without it Spark uses the package folder itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyspark

from connectors.servers.base import cache_root, fetch_once

#: the folder of the package that Spark would put on its Python processes' path as zips
ZIPPED = Path("python") / "lib"


def package_home() -> Path:
    """The installed ``pyspark`` package folder: PySpark's own Spark home."""
    return Path(pyspark.__file__).parent


def fill(home: Path, target: Path) -> None:
    """Link each entry of `home` into `target`, and of ``home/python`` all but ``lib``."""
    (target / "python").mkdir()
    for entry in home.iterdir():
        if entry.name != "python":
            (target / entry.name).symlink_to(entry)
    for entry in (home / "python").iterdir():
        if entry.name != ZIPPED.name:
            (target / "python" / entry.name).symlink_to(entry)


def ensure() -> Path:
    """The Spark home for this interpreter's PySpark, made first when missing."""
    home = package_home()
    stamp = f"{home} {pyspark.__version__}"
    target = cache_root() / f"spark-home-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}"
    return fetch_once(target, stamp, lambda staging: fill(home, staging))


if __name__ == "__main__":
    print(ensure())
