"""End to end on a real Spark standalone cluster: a master and two one-core workers, so every query has two
executor JVMs, each with its own Python workers. The driver runs in `job.py` (a SparkContext of its own).

The kill test SIGKILLs the executor JVM that is in the middle of writing a partition (held there by the
``stall`` fault, see `connectors.faults`): the task is retried on another executor and each sink still holds
every event exactly once (Kafka read with ``read_committed``, Redis, the deduping HTTP receiver).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from connectors.faults import stalled_among
from tests.cluster.scenarios import expected
from tests.conftest import sink_names
from connectors.servers import processes_under, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[2]
SINKS = sink_names()  # every sink of connectors.registry


def _driver_env() -> dict[str, str]:
    """A driver's environment: this interpreter for every Python Spark starts, this checkout first."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def job(master: str, steps: list[dict], cwd: Path, wait: bool = True):
    """Start `job.py` with these steps; with `wait`, its parsed RESULT (failing with its output otherwise)."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.cluster.job", json.dumps({"master": master, "steps": steps})],
                            env=_driver_env(), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return finish(proc, cwd) if wait else proc


def finish(proc: subprocess.Popen, cwd: Path, timeout: float = 600) -> dict:
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"job failed ({proc.returncode}):\n{out[-3000:]}\n{err[-6000:]}"
    # the driver's Python processes run in `cwd`: none may outlive the application
    wait_until(lambda: not processes_under(cwd), 30, 0.2, lambda: f"driver processes to end: {processes_under(cwd)}")
    return json.loads(lines[-1][len("RESULT "):])


PIPELINE = """\
from pyspark.sql import functions as F


@F.udf("string")
def parity(counter):
    return "even" if counter % 2 == 0 else "odd"


def labelled(events):
    return events.select("subtask_index", "counter", parity("counter").alias("parity"))
"""


@pytest.fixture(scope="module")
def run(spark_cluster, sink_adapters, tmp_path_factory):
    """One application for the end-to-end checks: each sink, the batch read, a restart from the checkpoint and
    ``impulse-load --master`` (in the same driver: another application would pay the executors' start again)."""
    base = tmp_path_factory.mktemp("cluster-e2e")
    spaces = {sink: f"s{uuid.uuid4().hex[:8]}" for sink in [*SINKS, "restart"]}
    adapters = {**sink_adapters, "restart": sink_adapters["redis-sink"]}
    for sink, space in spaces.items():
        adapters[sink].prepare(space)
    steps = [{"write": adapters[s].format, "options": dict(adapters[s].options(spaces[s])),
              "checkpoint": str(base / s), "limit": 400, "per_trigger": 400} for s in SINKS]
    restart = {"write": "redis-sink", "options": dict(adapters["restart"].options(spaces["restart"])),
               "checkpoint": str(base / "restart"), "per_trigger": 100}
    steps += [{"batch_read": 301}, {**restart, "limit": 200}, {"uncommit": restart["checkpoint"]},
              {**restart, "limit": 300},
              {"harness": ["--master", spark_cluster.master_url, "--rate", "200", "--duration", "2s",
                           "--drain-timeout", "5m", "--output", str(base / "report")]}]
    # a user's module in the driver's working directory only: the executors import it because the harness ships it
    (base / "cluster_pipeline.py").write_text(PIPELINE)
    steps.append({"harness": ["--master", spark_cluster.master_url, "--transform", "cluster_pipeline:labelled",
                              "--check", "--rate", "200", "--duration", "2s", "--drain-timeout", "5m",
                              "--output", str(base / "report-transform")]})
    result = job(spark_cluster.master_url, steps, base)
    result["transform_output"] = str(base / "report-transform")
    result["harness_output"] = str(base / "report")
    yield result, {sink: adapters[sink].read_back(space) for sink, space in spaces.items()}
    for sink, space in spaces.items():
        adapters[sink].cleanup(space)


def test_two_executors_in_separate_processes(run):
    result, _ = run
    assert result["executors"] == 2


@pytest.mark.parametrize("sink", SINKS)
def test_impulse_to_each_sink_lands_every_event_once(run, sink):
    _, landed = run
    assert sorted(landed[sink]) == expected(400)


def test_bounded_batch_read(run):
    result, _ = run
    assert [tuple(pair) for pair in result["steps"][3]] == expected(301)


def test_restart_from_checkpoint_replays_the_uncommitted_batch_without_duplicates(run):
    result, landed = run
    first_run_last, uncommitted = result["steps"][4], result["steps"][5]
    assert first_run_last == 1 and uncommitted == 1
    assert sorted(landed["restart"]) == expected(300)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _executor_of(pid: int, executors: list[int]) -> int:
    seen = pid
    while seen > 1 and seen not in executors:
        seen = _parent(seen)
    assert seen in executors, f"the stalled Python worker {pid} runs under no executor JVM of {executors}"
    return seen


def test_sigkill_of_an_executor_mid_write_keeps_every_sink_exactly_once(spark_cluster, sink_adapters, tmp_path):
    if not spark_cluster.managed:
        pytest.skip("SPARK_MASTER_URL: this test kills executor JVMs, so it needs a cluster it started itself")
    spaces = {sink: f"k{uuid.uuid4().hex[:8]}" for sink in SINKS}
    stall = "point=mid_write,action=stall,batch=0,partition=0,attempt=0"
    steps = []
    for sink in SINKS:
        sink_adapters[sink].prepare(spaces[sink])
        steps.append({"write": sink_adapters[sink].format, "limit": 400, "per_trigger": 200,
                      "options": {**sink_adapters[sink].options(spaces[sink]), "faultInjection": stall},
                      "checkpoint": str(tmp_path / sink)})
    proc = job(spark_cluster.master_url, steps, tmp_path, wait=False)
    try:
        killed = []
        for sink in SINKS:  # the job runs one query per sink, in this order; each stalls once
            stalled = wait_until(lambda: stalled_among(processes_under(spark_cluster.dir)) or proc.poll() is not None,
                                 300, 0.1,
                                 f"a {sink} write to stall")
            assert proc.poll() is None, f"the job ended before the {sink} write stalled: {proc.communicate()}"
            executor = _executor_of(stalled, spark_cluster.executor_pids())
            os.kill(executor, signal.SIGKILL)
            killed.append(executor)
            # the executor's Python daemon and workers (the stalled one included) go with it
            wait_until(lambda: not Path(f"/proc/{stalled}").exists() and executor not in spark_cluster.executor_pids(),
                       60, 0.1, f"executor {executor} and its stalled Python worker {stalled} to be gone")
        result = finish(proc, tmp_path)
        assert len(set(killed)) == len(SINKS) and result["steps"] == [1] * len(SINKS)
        for sink in SINKS:
            assert sorted(sink_adapters[sink].read_back(spaces[sink])) == expected(400), sink
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for sink in SINKS:
            sink_adapters[sink].cleanup(spaces[sink])


def test_load_harness_on_the_master_names_the_deployment(run, spark_cluster):
    result, _ = run
    done, output = result["steps"][7], Path(result["harness_output"])
    assert done["code"] == 0, done["stdout"][-3000:]
    report = json.loads((output / "report.json").read_text())
    assert report["summary"]["events"] == 400 and report["summary"]["outcome"] == "completed"
    assert report["deployment"]["master"] == spark_cluster.master_url and report["deployment"]["remote"] is None
    assert report["deployment"]["executors"] == 2 and report["deployment"]["cores"] == 2
    assert f"on master {spark_cluster.master_url}, 2 executors, 2 cores" in done["stdout"]


def test_load_harness_runs_a_user_module_on_the_executors_and_checks_it(run):
    result, _ = run
    done = result["steps"][8]
    assert done["code"] == 0, done["stdout"][-3000:]
    report = json.loads((Path(result["transform_output"]) / "report.json").read_text())
    assert report["check"] == {"passed": True, "expected": 400, "delivered": 400, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    assert report["deployment"]["executors"] == 2 and "check: pass" in done["stdout"]
