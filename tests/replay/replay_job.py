"""A replay query in its own Spark application, killed by the test: ``python replay_job.py RECORDING CHECKPOINT OUT``.

It streams the recording into parquet files at `OUT` (checkpoint `CHECKPOINT`) until it is killed.
"""

from __future__ import annotations

import sys

from connectors.session import local_session
from tests.replay.test_replay import stream


def main(recording: str, checkpoint: str, out: str) -> None:
    spark = local_session("local[2]", "replay-kill", **{"spark.sql.shuffle.partitions": 2})
    stream(spark, recording, checkpoint, out).awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:4])
