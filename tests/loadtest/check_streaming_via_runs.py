"""``--check`` through Kafka of a query Spark runs on streams only, and ``--expect`` through Kafka, for
``test_check_streaming.py``, in a process of their own (Spark's Kafka connector needs a session started with it):
``python -m tests.loadtest.check_streaming_via_runs BOOTSTRAP OUT.json``.

Each run writes its check and the records of its output topic into OUT.json, one object per run name.
"""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import replace

from connectors.kafka_topics import read_topic
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.via.kafka import run_via_kafka
from impulse.session import make_session
from tests.loadtest import pipelines


def pairs_once_of_records(records):
    """`pipelines.pairs_once` on the Kafka source's columns (no ``--decode``): each key ``counter DIV 2`` of the
    records' JSON values once, within a 5-second watermark on the records' timestamps (the scheduled times)."""
    from pyspark.sql import functions as F

    counter = F.get_json_object(F.col("value").cast("string"), "$.counter").cast("bigint")
    return (records.withColumn("k", F.floor(counter / 2)).withWatermark("timestamp", "5 seconds")
            .dropDuplicatesWithinWatermark(["k"]).select("k"))


def runs(bootstrap: str) -> dict:
    """name → (config, transform)."""
    def config(name: str, **more) -> LoadConfig:
        suffix = uuid.uuid4().hex[:8]
        return LoadConfig(sink="kafka-sink", options={"kafka.bootstrap.servers": bootstrap,
                                                      "topic": f"{name}-out-{suffix}"},
                          via=f"kafka://{bootstrap}/{name}-in-{suffix}", create_topic=2, partitions=2, rate=400,
                          duration_s=4, trigger="500ms", payload_bytes=16, warmup=False, check=True, **more)

    return {
        "dedup": (config("dedup", decode=True), pipelines.pairs_once),
        "records": (config("records"), pairs_once_of_records),
        "expect": (config("expect", decode=True, expect="tests.loadtest.pipelines:in_kilometres_expected"),
                   pipelines.in_kilometres),
    }


def main(argv: list[str]) -> None:
    bootstrap, out = argv
    spark = make_session("local[4]", "check-streaming-via-tests", kafka=True)
    results = {}
    for name, (config, transform) in runs(bootstrap).items():
        result = run_via_kafka(replace(config, warmup=not results), transform=transform, output_mode="append",
                               spark=spark)
        results[name] = {
            "summary": result.summary(), "check": result.check.to_json() if result.check is not None else None,
            "basis": result.check.basis if result.check is not None else None,
            "output": [json.loads(m.value()) for m in read_topic({"bootstrap.servers": bootstrap},
                                                                 config.options["topic"])],
        }
        with open(out, "w") as sink:
            json.dump(results, sink)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
