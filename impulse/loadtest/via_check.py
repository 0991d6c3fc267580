"""``--check`` through Kafka: the expected answer of the Kafka topology's pipeline, and its target read back.

The comparison is `impulse.loadtest.check.judge`'s, as in the direct topology; what differs is the answer's input
and how a Spark ``kafka`` sink is read back:

- with ``--decode`` the pipeline's transform sees the events parsed back from the records' JSON values, so the
  expected answer is the transform over a batch read of the producer's events (``startTime`` pinned to the run's
  schedule start; with ``--prefill`` the prefill's events too, which the pipeline reads first) passed through
  the same JSON encoding and decoding (`as_records`, `decode`: JSON keeps timestamps to the millisecond);
- without it the transform sees the Kafka source's columns, so the expected answer is the transform over a batch
  ``spark.read.format("kafka")`` of the input topic between the offsets the pipeline started from and the ends
  committed when the run ended (``read_committed``);
- the delivered rows are the target's (`impulse.loadtest.check.readback`), or for Spark's ``kafka`` sink the
  ``value`` of every committed record of the output topic after the run's starting offsets, compared with the
  expected rows rendered the way the pipeline writes them (`impulse.loadtest.via_kafka` drops the input's
  ``topic`` / ``partition`` and makes the row a JSON ``value``).
"""

from __future__ import annotations

import json
from typing import Mapping

from impulse.loadtest.check import Readback, batch_events, readback
from impulse.loadtest.config import LoadConfig
from impulse.loadtest.units import LoadError
from impulse.loadtest.via_options import Via

__all__ = ["as_records", "decode", "OutputTopicReadback", "via_readback", "expected_input"]

_STREAM_ONLY = ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay", "startingoffsets",
                "startingtimestamp", "startingoffsetsbytimestamp")


def as_records(events):
    """`events` as the producer's Kafka records: ``value`` = the event as a JSON object, ``timestamp`` = its own."""
    from pyspark.sql import functions as F

    return events.select(F.to_json(F.struct(*[F.col(c) for c in events.columns])).alias("value"), F.col("timestamp"))


def decode(records, schema):
    """The events parsed back from records' JSON ``value`` (``from_json`` with `schema`: its columns)."""
    from pyspark.sql import functions as F

    return records.select(F.from_json(F.col("value").cast("string"), schema).alias("event")).select("event.*")


class OutputTopicReadback(Readback):
    """Spark's ``kafka`` sink: the ``value`` of every committed record of the output topic after `start`."""

    raw = True

    def __init__(self, client: Mapping[str, str], topic: str, start: Mapping[int, int]) -> None:
        self.client, self.topic, self.start = dict(client), topic, dict(start)

    def describe(self) -> str:
        return f"the record values of topic {self.topic!r}"

    def values(self) -> list[bytes]:
        from impulse.loadtest.output_latency import read_output

        return [v or b"" for v in read_output(self.client, self.topic, self.start).values]


def via_readback(config: LoadConfig, sink_options: Mapping[str, str], mode: str, receiver=None) -> Readback | None:
    """How the pipeline's target is read back (None for Spark's ``kafka`` sink: `OutputTopicReadback` once the
    output topic's starting offsets are known); `LoadError` before any load when it cannot be."""
    if config.sink == "kafka":
        if mode != "append":
            raise LoadError(f"--check of output mode {mode} with --sink kafka: a topic keeps every update, not the "
                            "final state per key; use append, or redis-sink with keyColumn")
        return None
    return readback(config.sink, sink_options, mode, receiver)


def expected_input(spark, via: Via, *, decode_schema, read_schema, runs: list[tuple[Mapping[str, str], int]],
                   input_start: Mapping[int, int], input_end: Mapping[int, int]):
    """The bounded input the pipeline read (module docstring): with `decode_schema`, the events of `runs` (each
    (impulse options, schedule start µs), read with `read_schema`, the run's ``--schema`` or None) encoded and
    decoded; else the input topic from `input_start` to `input_end` (``{partition: offset}``) as Spark's Kafka
    source gives it."""
    if decode_schema is not None:
        frames = [decode(as_records(batch_events(spark, "impulse", options, start_us, read_schema)), decode_schema)
                  for options, start_us in runs]
        out = frames[0]
        for frame in frames[1:]:
            out = out.unionByName(frame)
        return out
    options = {k: v for k, v in via.source_options(input_start).items() if k.lower() not in _STREAM_ONLY}
    topic = via.topic
    options["startingOffsets"] = json.dumps({topic: {str(p): o for p, o in sorted(input_start.items())}})
    options["endingOffsets"] = json.dumps({topic: {str(p): o for p, o in sorted(input_end.items())}})
    return spark.read.format("kafka").options(**options).load()

