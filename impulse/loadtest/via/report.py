"""The Kafka topology's figures for the reports: the pipeline's as the run's, the producer's in a section of its own.

A run through Kafka (`impulse.loadtest.via.kafka`) has two queries. The reports give the **pipeline**'s figures as
the run's: its micro-batches (`PipelineBatch`, from its progress: input records read, output rows, Spark's
``durationMs``), its output rows (the output topic read back, or the sink's metrics) and its latency
(`impulse.loadtest.measure.latency_names`: ``pipeline`` — input committed → output appended — where the output
records carry the event's ``subtask_index`` and ``counter``, else ``via-end-to-end`` / ``via-event-time`` into a
Kafka sink, ``end-to-end`` into the project's other sinks). The run's events and its target vs achieved rate are the
events the producer delivered: the load.

The **producer**'s figures — its micro-batches, bytes, rate, Spark's phases and its latency (scheduled →
committed into the input topic, with its schedule delay and delivery) — are the ``producer`` object of
report.json (`producer_section`, shaped like a run's object) and the producer block of the summary
(`producer_lines`).

A pipeline batch's latency (the per-batch charts) is that of the output records appended while it ran: each
record goes to the first batch that ended at or after its broker time (the broker's and the driver's clocks are
taken as one), records after the last batch to the last; into the project's sinks, each batch's own metrics line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from connectors.latency import LatencyHistogram
from impulse.loadtest.measure.latency_names import description, title
from impulse.loadtest.measure.metrics import PHASES
from impulse.loadtest.settings.units import epoch_us

__all__ = ["PipelineBatch", "compact_progress", "pipeline_batches", "attribute_latency", "count_output", "assign_lag",
           "batch_rows", "report_rows", "producer_section", "producer_lines", "via_lines"]

_PRODUCER_SUMMARY = ("batches", "events", "targetEvents", "targetRate", "achievedRate", "bytes", "errors",
                     "deadLettered", "latencyDefinition")
_PRODUCER_KEYS = ("latencyMs", "scheduleDelayMs", "deliveryMs", "latencyHistogram", "scheduleDelayHistogram",
                  "deliveryHistogram", "phasesMs", "batches")


@dataclass
class PipelineBatch:
    """One micro-batch of the pipeline query (times in epoch µs)."""

    batch_id: int
    start_us: int                       # its progress ``timestamp``
    end_us: int                         # start + ``durationMs.triggerExecution``
    rows: int                           # input records read (``numInputRows``)
    output_rows: int | None             # Spark's ``sink.numOutputRows`` (None: the sink does not count)
    durations: dict                     # Spark's ``durationMs``
    latency_data: dict | None = None    # `LatencyHistogram.to_dict` of its output's latency; None: no output measured
    lag: int | None = None              # input records not yet read, sampled after it ended (`assign_lag`)

    @property
    def latency(self) -> LatencyHistogram:
        return LatencyHistogram.from_dict(self.latency_data)


def compact_progress(record: Mapping) -> dict:
    """The keys of a pipeline progress record (its JSON as a dict) the reports read: small enough to keep one per
    batch of a long run."""
    sink = record.get("sink") or {}
    return {"batchId": int(record["batchId"]), "timestamp": record.get("timestamp"),
            "numInputRows": int(record.get("numInputRows") or 0), "durationMs": dict(record.get("durationMs") or {}),
            "numOutputRows": sink.get("numOutputRows")}


def pipeline_batches(progress: Iterable[Mapping]) -> list[PipelineBatch]:
    """The batches that ran (``durationMs`` has ``addBatch``, or records were read), once each, by id, from progress
    records (full or `compact_progress`)."""
    seen: dict[int, PipelineBatch] = {}
    for record in progress:
        record = record if "numOutputRows" in record else compact_progress(record)
        durations = {k: int(v) for k, v in record["durationMs"].items()}
        if "addBatch" not in durations and not record["numInputRows"]:
            continue   # an idle trigger: no batch ran
        start = epoch_us(record["timestamp"])
        counted = record.get("numOutputRows")
        seen[record["batchId"]] = PipelineBatch(
            record["batchId"], start, start + durations.get("triggerExecution", 0) * 1000, record["numInputRows"],
            int(counted) if counted is not None and int(counted) >= 0 else None, durations)
    return [seen[key] for key in sorted(seen)]


def _owners(batches: Sequence[PipelineBatch], times_us: np.ndarray) -> np.ndarray:
    """For each broker time: the index of the first batch that ended at or after it (the last batch for later ones)."""
    ends = np.array([b.end_us for b in batches], dtype=np.int64)
    return np.minimum(np.searchsorted(ends, times_us, side="left"), len(batches) - 1)


def attribute_latency(batches: Sequence[PipelineBatch], times_us: np.ndarray, values_us: np.ndarray) -> None:
    """Give each batch the latencies (`values_us`) of the output records appended while it ran (`times_us`, their
    broker times): the first batch that ended at or after a record's time, the last for records after it."""
    if not batches or len(times_us) == 0:
        return
    owner = _owners(batches, times_us)
    order = np.argsort(owner, kind="stable")
    owner, values = owner[order], values_us[order]
    bounds = np.searchsorted(owner, np.arange(len(batches) + 1), side="left")
    for index, batch in enumerate(batches):
        mine = values[bounds[index]:bounds[index + 1]]
        if len(mine):
            histogram = LatencyHistogram()
            histogram.record(mine.astype(np.int64))
            batch.latency_data = histogram.to_dict()


def count_output(batches: Sequence[PipelineBatch], times_us: np.ndarray) -> None:
    """Give each batch Spark did not count the output of (``output_rows`` None) the output records appended while it
    ran (`times_us`, every record's broker time; `attribute_latency`'s rule)."""
    if not batches:
        return
    counts = np.bincount(_owners(batches, times_us), minlength=len(batches)) if len(times_us) else [0] * len(batches)
    for batch, count in zip(batches, counts):
        if batch.output_rows is None:
            batch.output_rows = int(count)


def assign_lag(batches: Sequence[PipelineBatch], samples: Sequence[tuple[int, int]]) -> None:
    """Give each batch the lag of the first of `samples` — (epoch µs, input records not yet read), ascending — taken
    at or after its end (the watch samples the lag after each batch it sees)."""
    times = np.array([t for t, _ in samples], dtype=np.int64)
    for batch in batches:
        at = int(np.searchsorted(times, batch.end_us, side="left"))
        if at < len(samples):
            batch.lag = samples[at][1]


def batch_rows(batches: Sequence[PipelineBatch], origin_us: int) -> list[dict]:
    """The pipeline's batches as report.json's ``batches`` rows: ``timeS`` (its end, s since `origin_us`),
    ``events`` (records read), ``delivered`` (records read so far), ``outputRows``, ``lag``, its output's latency
    (p50, p99, max in ms; None for a batch with no output measured, which charts leave out) and Spark's phases."""
    out, read = [], 0
    for batch in batches:
        read += batch.rows
        latency = batch.latency if batch.latency_data is not None else None
        row = {"batchId": batch.batch_id, "timeS": round((batch.end_us - origin_us) / 1e6, 3), "events": batch.rows,
               "delivered": read, "outputRows": batch.output_rows, "lag": batch.lag,
               "latencyP50Ms": None if latency is None else round(latency.percentile(50.0) / 1e3, 3),
               "latencyP99Ms": None if latency is None else round(latency.percentile(99.0) / 1e3, 3),
               "latencyMaxMs": None if latency is None else round(latency.max_us / 1e3, 3)}
        for phase in PHASES:
            row[f"{phase}Ms"] = batch.durations.get(phase, 0)
        out.append(row)
    return out


def report_rows(run, origin_us: int) -> list[dict]:
    """A run's batches as report rows (`impulse.loadtest.measure.metrics.Batch.row`); through Kafka (a run with
    ``pipeline_batches``), the pipeline's (`batch_rows`)."""
    if hasattr(run, "pipeline_batches"):
        return batch_rows(run.pipeline_batches, origin_us)
    return [batch.row(origin_us) for batch in run.batches]


def producer_section(run: Mapping) -> dict:
    """The ``producer`` object of a run through Kafka from the producer's own run object (`LoadResult.to_dict` of
    its batches): its summary (batches, events, rate, bytes, errors, its latency's percentiles), its latency and
    parts, Spark's phases and its batches — the shape of a run's object, so the reports draw it alike."""
    summary = run.get("summary") or {}
    keep = {key: summary.get(key) for key in _PRODUCER_SUMMARY}
    keep.update({key: value for key, value in summary.items() if key.startswith("latencyP") or key in (
        "latencyMaxMs", "latencyMeanMs")})
    keep["latencyDefinition"] = "producer"
    return {"summary": keep, **{key: run.get(key) for key in _PRODUCER_KEYS}}


def _percentile_line(label: str, values: Mapping[str, float]) -> str:
    names = ("p50", "p95", "p99", "p99.9", "p99.99", "max")
    return f"      {label:<20}" + "".join(f"{values.get(n, 0):>10,.1f}" for n in names)


def producer_lines(producer: Mapping, via: Mapping) -> list[str]:
    """The summary's producer block: its batches, bytes and rate, its latency (and parts) and Spark's phases."""
    s = producer.get("summary") or {}
    names = ("p50", "p95", "p99", "p99.9", "p99.99", "max")
    lines = [f"  producer (impulse → {via.get('input')}, the load): {s.get('batches', 0):,} micro-batches, "
             f"{s.get('events', 0):,} events, {(s.get('bytes') or 0) / 2**20:,.1f} MB (Arrow), achieved "
             f"{s.get('achievedRate') or 0:,.0f} of {s.get('targetRate') or 0:,.0f} events/s",
             f"    latency: {title('producer')}: {description('producer')}",
             "    " + f"{'latency (ms)':<24}" + "".join(f"{n:>10}" for n in names),
             _percentile_line(title("producer"), producer.get("latencyMs") or {}),
             _percentile_line("schedule delay", producer.get("scheduleDelayMs") or {}),
             _percentile_line("delivery", producer.get("deliveryMs") or {}),
             f"    {'Spark phase (ms)':<24}{'mean':>10}{'max':>10}"]
    for phase, stats in (producer.get("phasesMs") or {}).items():
        lines.append(f"      {phase:<22}{stats['mean']:>10,.1f}{stats['max']:>10,.0f}")
    return lines


def via_lines(result) -> list[str]:
    """The summary's lines of the Kafka topology (a `impulse.loadtest.via.kafka.ViaResult`): the pipeline's input
    and trigger, notes on its latency, the producer's block and the backlog's drain."""
    via = result.via
    lines = [f"  through {via['input']}: pipeline trigger {via['trigger']}, {via['outputMode']}"
             f"{', decoded events' if via['decode'] else ''}; latency measured as {via['latencySource']}"]
    if via.get("latencyNote"):
        lines.append(f"  note: {via['latencyNote']}")
    lines += producer_lines(producer_section(result.producer_document()), via)
    drain = via.get("prefill")
    if drain:
        read = f"read in {drain['readS']:g}s ({drain['readRate']:,.0f} events/s)" if drain["readS"] else "not read"
        caught = (f"caught up (lag ≤ {drain['caughtUpLag']:,} events) after {drain['caughtUpS']:g}s, "
                  f"{drain['drainRate']:,.0f} events/s read meanwhile" if drain["caughtUpS"]
                  else "never caught up")
        lines.append(f"  backlog of {drain['events']:,} events: {read}; {caught}")
    return lines

