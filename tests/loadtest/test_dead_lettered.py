"""Dead-lettered events in the harness, without Spark: a sink's ``deadLettered`` reaches each batch, the run's
summary and report, the Prometheus metrics and the ``deadLettered`` threshold."""

from __future__ import annotations

import pytest

from impulse.loadtest import LoadConfig
from impulse.loadtest.load.run import LoadResult
from impulse.loadtest.measure.metrics import Batch, Collector
from impulse.loadtest.reports.prometheus import Exporter
from impulse.loadtest.reports.report import summary_text
from impulse.loadtest.settings.thresholds import evaluate, hopeless, parse_threshold

DEAD = (0, 7, 5)  # dead-lettered events of each batch


def _batches() -> list[Batch]:
    return [Batch(i, 0, 1, 1, 100, 100 * (i + 1), 0, 0, 2_400, 0, {}, {}, {}, {}, dead_lettered=dead)
            for i, dead in enumerate(DEAD)]


def _result() -> LoadResult:
    return LoadResult(LoadConfig(sink="redis-sink", rate=100, duration_s=3), "redis-sink", {}, None, _batches(),
                      0, 0, 3_000_000, "completed")


def test_a_batchs_metrics_line_gives_its_dead_lettered_count():
    collector = Collector(None, total_events=200, partitions=1, payload_bytes=0, metrics_path="unused")
    offsets = {"startTime": 0, "anchorTime": 0, "delayUs": 10_000, "rampUs": 0, "counters": [100],
               "anchorCounters": [0]}  # one partition, 100 events/s from 0
    collector._metrics[4] = {"ackUs": 2_000_000, "bytes": 2_400, "deadLettered": 7}
    progress = {"batchId": 4, "timestamp": "1970-01-01T00:00:01.000Z", "numInputRows": 100,
                "durationMs": {"addBatch": 5, "triggerExecution": 10},
                "sources": [{"startOffset": None, "endOffset": offsets}]}
    batch = collector._batch(progress)
    assert batch.dead_lettered == 7 and batch.row(0)["deadLettered"] == 7


def test_the_summary_and_report_count_the_runs_dead_letters():
    result = _result()
    assert result.dead_lettered == sum(DEAD) == result.summary()["deadLettered"]
    line = next(line for line in summary_text(result).splitlines() if "dead-lettered" in line)
    assert line.split()[-1] == str(sum(DEAD))


def test_prometheus_exports_the_dead_lettered_events():
    pytest.importorskip("prometheus_client")

    collector = Collector(None, total_events=300, partitions=1, payload_bytes=0)
    collector.batches = _batches()
    exporter = Exporter()
    exporter.attach(collector, LoadConfig(sink="redis-sink", rate=100, duration_s=3), "run-1")
    samples = {s.name: s.value for family in exporter.collect() for s in family.samples}
    assert samples["impulse_load_events_dead_lettered_total"] == sum(DEAD)


def test_the_dead_lettered_threshold():
    threshold = parse_threshold("deadLettered == 0")
    assert (threshold.metric, threshold.op, threshold.limit, threshold.text) == ("deadlettered", "==", 0,
                                                                                 "deadLettered == 0")
    [check] = evaluate([threshold], _result())
    assert not check.passed and check.actual == sum(DEAD) and check.measured == str(sum(DEAD))
    [check] = evaluate([parse_threshold(f"deadLettered <= {sum(DEAD)}")], _result())
    assert check.passed
    collector = Collector(None, total_events=300, partitions=1, payload_bytes=0)
    collector.batches = _batches()[:1]  # none dead-lettered yet: the check can still pass
    assert hopeless(threshold, collector) is None
    collector.batches = _batches()
    assert hopeless(threshold, collector) == f"deadLettered == 0: {sum(DEAD)} events dead-lettered so far"
    with pytest.raises(Exception, match="deadlettered takes == or <= or <, not >="):
        parse_threshold("deadLettered >= 1")
