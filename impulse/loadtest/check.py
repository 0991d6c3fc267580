"""``--check``: the answer under load. The target is read back and compared with an expected answer.

The events are a pure function of the source options and the timeline, so the harness reads the same events
again (the run's options, ``startTime`` pinned to the run's schedule start) and computes the expected answer
from them, one of three ways, decided before the load (`expectation`; the summary and report.json's
``checkDetail.basis`` say which):

- the **batch twin**: the same transform (`impulse.loadtest.transform.build`) over ``spark.read`` of the
  events (`batch_events`);
- **one micro-batch**: for a transform Spark refuses on a batch DataFrame because it holds an operator Spark
  runs on streams only (``dropDuplicatesWithinWatermark``, ``applyInPandasWithState``), the same transform over
  ``spark.readStream`` of the events (`stream_events`) run as ONE micro-batch (`impulse.loadtest.stream_twin`):
  the answer the query gives when no event arrives late;
- ``--expect MODULE:FUNCTION``: the user's reference rows over the batch read (`impulse.loadtest.expect`).

Without ``--expect`` the check proves the stream equals the same query run as a batch (or as one micro-batch)
over the same events, so a logic bug present in both passes; with it, that the stream equals the user's own
answer. The expected answer is then compared with what the target holds:

- **append**: every row delivered, as a multiset, against the rows of the expected answer that are final under
  the stream's last watermark: with a finality rule (``--event-time-column COL``, or a Nexmark query's own), the
  rows whose rule value is ≤ that watermark (Spark appends a window once the watermark passed its end, so the
  windows still open when the run stopped are not expected); without one, every row (a filter, a projection, a
  join with a static table or an inner stream-stream join appends each row when its input arrives).
- **update / complete**: the final state per key, where the target keeps one row per key: redis-sink
  ``target=string`` with ``keyColumn``, or ``target=hash`` with ``fieldColumn``; the values held are compared,
  as a set of rows, with the whole expected answer. Other targets are refused before the load (exit 2). (Spark
  writes the project's sinks, Python data sources, in append or complete mode only: update is refused.)
- a Nexmark query with its own batch answer (``Query.answer``: q4, q6, q15, q16) is compared with that answer
  under the stream's last watermark; one with ``latest_by`` (an update stream, e.g. q6 in append mode) by its
  final state: the delivered rows reduced to the last row per ``key`` (`impulse.answer.latest`).

`judge` is the comparison itself, which the Kafka topology's check (`impulse.loadtest.via_check`) uses too.

Rows are compared as JSON (`impulse.answer.compare`, which impulse-nexmark's ``--check`` uses too): the target's
values (the sinks render each row with `connectors.rows.json_objects`) are parsed with the answer's schema; a row
the schema cannot parse is unexpected.

Targets that can be read back (`readback`; anything else exits 2 before the load): the embedded HTTP
receiver (webhook-sink without ``url``, NDJSON), redis-sink under a ``keyPrefix`` with the row as the value
(no ``valueColumn``), and kafka-sink (every record a ``read_committed`` consumer sees,
`connectors.kafka_topics.read_topic`). The target must hold nothing of the run's kind before it starts
(a fresh ``keyPrefix``, an empty topic): checked before the load.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit

from impulse.answer import CheckResult, compare, final_rows, last_watermark, latest
from impulse.loadtest.units import LoadError

__all__ = ["Readback", "readback", "batch_events", "stream_events", "Expectation", "expectation", "probe",
           "expected_answer", "run_check", "judge"]


def _pinned(source_options: Mapping[str, str], schedule_start_us: int) -> dict[str, str]:
    """A run's source options with ``startTime`` pinned to `schedule_start_us` (µs since the epoch, UTC), without
    ``maxEventsPerTrigger`` (a streaming pace): every event of the run, each with its own time."""
    start = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=schedule_start_us)
    options = {k: v for k, v in source_options.items() if k.lower() != "maxeventspertrigger"}
    options["startTime"] = start.isoformat()
    return options


def batch_events(spark, source: str, source_options: Mapping[str, str], schedule_start_us: int, schema=None):
    """A bounded batch read of a run's events: `source` with its options, ``startTime`` pinned to
    `schedule_start_us` (µs since the epoch, UTC), without ``maxEventsPerTrigger`` (a streaming pace)."""
    reader = spark.read.format(source).options(**_pinned(source_options, schedule_start_us))
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load()


def stream_events(spark, source: str, source_options: Mapping[str, str], schedule_start_us: int, schema=None):
    """The same events as `batch_events`, read as a stream: once the run is over every one is due, so a query with
    ``availableNow`` reads them all in one micro-batch."""
    reader = spark.readStream.format(source).options(**_pinned(source_options, schedule_start_us))
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load()


@dataclass(frozen=True)
class Expectation:
    """Where ``--check``'s expected answer comes from (module docstring), decided before the load: `oracle` (an
    `impulse.loadtest.expect.Oracle`): ``--expect``'s rows; else `operator` (what Spark runs on streams only):
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
    """Before the load, on the session: ``--expect`` imported (`impulse.loadtest.expect.resolve`), or else whether
    the transform's batch twin holds an operator Spark runs on streams only (`probe`). A Nexmark query is its
    own batch twin (or has its own answer); SQL has no streaming-only operator."""
    from impulse.loadtest.expect import resolve
    from impulse.loadtest.transform import build

    oracle = resolve(spark, config.expect)
    if oracle is not None:
        return Expectation(oracle=oracle)
    if transform is None or transform.function is None:
        return Expectation()
    events = batch_events(spark, config.source, source_options, time.time_ns() // 1_000, schema)
    return Expectation(operator=probe(build(spark, config, transform, events), transform.label))


def probe(batch_twin, label: str) -> str | None:
    """The operator Spark runs on streams only that `batch_twin` holds
    (`impulse.loadtest.stream_twin.streaming_only`), None without one; any other error Spark finds planning it is
    a `LoadError` naming `label`, as `impulse.loadtest.transform.apply` reports the stream's."""
    from impulse.loadtest.stream_twin import streaming_only
    from impulse.loadtest.transform import reason

    try:
        return streaming_only(batch_twin)
    except Exception as exc:  # noqa: BLE001 - not a streaming-only refusal (those are returned): quoted
        raise LoadError(f"{label}: Spark cannot run it over a batch read of the events (the check's expected "
                        f"answer): {reason(exc)}") from None


def expected_answer(spark, config, transform, source_options: Mapping[str, str], schedule_start_us: int, schema=None,
                    watermark: str | None = None):
    """The query over a bounded batch read of the run's events (`batch_events`); for a Nexmark query with its own
    batch answer (`Query.answer`), that answer under the stream's last `watermark`."""
    from impulse.loadtest.transform import build, with_event_time

    events = batch_events(spark, config.source, source_options, schedule_start_us, schema)
    q = transform.nexmark if transform is not None else None
    if q is not None and q.answer is not None:
        answer = q.answer(events, spark, watermark or "1970-01-01 00:00:00")
        return with_event_time(config, answer, type(spark).__module__.startswith("pyspark.sql.connect"))
    return build(spark, config, transform, events)


def run_check(spark, config, transform, mode: str, source_options: Mapping[str, str], schedule_start_us: int,
              query, reader: "Readback", schema=None, expected: Expectation | None = None) -> CheckResult:
    """Read the target back (`reader`) and compare it with the expected answer computed the way `expected` says
    (default: the batch twin; module docstring)."""
    from impulse.loadtest.expect import answer as expect_answer
    from impulse.loadtest.stream_twin import one_micro_batch
    from impulse.loadtest.transform import apply, build, connect_mode, final_after, with_event_time

    expected = expected or Expectation()
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
                         answered_by=said)
        if expected.operator is not None:
            events = stream_events(spark, config.source, source_options, schedule_start_us, schema)
            with one_micro_batch(spark, build(spark, config, transform, events), mode) as answer:
                return judge(spark, answer, reader, mode, rule, watermark, update, answered_by=said)
        answer = expected_answer(spark, config, transform, source_options, schedule_start_us, schema, watermark)
        if q is not None and q.answer is not None:  # its own answer is already the state under the watermark
            return judge(spark, answer, reader, mode, None, watermark, update,
                         basis=f"{mode}: {q.name}'s batch answer under the last watermark {watermark or 'none'}")
        return judge(spark, answer, reader, mode, rule, watermark, update, answered_by=said)


def judge(spark, answer, reader: "Readback", mode: str, rule: str | None, watermark: str | None,
          update: tuple[Sequence[str], str] | None = None, render=None, basis: str | None = None,
          answered_by: str = "") -> CheckResult:
    """The one comparison of ``--check``: the target's rows (`reader`) against `answer`, the expected answer.

    append: `answer`'s rows final under `watermark` by `rule` (`final_rows`); update / complete: the whole
    `answer`. `update` (key columns, SQL ordering): the delivered rows are an update stream, reduced to their
    final row per key (`latest`) before the comparison. `render`: the expected rows put in the shape the sink
    wrote (a DataFrame → DataFrame, e.g. the single ``value`` column Spark's ``kafka`` sink writes), applied
    after the finality rule; with a `reader` whose `raw` is set the delivered values are that ``value``.
    `basis`: what the expected rows are, for the summary (default: said from `mode` and `rule`), followed by
    `answered_by` (how the expected answer was computed, `Expectation.describe`)."""
    from pyspark.sql import functions as F

    if mode == "append":
        expected = final_rows(answer, rule, watermark)
        basis = basis or (f"append: the rows with {rule} ≤ the last watermark {watermark or 'none'}, as a multiset" if rule
                 else "append: every row of the answer, as a multiset")
    else:
        expected = answer
        basis = basis or f"{mode}: the final state per key ({reader.describe()}) against the whole answer"
    if render is not None:
        expected = render(expected)
    if reader.raw:
        expected = expected.select(F.col("value").cast("string").alias("value"))
        delivered = _binary_frame(spark, reader.values()).select(F.col("value").cast("string").alias("value"))
    else:
        delivered = parse_rows(spark, reader.values(), expected.schema)
    if update is not None:
        delivered = latest(delivered, update[0], update[1])
        basis += f"; delivered rows reduced to the final row per {', '.join(update[0])}"
    if answered_by:
        basis += f"; {answered_by}"
    return compare(expected, delivered, basis)


def parse_rows(spark, values: Sequence[bytes], schema):
    """JSON rows (bytes) as a DataFrame of `schema` (unparsable rows: every column null)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    loose = StructType([StructField(f.name, f.dataType, True) for f in schema.fields])
    parsed = _binary_frame(spark, values).select(F.from_json(F.col("value").cast("string"), loose).alias("r"))
    return parsed.select(*[F.col(f"r.`{f.name}`").alias(f.name) for f in schema.fields])


def _binary_frame(spark, values: Sequence[bytes]):
    """`values` as a DataFrame of one binary column ``value``."""
    import pyarrow as pa

    table = pa.table({"value": pa.array([bytes(v) for v in values], pa.binary())})
    return spark.createDataFrame(table) if len(values) else spark.createDataFrame([], "value binary")


# ------------------------------------------------------------------------------------------------ targets

class Readback:
    """A target's content, read independently of the sink: `prepare` before the load (refuses a target that already
    holds rows of the run's kind), `values` after it (every row as the JSON bytes the sink wrote)."""

    keeps_state = False   # one row per key (update / complete can be checked)
    raw = False           # `values` are the ``value`` column the sink wrote, not whole rows as JSON

    def describe(self) -> str:
        raise NotImplementedError

    def prepare(self) -> None:
        pass

    def values(self) -> list[bytes]:
        raise NotImplementedError


def _option(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    return next((str(v) for k, v in options.items() if k.lower() == name.lower()), default)


class ReceiverReadback(Readback):
    """The embedded receiver (``record=True``): the NDJSON rows of the requests it accepted under the sink's path."""

    def __init__(self, receiver, url: str) -> None:
        self.receiver, self.path, self.start = receiver, urlsplit(url).path, 0

    def describe(self) -> str:
        return f"the embedded receiver's rows under {self.path}"

    def prepare(self) -> None:
        self.start = len(self.receiver.accepted_requests)

    def values(self) -> list[bytes]:
        rows: list[bytes] = []
        for request in self.receiver.accepted_requests[self.start:]:
            if request.path.split("?")[0] == self.path:
                rows += [line for line in request.body.split(b"\n") if line.strip()]
        return rows


class RedisReadback(Readback):
    """redis-sink's keys under ``keyPrefix`` (commit records excluded), each read by its type."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.url = _option(options, "url")
        self.prefix = _option(options, "keyPrefix", "")
        self.commit_prefix = _option(options, "commitKeyPrefix", "impulse:commit:")
        self.target = _option(options, "target", "string")
        self.keeps_state = ((self.target == "string" and _option(options, "keyColumn") is not None)
                            or (self.target == "hash" and _option(options, "fieldColumn") is not None))

    def describe(self) -> str:
        return f"Redis {self.target} values under {self.prefix!r}"

    def _client(self):
        import redis

        return redis.Redis.from_url(self.url)

    def _keys(self, client) -> list[bytes]:
        commit = self.commit_prefix.encode()
        return [k for k in client.scan_iter(match=f"{self.prefix}*", count=10_000) if not k.startswith(commit)]

    def prepare(self) -> None:
        client = self._client()
        try:
            keys = self._keys(client)
        finally:
            client.close()
        if keys:
            raise LoadError(f"--check: redis-sink's keyPrefix {self.prefix!r} already holds {len(keys):,} keys (e.g. "
                            f"{keys[0].decode(errors='replace')!r}); the check compares everything under it: use a "
                            "fresh keyPrefix")

    def values(self) -> list[bytes]:
        client = self._client()
        try:
            keys = self._keys(client)
            out: list[bytes] = []
            types = client.pipeline(transaction=False)
            for key in keys:
                types.type(key)
            strings = []
            for key, kind in zip(keys, types.execute()):
                if kind == b"string":
                    strings.append(key)
                elif kind == b"list":
                    out += client.lrange(key, 0, -1)
                elif kind == b"hash":
                    out += client.hvals(key)
                elif kind == b"stream":
                    out += [fields[b"value"] for _, fields in client.xrange(key)]
            for i in range(0, len(strings), 10_000):
                out += [v for v in client.mget(strings[i:i + 10_000]) if v is not None]
            return out
        finally:
            client.close()


class KafkaReadback(Readback):
    """kafka-sink's topic, every record a ``read_committed`` consumer sees (`connectors.kafka_topics.read_topic`)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.topic = _option(options, "topic")
        self.config: dict[str, Any] = {k[len("kafka."):]: v for k, v in options.items() if k.lower().startswith("kafka.")}

    def describe(self) -> str:
        return f"the records of topic {self.topic!r}"

    def _read(self) -> list:
        from connectors.kafka_topics import read_topic

        return read_topic(self.config, self.topic)

    def prepare(self) -> None:
        held = len(self._read())
        if held:
            raise LoadError(f"--check: topic {self.topic!r} already holds {held:,} records; the check compares every "
                            "record of the topic: use a new topic (e.g. with --create-topic)")

    def values(self) -> list[bytes]:
        return [m.value() for m in self._read()]


def readback(sink: str, options: Mapping[str, str], mode: str, receiver=None) -> Readback:
    """How `sink` with `options` is read back for ``--check``; `LoadError` (before any load) saying why it cannot be.
    `receiver`: the embedded receiver (recording requests) webhook-sink writes to, if any."""
    if sink == "webhook-sink":
        url = _option(options, "url", "")
        if receiver is None or not getattr(receiver, "record", False) or not url.startswith(receiver.url):
            raise LoadError("--check reads webhook-sink's rows back from the embedded receiver only: leave out the "
                            "url option (an HTTP server of yours cannot be read back)")
        if _option(options, "format", "json") != "ndjson":
            raise LoadError("--check reads the embedded receiver's NDJSON rows: leave out the format option")
        reader: Readback = ReceiverReadback(receiver, url)
    elif sink == "redis-sink":
        if not _option(options, "keyPrefix"):
            raise LoadError("--check reads redis-sink's keys back under its keyPrefix: set -o keyPrefix=NAME: (a "
                            "prefix that holds nothing yet)")
        if _option(options, "valueColumn") is not None or _option(options, "target", "string") not in (
                "string", "list", "hash", "stream"):
            raise LoadError("--check compares whole rows: redis-sink must write each row as its JSON value (no "
                            "valueColumn) to target string, list, hash or stream")
        reader = RedisReadback(options)
    elif sink == "kafka-sink":
        reader = KafkaReadback(options)
    else:
        raise LoadError(f"--check cannot read {sink} back: it reads the embedded receiver (webhook-sink without url), "
                        "redis-sink and kafka-sink")
    if mode != "append" and not reader.keeps_state:
        raise LoadError(f"--check of output mode {mode} compares the final state per key, which only a target keeping "
                        "one row per key holds: redis-sink with target=string and keyColumn=<the key column>, or "
                        "target=hash and fieldColumn=<the key column>")
    return reader

