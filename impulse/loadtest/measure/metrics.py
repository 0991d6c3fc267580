"""Per-batch measurements of a load run, from Spark's progress, the impulse offsets and the sinks' metrics.

Definitions (every time in epoch µs, every count in events):

- **delivered** after batch b: the sum of the impulse ``counters`` of its ``endOffset`` (every event
  below them was handed to the sink and committed);
- **ack** of batch b: for the project's sinks the latest partition acknowledgement in its
  ``metricsPath`` line (``ackUs``); for a committed table (file sinks, Delta) the time of the batch's commit
  (`impulse.loadtest.measure.commit_time`); for other sinks the end of the micro-batch, progress
  ``timestamp`` + ``durationMs.triggerExecution`` (the sink's write is part of it);
- **end-to-end latency** of an event: ack − the event's ``timestamp``, its **scheduled** time (so a
  stall is never hidden: an event due during a 3 s stall waits for it, whenever Spark reads it — no
  coordinated omission). It splits into **schedule delay**, scheduled time → start of the micro-batch
  that read the event (how far Spark and the source fell behind; computed here from the offsets and
  the progress ``timestamp``), and **delivery**, that start → the acknowledgement of the event's
  partition (the sinks' ``acks`` in the metrics line; for other sinks the end of the batch). The project's sinks measure it
  per event on the executors (`connectors.latency.LatencyHistogram` in the metrics line). For other
  sinks it is computed here, vectorised with numpy, from the offsets: event k of partition i is due
  at ``anchorTime + offset(k − anchorCounters[i])`` (`impulse.schedule.Schedule`), which is its
  timestamp (no ``interval`` option);
- **due(t)**: the events of the run's schedule due at time t, capped per partition by the run's
  event budget (impulse ``limit``); **lag** of batch b = due(ack) − delivered. It is the arithmetic
  of impulse's ``reportLatestOffset`` evaluated at the ack; Spark's own view, **held back** =
  ``sources[0].latestOffset`` − ``endOffset`` counters, is taken when the batch is planned and is
  non-zero only when ``maxEventsPerTrigger`` holds events back;
- **achieved rate**, steady state: the slope of a least-squares line through the points (ack,
  delivered) of the steady batches — all but the first (it pays for the query's start) and the last
  (the event budget cuts it short). A sink that keeps up delivers along a line of slope = the target
  rate; one that falls behind delivers at its own, lower capacity while its lag grows (lag grows at
  target − achieved). With fewer than three steady batches: delivered / (last ack − schedule start).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Sequence

import numpy as np

from connectors.latency import LatencyHistogram
from impulse.options import split_limit
from impulse.schedule import Schedule

__all__ = ["Batch", "Collector", "PHASES", "PERCENTILES", "achieved_rate", "steady_batches", "phase_stats",
           "offsets_latency", "newest_schedule_us", "row_bytes", "merged_latency", "percentiles_ms", "recent_rate"]

PHASES = ("latestOffset", "addBatch", "walCommit", "commitOffsets", "queryPlanning", "triggerExecution")
PERCENTILES = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9), ("p99.99", 99.99))
_CHUNK = 1 << 20  # events per numpy chunk when computing latency from offsets
_METRICS_WAIT_S = 10.0  # a batch whose metrics line is still missing after this is measured from its offsets


@dataclass
class Batch:
    """One committed micro-batch of the run."""

    batch_id: int
    start_us: int                 # trigger start (progress timestamp, ms precision)
    end_us: int                   # start + triggerExecution
    ack_us: int                   # see the module docstring
    rows: int                     # events in this batch
    delivered: int                # events delivered after it, in total
    lag: int                      # due(ack) − delivered
    held_back: int                # Spark's latestOffset − endOffset when the batch was planned
    bytes: int                    # Arrow bytes handed to the sink (estimated for non-project sinks)
    retried: int                  # partitions that needed more than one task attempt (project sinks)
    durations: dict               # Spark's durationMs, ms per phase
    latency_data: dict = field(repr=False)          # `LatencyHistogram.to_dict` of end-to-end latency
    schedule_data: dict = field(repr=False)         # … of schedule delay
    delivery_data: dict = field(repr=False)         # … of delivery
    retried_rows: int = 0         # events of the partitions that needed more than one attempt
    dead_lettered: int = 0        # events the target refused for good, sent to the sink's dead-letter target
    output_rows: int | None = None  # rows the sink acknowledged (Spark's count for other sinks; None: unknown)
    end_counters: tuple[int, ...] = ()  # the impulse counters of its end offset, per partition

    # histograms are kept encoded (a few hundred bytes each, not an HdrHistogram's 190 kB) and decoded on demand
    @property
    def latency(self) -> LatencyHistogram:
        return LatencyHistogram.from_dict(self.latency_data)

    @property
    def schedule_delay(self) -> LatencyHistogram:
        return LatencyHistogram.from_dict(self.schedule_data)

    @property
    def delivery(self) -> LatencyHistogram:
        return LatencyHistogram.from_dict(self.delivery_data)

    def row(self, origin_us: int) -> dict:
        """A flat dict for CSV/JSON: times in s since `origin_us`, latencies in ms (None for a histogram with no value:
        a batch without output has no latency, and charts leave it out)."""
        out = {"batchId": self.batch_id, "timeS": round((self.ack_us - origin_us) / 1e6, 3),
               "events": self.rows, "delivered": self.delivered, "lag": self.lag, "heldBack": self.held_back,
               "bytes": self.bytes,
               "retriedPartitions": self.retried, "deadLettered": self.dead_lettered, "outputRows": self.output_rows}
        for prefix, histogram in (("latency", self.latency), ("scheduleDelay", self.schedule_delay),
                                  ("delivery", self.delivery)):
            empty = histogram.count == 0
            for name, p in (("p50", 50.0), ("p99", 99.0)):
                out[f"{prefix}{name.upper()}Ms"] = None if empty else round(histogram.percentile(p) / 1e3, 3)
            out[f"{prefix}MaxMs"] = None if empty else round(histogram.max_us / 1e3, 3)
        for phase in PHASES:
            out[f"{phase}Ms"] = self.durations.get(phase, 0)
        return out


def row_bytes(payload_bytes: int) -> int:
    """Arrow bytes of one impulse row: three int64/timestamp columns, and payload + its int32 offset."""
    return 24 + (payload_bytes + 4 if payload_bytes > 0 else 0)


def offsets_latency(start: dict, end: dict, ack_us: int) -> LatencyHistogram:
    """Time from the scheduled time of every event of a batch (offsets `start` → `end`) to `ack_us`."""
    schedule = Schedule.of_offset(end)
    histogram = LatencyHistogram()
    for subtask, (first, last, base) in enumerate(zip(start["counters"], end["counters"], end["anchorCounters"])):
        for lo in range(first, last, _CHUNK):
            counters = np.arange(lo, min(lo + _CHUNK, last), dtype=np.int64)
            histogram.record(ack_us - schedule.times_us(counters, base, subtask))
    return histogram


def newest_schedule_us(start: dict, end: dict) -> int | None:
    """The scheduled time (epoch µs) of the newest event a batch (offsets `start` → `end`) read; None: it read none."""
    schedule = Schedule.of_offset(end)
    times = [int(schedule.times_us(np.array([last - 1], dtype=np.int64), base, subtask)[0])
             for subtask, (first, last, base) in enumerate(zip(start["counters"], end["counters"],
                                                               end["anchorCounters"])) if last > first]
    return max(times) if times else None


def _timestamp_us(text: str) -> int:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(parsed.timestamp() * 1_000_000)


class Collector:
    """Turns a running query's progress (and the sink's metrics file) into `Batch` records.

    `poll()` is cheap enough to call a few times a second. Progress records without ``addBatch``
    (idle triggers: no data) are skipped. A batch of a project sink waits for its metrics line (the
    sink's driver writes it before Spark reports the progress) at most 10 s, then is measured from
    its offsets like any other sink's; `poll(final=True)` does not wait.
    """

    def __init__(self, query, *, total_events: int, partitions: int, payload_bytes: int,
                 metrics_path: str | None = None, metrics_offset: int = 0, commit_id: str | None = None,
                 stages=None, batch_latency: bool = False, commit_clock=None,
                 positional_rate: float | None = None) -> None:
        self.query = query
        # a replay's rate (its offsets are positions, `positional_offset`); None: the source's offsets are impulse's
        self.positional_rate = positional_rate
        partitions = 1 if positional_rate is not None else partitions
        # batch id → epoch µs of its commit in the target (`impulse.loadtest.measure.commit_time`): the ack of a
        # sink without metrics, in place of the micro-batch's end; None, or a batch it does not know: the end
        self.commit_clock = commit_clock
        self.batch_latency = batch_latency   # latency per micro-batch: newest input event's schedule → commit
        self.stages = stages   # with rateStages, its `impulse.loadtest.settings.stages.StagePlan`, else None
        self.total = total_events
        self.limits = list(split_limit(total_events, partitions))
        self.row_bytes = row_bytes(payload_bytes)
        self.metrics_path = metrics_path
        self._metrics_offset = metrics_offset
        self._metrics: dict[int, dict] = {}
        self._commit_id = commit_id
        self._seen: set[int] = set()
        self._pending: dict[int, tuple[dict, float]] = {}
        self._last_real = -1   # the highest batch id with data seen in the progress
        self.batches: list[Batch] = []
        self.offsets: dict | None = None     # the first batch's end offset: the run's schedule
        self.schedule_start_us: int | None = None
        # the run's histograms so far, merged as batches arrive (thresholds and Prometheus read them)
        self.latency = LatencyHistogram()
        self.schedule_delay = LatencyHistogram()
        self.delivery = LatencyHistogram()
        self.lock = threading.Lock()   # held while batches and histograms change (a metrics scrape reads them)

    # -- schedule -----------------------------------------------------------------------------------
    def due(self, now_us: int) -> int:
        """Events of the run due at `now_us` (0 before the first batch told the schedule)."""
        if self.offsets is None:
            return 0
        o = self.offsets
        schedule = Schedule.of_offset(o)
        return sum(min(schedule.next_counter(now_us, base, subtask), cap)
                   for subtask, (base, cap) in enumerate(zip(o["anchorCounters"], self.limits)))

    def target_rate(self, now_us: int, rate: float) -> float:
        """The run's target rate at `now_us`: `rate`, or with stages the stages' rate at that time."""
        if self.stages is None or self.schedule_start_us is None:
            return rate
        return self.stages.rate_at((now_us - self.schedule_start_us) / 1e6)

    @property
    def delivered(self) -> int:
        return self.batches[-1].delivered if self.batches else 0

    @property
    def done(self) -> bool:
        """Every event of the run's budget was delivered."""
        return self.delivered >= self.total

    # -- polling ------------------------------------------------------------------------------------
    def poll(self, final: bool = False) -> list[Batch]:
        """Read new progress (and metrics); return the batches completed since the last call."""
        self._read_metrics()
        for progress in self._progress(final):
            data = json.loads(progress.json)
            batch_id = data["batchId"]
            if batch_id in self._seen or batch_id in self._pending or "addBatch" not in data.get("durationMs", {}):
                continue
            self._pending[batch_id] = (data, time.monotonic())
            self._last_real = max(self._last_real, batch_id)
        new = []
        for batch_id in sorted(self._pending):
            waited = time.monotonic() - self._pending[batch_id][1]
            if self.metrics_path and batch_id not in self._metrics and not final and waited < _METRICS_WAIT_S:
                break  # keep batch order: wait for this batch's metrics line
            new.append(self._batch(self._pending.pop(batch_id)[0]))
            self._seen.add(batch_id)
        with self.lock:
            self.batches.extend(new)
            for batch in new:
                self.latency.merge(batch.latency)
                self.schedule_delay.merge(batch.schedule_delay)
                self.delivery.merge(batch.delivery)
        return new

    def _progress(self, final: bool) -> list:
        """The progress records to look at: the last one (one py4j call), or all recent ones after a gap."""
        if final:
            return list(self.query.recentProgress)
        last = self.query.lastProgress
        if last is None:
            return []
        if last.batchId > self._last_real + 1:  # a batch finished between two polls: fetch the ones before it
            return list(self.query.recentProgress)
        return [last]

    def _read_metrics(self) -> None:
        if not self.metrics_path or not os.path.exists(self.metrics_path):
            return
        with open(self.metrics_path, "rb") as source:
            source.seek(self._metrics_offset)
            chunk = source.read()
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self._metrics_offset += len(complete)
        for line in complete.splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if self._commit_id is None or record.get("commitId") == self._commit_id:
                self._metrics[int(record["batchId"])] = record

    def _batch(self, data: dict) -> Batch:
        source = data["sources"][0]
        start, end = _offset(source.get("startOffset")), _offset(source["endOffset"])
        latest = _offset(source.get("latestOffset")) or end
        if self.positional_rate is not None:
            start, end, latest = (positional_offset(o, self.positional_rate) for o in (start, end, latest))
        if start is None:  # the first batch of a new query: everything before its end was 0
            start = {**end, "counters": [0] * len(end["counters"])}
        if self.offsets is None:
            self.offsets = end
            self.schedule_start_us = int(end["startTime"])
        durations = {k: int(v) for k, v in data.get("durationMs", {}).items()}
        start_us = _timestamp_us(data["timestamp"])
        end_us = start_us + durations.get("triggerExecution", 0) * 1_000
        rows = int(data.get("numInputRows", 0))
        metrics = self._metrics.pop(int(data["batchId"]), None)
        schedule = offsets_latency(start, end, start_us)
        delivery = LatencyHistogram()
        if metrics is not None:
            ack_us = int(metrics.get("ackUs") or end_us)
            latency = LatencyHistogram.from_dict(metrics.get("latency"))
            size = int(metrics.get("bytes", 0))
            retried = int(metrics.get("retriedPartitions", 0))
            retried_rows = int(metrics.get("retriedRows", 0))
            dead_lettered = int(metrics.get("deadLettered", 0))
            for acked_us, n in metrics.get("acks", ()):
                delivery.record_value(acked_us - start_us, n)
        else:
            committed = self.commit_clock(int(data["batchId"])) if self.commit_clock is not None else None
            ack_us = committed if committed is not None else end_us
            latency = offsets_latency(start, end, ack_us)
            size = rows * self.row_bytes
            retried = retried_rows = dead_lettered = 0
            delivery.record_value(ack_us - start_us, rows)
        if metrics is not None and "rows" in metrics:
            output_rows = int(metrics["rows"])
        else:
            counted = (data.get("sink") or {}).get("numOutputRows", -1)
            output_rows = int(counted) if counted is not None and int(counted) >= 0 else None
        if self.batch_latency:
            latency = LatencyHistogram()
            newest = newest_schedule_us(start, end)
            if newest is not None:
                latency.record_value(max(0, ack_us - newest), 1)
        delivered = sum(end["counters"])
        batch = Batch(int(data["batchId"]), start_us, end_us, ack_us, rows, delivered,
                      max(0, self.due(ack_us) - delivered), max(0, sum(latest["counters"]) - delivered), size,
                      retried, durations, latency.to_dict(), schedule.to_dict(), delivery.to_dict(), retried_rows,
                      dead_lettered, output_rows, tuple(int(c) for c in end["counters"]))
        return batch


def positional_offset(offset: dict | None, rate: float) -> dict | None:
    """A replay's offset (``position``, ``startTime``: position p is due (p + 1) / `rate` s after the start, at a fixed
    ``eventsPerSecond``) as the impulse offset of one partition on the same schedule, which the measures read."""
    if offset is None:
        return None
    delay_us = 1e6 / rate
    return {"startTime": offset["startTime"], "anchorTime": offset["startTime"] + round(delay_us), "delayUs": delay_us,
            "rampUs": 0, "anchorCounters": [0], "counters": [offset["position"]]}


def _offset(value) -> dict | None:
    if value is None:
        return None
    return json.loads(value) if isinstance(value, str) else dict(value)


# -- summaries over a run's batches -------------------------------------------------------------------

def steady_batches(batches: Sequence[Batch], total: int) -> list[Batch]:
    """The batches between the first (query start-up) and the one the event budget cut short."""
    inner = list(batches[1:])
    if inner and inner[-1].delivered >= total:
        inner.pop()
    return inner


def achieved_rate(batches: Sequence[Batch], total: int, schedule_start_us: int | None) -> float:
    """Events/s delivered in steady state (module docstring); 0 without batches."""
    if not batches:
        return 0.0
    steady = steady_batches(batches, total)
    if len(steady) >= 3:
        t = np.array([b.ack_us for b in steady], dtype=np.float64) / 1e6
        n = np.array([b.delivered for b in steady], dtype=np.float64)
        if np.ptp(t) > 0:
            return float(np.polyfit(t - t[0], n, 1)[0])
    origin = schedule_start_us or batches[0].start_us
    span = batches[-1].ack_us - origin
    return batches[-1].delivered / (span / 1e6) if span > 0 else 0.0


def recent_rate(batches: Sequence[Batch], now_us: int, window_us: int = 5_000_000) -> float | None:
    """Events/s between the newest acknowledgement and the last one at least `window_us` older (None: < 2 batches)."""
    if len(batches) < 2:
        return None
    last = batches[-1]
    ref = batches[0]
    for batch in batches[:-1]:
        if batch.ack_us <= now_us - window_us:
            ref = batch
    span = last.ack_us - ref.ack_us
    return (last.delivered - ref.delivered) / (span / 1e6) if span > 0 else None


def merged_latency(batches: Iterable[Batch], part: str = "latency") -> LatencyHistogram:
    """The merged histogram of the batches' `part`: ``latency`` (end to end), ``schedule_delay`` or ``delivery``."""
    total = LatencyHistogram()
    for batch in batches:
        total.merge(getattr(batch, part))
    return total


def percentiles_ms(histogram: LatencyHistogram) -> dict[str, float]:
    """p50, p95, p99, p99.9, p99.99, max and mean in ms (0 when empty)."""
    out = {name: round(histogram.percentile(p) / 1e3, 3) for name, p in PERCENTILES}
    out["max"] = round(histogram.max_us / 1e3, 3)
    out["mean"] = round(histogram.mean_us / 1e3, 3)
    return out


def phase_stats(batches: Sequence[Batch]) -> dict[str, dict[str, float]]:
    """Mean and max (ms) of each of Spark's `PHASES` over the batches."""
    out = {}
    for phase in PHASES:
        values = [b.durations.get(phase, 0) for b in batches]
        out[phase] = {"mean": round(float(np.mean(values)), 1) if values else 0.0,
                      "max": float(max(values)) if values else 0.0}
    return out
