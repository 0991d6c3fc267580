"""What the harness settles before the load: every setup that cannot work is refused (exit 2) before any query of the
run starts, and the measured run starts warm (`impulse.loadtest.load.warm_pipeline`).

The refusals run ``main()`` in-process on the shared session with the run's query starts recorded; the runs that need
a session of their own (a module whose top level makes a UDF needs the harness to import it once its session exists;
real-time mode through Kafka) run the CLI in a fresh process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import impulse.loadtest.load.orchestrate as orchestrate_module
import impulse.loadtest.load.run as run_module
import impulse.loadtest.load.warm_pipeline as warm_module
from impulse.loadtest.cli import main
from tests.readme import DOCS, python_block

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = "tests.loadtest.pipelines"
RUN = ["--rate", "400", "--duration", "4s", "--partitions", "2", "--trigger", "500ms"]

# A user's module written the usual way: the UDF made at import, a static table joined, a filter on the score.
UDF_PIPELINE = python_block("## A pipeline with a Python UDF under a ramp", page=DOCS / "tutorial" / "index.md")


@pytest.fixture
def starts(monkeypatch) -> list:
    """The run's query starts (the warm-up's, the warm pipeline's and the measured query's), recorded."""
    calls: list = []

    def record(original, what):
        def wrapper(*args, **kwargs):
            calls.append(what)
            return original(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(orchestrate_module, "warm_up", record(orchestrate_module.warm_up, "warm-up"))
    monkeypatch.setattr(warm_module, "start", record(warm_module.start, "warm pipeline"))
    monkeypatch.setattr(run_module, "start_query", record(run_module.start_query, "measured query"))
    return calls


@pytest.mark.integration
@pytest.mark.webhook
def test_every_impossible_setup_exits_2_before_any_query_starts_with_one_line_and_no_java_trace(spark, starts,
                                                                                                  capsys):
    for argv, words in (
            (["--transform", f"{PIPELINES}:per_second", "--check"],
             r"--check: --transform tests.loadtest.pipelines:per_second aggregates in append mode.*"
             r"add --event-time-column window_end"),
            (["--transform", f"{PIPELINES}:raises"], r"the function raised: ZeroDivisionError: division by zero"),
            (["--transform", f"{PIPELINES}:returns_none"], r"returned NoneType, not a DataFrame"),
            (["--transform", f"{PIPELINES}:returns_a_batch_frame"], r"returned a batch DataFrame"),
            (["--sql", "SELEC counter FROM events"], r"--sql SELEC counter FROM events: Spark cannot run it: \[PARSE_SYNTAX_ERROR\]"),
            (["--transform", f"{PIPELINES}:evens", "--event-time-column", "nope"],
             r"--event-time-column nope: not a column of the output \(counter, subtask_index, timestamp\)")):
        assert main([*RUN, *argv]) == 2, argv
        captured = capsys.readouterr()
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and re.search(words, err[0]), (argv, captured.err)
        assert len(captured.err) < 1500, (argv, len(captured.err))
        assert "\tat org.apache" not in captured.err and "Traceback" not in captured.err + captured.out
        assert starts == [], (argv, starts)  # refused before the warm-up: nothing ran, let alone the load


@pytest.mark.integration
@pytest.mark.webhook
def test_a_check_on_a_windowed_query_with_its_window_column_is_not_refused(spark, starts, tmp_path, capsys):
    code = main([*RUN, "--transform", f"{PIPELINES}:per_second", "--check", "--event-time-column", "window_end",
                 "--output", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert starts == ["warm-up", "warm pipeline", "measured query"]
    summary = json.loads((tmp_path / "report.json").read_text())["summary"]
    assert summary["firstBatchMs"] > 0 and summary["warmupS"] > 0, summary


def _cli(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "impulse.loadtest", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.integration
@pytest.mark.webhook
@pytest.mark.slow
def test_a_module_with_a_top_level_udf_runs_each_ramp_step_warm(tmp_path):
    """The module is imported once the harness's session exists, and each ramp step starts after its own warm
    pipeline: its first measured micro-batch is far faster than the same pipeline's first micro-batch cold
    (``--no-warmup``: Python UDF workers start and the plan compiles inside it, 6–30 s on this machine). Whether the
    steps also reach 200 and 400 events/s within 5 s depends on how busy the machine is: a ramp that did not fails
    its gate (exit 99) with a JUnit failure, and one that did passes with none."""
    name = f"udf_pipeline_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(UDF_PIPELINE)
    done = _cli(["--transform", f"{name}:enrich", "--ramp", "200:200:400", "--step-duration", "8s",
                 "--trigger", "1s", "--output", str(tmp_path / "warm"), "--junit", str(tmp_path / "junit.xml")],
                tmp_path)
    assert done.returncode in (0, 99), done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "SESSION_OR_CONTEXT_NOT_EXISTS" not in done.stderr
    report = json.loads((tmp_path / "warm" / "report.json").read_text())
    for step in report["steps"]:
        summary = step["summary"]
        assert summary["outcome"] == "completed" and summary["warmupS"] > 0 and summary["firstBatchMs"] > 0, summary
        assert 0 < summary["outputRows"] < summary["events"], summary  # the filter on the UDF's score kept some
    failures = ET.parse(tmp_path / "junit.xml").getroot().findall(".//failure")
    assert (done.returncode == 0) == (not failures), [f.get("message") for f in failures]

    cold = _cli(["--transform", f"{name}:enrich", "--rate", "200", "--duration", "8s", "--trigger", "1s",
                 "--no-warmup", "--output", str(tmp_path / "cold")], tmp_path)
    assert cold.returncode == 0, cold.stdout + cold.stderr
    cold_first = json.loads((tmp_path / "cold" / "report.json").read_text())["summary"]["firstBatchMs"]
    warm_first = report["steps"][0]["summary"]["firstBatchMs"]
    assert warm_first * 2 < cold_first, (warm_first, cold_first)


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_real_time_mode_refuses_a_python_udf_before_the_load_and_runs_quietly_with_default_options(kafka_broker,
                                                                                                   tmp_path):
    from connectors.kafka_topics import read_topic

    name = f"udf_pipeline_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(UDF_PIPELINE)
    topics = {kind: f"rt-{kind}-{uuid.uuid4().hex[:8]}" for kind in ("in", "out", "in2", "out2")}

    def args(inp: str, out: str) -> list[str]:
        return ["--via", f"kafka://{kafka_broker.bootstrap}/{topics[inp]}", "--create-topic", "2", "--sink", "kafka",
                "-o", f"kafka.bootstrap.servers={kafka_broker.bootstrap}", "-o", f"topic={topics[out]}",
                "--pipeline-trigger", "realTime=5s", "--rate", "200", "--duration", "4s", "--decode"]

    refused = _cli([*args("in", "out"), "--transform", f"{name}:enrich"], tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    err = [line for line in refused.stderr.splitlines() if line.startswith("impulse-load:")]
    assert len(err) == 1 and re.search(r"--pipeline-trigger realTime=5s: Spark's real-time mode refuses this pipeline: "
                                       r"the operator\(s\) \w*EvalPythonExec .*OPERATOR_OR_SINK_NOT_IN_ALLOWLIST",
                                       err[0]), refused.stderr
    assert "\tat " not in refused.stderr and "Traceback" not in refused.stderr
    assert list(read_topic({"bootstrap.servers": kafka_broker.bootstrap}, topics["in"])) == []  # nothing produced

    ran = _cli(args("in2", "out2"), tmp_path)   # default master: the harness sizes the local session's slots
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "completed" in ran.stdout and "--master" not in ran.stderr, ran.stdout + ran.stderr
    noisy = [line for line in ran.stderr.splitlines()
             if re.search(r"\bERROR\b|Exception|^\s+at ", line)]
    assert noisy == [], "\n".join(noisy[:20])
