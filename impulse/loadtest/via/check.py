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
- the delivered rows are the target's (`impulse.loadtest.check.readback.readback`), or for Spark's ``kafka`` sink the
  ``value`` of every committed record of the output topic after the run's starting offsets, compared with the
  expected rows rendered the way the pipeline writes them (`impulse.loadtest.via.kafka` drops the input's
  ``topic`` / ``partition`` and makes the row a JSON ``value``).

As in the direct topology the way the expected answer is computed is decided before the load
(`via_expectation`, `impulse.loadtest.check.judge.Expectation`): ``--expect``'s rows over the bounded input above;
else, for a transform Spark refuses on a batch DataFrame (an operator it runs on streams only), the transform
over Spark's Kafka source reading the input topic from the offsets the pipeline started from (decoded with
``--decode``, without the pacing options ``maxOffsetsPerTrigger`` …) as ONE micro-batch
(`impulse.loadtest.check.stream_twin.one_micro_batch`); else the transform over the bounded input (`run_via_check`).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping, Sequence

from pyspark.sql import functions as F

from impulse.answer import CheckResult
from impulse.loadtest.check.expect import answer as expect_answer
from impulse.loadtest.check.expect import resolve
from impulse.loadtest.check.judge import Expectation, batch_events, judge, probe
from impulse.loadtest.check.readback import Readback, readback
from impulse.loadtest.check.stream_twin import one_micro_batch
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.units import LoadError
from impulse.loadtest.settings.via import Via
from impulse.loadtest.via.output_latency import read_output
from impulse.loadtest.via.watch import committed_ends

__all__ = ["as_records", "decode", "OutputTopicReadback", "via_readback", "expected_input", "via_expectation",
           "run_via_check"]

_PACING = ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay")
_STREAM_ONLY = _PACING + ("startingoffsets", "startingtimestamp", "startingoffsetsbytimestamp")


def as_records(events):
    """`events` as the producer's Kafka records: ``value`` = the event as a JSON object, ``timestamp`` = its own."""
    return events.select(F.to_json(F.struct(*[F.col(c) for c in events.columns])).alias("value"), F.col("timestamp"))


def decode(records, schema):
    """The events parsed back from records' JSON ``value`` (``from_json`` with `schema`: its columns)."""
    return records.select(F.from_json(F.col("value").cast("string"), schema).alias("event")).select("event.*")


class OutputTopicReadback(Readback):
    """Spark's ``kafka`` sink: the ``value`` of every committed record of the output topic after `start`."""

    raw = True

    def __init__(self, client: Mapping[str, str], topic: str, start: Mapping[int, int]) -> None:
        self.client, self.topic, self.start = dict(client), topic, dict(start)

    def describe(self) -> str:
        return f"the record values of topic {self.topic!r}"

    def values(self) -> list[bytes]:
        return [v or b"" for v in read_output(self.client, self.topic, self.start).values]


def via_readback(config: LoadConfig, sink_options: Mapping[str, str], mode: str, receiver=None) -> Readback | None:
    """How the pipeline's target is read back (None for Spark's ``kafka`` sink: `OutputTopicReadback` once the
    output topic's starting offsets are known), or through the user's ``--check-read`` (a ``--foreach-batch`` target,
    ``--check-key`` its key); `LoadError` before any load when it cannot be."""
    if config.sink == "kafka":
        if mode != "append":
            raise LoadError(f"--check of output mode {mode} with --sink kafka: a topic keeps every update, not the "
                            "final state per key; use append, or redis-sink with keyColumn")
        return None
    return readback(config.sink, sink_options, mode, receiver, check_read=config.check_read,
                    check_key=config.check_key)


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
    return _batch_input(spark, via, _offsets(via, input_start), _offsets(via, input_end))


def _offsets(via: Via, offsets: Mapping[int, int]) -> str:
    return json.dumps({via.topic: {str(p): o for p, o in sorted(offsets.items())}})


def _batch_input(spark, via: Via, starting: str, ending: str):
    """Spark's batch Kafka read of the input topic from `starting` to `ending` (its option values)."""
    options = {k: v for k, v in via.source_options({}).items() if k.lower() not in _STREAM_ONLY}
    return spark.read.format("kafka").options(**options, startingOffsets=starting, endingOffsets=ending).load()


def _stream_input(spark, via: Via, input_start: Mapping[int, int], decode_schema):
    """The pipeline's input again, as a stream without its pacing: the input topic from `input_start`, decoded with
    `decode_schema` (``--decode``); once the run is over ``availableNow`` reads all of it in one micro-batch."""
    options = {k: v for k, v in via.source_options(input_start).items() if k.lower() not in _PACING}
    frame = spark.readStream.format("kafka").options(**options).load()
    return frame if decode_schema is None else decode(frame, decode_schema)


def _label(config: LoadConfig) -> str:
    """The pipeline's query, for messages."""
    return (f"--transform {config.transform}" if config.transform is not None
            else f"--sql {config.sql}" if config.sql is not None else "the pipeline's transform")


def via_expectation(spark, config: LoadConfig, via: Via, transform: Callable[[Any], Any] | None,
                    producer_options: Mapping[str, str], *, decode_schema, read_schema) -> Expectation:
    """Before the load (`impulse.loadtest.check.judge.expectation` for the Kafka topology): ``--expect`` imported, or
    else whether the pipeline's `transform` (DataFrame → DataFrame) holds an operator Spark runs on streams only,
    found by planning it over a batch of the input it will read: with `decode_schema` impulse events with the
    producer's options (`read_schema`: the run's ``--schema``) encoded and decoded, else the input topic."""
    oracle = resolve(spark, config.expect)
    if oracle is not None:
        return Expectation(oracle=oracle)
    if transform is None:
        return Expectation()
    if decode_schema is not None:
        events = decode(as_records(batch_events(spark, "impulse", producer_options, time.time_ns() // 1_000,
                                                read_schema)), decode_schema)
    else:
        events = _batch_input(spark, via, "earliest", "latest")
    return Expectation(operator=probe(transform(events), _label(config)))


def run_via_check(spark, via: Via, transform: Callable[[Any], Any] | None, expected: Expectation, reader: Readback,
                  mode: str, *, rule: str | None, watermark: str | None, render: Callable[[Any], Any],
                  decode_schema, read_schema, runs: list[tuple[Mapping[str, str], int]],
                  input_start: Mapping[int, int], unique: Sequence[str] = ()) -> CheckResult:
    """After the run: the expected answer, computed the way `expected` says (module docstring), against the target
    (`reader`), by `impulse.loadtest.check.judge` in output mode `mode` with the finality `rule` under the
    pipeline's last `watermark`, the expected rows put in the sink's shape by `render`. `decode_schema`,
    `read_schema`, `runs`, `input_start`: as for `expected_input` (its end: the topic's committed end now).
    `unique`: ``--check-unique``'s key columns (`impulse.loadtest.check.unique`)."""
    said = expected.describe()
    if expected.operator is not None:
        stream = _stream_input(spark, via, input_start, decode_schema)
        with one_micro_batch(spark, transform(stream), mode) as answer:
            return judge(spark, answer, reader, mode, rule, watermark, render=render, answered_by=said, unique=unique)
    events = expected_input(spark, via, decode_schema=decode_schema, read_schema=read_schema, runs=runs,
                            input_start=input_start, input_end=committed_ends(via.client_config, via.topic))
    if expected.oracle is not None:
        output = transform(events) if transform is not None else events
        answer = expect_answer(spark, expected.oracle, events, output.schema)
    else:
        answer = transform(events) if transform is not None else events
    return judge(spark, answer, reader, mode, rule, watermark, render=render, answered_by=said, unique=unique)

