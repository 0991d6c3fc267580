"""``--sink delta``: Delta's session settings set by the harness, the probe refusing a Delta that cannot run on the
session's Spark (exit 2, before any load), and Delta targets read back by ``--check``.

Delta 4.4.0 (``io.delta:delta-spark_2.13:4.4.0`` from Maven Central) runs on Spark 4.2 and fails on 4.3 (a
``NoSuchMethodError`` at its first read). The runs writing Delta are marked ``delta`` and run where this PySpark is
4.2 (``bash tests/run --lowest`` selects them); elsewhere the refusal is tested. Each run is ``impulse-load`` in a
process of its own (a session's packages are fixed when it starts), its jars resolved through an Ivy cache under
``$IMPULSE_CACHE/ivy``: fetched from Maven Central by the first run, read from the cache after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from connectors.servers.base import cache_root
from impulse.loadtest.settings import delta

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = "tests.loadtest.pipelines"
#: Delta 4.4.0 is built for Spark 4.2 (measured: it fails on 4.3)
DELTA_RUNS_HERE = pyspark.__version__.startswith("4.2.")
#: no warm-up: it warms Python's workers into noop, not Delta, and costs each run's process ~40 s under CI's load
RUN = ["--rate", "200", "--duration", "3s", "--partitions", "2", "--trigger", "500ms", "--drain-timeout", "5m",
       "--no-warmup", "--master", "local[2]"]


def delta_flags() -> list[str]:
    """Delta's jars, resolved through the Ivy cache under ``$IMPULSE_CACHE`` (fetched once)."""
    return ["--packages", delta.PACKAGE_EXAMPLE, "--conf", f"spark.jars.ivy={cache_root() / 'ivy'}"]


def impulse_load(tmp_path: Path, *argv: str, env: dict | None = None) -> tuple[int, str, dict | None]:
    """``python -m impulse.loadtest ARGV --output DIR`` in a new process: (exit code, output, report.json or None)."""
    out_dir = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}"
    environ = {**os.environ, **(env or {}),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "impulse.loadtest", *argv, "--output", str(out_dir)], cwd=tmp_path,
                          env=environ, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    report = out_dir / "report.json"
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text()) if report.exists() else None


# ------------------------------------------------------------------------------------------- no Spark


def test_delta_s_extension_and_catalog_are_added_beside_the_user_s_settings():
    assert delta.session_settings(["noop"], {"spark.x": 1}) == {"spark.x": "1"}
    assert delta.session_settings(["noop", "delta"], {}) == {delta.EXTENSIONS_KEY: delta.EXTENSION,
                                                             delta.CATALOG_KEY: delta.CATALOG,
                                                             delta.SNAPSHOT_PARTITIONS_KEY: "2"}
    given = {delta.EXTENSIONS_KEY: "my.Extension", delta.CATALOG_KEY: "my.Catalog",
             "spark.sql.shuffle.partitions": "8"}
    assert delta.session_settings(["delta"], given) == {**given, delta.EXTENSIONS_KEY: f"my.Extension,{delta.EXTENSION}",
                                                        delta.SNAPSHOT_PARTITIONS_KEY: "8"}
    mine = {delta.SNAPSHOT_PARTITIONS_KEY: "50"}
    assert delta.session_settings(["delta"], mine)[delta.SNAPSHOT_PARTITIONS_KEY] == "50"
    twice = {delta.EXTENSIONS_KEY: f"{delta.EXTENSION}, my.Extension"}
    assert delta.session_settings(["delta"], twice)[delta.EXTENSIONS_KEY] == f"{delta.EXTENSION},my.Extension"
    assert delta.session_settings(["foreachBatch"], {}, ["a:b:1," + delta.PACKAGE_EXAMPLE])[delta.CATALOG_KEY] == \
        delta.CATALOG                                     # Delta's jars given: a foreachBatch may MERGE into Delta
    assert delta.session_settings(["foreachBatch"], {}, ["io.deltax:other:1"]) == {}


def test_a_delta_sink_needs_a_path_like_a_file_sink():
    from impulse.loadtest.settings.target import preflight
    from impulse.loadtest.settings.units import LoadError

    with pytest.raises(LoadError, match=r"--sink delta writes files to a directory: give it with -o path=DIR"):
        preflight("delta", {}, 0)
    assert preflight("delta", {"table": "events"}, 0).sink == "delta"


def test_a_toml_file_holds_the_delta_and_foreach_batch_keys(tmp_path):
    from impulse.loadtest.scenario import load_plan

    file = tmp_path / "delta.toml"
    file.write_text(f"""
packages = ["{delta.PACKAGE_EXAMPLE}"]
spark-conf = {{ "spark.sql.shuffle.partitions" = "4" }}
check = true

[[scenario]]
name = "append"
sink = "delta"
options = {{ path = "/data/per-second" }}
transform = "{PIPELINES}:per_second"
event-time-column = "window_end"

[[scenario]]
name = "merge"
transform = "{PIPELINES}:per_second"
output-mode = "update"
foreach-batch = "{PIPELINES}:merge_into_delta"
check-read = "{PIPELINES}:read_delta"
check-key = ["window_start", "subtask_index"]
""")
    append, merge = (s.config for s in load_plan(file).scenarios)
    assert (append.sink, append.options, append.check) == ("delta", {"path": "/data/per-second"}, True)
    assert (merge.sink, merge.foreach_batch, merge.check_read, merge.check_key) == (
        "foreachBatch", f"{PIPELINES}:merge_into_delta", f"{PIPELINES}:read_delta", ("window_start", "subtask_index"))
    assert append.packages == merge.packages == (delta.PACKAGE_EXAMPLE,)
    assert append.spark_conf == {"spark.sql.shuffle.partitions": "4"}


# ------------------------------------------------------------------------------------------- the probe


@pytest.mark.integration
def test_a_running_session_without_delta_s_extension_is_refused_naming_the_sink(spark, tmp_path, capsys):
    from tests.loadtest.helpers import run_cli

    target = tmp_path / "events"
    code, out, report = run_cli(capsys, tmp_path, *RUN[:-2], "--sink", "delta", "-o", f"path={target}")  # no --master
    assert code == 2, out
    assert (f"--sink delta: the Spark session was already running without Delta's {delta.EXTENSIONS_KEY}="
            f"{delta.EXTENSION}") in out and "run impulse-load in a new process" in out, out
    assert report is None and not target.exists()
    # the running session is left as it was: Delta's catalog (a runtime setting) was not set on it on the way
    assert spark.conf.get(delta.CATALOG_KEY, None) != delta.CATALOG
    assert spark.range(3).count() == 3



@pytest.mark.integration
@pytest.mark.skipif(DELTA_RUNS_HERE, reason="Delta 4.4.0 runs on this PySpark: the runs below test it")
def test_delta_built_for_another_spark_is_refused_at_start_with_exit_2(tmp_path):
    target = tmp_path / "events"
    code, out, report = impulse_load(tmp_path, *RUN, "--sink", "delta", "-o", f"path={target}", "--check",
                                     *delta_flags())
    assert code == 2, out
    assert f"--sink delta: Delta cannot run on this session's Spark {pyspark.__version__}" in out, out
    assert "NoSuchMethodError" in out and "give the Delta release built for Spark" in out, out
    assert report is None and not target.exists()


@pytest.mark.integration
@pytest.mark.delta
@pytest.mark.skipif(not DELTA_RUNS_HERE, reason="Delta 4.4.0 runs on PySpark 4.2 only (bash tests/run --lowest)")
def test_a_session_without_delta_s_jars_is_refused_with_the_packages_hint(tmp_path):
    code, out, report = impulse_load(tmp_path, *RUN, "--sink", "delta", "-o", f"path={tmp_path / 'events'}")
    assert code == 2, out
    assert "--sink delta: Delta cannot run on this session's Spark" in out, out
    assert "Delta is not on the session: give its jars with --packages io.delta:delta-spark_2.13:VERSION" in out, out
    assert report is None


# ------------------------------------------------------------------------------------------- runs into Delta


@pytest.mark.integration
@pytest.mark.delta
@pytest.mark.skipif(not DELTA_RUNS_HERE, reason="Delta 4.4.0 runs on PySpark 4.2 only (bash tests/run --lowest)")
def test_a_windowed_aggregation_appended_to_delta_passes_the_check(tmp_path):
    target = tmp_path / "per-second"
    # a second of events a micro-batch at most: however slow Delta's first commit is, the watermark moves batch by
    # batch and windows close (one late batch holding all 6 s would close none)
    code, out, report = impulse_load(tmp_path, *RUN, "--duration", "6s", "--max-events-per-trigger", "200",
                                     "--transform", f"{PIPELINES}:per_second",
                                     "--check", "--event-time-column", "window_end", "--sink", "delta",
                                     "-o", f"path={target}", *delta_flags())
    assert code == 0, out
    check = report["check"]
    assert check["passed"] and check["expected"] == check["delivered"] > 0, check   # some windows closed
    assert check["lost"] == check["duplicated"] == check["unexpected"] == 0, check
    assert (target / "_delta_log").is_dir()
    assert report["summary"]["latencyDefinition"] == "commit", report["summary"]


@pytest.mark.integration
@pytest.mark.delta
@pytest.mark.skipif(not DELTA_RUNS_HERE, reason="Delta 4.4.0 runs on PySpark 4.2 only (bash tests/run --lowest)")
def test_a_merge_upsert_into_delta_through_foreach_batch_passes_check_key(tmp_path):
    target = tmp_path / "merged"
    code, out, report = impulse_load(tmp_path, *RUN, "--transform", f"{PIPELINES}:per_second",
                                     "--output-mode", "update", "--check",
                                     "--foreach-batch", f"{PIPELINES}:merge_into_delta",
                                     "--check-read", f"{PIPELINES}:read_delta",
                                     "--check-key", "window_start,subtask_index", *delta_flags(),
                                     env={"IMPULSE_TEST_FOREACH_TARGET": str(target)})
    assert code == 0, out
    check = report["check"]
    assert check["passed"] and check["expected"] == check["delivered"] > 0, check
    assert "update: the final state per key" in report["checkDetail"]["basis"]
    versions = sorted((target / "_delta_log").glob("*.json"))
    assert len(versions) > 2, versions   # the table's creation and a MERGE per micro-batch with rows


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.delta
@pytest.mark.skipif(not DELTA_RUNS_HERE, reason="Delta 4.4.0 runs on PySpark 4.2 only (bash tests/run --lowest)")
def test_a_pipeline_reading_kafka_into_delta_passes_the_check(tmp_path, kafka_broker):
    """The production shape: impulse → Kafka → the user's query → a Delta table, read back by --check."""
    target = tmp_path / "evens"
    code, out, report = impulse_load(tmp_path, *RUN, "--via", f"kafka://{kafka_broker.bootstrap}/delta-{tmp_path.name}",
                                     "--create-topic", "2", "--decode", "--transform", f"{PIPELINES}:evens", "--check",
                                     "--sink", "delta", "-o", f"path={target}", *delta_flags())
    assert code == 0, out
    assert report["check"] == {"passed": True, "expected": 300, "delivered": 300, "lost": 0, "duplicated": 0,
                               "unexpected": 0}, report["check"]
    assert (target / "_delta_log").is_dir()
