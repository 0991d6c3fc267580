"""A CDC pipeline in its own driver process, for the SIGKILL test: Spark's Kafka source reads a Debezium topic
(debezium-json, with the schema/payload wrapper), ``from_json`` with Debezium's envelope schema, and the user's
``foreachBatch`` MERGEs each micro-batch into a Redis hash: per key the batch's last change (by ``source.pos``),
its ``after`` as JSON (HSET) or, for a delete, the field's removal (HDEL), in one MULTI/EXEC. A replayed batch
applies the same last changes again, so a restart from the checkpoint leaves the same table.

``python -m tests.sinks.cdc_merge_driver '<json: bootstrap, topic, url, hash, checkpoint, perTrigger, package>'``
runs it until the topic's end (availableNow), with Spark's Kafka connector at the coordinates `package`
(`connectors.session.kafka_package`, decided once by the test for both of its driver runs)."""

from __future__ import annotations

import json
import sys

import redis
from pyspark.sql import Window
from pyspark.sql import functions as F

from connectors.session import local_session
from tests.sinks.debezium_readback import PAYLOAD


def merge_into(url: str, hash_key: str):
    """The foreachBatch function: the batch's Kafka records → each key's last change applied to `hash_key`."""
    def merge(batch, batch_id: int) -> None:
        changes = (batch.where("value IS NOT NULL")   # tombstones follow deletes: nothing more to apply
                   .select(F.from_json(F.col("key").cast("string"), "payload STRUCT<id BIGINT>").alias("k"),
                           F.from_json(F.col("value").cast("string"), f"payload STRUCT<{PAYLOAD}>").alias("v"))
                   .select(F.col("k.payload.id").alias("id"), "v.payload.*"))
        last = Window.partitionBy("id").orderBy(F.col("source.pos").desc())
        rows = (changes.withColumn("n", F.row_number().over(last)).where("n = 1")
                .select("id", "op", F.to_json("after").alias("after")).collect())
        with redis.Redis.from_url(url) as client:
            pipe = client.pipeline(transaction=True)
            for row in rows:
                if row.op == "d":
                    pipe.hdel(hash_key, str(row.id))
                else:
                    pipe.hset(hash_key, str(row.id), row.after)
            pipe.execute()
    return merge


def start(spark, args: dict):
    """Start the pipeline (availableNow, at most `perTrigger` records a micro-batch) and return the query."""
    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args["bootstrap"])
            .option("subscribe", args["topic"]).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", args["perTrigger"]).load()
            .writeStream.foreachBatch(merge_into(args["url"], args["hash"]))
            .option("checkpointLocation", args["checkpoint"]).trigger(availableNow=True).start())


def main(argv: list[str]) -> int:
    args = json.loads(argv[0])
    spark = local_session("local[2]", "cdc-merge-driver", **{"spark.sql.shuffle.partitions": 2,
                                                             "spark.jars.packages": args["package"]})
    start(spark, args).awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
