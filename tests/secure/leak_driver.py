"""Secured writes in a driver process of their own, for the test that searches what a run leaves behind for the
passwords: ``python -m tests.secure.leak_driver '<json>'`` with ``out`` (a folder: Spark's event log and the
checkpoints go there), ``kafka`` (the sink's ``kafka.*`` options), ``topic``, ``redis_url``, ``namespace`` and
``wrong_url`` (a Redis URL with a wrong password). Prints the streaming queries' plans and progress, and the
error of the write with the wrong password; logs at INFO (Spark) and DEBUG (Python, py4j at INFO) to stderr."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from connectors.redact import SPARK_REDACTION_REGEX
from connectors.session import local_session

#: what Spark hides in its plans, UI and event log: as impulse-load's session has it (Spark's default patterns and
#: the option names of this project's sinks that hold a secret without saying so)
REDACTION = {"spark.redaction.regex": SPARK_REDACTION_REGEX}


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    out = Path(args["out"])
    (out / "events").mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.INFO)  # every py4j call, arguments included: noise, no secret
    spark = local_session("local[2]", "leak-driver", **REDACTION, **{
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": (out / "events").as_uri(),
        "spark.eventLog.compress": "false",  # searched as text by the test
        "spark.sql.shuffle.partitions": 2})
    spark.sparkContext.setLogLevel("INFO")
    events = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("startTime", "0")
              .option("limit", 200).option("numPartitions", 2).load())
    targets = {"kafka-sink": {**args["kafka"], "topic": args["topic"]},
               "redis-sink": {"url": args["redis_url"], "target": "list", "keyPrefix": f"{args['namespace']}:",
                              "commitKeyPrefix": f"commit:{args['namespace']}:"}}
    for name, options in targets.items():
        query = (events.writeStream.format(name).options(**options)
                 .option("checkpointLocation", str(out / f"ck-{name}")).trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None, query.exception()
        query.explain(extended=True)
        print(json.dumps(query.lastProgress, default=str))
        batch = spark.range(10).selectExpr("id AS subtask_index", "id AS counter")
        batch.write.format(name).mode("append").options(**options).option("commitId", f"batch-{name}").save()
    try:
        (events.writeStream.format("redis-sink").options(**{**targets["redis-sink"], "url": args["wrong_url"]})
         .option("checkpointLocation", str(out / "ck-wrong")).trigger(availableNow=True).start().awaitTermination())
    except Exception as exc:  # noqa: BLE001 - the failure is what is printed
        print(f"the write with the wrong password failed: {exc}")
    else:
        raise AssertionError("the write with the wrong password did not fail")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
