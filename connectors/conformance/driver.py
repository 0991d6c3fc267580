"""A streaming query in its own driver process, for the conformance suite's kill test.

``python -m connectors.conformance.driver '<json>'`` with keys format, options, checkpoint, limit,
per_trigger, partitions, columns (SQL expressions added to impulse's rows, optional) and data_source (``"module:Class"`` of the sink, registered before the query:
a sink outside this project's registry works too): impulse → the sink with a 100 ms processing-time
trigger, until killed or the limit is reached.
"""

from __future__ import annotations

import json
import sys

from connectors.registry import load
from connectors.session import local_session


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    spark = local_session("local[2]", "conformance-driver")
    if args.get("data_source"):
        spark.dataSource.register(load(args["data_source"]))
    frame = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000)
             .option("numPartitions", args["partitions"]).option("startTime", "0").option("limit", args["limit"])
             .option("maxEventsPerTrigger", args["per_trigger"]).load())
    if args.get("columns"):
        frame = frame.selectExpr("*", *args["columns"])
    query = (frame.writeStream.format(args["format"]).options(**args["options"])
             .option("checkpointLocation", args["checkpoint"]).trigger(processingTime="100 milliseconds").start())
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
