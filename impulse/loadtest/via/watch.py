"""Watching the two queries of the Kafka topology (`impulse.loadtest.via.kafka`) until the run ends, and the
backlog's drain.

The run ends when the producer delivered every event and the pipeline has read the input topic to its end: its
progress's offsets reached the topic's end for ``read_committed`` readers (a micro-batch reads the commit markers
too), or, in real-time mode, whose offsets stop at the last record, the pipeline's input rows count every record
the run put into the topic (exactly once there); a micro-batch pipeline must then also be idle (the no-data
batch that closes the last windows has run).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping

from connectors.kafka_topics import end_offsets
from impulse.loadtest.measure.metrics import Collector
from impulse.loadtest.query.transform import exception_text
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.via.report import compact_progress

__all__ = ["Watch", "committed_ends", "kafka_offsets"]

_POLL_S = 0.25
_PIPELINE_START_S = 300.0   # how long the producer may take to complete its first batch
_IDLE_S = 10.0              # after the input is read: how long a micro-batch pipeline may take to go idle


def committed_ends(client: Mapping[str, str], topic: str) -> dict[int, int]:
    """The topic's end offsets for read_committed readers, once no transaction is open (≤ 5 s)."""
    deadline = time.monotonic() + 5.0
    while True:
        committed = end_offsets(client, topic, "read_committed")
        if committed == end_offsets(client, topic, "read_uncommitted") or time.monotonic() > deadline:
            return committed
        time.sleep(0.05)


def kafka_offsets(progress: dict, topic: str) -> dict[int, int] | None:
    """The Kafka source's end offsets in a progress record (``{partition: offset}``), None without them."""
    for source in progress.get("sources", ()):
        end = source.get("endOffset")
        end = json.loads(end) if isinstance(end, str) else end
        if isinstance(end, dict) and topic in end:
            return {int(p): int(o) for p, o in end[topic].items()}
    return None


class Watch:
    """The run's watch loop over both queries, and the backlog's drain."""

    def __init__(self, config: LoadConfig, via, trigger, collector: Collector, producer,
                 pipeline, display, stop, prefilled: dict[int, int], pipeline_started_us: int, prefill: int) -> None:
        self.config, self.via, self.trigger, self.collector = config, via, trigger, collector
        self.producer, self.pipeline, self.display, self.stop = producer, pipeline, display, stop
        self.prefilled, self.prefill = prefilled, prefill
        self.expected_records = prefill + config.total_events   # the records the run puts into the topic
        self.pipeline_started_us = pipeline_started_us
        self.read_offsets: dict[int, int] = {}
        self.lag_samples: list[tuple[float, int]] = []   # (s since the pipeline's start, events not yet read)
        self.prefill_read_us: int | None = None
        self.caught_up_us: int | None = None
        self.read_at_caught_up = 0
        self._seen_batches = -1
        self.rows_read: dict[int, int] = {}   # pipeline batch id → input rows
        self.progress: list[dict] = []        # the pipeline's progress records (`via_report.compact_progress`)

    def last_lag(self) -> int | None:
        """The pipeline's lag (events of the input topic not yet read) at its last micro-batch; None before."""
        samples = self.lag_samples
        return samples[-1][1] if samples else None

    def drain_info(self) -> dict | None:
        if not self.prefill:
            return None
        since = self.pipeline_started_us

        def seconds(us):
            return None if us is None else round((us - since) / 1e6, 3)

        read_s, caught_s = seconds(self.prefill_read_us), seconds(self.caught_up_us)
        return {"events": self.prefill, "readS": read_s,
                "readRate": round(self.prefill / read_s, 1) if read_s else None,
                "caughtUpS": caught_s,
                "drainRate": round(self.read_at_caught_up / caught_s, 1) if caught_s else None,
                "caughtUpLag": self._lag_bound}

    @property
    def _lag_bound(self) -> int:
        """Lag (events) at or under which the pipeline has caught up: one second, or one trigger interval, of
        the producer's events."""
        return int(self.config.rate * max(1.0, self.trigger.seconds if self.trigger.kind != "availableNow" else 1))

    def _sample(self, now_us: int) -> None:
        """After each pipeline batch: what it has read, and the lag behind the topic's end."""
        last = self.pipeline.lastProgress
        if last is None:
            return
        data = json.loads(last.json)
        if data["batchId"] == self._seen_batches:
            return
        missed = data["batchId"] > self._seen_batches + 1
        for progress in (self.pipeline.recentProgress if missed else [last]):
            record = json.loads(progress.json)
            if record["batchId"] > self._seen_batches:
                self.rows_read[record["batchId"]] = int(record.get("numInputRows", 0))
                self.progress.append(compact_progress(record))
        self._seen_batches = data["batchId"]
        offsets = kafka_offsets(data, self.via.topic)
        if offsets is None:
            return
        self.read_offsets = offsets
        ends = end_offsets(self.via.client_config, self.via.topic, "read_committed")
        lag = sum(max(0, ends.get(p, 0) - offsets.get(p, 0)) for p in ends)
        self.lag_samples.append((round((now_us - self.pipeline_started_us) / 1e6, 3), lag))
        if self.prefill and self.prefill_read_us is None and (all(
                offsets.get(p, 0) >= o for p, o in self.prefilled.items())
                or sum(self.rows_read.values()) >= self.prefill):
            self.prefill_read_us = now_us
        if self.prefill and self.prefill_read_us is not None and self.caught_up_us is None and lag <= self._lag_bound:
            self.caught_up_us = now_us
            self.read_at_caught_up = sum(self.rows_read.values())

    def run(self, start_pipeline: Callable[[], Any], queries: list) -> tuple[str, str | None]:
        """Poll until the run ends; returns (outcome, error)."""
        config = self.config
        input_end: dict[int, int] | None = None
        idle_since: float | None = None
        producer_done_at: float | None = None
        while True:
            now_us = time.time_ns() // 1000
            try:
                self.collector.poll()
            except Exception as exc:  # noqa: BLE001 - the producer's progress went away with a failed query
                return "failed", f"producer: {exception_text(exc)}"
            if self.display is not None:
                self.display.update(self.collector, now_us, waiting="starting the producer and the pipeline")
            for name, query in (("producer", self.producer), ("pipeline", self.pipeline)):
                if query is not None and not query.isActive and not (name == "producer" and self.collector.done):
                    exc = query.exception()
                    if exc is not None:
                        return "failed", f"{name}: {exception_text(exc)}"
                    if name == "pipeline" and self.trigger.kind == "availableNow":
                        continue
                    return "interrupted", f"the {name} query was stopped"
            if self.stop is not None and self.stop.is_set():
                return "interrupted", None
            if self.collector.done and input_end is None:
                input_end = committed_ends(self.via.client_config, self.via.topic)
                producer_done_at = time.monotonic()
                if self.pipeline is None:  # availableNow: the pipeline reads what the producer wrote, then stops
                    self.pipeline = start_pipeline()
                    queries.append(self.pipeline)
                    self.pipeline_started_us = time.time_ns() // 1000
            if self.pipeline is not None:
                self._sample(now_us)
                # read to the end: the offsets (a micro-batch reads the commit markers too) or, in real-time mode,
                # whose offsets stop at the last record, every record of the run (exactly once in the topic)
                if input_end is not None and (
                        all(self.read_offsets.get(p, 0) >= o for p, o in input_end.items())
                        or sum(self.rows_read.values()) >= self.expected_records):
                    if self.trigger.kind != "processingTime" or not self.pipeline.isActive:
                        return "completed", None
                    status = self.pipeline.status
                    if not status.get("isTriggerActive") and not status.get("isDataAvailable"):
                        idle_since = idle_since or time.monotonic()
                        if time.monotonic() - idle_since >= max(self.trigger.seconds, 0.5) + 0.5:
                            return "completed", None
                    else:
                        idle_since = None
            if self.collector.schedule_start_us is None:
                if now_us - self.pipeline_started_us > _PIPELINE_START_S * 1e6:
                    return "timed out", f"the producer completed no micro-batch within {_PIPELINE_START_S:g}s"
            elif producer_done_at is None:
                if now_us - self.collector.schedule_start_us > (config.duration_s + config.drain_s) * 1e6:
                    return "timed out", (f"producer: {self.collector.delivered:,} of {self.collector.total:,} events "
                                         f"written {config.duration_s + config.drain_s:g}s after the start")
            elif time.monotonic() - producer_done_at > config.drain_s + _IDLE_S:
                read = sum(self.read_offsets.values())
                return "timed out", (f"pipeline: read up to offset sum {read:,} of {sum(input_end.values()):,} "
                                     f"{config.drain_s + _IDLE_S:g}s after the producer's last event")
            if self.stop is not None and hasattr(self.stop, "wait"):
                self.stop.wait(_POLL_S)
            else:
                time.sleep(_POLL_S)
