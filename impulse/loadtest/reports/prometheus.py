"""Live Prometheus metrics of a load run (``--metrics-port``): the text exposition format over HTTP.

Served by the ``prometheus-client`` package from a daemon thread of the harness while the run lasts
(``http://HOST:PORT/metrics``), from a registry of its own. Every series is labelled ``sink`` and
``run_id`` (the streaming query id; each ramp step is a run of its own). Computed at each scrape
from the running `impulse.loadtest.measure.metrics.Collector`:

- counters ``impulse_load_events_due_total`` (the schedule's events due so far),
  ``impulse_load_events_delivered_total`` (delivered and committed),
  ``impulse_load_events_failed_total`` (events of partitions whose write failed and was retried);
- gauges ``impulse_load_lag_events`` (due − delivered now), ``impulse_load_target_rate``
  and ``impulse_load_achieved_rate`` (events/s, over the last 5 s of acknowledgements);
- histograms ``impulse_load_latency_seconds`` (end to end, from each event's scheduled time),
  ``impulse_load_schedule_delay_seconds`` and ``impulse_load_delivery_seconds`` (its two parts),
  cut from the run's HdrHistograms, and ``impulse_load_batch_phase_seconds{phase=…}`` (Spark's
  per-phase durations of each micro-batch).

Through Kafka (``--via``) the series are the producer's, impulse → the input topic (`run_id` the pipeline's query
id; the producer's for an ``availableNow`` pipeline, which starts later), and the gauge
``impulse_load_pipeline_lag_events`` says how far the user's pipeline is behind: the input topic's committed
events it had not read at its last micro-batch (absent before its first).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

from impulse.loadtest.measure.metrics import PHASES, recent_rate
from impulse.loadtest.settings.units import LoadError

__all__ = ["Exporter", "LATENCY_BUCKETS_S", "PHASE_BUCKETS_S"]

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
PHASE_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_PARTS = (("latency", "end-to-end latency: each event's scheduled time to the target's acknowledgement"),
          ("schedule_delay", "an event's scheduled time to the start of the micro-batch that read it"),
          ("delivery", "the start of an event's micro-batch to the acknowledgement of its partition"))


def _le(bound: float) -> str:
    return f"{bound:g}"


class Exporter:
    """``with Exporter(port=9464) as e: run_load(…, exporter=e)``; port 0 binds a free one (`port` tells which)."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        try:
            from prometheus_client import CollectorRegistry  # noqa: PLC0415 - the load extra's prometheus-client
        except ImportError as exc:
            raise LoadError("--metrics-port needs prometheus-client: pip install 'pyspark-impulse[load]'") from exc
        self.host, self.port = host, port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._lock = threading.Lock()
        self._run: tuple | None = None   # (collector, config, run_id, pipeline_lag)
        self._server = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def start(self) -> "Exporter":
        from prometheus_client import start_http_server  # noqa: PLC0415 - the load extra's prometheus-client

        try:
            self._server, _ = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as exc:
            raise LoadError(f"--metrics-port {self.port}: cannot listen on {self.host}:{self.port}: {exc.strerror}; "
                            "choose a free port (0 picks one)") from None
        self.port = self._server.server_port
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> "Exporter":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def attach(self, collector, config, run_id: str, pipeline_lag: Callable[[], int | None] | None = None) -> None:
        """From now on, serve the metrics of this run (a ramp attaches each step in turn); `pipeline_lag` (through
        Kafka) gives the pipeline's lag in events at each scrape, None while it has none."""
        with self._lock:
            self._run = (collector, config, run_id, pipeline_lag)

    # -- prometheus_client's custom-collector protocol ------------------------------------------------
    def collect(self) -> Iterator:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily  # noqa: PLC0415 - the load extra's prometheus-client

        with self._lock:
            run = self._run
        if run is None:
            return
        collector, config, run_id, pipeline_lag = run
        labels, values = ["sink", "run_id"], [config.sink, run_id]
        now_us = time.time_ns() // 1_000
        with collector.lock:
            batches = list(collector.batches)
            delivered = collector.delivered
            due = max(collector.due(now_us), delivered)
            histograms = {part: _buckets(getattr(collector, part)) for part, _ in _PARTS}

        def one(family, value):
            family.add_metric(values, value)
            return family

        yield one(CounterMetricFamily("impulse_load_events_due", "events of the schedule due so far", labels=labels),
                  due)
        yield one(CounterMetricFamily("impulse_load_events_delivered", "events delivered and committed",
                                      labels=labels), delivered)
        yield one(CounterMetricFamily("impulse_load_events_failed",
                                      "events of partitions whose write failed and was retried", labels=labels),
                  sum(b.retried_rows for b in batches))
        yield one(CounterMetricFamily("impulse_load_events_dead_lettered",
                                      "events the target refused for good, sent to the sink's dead-letter target",
                                      labels=labels), sum(b.dead_lettered for b in batches))
        yield one(GaugeMetricFamily("impulse_load_lag_events", "events due but not yet delivered", labels=labels),
                  due - delivered)
        yield one(GaugeMetricFamily("impulse_load_target_rate", "target rate, events/s (with rateStages: the "
                                    "stages' rate now)", labels=labels), collector.target_rate(now_us, config.rate))
        yield one(GaugeMetricFamily("impulse_load_achieved_rate", "events/s delivered over the last 5 s",
                                    labels=labels), recent_rate(batches, now_us) or 0.0)
        lag = pipeline_lag() if pipeline_lag is not None else None
        if lag is not None:
            yield one(GaugeMetricFamily("impulse_load_pipeline_lag_events", "through Kafka: events of the input "
                                        "topic the pipeline had not read at its last micro-batch", labels=labels), lag)
        for part, doc in _PARTS:
            buckets, total_s = histograms[part]
            family = HistogramMetricFamily(f"impulse_load_{part}_seconds", doc, labels=labels)
            family.add_metric(values, buckets, sum_value=total_s)
            yield family
        phases = HistogramMetricFamily("impulse_load_batch_phase_seconds",
                                       "Spark's duration of each phase of a micro-batch", labels=labels + ["phase"])
        for phase in PHASES:
            durations = [b.durations.get(phase, 0) / 1e3 for b in batches]
            buckets = [(_le(bound), sum(d <= bound for d in durations)) for bound in PHASE_BUCKETS_S]
            phases.add_metric(values + [phase], buckets + [("+Inf", len(durations))], sum_value=sum(durations))
        yield phases


def _buckets(histogram) -> tuple[list[tuple[str, int]], float]:
    """Cumulative Prometheus buckets (seconds) of a `connectors.latency.LatencyHistogram`, and its sum in s."""
    buckets = [(_le(bound), histogram.count_at_or_below(bound * 1e6)) for bound in LATENCY_BUCKETS_S]
    return buckets + [("+Inf", histogram.count)], histogram.total_us / 1e6
