"""Spark's file sinks as first-class targets: ``--sink parquet|json|csv|orc`` with ``-o path=DIR``, refused before
any load without one, and ``--check`` reading the files back with Spark (`impulse.loadtest.check.spark_target`).

The runs call ``main()`` in-process on the shared session, small like tests/loadtest/test_transform.py.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from impulse.loadtest.check.readback import readback
from impulse.loadtest.check.spark_target import SparkTarget
from impulse.loadtest.scenario import plan_from_args
from impulse.loadtest.settings.spark_conf import session_conf
from impulse.loadtest.settings.target import FILE_SINKS, preflight
from impulse.loadtest.settings.units import LoadError
from tests.loadtest.helpers import run_cli

PIPELINES = "tests.loadtest.pipelines"
RUN = ["--rate", "400", "--duration", "3s", "--partitions", "2", "--trigger", "500ms", "--drain-timeout", "5m"]


# ------------------------------------------------------------------------------------------- no Spark


@pytest.mark.parametrize("sink", FILE_SINKS)
def test_a_file_sink_without_a_path_is_refused_naming_the_option(sink):
    with pytest.raises(LoadError, match=rf"--sink {sink} writes files to a directory: give it with -o path=DIR"):
        preflight(sink, {}, 0)
    with pytest.raises(LoadError, match="-o path=DIR"):
        preflight(sink, {"path": " "}, 0)
    assert preflight(sink, {"PATH": "/tmp/x"}, 0).options == {"PATH": "/tmp/x"}   # Spark ignores the case


def test_a_file_sink_s_checkpoint_location_is_the_harness_s():
    with pytest.raises(LoadError, match="checkpointLocation is the harness's"):
        preflight("parquet", {"path": "/tmp/x", "checkpointlocation": "/tmp/c"}, 0)


def test_check_reads_a_file_sink_back_with_spark_and_refuses_a_directory_holding_files(tmp_path):
    reader = readback("parquet", {"path": str(tmp_path / "new"), "compression": "snappy"}, "append")
    assert isinstance(reader, SparkTarget) and reader.options == {"compression": "snappy"}
    reader.prepare()                                     # a directory that does not exist yet: fine
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "part-0.parquet").write_bytes(b"x")
    with pytest.raises(LoadError, match=r"--check: -o path=.*old already holds files"):
        readback("parquet", {"path": str(tmp_path / "old")}, "append").prepare()
    with pytest.raises(LoadError, match="--check of output mode complete: --check reads Spark.s parquet target back"):
        readback("parquet", {"path": str(tmp_path / "new")}, "complete")


# ------------------------------------------------------------------------------------------- runs


def _rows(path: Path) -> int:
    return sum(pq.read_metadata(f).num_rows for f in path.glob("part-*.parquet"))


@pytest.mark.integration
def test_a_transform_into_parquet_passes_the_check(spark, tmp_path, capsys):
    target = tmp_path / "evens"
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:evens", "--check",
                                "--sink", "parquet", "-o", f"path={target}")
    assert code == 0, out
    assert report["check"] == {"passed": True, "expected": 600, "delivered": 600, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    assert _rows(target) == 600 and (target / "_spark_metadata").is_dir()
    # latency to the commit: each batch's ack is its _spark_metadata entry's time, the file sink's commit
    assert report["summary"]["latencyDefinition"] == "commit"
    html = next(tmp_path.glob("report-*/report.html")).read_text()
    assert "to commit" in html and "the commit that made its micro-batch visible in the table" in html
    written = [b for b in report["batches"] if b["events"] > 0]
    assert written and all(b["latencyP50Ms"] is not None for b in written)
    for batch in written:
        entry = next(target.glob(f"_spark_metadata/{batch['batchId']}*"))
        committed_s = (entry.stat().st_mtime_ns // 1_000 - report["scheduleStartUs"]) / 1e6
        assert abs(batch["timeS"] - committed_s) <= 0.001, (batch, committed_s)


@pytest.mark.integration
def test_an_event_time_column_lands_no_column_of_the_harness_in_the_target(spark, tmp_path, capsys):
    """The target holds the user's query's output as it is: --event-time-column is read, not written as a
    ``timestamp`` column (only the project's sinks, which measure latency from it, get that copy)."""
    target = tmp_path / "windows"
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--duration", "4s", "--max-events-per-trigger", "400",
                                "--transform", f"{PIPELINES}:per_second", "--event-time-column", "window_end",
                                "--check", "--sink", "parquet", "-o", f"path={target}")
    assert code == 0, out
    assert report["check"]["passed"] and report["check"]["delivered"] > 0, report["check"]
    files = list(target.glob("part-*.parquet"))
    assert files and {tuple(pq.read_schema(f).names) for f in files} == {
        ("window_start", "window_end", "subtask_index", "events")}


@pytest.mark.integration
def test_a_lossy_transform_into_parquet_fails_the_check_with_exit_99(spark, tmp_path, capsys):
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:loses_and_duplicates",
                                "--check", "--sink", "parquet", "-o", f"path={tmp_path / 'lossy'}")
    assert code == 99, out
    check = report["check"]
    assert not check["passed"] and check["expected"] == 1_200 and check["lost"] > 0 and check["duplicated"] > 0
    assert check["delivered"] == _rows(tmp_path / "lossy")


@pytest.mark.integration
def test_a_file_sink_without_a_path_exits_2_before_any_load(tmp_path, capsys):
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--sink", "parquet", "--check")
    assert code == 2 and "--sink parquet writes files to a directory: give it with -o path=DIR" in out, out
    assert report is None


@pytest.mark.integration
def test_a_format_the_session_does_not_know_exits_2_before_any_load_with_the_packages_hint(spark, tmp_path,
                                                                                         capsys):
    target = tmp_path / "iceberg-like"
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--sink", "no_such_format_q3", "-o", f"path={target}")
    assert code == 2, out
    assert "unknown sink 'no_such_format_q3'" in out and "needs its jars, --packages GROUP:ARTIFACT:VERSION" in out
    assert report is None and not target.exists()


# ------------------------------------------------------------------------------------------- --foreach-batch


def test_foreach_batch_replaces_the_sink_and_its_check_needs_check_read():
    config = plan_from_args(["--foreach-batch", "m:f", "--check", "--check-read", "m:g"]).scenarios[0].config
    assert (config.sink, config.foreach_batch, config.check_read) == ("foreachBatch", "m:f", "m:g")
    for argv, words in ((["--foreach-batch", "m:f", "--sink", "parquet"], "leave out --sink parquet"),
                        (["--foreach-batch", "m:f", "-o", "path=/x"], "-o path would go to no writer"),
                        (["--foreach-batch", "m:f", "--check"], "give --check-read MODULE:FUNCTION"),
                        (["--check-read", "m:f"], "--check-read tells --check how to read the target: add --check"),
                        (["--check-key", "k"], "--check-key tells --check how to read the target: add --check")):
        with pytest.raises(LoadError, match=re.escape(words)):
            plan_from_args(argv)
    assert plan_from_args(["--check", "--check-key", "a,b", "--check-key", "c"]).scenarios[0].config.check_key == (
        "a", "b", "c")


@pytest.fixture
def foreach_target(tmp_path, monkeypatch) -> Path:
    target = tmp_path / "foreach-target"
    monkeypatch.setenv("IMPULSE_TEST_FOREACH_TARGET", str(target))
    return target


@pytest.mark.integration
def test_a_foreach_batch_appending_to_parquet_passes_the_check_through_check_read(spark, tmp_path, capsys,
                                                                                 foreach_target):
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:evens", "--check",
                                "--foreach-batch", f"{PIPELINES}:append_to_parquet",
                                "--check-read", f"{PIPELINES}:read_parquet")
    assert code == 0, out
    assert report["check"] == {"passed": True, "expected": 600, "delivered": 600, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    assert _rows(foreach_target) == 600


@pytest.mark.integration
def test_a_foreach_batch_writing_each_batch_twice_fails_the_check_with_exit_99(spark, tmp_path, capsys,
                                                                              foreach_target):
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:evens", "--check",
                                "--foreach-batch", f"{PIPELINES}:append_twice",
                                "--check-read", f"{PIPELINES}:read_parquet")
    assert code == 99, out
    assert report["check"] == {"passed": False, "expected": 600, "delivered": 1_200, "lost": 0, "duplicated": 600,
                               "unexpected": 0}


@pytest.mark.integration
def test_check_key_compares_an_upsert_target_s_final_state_per_key(spark, tmp_path, capsys, foreach_target):
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:per_second",
                                "--output-mode", "complete", "--check",
                                "--foreach-batch", f"{PIPELINES}:overwrite_parquet",
                                "--check-read", f"{PIPELINES}:read_parquet",
                                "--check-key", "window_start,subtask_index")
    assert code == 0, out
    check = report["check"]
    assert check["passed"] and check["expected"] == check["delivered"] == _rows(foreach_target) > 0, check
    assert "complete: the final state per key" in report["checkDetail"]["basis"]


@pytest.mark.integration
def test_a_foreach_batch_function_of_one_argument_exits_2_before_any_load(spark, tmp_path, capsys, foreach_target):
    code, out, _ = run_cli(capsys, tmp_path, *RUN, "--foreach-batch", f"{PIPELINES}:one_argument")
    assert code == 2, out
    assert "--foreach-batch tests.loadtest.pipelines:one_argument: one_argument(batch_df) cannot be called as " \
           "FUNCTION(batch_df, batch_id)" in out
    assert not foreach_target.exists()


# ------------------------------------------------------------------------------------------- -o table=NAME


def test_a_table_is_a_file_sink_s_target_and_no_project_sink_s():
    assert preflight("parquet", {"table": "t"}, 0).options == {"table": "t"}       # no path needed
    with pytest.raises(LoadError, match=r"-o table= is empty"):
        preflight("parquet", {"table": " "}, 0)
    with pytest.raises(LoadError, match=r"-o table=NAME writes a Spark table \(toTable\): redis-sink is a sink"):
        preflight("redis-sink", {"table": "t", "url": "redis://localhost:1"}, 0)
    assert readback("orc", {"table": "t"}, "append").describe() == "the table t"


@pytest.mark.integration
def test_a_transform_into_a_table_passes_the_check_and_an_existing_table_is_refused(spark, tmp_path, capsys):
    name = f"impulse_table_{uuid.uuid4().hex[:8]}"
    try:
        code, out, report = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:evens", "--check",
                                    "--sink", "parquet", "-o", f"table={name}", "-o", f"path={tmp_path / name}")
        assert code == 0, out
        assert report["check"]["passed"] and report["check"]["delivered"] == 600, report["check"]
        assert spark.table(name).count() == 600
        code, out, _ = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:evens", "--check",
                               "--sink", "parquet", "-o", f"table={name}", "-o", f"path={tmp_path / 'other'}")
        assert code == 2 and f"--check: -o table={name} exists already" in out, out
        assert spark.table(name).count() == 600                                   # nothing written
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


# ------------------------------------------------------------------------------------------- --conf, --packages


def test_packages_are_joined_into_spark_jars_packages_after_conf_s():
    assert session_conf({"spark.jars.packages": "a:b:1", "spark.x": 2}, ("c:d:1,a:b:1", " e:f:1 ")) == {
        "spark.jars.packages": "a:b:1,c:d:1,e:f:1", "spark.x": "2"}
    assert session_conf({}, ()) == {}
    config = plan_from_args(["--conf", "spark.x=1", "--packages", "c:d:1"]).scenarios[0].config
    assert (config.spark_conf, config.packages) == ({"spark.x": "1"}, ("c:d:1",))


@pytest.mark.integration
def test_conf_reaches_the_session_and_packages_a_running_session_lacks_exit_2(spark, tmp_path, capsys):
    key, value = "spark.impulse.test.marker", uuid.uuid4().hex[:8]
    try:
        code, out, _ = run_cli(capsys, tmp_path, *RUN, "--sink", "noop", "--conf", f"{key}={value}")
        assert code == 0, out
        assert spark.conf.get(key) == value
    finally:
        spark.conf.unset(key)
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--sink", "noop", "--packages", "org.example:absent_2.13:1.0")
    assert code == 2 and "--packages org.example:absent_2.13:1.0: the Spark session was already running without them" \
        in out, out
    assert report is None
