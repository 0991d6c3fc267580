"""``--check``'s judgement: where the expected answer comes from (`Expectation`, decided before the load), the
answer computed after it (`run_check`), and the target's rows compared with it (`judge`).

The three ways to the expected answer, and what is compared in each output mode: `impulse.loadtest.check`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from impulse.answer import CheckResult, compare, final_rows, last_watermark, latest
from impulse.loadtest.check.expect import answer as expect_answer
from impulse.loadtest.check.expect import resolve
from impulse.loadtest.check.readback import Readback
from impulse.loadtest.check.spark_target import SparkReadable
from impulse.loadtest.check.stream_twin import one_micro_batch, streaming_only
from impulse.loadtest.check.unique import FLAG as UNIQUE_FLAG
from impulse.loadtest.check.unique import columns, repeats
from impulse.loadtest.query.transform import apply, build, connect_mode, final_after, reason, with_event_time
from impulse.loadtest.settings.units import LoadError, iso_us

__all__ = ["batch_events", "stream_events", "Expectation", "expectation", "probe",
           "expected_answer", "run_check", "judge"]


#: sources whose rows do not depend on when they are read: the twin reads every position of the run at once
_POSITIONAL = ("replay",)
_AT_ONCE = "1e15"  # events/s: the run's whole limit is due the first µs after the twin's own start


def _pinned(source: str, source_options: Mapping[str, str], schedule_start_us: int) -> dict[str, str]:
    """A run's source options with ``startTime`` pinned to `schedule_start_us` (µs since the epoch, UTC), without
    ``maxEventsPerTrigger`` (a streaming pace): every event of the run, each with its own time. A replay's rows are
    its recording's at each position, whenever read: its twin keeps the run's ``limit`` and reads them at once."""
    options = {k: v for k, v in source_options.items() if k.lower() != "maxeventspertrigger"}
    if source in _POSITIONAL:
        options["eventsPerSecond"] = _AT_ONCE
    else:
        options["startTime"] = iso_us(schedule_start_us)
    return options


def batch_events(spark, source: str, source_options: Mapping[str, str], schedule_start_us: int, schema=None):
    """A bounded batch read of a run's events: `source` with its options, ``startTime`` pinned to
    `schedule_start_us` (µs since the epoch, UTC), without ``maxEventsPerTrigger`` (a streaming pace)."""
    reader = spark.read.format(source).options(**_pinned(source, source_options, schedule_start_us))
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load()


def stream_events(spark, source: str, source_options: Mapping[str, str], schedule_start_us: int, schema=None):
    """The same events as `batch_events`, read as a stream: once the run is over every one is due, so a query with
    ``availableNow`` reads them all in one micro-batch."""
    reader = spark.readStream.format(source).options(**_pinned(source, source_options, schedule_start_us))
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load()


@dataclass(frozen=True)
class Expectation:
    """Where ``--check``'s expected answer comes from (`impulse.loadtest.check`), decided before the load: `oracle` (an
    `impulse.loadtest.check.expect.Oracle`): ``--expect``'s rows; else `operator` (what Spark runs on streams only):
    the query as one micro-batch; else the query's batch twin."""

    operator: str | None = None
    oracle: Any = None

    @property
    def way(self) -> str:
        """``expect``, ``stream`` or ``batch``."""
        return "expect" if self.oracle is not None else "stream" if self.operator is not None else "batch"

    def describe(self) -> str:
        """What the expected answer is, for the check's basis."""
        if self.oracle is not None:
            return f"the expected answer: {self.oracle.label}'s rows over a batch read of the same events"
        if self.operator is not None:
            return (f"the expected answer: the query run as one micro-batch over the same events (Spark runs "
                    f"{self.operator} on streams only)")
        return "the expected answer: the query over a batch read of the same events"


def expectation(spark, config, transform, source_options: Mapping[str, str], schema=None) -> Expectation:
    """Before the load, on the session: ``--expect`` imported (`impulse.loadtest.check.expect.resolve`), or else whether
    the transform's batch twin holds an operator Spark runs on streams only (`probe`). A Nexmark query is its
    own batch twin (or has its own answer); SQL has no streaming-only operator."""
    oracle = resolve(spark, config.expect)
    if oracle is not None:
        return Expectation(oracle=oracle)
    if transform is None or transform.function is None:
        return Expectation()
    events = batch_events(spark, config.source, source_options, time.time_ns() // 1_000, schema)
    return Expectation(operator=probe(build(spark, config, transform, events), transform.label))


def probe(batch_twin, label: str) -> str | None:
    """The operator Spark runs on streams only that `batch_twin` holds
    (`impulse.loadtest.check.stream_twin.streaming_only`), None without one; any other error Spark finds planning it is
    a `LoadError` naming `label`, as `impulse.loadtest.query.transform.apply` reports the stream's."""
    try:
        return streaming_only(batch_twin)
    except Exception as exc:  # noqa: BLE001 - not a streaming-only refusal (those are returned): quoted
        raise LoadError(f"{label}: Spark cannot run it over a batch read of the events (the check's expected "
                        f"answer): {reason(exc)}") from None


def expected_answer(spark, config, transform, source_options: Mapping[str, str], schedule_start_us: int, schema=None,
                    watermark: str | None = None):
    """The query over a bounded batch read of the run's events (`batch_events`); for a Nexmark query with its own
    batch answer (`Query.answer`), that answer under the stream's last `watermark`."""
    events = batch_events(spark, config.source, source_options, schedule_start_us, schema)
    q = transform.nexmark if transform is not None else None
    if q is not None and q.answer is not None:
        answer = q.answer(events, spark, watermark or "1970-01-01 00:00:00")
        return with_event_time(config, answer, type(spark).__module__.startswith("pyspark.sql.connect"))
    return build(spark, config, transform, events)


def run_check(spark, config, transform, mode: str, source_options: Mapping[str, str], schedule_start_us: int,
              query, reader: Readback, schema=None, expected: Expectation | None = None) -> CheckResult:
    """Read the target back (`reader`) and compare it with the expected answer computed the way `expected` says
    (default: the batch twin; `impulse.loadtest.check`)."""
    expected = expected or Expectation()
    unique = columns(config.check_unique)
    remote = type(spark).__module__.startswith("pyspark.sql.connect")
    with connect_mode(remote):
        watermark = last_watermark(query)
        q = transform.nexmark if transform is not None else None
        update = (q.key, q.latest_by) if q is not None and q.latest_by else None
        rule, said = final_after(config, transform), expected.describe()
        if expected.oracle is not None:
            events = batch_events(spark, config.source, source_options, schedule_start_us, schema)
            rows = expect_answer(spark, expected.oracle, events, apply(spark, transform, events).schema)
            return judge(spark, with_event_time(config, rows, remote), reader, mode, rule, watermark, update,
                         answered_by=said, unique=unique)
        if expected.operator is not None:
            events = stream_events(spark, config.source, source_options, schedule_start_us, schema)
            with one_micro_batch(spark, build(spark, config, transform, events), mode) as answer:
                return judge(spark, answer, reader, mode, rule, watermark, update, answered_by=said, unique=unique)
        answer = expected_answer(spark, config, transform, source_options, schedule_start_us, schema, watermark)
        if q is not None and q.answer is not None:  # its own answer is already the state under the watermark
            return judge(spark, answer, reader, mode, None, watermark, update,
                         basis=f"{mode}: {q.name}'s batch answer under the last watermark {watermark or 'none'}",
                         unique=unique)
        return judge(spark, answer, reader, mode, rule, watermark, update, answered_by=said, unique=unique)


def judge(spark, answer, reader: Readback, mode: str, rule: str | None, watermark: str | None,
          update: tuple[Sequence[str], str] | None = None, render=None, basis: str | None = None,
          answered_by: str = "", unique: Sequence[str] = ()) -> CheckResult:
    """The one comparison of ``--check``: the target's rows (`reader`) against `answer`, the expected answer.

    append: `answer`'s rows final under `watermark` by `rule` (`final_rows`); update / complete: the whole
    `answer`. `update` (key columns, SQL ordering): the delivered rows are an update stream, reduced to their
    final row per key (`latest`) before the comparison. `render`: the expected rows put in the shape the sink
    wrote (a DataFrame → DataFrame, e.g. the single ``value`` column Spark's ``kafka`` sink writes), applied
    after the finality rule; with a `reader` whose `raw` is set the delivered values are that ``value`` (so too
    with `value_column` for rows that have a string or binary ``value``: kafka-sink writes it as the record's value).
    `basis`: what the expected rows are, for the summary (default: said from `mode` and `rule`), followed by
    `answered_by` (how the expected answer was computed, `Expectation.describe`). `unique` (``--check-unique``'s
    columns): the delivered rows, as written (before any reduction per key), must also hold each value of these
    columns once (`impulse.loadtest.check.unique`); the rows beyond the first of a key are the result's
    `repeated`."""
    if mode == "append":
        expected = final_rows(answer, rule, watermark)
        basis = basis or (f"append: the rows with {rule} ≤ the last watermark {watermark or 'none'}, as a multiset" if rule
                 else "append: every row of the answer, as a multiset")
    else:
        expected = answer
        basis = basis or f"{mode}: the final state per key ({reader.describe()}) against the whole answer"
    if render is not None:
        expected = render(expected)
    raw = reader.raw or (reader.value_column and _has_value(expected.schema))
    if isinstance(reader, SparkReadable):
        delivered = reader.frame(spark, expected.schema)
    elif raw:
        expected = expected.select(F.col("value").cast("string").alias("value"))
        delivered = _binary_frame(spark, reader.values()).select(F.col("value").cast("string").alias("value"))
    else:
        delivered = parse_rows(spark, reader.values(), expected.schema)
    found = _unique(spark, reader, raw, expected.schema, delivered, unique) if unique else None
    if update is not None:
        delivered = latest(delivered, update[0], update[1])
        basis += f"; delivered rows reduced to the final row per {', '.join(update[0])}"
    if answered_by:
        basis += f"; {answered_by}"
    if found is None:
        return compare(expected, delivered, basis)
    result = compare(expected, delivered, basis + f"; and each ({', '.join(unique)}) once ({UNIQUE_FLAG})")
    return replace(result, unique=tuple(unique), repeated=found.extra,
                   examples={**result.examples, "repeated": found.examples})


def _has_value(schema) -> bool:
    """Whether rows of `schema` have a string or binary ``value`` column (a Kafka sink writes it as the value)."""
    return "value" in schema.fieldNames() and isinstance(schema["value"].dataType, (StringType, BinaryType))


def _unique(spark, reader: Readback, raw: bool, schema, delivered, unique: Sequence[str]):
    """`impulse.loadtest.check.unique.repeats` over the delivered rows as written (parsed as `schema` when the reader
    gives raw values)."""
    rows = parse_rows(spark, reader.values(), schema) if raw else delivered
    present = all(name in rows.columns for name in unique)
    return repeats(rows.select(*(unique if present else rows.columns)).toArrow(), tuple(unique))


def parse_rows(spark, values: Sequence[bytes], schema):
    """JSON rows (bytes) as a DataFrame of `schema` (unparsable rows: every column null)."""
    loose = StructType([StructField(f.name, f.dataType, True) for f in schema.fields])
    parsed = _binary_frame(spark, values).select(F.from_json(F.col("value").cast("string"), loose).alias("r"))
    return parsed.select(*[F.col(f"r.`{f.name}`").alias(f.name) for f in schema.fields])


def _binary_frame(spark, values: Sequence[bytes]):
    """`values` as a DataFrame of one binary column ``value``."""
    table = pa.table({"value": pa.array([bytes(v) for v in values], pa.binary())})
    return spark.createDataFrame(table) if len(values) else spark.createDataFrame([], "value binary")
