"""The driver tests/loadtest/test_crash.py SIGKILLs: a streaming query impulse → ``evens`` → a Spark target on a
checkpoint, and after its rerun ``--check``'s comparison (`impulse.loadtest.check.judge.judge`) of the target.

    python -m tests.loadtest.crash_child run SPEC.json      # run the query on the checkpoint until every event is in
    python -m tests.loadtest.crash_child finish SPEC.json   # the same, then print the check's result as JSON

SPEC.json: ``sink`` (``parquet``, ``delta`` or ``foreachBatch``), ``target`` (the path), ``checkpoint``, ``rate``,
``events``, ``writer`` (``--foreach-batch``'s MODULE:FUNCTION), ``reader`` (``--check-read``'s), ``packages`` and
``ivy``. The first run adds ``start_us``, the schedule's start once its session is up, pinned for the rerun and the
check so that all see the same events.
"""

from __future__ import annotations

import json
import sys
import time

from connectors.session import local_session
from impulse.loadtest.check.judge import batch_events, judge
from impulse.loadtest.check.spark_target import CheckRead, SparkTarget
from impulse.loadtest.query.transform import function_of, load
from impulse.loadtest.settings import delta
from impulse.loadtest.settings.units import iso_us
from tests.loadtest.pipelines import evens


def _session(spec: dict):
    conf = delta.session_settings([spec["sink"]], {}) if spec.get("packages") else {}
    if spec.get("packages"):
        conf = {**conf, "spark.jars.packages": spec["packages"], "spark.jars.ivy": spec["ivy"]}
    return local_session("local[2]", "crash-child", **{"spark.sql.shuffle.partitions": 2, **conf})


def _options(spec: dict) -> dict[str, str]:
    """The source's options: at most a tenth of the events a micro-batch, so that a kill after the first commit
    is mid-run however late the query started (the check's batch read drops ``maxEventsPerTrigger``)."""
    return {"eventsPerSecond": str(spec["rate"]), "numPartitions": "2", "limit": str(spec["events"]),
            "startTime": iso_us(spec["start_us"]), "maxEventsPerTrigger": str(spec["events"] // 10)}


def run(spec: dict, spark) -> None:
    """The query on `spec`'s checkpoint (resumed if it holds one) until the schedule has passed and every event
    it made is written."""
    events = spark.readStream.format("impulse").options(**_options(spec)).load()
    writer = evens(events).writeStream.option("checkpointLocation", spec["checkpoint"]).trigger(
        processingTime="300 milliseconds")
    if spec["sink"] == "foreachBatch":
        writer = writer.foreachBatch(load(spark, function_of(spec["writer"], "--foreach-batch", "m:f")).function)
    else:
        writer = writer.format(spec["sink"]).option("path", spec["target"])
    query = writer.start()
    end_s = spec["start_us"] / 1e6 + spec["events"] / spec["rate"] + 1
    while time.time() < end_s and query.isActive:   # the schedule's last event is made only once its time came
        query.awaitTermination(0.2)
    query.processAllAvailable()
    query.stop()


def check(spec: dict, spark) -> None:
    """``--check``'s comparison of the target with every event's expected row, printed as one JSON line."""
    answer = evens(batch_events(spark, "impulse", _options(spec), spec["start_us"]))
    reader = (CheckRead(spec["reader"]) if spec["sink"] == "foreachBatch"
              else SparkTarget(spec["sink"], {"path": spec["target"]}))
    result = judge(spark, answer, reader, "append", None, None)
    print(json.dumps({"passed": result.passed, "expected": result.expected, "delivered": result.delivered,
                      "lost": result.lost, "duplicated": result.duplicated, "unexpected": result.unexpected}))


def main(mode: str, spec_path: str) -> None:
    with open(spec_path) as file:
        spec = json.load(file)
    spark = _session(spec)
    if "start_us" not in spec:
        spec["start_us"] = time.time_ns() // 1_000 + 1_000_000
        with open(spec_path, "w") as file:
            json.dump(spec, file)
    run(spec, spark)
    if mode == "finish":
        check(spec, spark)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
