"""``--sink delta``: Delta Lake's session settings, which the harness sets itself, and the probe that refuses a Delta
that cannot run on the session's Spark before any load.

Delta needs three things on the session: its jars (``--packages io.delta:delta-spark_2.13:VERSION``, the release
built for the session's Spark; the harness does not pick one), its SQL extension and its catalog. `session_settings`
adds the last two to ``--conf``'s settings when a scenario writes Delta (``--sink delta``) or Delta's jars are given
(``--packages io.delta:delta-spark…``, e.g. for a ``--foreach-batch`` function that MERGEs into a Delta table):
Delta's extension beside any the user gave, its catalog unless the user gave ``spark.sql.catalog.spark_catalog``. A
session already running without them (the harness called in a process that has one) is refused by
`refuse_unapplied`. It also sets ``spark.databricks.delta.snapshotPartitions`` (unless given) to the session's
shuffle partitions, as the harness sets those: Delta rebuilds the table's state after each commit in 50 tasks by
default, which on ``local[2]`` made a micro-batch of 200 rows take 20 s instead of 2.

`probe` writes one row to a Delta table in a temporary folder and reads it back, on the session, before the load:
a Delta that is missing, or built for another Spark (Delta 4.4.0 on Spark 4.3 fails its first read with a
``NoSuchMethodError``), raises `LoadError` naming ``--sink delta`` with Spark's reason and what to do. Over Spark
Connect the folder would be the client's, not the server's: no probe, the server finds out when the query starts.
"""

from __future__ import annotations

import tempfile
from typing import Iterable, Mapping

from impulse.loadtest.settings.units import LoadError
from impulse.session import SHUFFLE_PARTITIONS, is_remote

__all__ = ["FORMAT", "EXTENSION", "CATALOG", "PACKAGE_EXAMPLE", "session_settings", "refuse_unapplied", "probe"]

FORMAT = "delta"
EXTENSIONS_KEY = "spark.sql.extensions"
EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG_KEY = "spark.sql.catalog.spark_catalog"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
SNAPSHOT_PARTITIONS_KEY = "spark.databricks.delta.snapshotPartitions"
#: the group and artifact of Delta's Spark jars (Scala 2.13), its Maven coordinates without the version
ARTIFACT = "io.delta:delta-spark_"
#: the coordinates of a Delta known to run here: Delta 4.4.0 is built for Spark 4.2
PACKAGE_EXAMPLE = "io.delta:delta-spark_2.13:4.4.0"

_BUILT_FOR_ANOTHER_SPARK = ("NoSuchMethodError", "NoSuchFieldError", "AbstractMethodError", "IncompatibleClassChange",
                            "NoClassDefFoundError")
_MISSING = ("DATA_SOURCE_NOT_FOUND", "ClassNotFoundException", "Failed to find the data source")


def session_settings(sinks: Iterable[str], conf: Mapping[str, str], packages: Iterable[str] = ()) -> dict[str, str]:
    """`conf` (``--conf``'s settings) with Delta's extension and catalog when one of `sinks` is ``delta`` or one of
    `packages` (Maven coordinates, comma-separated or not) is Delta's ``io.delta:delta-spark…``."""
    merged = {key: str(value) for key, value in conf.items()}
    coordinates = [c.strip() for text in packages for c in text.split(",")]
    if FORMAT not in set(sinks) and not any(c.startswith(ARTIFACT) for c in coordinates):
        return merged
    extensions = [e.strip() for e in merged.get(EXTENSIONS_KEY, "").split(",") if e.strip()]
    merged[EXTENSIONS_KEY] = ",".join(extensions if EXTENSION in extensions else [*extensions, EXTENSION])
    merged.setdefault(CATALOG_KEY, CATALOG)
    merged.setdefault(SNAPSHOT_PARTITIONS_KEY, merged.get("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS)))
    return merged


def refuse_unapplied(spark, settings: Mapping[str, str]) -> None:
    """`LoadError` naming ``--sink delta`` when `spark`, a session already running, lacks one of Delta's `settings`
    the harness added (`session_settings`): a static setting cannot change once the session runs (Delta's snapshot
    partitions, a runtime one, is set on it like any other)."""
    for key, value in settings.items():
        if key == SNAPSHOT_PARTITIONS_KEY:
            continue
        try:
            held = spark.conf.get(key, None) or ""
        except Exception:  # noqa: BLE001 - a setting the session cannot read counts as not held
            held = ""
        present = value in [e.strip() for e in held.split(",")] if key == EXTENSIONS_KEY else held == value
        if not present:
            raise LoadError(f"--sink delta: the Spark session was already running without Delta's {key}={value} (a "
                            "static setting cannot change once a session runs): run impulse-load in a new process")


def probe(spark) -> None:
    """Write and read one row of a Delta table in a temporary folder; `LoadError` naming ``--sink delta`` if Delta
    cannot run on `spark`."""
    if is_remote(spark):
        return
    with tempfile.TemporaryDirectory(prefix="impulse-delta-probe-") as folder:
        try:
            spark.range(1).write.format(FORMAT).mode("overwrite").save(folder)
            rows = spark.read.format(FORMAT).load(folder).count()
        except Exception as exc:  # noqa: BLE001 - the JVM's error, quoted in one line with what to do
            raise LoadError(_refusal(spark.version, _first_line(exc))) from None
    if rows != 1:
        raise LoadError(f"--sink delta: a probe table written with one row read back {rows} rows on Spark "
                        f"{spark.version}: this Delta does not work on this Spark")


def _refusal(version: str, reason: str) -> str:
    if any(word in reason for word in _MISSING):
        todo = (f"Delta is not on the session: give its jars with --packages io.delta:delta-spark_2.13:VERSION, the "
                f"Delta release built for Spark {version} (e.g. {PACKAGE_EXAMPLE} for Spark 4.2)")
    elif any(word in reason for word in _BUILT_FOR_ANOTHER_SPARK):
        todo = (f"the Delta given was built for another Spark: give the Delta release built for Spark {version} with "
                f"--packages (e.g. {PACKAGE_EXAMPLE} runs on Spark 4.2 only)")
    else:
        todo = "see Spark's reason"
    return f"--sink delta: Delta cannot run on this session's Spark {version} (a probe write and read failed: {reason}); {todo}"


def _first_line(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[0] if lines else type(exc).__name__
    return line if len(line) <= 300 else line[:300] + "…"
