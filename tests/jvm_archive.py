"""A class-data-sharing archive of the classes a Spark driver loads, so that the tests' many short-lived Spark
JVMs start faster.

``python3 -m tests.jvm_archive`` prints the JVM options that use the archive (``-XX:SharedArchiveFile=<path>
-Xlog:cds*=off``), making the archive first when it is missing (one small Spark job run with
``-XX:ArchiveClassesAtExit``), or prints nothing when it cannot be made; `tests/run` adds them to
``JAVA_TOOL_OPTIONS``. The JDK maps the archived classes instead of parsing and verifying them from the jars, so a
local Spark session and its first query start sooner (figures: bench/README.md). A JVM whose class path is not the archive's (the Kafka broker, Maven, Spark's launcher, another PySpark's
jars) cannot use it: the JDK checks the class path and the jars' sizes and times against the archive and starts
as before, and ``-Xlog:cds*=off`` keeps its warning out of that JVM's output. Nothing depends on the archive but speed.

The archive is cached under ``$IMPULSE_CACHE`` by a hash of the JDK's version and Spark's jars (their folder, under
``$SPARK_HOME`` when set, names, sizes, times): a new JDK, PySpark or Spark home makes a new one.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

from connectors.servers.base import cache_root
from connectors.servers.spark import spark_home

#: beside ``-XX:SharedArchiveFile``: no warning (on standard output) from a JVM that cannot use the archive
QUIET = "-Xlog:cds*=off"

# The job whose classes are archived: what the tests' Spark drivers do first (a session, a Python data source
# read, a Python UDF, a shuffle, streaming queries with and without state, a batch write).
_JOB = """
import sys, tempfile
from pathlib import Path
from connectors.session import local_session

spark = local_session("local[2,2]", "jvm-archive", **{"spark.sql.shuffle.partitions": 2,
                      "spark.driver.extraJavaOptions": "-XX:ArchiveClassesAtExit=" + sys.argv[1]})
from pyspark.sql.functions import udf, window
events = spark.read.format("impulse").option("eventsPerSecond", 1000).option("limit", 1000).load()
events.groupBy("subtask_index").count().collect()
events.select(udf(lambda c: c + 1, "long")("counter")).collect()
events.write.format("noop").mode("overwrite").save()
work = Path(tempfile.mkdtemp())
stream = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("startTime", "0")
          .option("limit", 2000).option("maxEventsPerTrigger", 1000).load())
for name, frame, mode in (
        ("plain", stream, "append"),
        ("windows", stream.withWatermark("timestamp", "1 second")
                           .groupBy("subtask_index", window("timestamp", "1 second")).count(), "append")):
    query = (frame.writeStream.format("noop").outputMode(mode).option("checkpointLocation", str(work / name))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
spark.stop()
"""


def archive_path() -> Path:
    """Where the archive for this JDK and PySpark is (or would be) kept."""
    version = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    # without the "Picked up JAVA_TOOL_OPTIONS" line: the archive does not depend on those options
    digest = hashlib.sha256("\n".join(l for l in version if not l.startswith("Picked up")).encode())
    # the folder as the JVM's class path names it: an archive made under another Spark home does not apply
    jars = spark_home() / "jars"
    digest.update(f"{jars}\n".encode())
    for jar in sorted(jars.glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return cache_root() / f"spark-classes-{digest.hexdigest()[:16]}.jsa"


def ensure() -> Path | None:
    """The archive's path, made first when missing; None when the job that makes it failed (reported on stderr)."""
    path = archive_path()
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=path.parent)) / "classes.jsa"
    try:
        # The JVM writes the archive as it exits, which it does when the job's Python process has exited (PySpark's
        # gateway JVM watches its standard input). It inherits the job's standard output, so `run` returns once
        # the JVM has exited too: then the archive is whole.
        done = subprocess.run([sys.executable, "-c", _JOB, str(partial)], capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not partial.exists():
            print(f"tests/jvm_archive: no archive, Spark's JVMs start without it:\n{done.stderr[-2000:]}",
                  file=sys.stderr)
            return None
        partial.replace(path)  # atomic: a concurrent run sees the whole archive or none
        return path
    finally:
        partial.unlink(missing_ok=True)
        partial.parent.rmdir()


if __name__ == "__main__":
    made = ensure()
    if made is not None:
        print(f"-XX:SharedArchiveFile={made} {QUIET}")
