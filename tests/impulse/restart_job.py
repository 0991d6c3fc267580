"""A restart from the checkpoint, in its own Spark application: ``python restart_job.py MASTER CHECKPOINT``.

Run by `test_cluster.py` on ``local-cluster[2,1,1024]`` (separate executor JVMs and Python workers),
which needs a SparkContext of its own. It runs a backfill to a limit, makes the last batch look
uncommitted, restarts with a higher limit, and prints one JSON line: every foreachBatch call's rows
(replays included), the offsets and which executors read them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from connectors.session import local_session

OPTIONS = {"delay": "1ms", "numPartitions": "4", "startTime": "0", "interval": "1ms", "payloadBytes": "24",
           "maxEventsPerTrigger": "200"}


def main(master: str, checkpoint: str) -> None:
    root = str(Path(__file__).resolve().parents[2])
    spark = local_session(master, "impulse-cluster-restart", **{
        "spark.executor.memory": "512m", "spark.executorEnv.PYTHONPATH": root,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable, "spark.sql.shuffle.partitions": 2})
    calls: dict[int, list] = {}

    def record(df, batch_id):
        got = df.selectExpr("counter", "subtask_index", "unix_micros(timestamp)", "hex(payload)").collect()
        calls.setdefault(batch_id, []).append(sorted(tuple(r) for r in got))

    def run(limit: int) -> None:
        query = (spark.readStream.format("impulse").options(**OPTIONS).option("limit", str(limit)).load()
                 .writeStream.foreachBatch(record).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        if query.exception() is not None:
            raise query.exception()

    run(1000)
    commits = sorted(int(p.name) for p in Path(checkpoint, "commits").iterdir() if p.name.isdigit())
    replayed = commits[-1]
    for name in (str(replayed), f".{replayed}.crc"):
        Path(checkpoint, "commits", name).unlink(missing_ok=True)
    run(2000)
    executors = spark.sparkContext._jsc.sc().getExecutorIds().size()
    offsets = {}
    for path in Path(checkpoint, "offsets").iterdir():
        if path.name.isdigit():
            offsets[int(path.name)] = json.loads(path.read_text().splitlines()[2])
    print("RESULT " + json.dumps({"calls": calls, "replayed": replayed, "offsets": offsets,
                                  "executors": executors, "pid": os.getpid()}))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
