"""A streaming query of impulse events into a sink, in its own driver process, for the poison-record SIGKILL tests:
``python -m tests.sinks.poison_driver '<json: format, options, rows, perTrigger, checkpoint[, columns]>'`` runs it
until it ends. The frame has the impulse columns and ``lane`` (``counter % 10``), the key the tests route refused
rows by, or ``columns`` (SQL expressions over those) when given. `kill_mid_batch` runs it and SIGKILLs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pyspark.sql import functions as F

from connectors.conformance.harness import kill_tree
from connectors.session import local_session
from tests.impulse.helpers import checkpoint_offsets, committed_batches, poll

LANES = 10


def start(spark, sink_format: str, options: dict[str, str], rows: int, per_trigger: int, checkpoint: str,
          columns: list[str] | None = None):
    """Start the query (availableNow, 2 source partitions) and return it."""
    frame = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("numPartitions", 2)
             .option("startTime", "0").option("limit", rows).option("maxEventsPerTrigger", per_trigger).load()
             .withColumn("lane", F.col("counter") % LANES))
    if columns:
        frame = frame.selectExpr(*columns)
    writer = frame.writeStream.format(sink_format).option("checkpointLocation", checkpoint)
    for name, value in options.items():
        writer = writer.option(name, value)
    return writer.trigger(availableNow=True).start()


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    spark = local_session("local[2]", "poison-driver")
    start(spark, args["format"], args["options"], args["rows"], args["perTrigger"], args["checkpoint"],
          args.get("columns")).awaitTermination()
    return 0


def kill_mid_batch(args: dict) -> None:
    """Run this driver with `args` and SIGKILL it mid-batch (`kill_driver_mid_batch`)."""
    kill_driver_mid_batch([sys.executable, "-m", "tests.sinks.poison_driver", json.dumps(args)],
                          Path(args["checkpoint"]), -(-args["rows"] // args["perTrigger"]))


def kill_driver_mid_batch(command: list[str], checkpoint: Path, batches: int, cwd: Path | None = None) -> None:
    """Run a streaming driver (`command`, writing its checkpoint to `checkpoint`) and SIGKILL it, with its Python
    workers, while a batch is planned but not committed, after at least two committed ones; fails if it ended
    first or the kill came after the last of its `batches`."""
    process = subprocess.Popen(command, cwd=cwd, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        poll(lambda: process.poll() is not None or (
            len(committed_batches(checkpoint)) >= 2
            and len(checkpoint_offsets(checkpoint)) > len(committed_batches(checkpoint))),
             timeout=240, interval=0.01, what="a batch in flight after two committed")
        assert process.poll() is None, f"the driver ended early: {process.stderr.read().decode()[-2000:]}"
    finally:
        kill_tree(process.pid)
        process.wait(30)
    assert len(committed_batches(checkpoint)) < batches, "the kill came after the last batch"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
