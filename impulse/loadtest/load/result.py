"""What one run measured (`LoadResult`): its batches, latency, rates and verdict, and the report's fields of it.

Both topologies return one (`impulse.loadtest.via.kafka.ViaResult` extends it); the reports read it
(`impulse.loadtest.reports`). Counting is exact: the events are those of committed batches.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from connectors.latency import LatencyHistogram
from connectors.redact import redact_options, redact_url
from impulse.loadtest.measure.bound import Verdict, assess
from impulse.loadtest.measure.metrics import Batch, achieved_rate, merged_latency, percentiles_ms, phase_stats
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.stages import StageResult, stage_results
from impulse.loadtest.settings.thresholds import Check, evaluate

__all__ = ["LoadResult", "LATENCY_PARTS", "public_config"]

_LATENCY_KEYS = {"p50": "latencyP50Ms", "p95": "latencyP95Ms", "p99": "latencyP99Ms", "p99.9": "latencyP999Ms",
                 "p99.99": "latencyP9999Ms", "max": "latencyMaxMs", "mean": "latencyMeanMs"}
LATENCY_PARTS = (("latency", "end-to-end"), ("schedule_delay", "schedule delay"), ("delivery", "delivery"))


@dataclass
class LoadResult:
    """What one run measured. Rates in events/s, times in epoch µs unless named otherwise."""

    config: LoadConfig
    sink: str
    options: dict                      # as given, secrets hidden
    query_id: str | None
    batches: list[Batch]
    schedule_start_us: int | None      # impulse startTime: when the first batch was planned
    started_us: int                    # when the query was started
    finished_us: int
    outcome: str                       # completed | interrupted | aborted (--abort-on-fail) | timed out | failed
    error: str | None = None
    receiver: dict | None = None       # the embedded receiver's counts for this run (webhook default)
    deployment: dict | None = None     # where it ran: `impulse.session.deployment`
    latency_definition: str = "end-to-end"   # or event-time / micro-batch (`impulse.loadtest.query.transform`)
    check: Any = None                  # `impulse.answer.CheckResult` of --check (None without it)
    warm_s: float | None = None        # seconds the warm pipeline ran before the load (None: it did not run)
    resumed: dict | None = None        # a query resumed from --checkpoint (`impulse.loadtest.load.resume`)
    _histograms: dict = field(default_factory=dict, repr=False)   # merged histograms (and stages), computed once

    @property
    def target_rate(self) -> float:
        return self.config.rate

    @property
    def target_events(self) -> int:
        return self.config.total_events

    @property
    def events(self) -> int:
        """Events delivered and committed."""
        return self.batches[-1].delivered if self.batches else 0

    @property
    def output_rows(self) -> int | None:
        """Rows the sink acknowledged (the project's sinks, or Spark's count for others); None when unknown."""
        counts = [b.output_rows for b in self.batches]
        return None if not counts or any(c is None for c in counts) else sum(counts)

    @property
    def first_batch_ms(self) -> int | None:
        """The first measured micro-batch's time (Spark's ``triggerExecution``): what a query's start still costs
        once the pipeline is warm. None without a batch."""
        return self.batches[0].durations.get("triggerExecution") if self.batches else None

    @property
    def errors(self) -> int:
        """Failed task attempts the sink recovered from (partitions retried) plus 1 if the query failed."""
        return sum(b.retried for b in self.batches) + (1 if self.outcome == "failed" else 0)

    @property
    def dead_lettered(self) -> int:
        """Events the target refused for good and the sink sent to its dead-letter target (its ``deadLettered``)."""
        return sum(b.dead_lettered for b in self.batches)

    @property
    def achieved_rate(self) -> float:
        """Events/s in steady state (`impulse.loadtest.measure.metrics.achieved_rate`); with stages, whose rate changes,
        the events over the time from the schedule's start to the last acknowledgement (per stage: `stage_results`)."""
        if self.config.stages is not None:
            return self.events / self.duration_s if self.duration_s > 0 else 0.0
        return achieved_rate(self.batches, self.target_events, self.schedule_start_us)

    @property
    def stage_results(self) -> list[StageResult]:
        """Per stage of the source option ``rateStages``: target vs achieved rate, latency (empty without it)."""
        plan = self.config.stages
        if plan is None:
            return []
        if "stages" not in self._histograms:
            self._histograms["stages"] = stage_results(plan, self.batches, self.schedule_start_us,
                                                       self.config.max_latency_s)
        return self._histograms["stages"]

    @property
    def rate_share(self) -> float:
        """Achieved / target rate: of the run, or with stages the lowest of its hold stages (all stages if none)."""
        stages = self.stage_results
        if stages:
            holds = [stage for stage in stages if stage.stage.hold] or stages
            return min(stage.rate_share for stage in holds)
        return self.achieved_rate / self.target_rate if self.target_rate else 0.0

    def histogram(self, part: str) -> LatencyHistogram:
        """The run's merged histogram of `part`: ``latency``, ``schedule_delay`` or ``delivery`` (`LATENCY_PARTS`)."""
        if part not in self._histograms:
            self._histograms[part] = merged_latency(self.batches, part)
        return self._histograms[part]

    @property
    def latency(self) -> LatencyHistogram:
        """End to end: each event's scheduled time → the target's acknowledgement."""
        return self.histogram("latency")

    @property
    def schedule_delay(self) -> LatencyHistogram:
        """Each event's scheduled time → the start of the micro-batch that read it."""
        return self.histogram("schedule_delay")

    @property
    def delivery(self) -> LatencyHistogram:
        """The start of the event's micro-batch → the acknowledgement of its partition."""
        return self.histogram("delivery")

    @property
    def max_lag(self) -> int:
        """The largest lag (events due − delivered) at any batch's acknowledgement."""
        return max((b.lag for b in self.batches), default=0)

    @property
    def bytes(self) -> int:
        return sum(b.bytes for b in self.batches)

    @property
    def duration_s(self) -> float:
        """From the schedule's start (or the query's) to the last acknowledgement."""
        origin = self.schedule_start_us or self.started_us
        end = self.batches[-1].ack_us if self.batches else self.finished_us
        return max(0.0, (end - origin) / 1e6)

    @property
    def verdict(self) -> Verdict:
        return assess(self, self.config.max_latency_s)

    @property
    def checks(self) -> list[Check]:
        """The run's ``--threshold`` checks, each pass/fail (empty without thresholds)."""
        return evaluate(self.config.parsed_thresholds(), self)

    @property
    def thresholds_failed(self) -> bool:
        return any(not check.passed for check in self.checks)

    def summary(self) -> dict:
        """The headline numbers (one CSV row, one JSON object)."""
        latency = percentiles_ms(self.latency)
        out = {
            "sink": self.sink, "partitions": self.config.partitions, "payloadBytes": self.config.payload_bytes,
            "trigger": self.config.trigger, "durationS": self.config.duration_s,
            "targetRate": self.target_rate, "achievedRate": round(self.achieved_rate, 1),
            "targetEvents": self.target_events, "events": self.events, "errors": self.errors,
            "deadLettered": self.dead_lettered,
            "batches": len(self.batches), "bytes": self.bytes, "outcome": self.outcome,
            "sustained": self.verdict.sustained,
        }
        out.update({_LATENCY_KEYS[name]: value for name, value in latency.items()})
        out["outputRows"] = self.output_rows
        out["latencyDefinition"] = self.latency_definition
        out["firstBatchMs"] = self.first_batch_ms
        out["warmupS"] = None if self.warm_s is None else round(self.warm_s, 2)
        if self.receiver is not None:
            out["receiverRows"] = self.receiver["rows"]
        if self.resumed is not None:
            out["resumed"] = self.resumed
        return out

    def to_dict(self) -> dict:
        origin = self.schedule_start_us or self.started_us
        config = public_config(self.config)
        config["options"] = self.options
        return {
            "summary": self.summary(),
            "config": config,
            "queryId": self.query_id,
            "deployment": self.deployment,
            "scheduleStartUs": self.schedule_start_us, "startedUs": self.started_us, "finishedUs": self.finished_us,
            "error": self.error,
            "verdict": {"sustained": self.verdict.sustained, "reasons": list(self.verdict.reasons)},
            "thresholds": [check.to_dict() for check in self.checks],
            "check": self.check.to_json() if self.check is not None else None,
            "checkDetail": ({"basis": self.check.basis, "examples": dict(self.check.examples)}
                            if self.check is not None else None),
            "latencyMs": percentiles_ms(self.latency),
            "scheduleDelayMs": percentiles_ms(self.schedule_delay),
            "deliveryMs": percentiles_ms(self.delivery),
            "latencyHistogram": self.latency.to_dict(),
            "scheduleDelayHistogram": self.schedule_delay.to_dict(),
            "deliveryHistogram": self.delivery.to_dict(),
            "phasesMs": phase_stats(self.batches),
            "stages": [stage.to_dict() for stage in self.stage_results],
            "receiver": self.receiver,
            "batches": [b.row(origin) for b in self.batches],
        }


#: The settings of a `LoadConfig` that are tables of options: each may hold a password or a key.
_OPTION_TABLES = ("options", "source_options", "via_options", "spark_conf")


def public_config(config: LoadConfig) -> dict:
    """`config` as report.json and the HTML report show it: the secret-looking values of its option tables hidden
    and its Spark Connect URL without its parameters (``;token=…``), by `connectors.redact`."""
    out = asdict(config)
    for name in _OPTION_TABLES:
        out[name] = redact_options(out[name])
    if out.get("remote"):
        out["remote"] = redact_url(out["remote"].split(";", 1)[0])
    return out
