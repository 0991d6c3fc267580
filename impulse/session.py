"""The Spark session a command of impulse runs on (``impulse-load``, ``impulse-nexmark``), and where it runs.

`make_session` builds it: `connectors.session.local_session` (``local[*]`` by default, every project data source
registered) keeping 1 000 progress updates for the report, or with `remote` a Spark Connect client session (the
server runs the queries and the data sources). `deployment` names where a session runs, `describe` says it in one
line for the report.
"""

from __future__ import annotations

from typing import Mapping

from connectors import register_all
from connectors.redact import SPARK_REDACTION_REGEX
from connectors.session import local_session, spark_kafka_session

__all__ = ["SHUFFLE_PARTITIONS", "make_session", "harness_settings", "is_remote", "deployment", "describe"]

REDACTION = "spark.redaction.regex"
#: the harness's ``spark.sql.shuffle.partitions`` unless ``--conf`` gives it: Spark's 200 cost each stateful
#: micro-batch 200 tasks, which on a few local cores is most of its time
SHUFFLE_PARTITIONS = 2


def make_session(master: str = "local[*]", app_name: str = "impulse-load", remote: str | None = None,
                 kafka: bool = False, settings: Mapping[str, str] | None = None):
    """A Spark session for the harness (the active one if there is one: its settings then stay), with `settings`
    (Spark property → value) on top of the harness's own.

    With `kafka` (local sessions only) Spark's own Kafka connector is on its class path
    (`connectors.session.spark_kafka_session`): the production topology's pipeline reads Kafka with it.

    With `remote` (``sc://host:port``) a Spark Connect client session instead, `master` unused: the server
    must have this package where its Python workers run; the data sources are registered from here too.
    """
    if remote is None:
        conf = harness_settings(settings)
        if kafka:
            return spark_kafka_session(master, app_name, **conf)[0]
        return local_session(master, app_name, **conf)
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession  # noqa: PLC0415 - the connect extra (grpcio)

    spark = RemoteSparkSession.builder.remote(remote).create()
    given = settings or {}
    conf = {key: value for key, value in harness_settings(given).items() if key != REDACTION or key in given}
    for key, value in conf.items():  # session-level settings: a Connect client cannot change static ones
        spark.conf.set(key, str(value))
    register_all(spark)
    return spark


def harness_settings(settings: Mapping[str, str] | None = None) -> dict[str, object]:
    """The settings `make_session` builds a session with: the harness's own, then `settings` over them.

    The harness's own: `SHUFFLE_PARTITIONS` shuffle partitions, 1 000 progress updates kept, and ``spark.redaction.regex`` =
    `connectors.redact.SPARK_REDACTION_REGEX` (Spark's default pattern and the option names this project hides), so
    the Spark UI, event log, ``SET`` and plans hide a secret-looking option or setting Spark's default would show
    (a registry's ``basic.auth.user.info``, a JAAS config). A Spark Connect session cannot change it (a setting of
    the server's context): the server's own applies there, unless `settings` gives one.
    """
    return {"spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS, "spark.sql.streaming.numRecentProgressUpdates": 1000,
            REDACTION: SPARK_REDACTION_REGEX, **(settings or {})}


def is_remote(spark) -> bool:
    """Whether `spark` is a Spark Connect client session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def deployment(spark, remote: str | None = None) -> dict:
    """Where `spark` runs its queries: ``{"master", "remote", "executors", "cores"}``.

    Classic: the master URL, the executors besides the driver (0 on ``local[...]``) and the default
    parallelism. Spark Connect: `remote` (the URL the session was made with; its ``;token=…`` parameters
    left out) and the server's master; executors and cores are ``None``: a Connect client has no
    SparkContext to ask.
    """
    if is_remote(spark):
        return {"remote": remote.split(";")[0] if remote else None, "master": spark.conf.get("spark.master", None),
                "executors": None, "cores": None}
    context = spark.sparkContext
    return {"remote": None, "master": context.master, "executors": context._jsc.sc().getExecutorIds().size(),
            "cores": context.defaultParallelism}


def describe(where: dict) -> str:
    """One line for the report, e.g. ``master spark://127.0.0.1:7077, 2 executors, 2 cores``."""
    if where.get("remote"):
        return f"Spark Connect {where['remote']} (server master {where.get('master') or 'unknown'})"
    executors = where.get("executors")
    return (f"master {where.get('master')}, "
            + (f"{executors} executors" if executors else "driver only") + f", {where.get('cores')} cores")
