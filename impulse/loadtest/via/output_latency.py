"""A pipeline's output topic read back: each record's broker time minus the scheduled time it carries.

The pipeline of the Kafka topology (`impulse.loadtest.via.kafka`) writes to a Kafka topic. After the run
the harness reads that topic with ``read_committed`` (records of aborted or open transactions are not
output) from the offsets it had before the run (`OutputRecords.since`), and for every record takes:

- its **broker time**: the record's Kafka timestamp, which for a topic created with
  ``message.timestamp.type=LogAppendTime`` is the time the broker appended it (the broker's clock,
  milliseconds); for a ``CreateTime`` topic, the time the writer gave it (the writer's clock);
- its **scheduled time**: the field `column` of the record's value read as a JSON object (``timestamp``
  by default; a dotted path such as ``window.end`` reaches into a nested object), a timestamp in ISO-8601
  (Spark's ``to_json`` and the project's sinks write it so). A record whose value is not JSON or lacks the
  field has no latency and is counted in `OutputLatency.unmeasured`.

``confluent_kafka`` is imported inside the functions (the ``kafka`` extra).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from connectors.kafka_topics import read_topic
from connectors.latency import LatencyHistogram

__all__ = ["OutputRecords", "OutputLatency", "read_output", "scheduled_times_us", "json_fields", "output_latency",
           "output_latency_values", "pipeline_part", "pipeline_part_values", "timestamp_type"]

LOG_APPEND_TIME = "LogAppendTime"
CREATE_TIME = "CreateTime"


@dataclass
class OutputRecords:
    """The records of one run in an output topic: values (bytes or None), broker times (epoch ms), keys."""

    topic: str
    values: list                 # bytes | None per record, in partition then offset order
    keys: list                   # bytes | None per record
    times_ms: np.ndarray         # int64, the record's Kafka timestamp
    timestamp_types: np.ndarray  # int8: 1 CreateTime, 2 LogAppendTime (confluent_kafka's TIMESTAMP_* codes)
    since: dict[int, int]        # {partition: first offset of the run}

    def __len__(self) -> int:
        return len(self.values)


def read_output(client: Mapping[str, Any], topic: str, since: Mapping[int, int] | None = None,
                timeout_s: float = 120.0) -> OutputRecords:
    """The records of `topic` from the offsets `since` (``{partition: offset}``; a partition not named, or None:
    from its beginning) to its end, read with ``read_committed`` by `connectors.kafka_topics.read_topic`.
    `client`: the consumer's settings (``bootstrap.servers`` and security settings)."""
    since = dict(since or {})
    messages = [m for m in read_topic(client, topic, "read_committed", timeout_s=timeout_s)
                if m.offset() >= since.get(m.partition(), 0)]
    stamps = [m.timestamp() for m in messages]
    return OutputRecords(topic, [m.value() for m in messages], [m.key() for m in messages],
                         np.fromiter((s[1] for s in stamps), dtype=np.int64, count=len(stamps)),
                         np.fromiter((s[0] for s in stamps), dtype=np.int8, count=len(stamps)), since)


def scheduled_times_us(values: list, column: str = "timestamp") -> np.ndarray:
    """The field `column` (a dotted path into nested objects) of each JSON value, as epoch µs (int64); -1 where a
    value is not a JSON object holding that field as an ISO-8601 timestamp."""
    return json_fields(values, {column: pa.timestamp("us", tz="UTC")})[column]


def json_fields(values: list, fields: Mapping[str, pa.DataType]) -> dict[str, np.ndarray]:
    """Fields of JSON object values as int64 arrays (one entry per value; -1 where a value is not a JSON object or
    lacks the field): `fields` maps a dotted path (``window.end``) to its Arrow type, a timestamp (read from
    ISO-8601, as epoch µs) or an integer. Parsed by Arrow's JSON reader, all values at once."""
    out = {path: np.full(len(values), -1, dtype=np.int64) for path in fields}
    lines = [v if isinstance(v, bytes) and v[:1] == b"{" and b"\n" not in v else None for v in values]
    index = np.array([i for i, line in enumerate(lines) if line is not None], dtype=np.int64)
    if len(index) == 0:
        return out
    options = pj.ParseOptions(explicit_schema=_schema(fields), unexpected_field_behavior="ignore")
    try:
        table = pj.read_json(io.BytesIO(b"\n".join(lines[i] for i in index)), parse_options=options)
    except pa.ArrowInvalid:  # a value that is not JSON, or a field of another type: one value at a time
        for i in index:
            try:
                one = pj.read_json(io.BytesIO(lines[i]), parse_options=options)
            except pa.ArrowInvalid:
                continue
            for path in fields:
                out[path][i] = _column(one, path)[0]
        return out
    for path in fields:
        out[path][index] = _column(table, path)
    return out


def _schema(fields: Mapping[str, pa.DataType]) -> pa.Schema:
    """The Arrow schema reaching the dotted `fields` (nested objects become structs)."""
    tree: dict = {}
    for path, kind in fields.items():
        node = tree
        *parents, leaf = path.split(".")
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = kind

    def build(node: dict) -> list[tuple[str, pa.DataType]]:
        return [(name, pa.struct(build(sub)) if isinstance(sub, dict) else sub) for name, sub in node.items()]

    return pa.schema(build(tree))


def _column(table: pa.Table, path: str) -> np.ndarray:
    first, *rest = path.split(".")
    array = table.column(first).combine_chunks()
    for name in rest:
        array = array.field(name)
    return array.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False)


@dataclass
class OutputLatency:
    """Latency of a run's output records: broker time − scheduled time (µs), with what was left out."""

    histogram: LatencyHistogram
    records: int            # output records of the run
    measured: int           # records in the histogram
    unmeasured: int         # records without the scheduled-time field
    before: int             # records scheduled before `from_us` (a prefill's events): not in the histogram
    clock: str              # LogAppendTime | CreateTime | mixed: which time the broker end is

    def to_dict(self) -> dict:
        return {"records": self.records, "measured": self.measured, "unmeasured": self.unmeasured,
                "beforeRun": self.before, "brokerTime": self.clock}


def output_latency(records: OutputRecords, column: str = "timestamp", from_us: int | None = None) -> OutputLatency:
    """The latency of every record of `records` whose value carries `column` and whose scheduled time is at or
    after `from_us` (None: all): broker time (ms, as µs) − scheduled time. Negative values (a scheduled time
    ahead of the broker's clock) are recorded as 0. Per record: `output_latency_values`."""
    scheduled = scheduled_times_us(records.values, column)
    known = scheduled >= 0
    keep = known & (scheduled >= from_us) if from_us is not None else known
    histogram = LatencyHistogram()
    latency = records.times_ms[keep] * 1000 - scheduled[keep]
    if len(latency):
        histogram.record(np.maximum(latency, 0))
    types = set(records.timestamp_types.tolist())
    clock = {frozenset({2}): LOG_APPEND_TIME, frozenset({1}): CREATE_TIME}.get(frozenset(types), "mixed" if types
                                                                                else "none")
    return OutputLatency(histogram, len(records), int(keep.sum()), int((~known).sum()),
                         int((known & ~keep).sum()), clock)


def output_latency_values(records: OutputRecords, column: str = "timestamp",
                          from_us: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`output_latency` per record: the indexes of the records measured (ascending) and their latencies (µs, ≥ 0)."""
    scheduled = scheduled_times_us(records.values, column)
    keep = scheduled >= 0
    if from_us is not None:
        keep &= scheduled >= from_us
    index = np.flatnonzero(keep)
    return index, np.maximum(records.times_ms[index] * 1000 - scheduled[index], 0)


def timestamp_type(admin: Any, topic: str, timeout_s: float = 30.0) -> str:
    """``message.timestamp.type`` of `topic` (``CreateTime`` or ``LogAppendTime``) through `admin` (an
    ``AdminClient``)."""
    from confluent_kafka.admin import ConfigResource  # noqa: PLC0415 - the kafka extra's client

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(timeout_s)
    return configs["message.timestamp.type"].value


def pipeline_part(records: OutputRecords, commits: Mapping[int, tuple[np.ndarray, np.ndarray]],
                  from_us: int | None = None, column: str = "timestamp") -> LatencyHistogram:
    """The pipeline's own part of the latency: each output record's broker time − the commit of the producer's
    micro-batch that wrote its input event, for output values that carry the event's ``subtask_index`` and
    ``counter`` (a pass-through, a filter; not an aggregate) and whose `column` is at or after `from_us`.

    `commits`: per impulse partition, the producer batches' end counters (ascending) and commit times (epoch µs:
    the batch's acknowledgement, the last of its partitions' commits, so the part is a lower bound by at most the
    spread of one batch's commits). Records before the first or after the last batch are left out. Per record:
    `pipeline_part_values`."""
    histogram = LatencyHistogram()
    _, part = pipeline_part_values(records, commits, from_us, column)
    if len(part):
        histogram.record(part)
    return histogram


def pipeline_part_values(records: OutputRecords, commits: Mapping[int, tuple[np.ndarray, np.ndarray]],
                         from_us: int | None = None, column: str = "timestamp") -> tuple[np.ndarray, np.ndarray]:
    """`pipeline_part` per record: the indexes of the records measured (ascending) and their parts (µs, ≥ 0)."""
    fields = json_fields(records.values, {"subtask_index": pa.int64(), "counter": pa.int64(),
                                          column: pa.timestamp("us", tz="UTC")})
    keep = (fields["counter"] >= 0) & (fields["subtask_index"] >= 0) & (fields[column] >= 0)
    if from_us is not None:
        keep &= fields[column] >= from_us
    part = np.full(len(records), -1, dtype=np.int64)
    for partition, (ends, acks) in commits.items():
        mine = np.flatnonzero(keep & (fields["subtask_index"] == partition))
        batch = np.searchsorted(ends, fields["counter"][mine], side="right")
        inside = batch < len(ends)
        part[mine[inside]] = np.maximum(records.times_ms[mine[inside]] * 1000 - acks[batch[inside]], 0)
    index = np.flatnonzero(part >= 0)
    return index, part[index]
