"""The load tests shipped in examples/: each reads (with its secrets from the environment) and each runs at a small
scale against a real target, through ``impulse-load run`` in-process on the shared Spark session; its thresholds
decide the exit code (0 all passed, 99 one failed)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from impulse.loadtest.cli import main
from impulse.loadtest.scenario import load_plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ENVIRON = {"REDIS_URL": "redis://127.0.0.1:6379", "KAFKA_BROKERS": "127.0.0.1:9092"}


def test_every_example_reads_and_has_thresholds():
    files = sorted(EXAMPLES.glob("*.toml"))
    assert [f.name for f in files] == ["soak-webhook.toml", "spike-redis.toml", "step-kafka.toml"]
    for path in files:
        plan = load_plan(path, environ=ENVIRON)
        assert plan.scenarios and all(s.config.thresholds for s in plan.scenarios), path.name
    spike = load_plan(EXAMPLES / "spike-redis.toml", environ=ENVIRON).scenarios[0].config
    assert [(s.start_rate, s.target_rate) for s in spike.stages.stages if s.hold] == [(5e3, 5e3), (2e4, 2e4),
                                                                                     (5e3, 5e3)]


def _run(capsys, path: Path, output: Path, *argv: str) -> tuple[int, dict, str]:
    code = main(["run", str(path), "--output", str(output), *argv])
    out = capsys.readouterr().out
    report = json.loads((output / "report.json").read_text())
    assert report["mode"] == "scenarios" and report["file"] == str(path)
    for section in report["scenarios"]:
        assert section["thresholds"], section["name"]
        failed = any(not check["passed"] for check in section["thresholds"])
        # completed, or stopped by abort-on-fail once a threshold failed for good (a loaded machine's cold start)
        assert section["summary"]["outcome"] == "completed" or (section["summary"]["outcome"] == "aborted" and failed), \
            (section["name"], section["error"], out)
    failed = any(not check["passed"] for section in report["scenarios"] for check in section["thresholds"])
    assert code == (99 if failed else 0), out  # the thresholds decide the exit code
    return code, report, out


@pytest.mark.integration
@pytest.mark.webhook
def test_the_soak_example_runs_into_the_embedded_receiver(spark, tmp_path, capsys):
    _, report, out = _run(capsys, EXAMPLES / "soak-webhook.toml", tmp_path, "--duration", "3s", "--rate", "2000")
    (soak,) = report["scenarios"]
    assert soak["name"] == "soak" and soak["summary"]["targetEvents"] == 6_000
    events = soak["summary"]["events"]
    assert events == 6_000 or soak["summary"]["outcome"] == "aborted"
    assert soak["receiver"]["rows"] >= events > 0  # the embedded receiver holds every committed event
    assert "impulse-load summary of 'soak': webhook-sink" in out


@pytest.mark.integration
@pytest.mark.kafka
def test_the_kafka_step_example_runs_its_scenarios_one_after_another(spark, kafka_broker, tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.setenv("KAFKA_BROKERS", kafka_broker.bootstrap)
    topic = kafka_broker.create_topic(f"steps-{uuid.uuid4().hex[:8]}", partitions=2)
    rates = {"step-10k": 1_000, "step-20k": 2_000, "step-40k": 4_000}
    sets = [arg for name, rate in rates.items() for arg in ("--set", f"scenario.{name}.rate={rate}")]
    _, report, out = _run(capsys, EXAMPLES / "step-kafka.toml", tmp_path, "--duration", "2s", "--partitions", "2",
                          "-o", f"topic={topic}", *sets)
    assert [(s["name"], s["summary"]["targetRate"], s["summary"]["events"]) for s in report["scenarios"]] == [
        (name, rate, 2 * rate) for name, rate in rates.items()]
    assert out.index("scenario 1/3: step-10k") < out.index("scenario 2/3: step-20k") < out.index("scenario 3/3")
    assert len(kafka_broker.consume_all(topic)) == sum(2 * rate for rate in rates.values())  # exactly once


@pytest.mark.integration
@pytest.mark.redis
def test_the_spike_example_reports_every_stage(spark, redis_server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    stages = "1s:1000,3s:1000,1s:4000,3s:4000,1s:1000,3s:1000"   # the example's shape, 5x slower
    _, report, out = _run(capsys, EXAMPLES / "spike-redis.toml", tmp_path, "--set", f"source.rateStages={stages}",
                          "--partitions", "2", "-o", f"keyPrefix=spike-{uuid.uuid4().hex[:8]}:")
    (spike,) = report["scenarios"]
    assert [s["stage"] for s in spike["stages"]] == [1, 2, 3, 4, 5, 6]
    assert sum(s["events"] for s in spike["stages"]) == spike["summary"]["events"]
    for stage in spike["stages"]:
        if stage["sustained"]:  # a sustained hold kept up: ≥ 95 % of its rate (above 100 % only while draining a
            assert stage["achievedRate"] >= 0.95 * stage["targetRate"], stage  # backlog of the stage before)
            assert stage["latencyMs"]["p99"] <= 2_000, stage   # the example's max-latency
    # After the ramp from 0 there is no backlog to drain. The achieved rate is the slope of delivered events over
    # acknowledgement times: on this 3-second hold (the example's 20 s, 5x shorter for CI) a few micro-batches make
    # it, and one batch's jitter moves it (14 % seen in a full CI run, both pytest workers busy); the full-size
    # example held within 2.6 % (README). A wrong rate (twice or half the target) still fails.
    first_hold = spike["stages"][1]
    if first_hold["sustained"]:
        assert abs(first_hold["achievedRate"] / first_hold["targetRate"] - 1) <= 0.25, first_hold
    assert "20,000" not in out and "hold 4,000/s" in out
