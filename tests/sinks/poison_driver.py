"""A streaming query of impulse events into a sink, in its own driver process, for the poison-record SIGKILL tests:
``python -m tests.sinks.poison_driver '<json: format, options, rows, perTrigger, checkpoint>'`` runs it until it
ends. The frame has the impulse columns and ``lane`` (``counter % 10``), the key the tests route refused rows by."""

from __future__ import annotations

import json
import sys

LANES = 10


def start(spark, sink_format: str, options: dict[str, str], rows: int, per_trigger: int, checkpoint: str):
    """Start the query (availableNow, 2 source partitions) and return it."""
    from pyspark.sql import functions as F

    frame = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("numPartitions", 2)
             .option("startTime", "0").option("limit", rows).option("maxEventsPerTrigger", per_trigger).load()
             .withColumn("lane", F.col("counter") % LANES))
    writer = frame.writeStream.format(sink_format).option("checkpointLocation", checkpoint)
    for name, value in options.items():
        writer = writer.option(name, value)
    return writer.trigger(availableNow=True).start()


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    from connectors.session import local_session

    spark = local_session("local[2]", "poison-driver")
    start(spark, args["format"], args["options"], args["rows"], args["perTrigger"], args["checkpoint"]).awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
