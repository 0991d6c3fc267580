"""The user's query under load: ``--transform`` / ``--sql``, ``--source nexmark``, output rows, the latency
definition and ``--check`` (the target read back and compared with the query over a batch read).

The runs call ``main()`` in-process on the shared session (small: a few hundred events/s for a few seconds);
the errors that need no Spark are checked on `resolve` / the plan, the others through ``main()``.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
import uuid
from collections import Counter
from pathlib import Path

import pytest

from impulse.answer import CheckResult
from impulse.loadtest.check.readback import readback
from impulse.loadtest.cli import main
from impulse.loadtest.query.transform import load, output_mode, resolve
from impulse.loadtest.scenario import load_plan, plan_from_args
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.units import LoadError
from impulse.options import split_limit
from tests.loadtest.helpers import run_cli
from tests.readme import DOCS, python_block

PIPELINES = "tests.loadtest.pipelines"
RUN = ["--rate", "400", "--duration", "4s", "--partitions", "2", "--trigger", "500ms", "--drain-timeout", "5m"]


# ------------------------------------------------------------------------------------------- no Spark


def test_a_transform_that_cannot_be_used_is_refused_naming_the_flag_and_python_s_reason():
    with pytest.raises(LoadError, match=r"--transform no_such_module_x9:f: cannot import module 'no_such_module_x9'.*"
                                        r"ModuleNotFoundError: No module named 'no_such_module_x9'"):
        resolve(LoadConfig(transform="no_such_module_x9:f"))
    with pytest.raises(LoadError, match=rf"--transform {PIPELINES}:nope: module '{PIPELINES}' .* has no 'nope'"):
        resolve(LoadConfig(transform=f"{PIPELINES}:nope"))
    with pytest.raises(LoadError, match="write MODULE:FUNCTION"):
        resolve(LoadConfig(transform="just_a_name"))
    with pytest.raises(LoadError, match="is a str, not a function"):
        load(None, resolve(LoadConfig(transform=f"{PIPELINES}:__doc__")))
    with pytest.raises(LoadError, match="add --source nexmark"):
        resolve(LoadConfig(transform="nexmark:q5"))
    with pytest.raises(LoadError, match="no Nexmark query 'q99'"):
        resolve(LoadConfig(transform="nexmark:q99", source="nexmark"))
    with pytest.raises(LoadError, match="--sql: the query is empty"):
        resolve(LoadConfig(sql="  "))


def test_a_nexmark_update_stream_runs_in_a_mode_the_project_s_sinks_take():
    q4 = LoadConfig(source="nexmark", transform="nexmark:q4")
    assert output_mode(q4, resolve(q4)) == "complete"                       # webhook-sink takes no update
    noop = LoadConfig(source="nexmark", transform="nexmark:q4", sink="noop")
    assert output_mode(noop, resolve(noop)) == "update"
    q6 = LoadConfig(source="nexmark", transform="nexmark:q6")
    assert output_mode(q6, resolve(q6)) == "append"
    q16 = LoadConfig(source="nexmark", transform="nexmark:q16", sink="redis-sink")
    assert output_mode(q16, resolve(q16)) == "append"                      # its rows: each key's new state
    noop16 = LoadConfig(source="nexmark", transform="nexmark:q16", sink="noop")
    assert output_mode(noop16, resolve(noop16)) == "update"
    given = LoadConfig(source="nexmark", transform="nexmark:q4", output_mode="update")
    assert output_mode(given, resolve(given)) == "update"


def test_the_module_is_imported_from_the_working_directory(tmp_path, monkeypatch):
    name = f"user_pipeline_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("def enrich(events):\n    return events\n")
    monkeypatch.chdir(tmp_path)
    transform = resolve(LoadConfig(transform=f"{name}:enrich"))
    assert transform.function is None and name not in sys.modules  # found and read, not run, before Spark starts
    assert transform.module_path == str(tmp_path / f"{name}.py")
    assert load(None, transform).function.__name__ == "enrich"


def test_a_module_is_read_not_run_before_spark_starts(tmp_path, monkeypatch):
    """A module whose top level needs a session (a UDF made at import) is found and its FUNCTION seen without running
    it; a package's submodule likewise; a name the file never binds is refused."""
    name = f"user_pkg_{uuid.uuid4().hex[:8]}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("raise RuntimeError('the package ran')\n")
    (tmp_path / name / "steps.py").write_text(
        "raise RuntimeError('the module ran')\nfrom x import helper as score\n\n@decorate\ndef enrich(e):\n"
        "    return e\n")
    monkeypatch.chdir(tmp_path)
    for function in ("enrich", "score"):
        transform = resolve(LoadConfig(transform=f"{name}.steps:{function}"))
        assert transform.module_path == str(tmp_path / name) and transform.function is None
    with pytest.raises(LoadError, match=rf"module '{name}.steps' \(.*steps.py\) has no 'missing'"):
        resolve(LoadConfig(transform=f"{name}.steps:missing"))
    with pytest.raises(LoadError, match=rf"No module named '{name}.nope'"):
        resolve(LoadConfig(transform=f"{name}.nope:f"))
    with pytest.raises(LoadError, match="the package ran"):  # the import, once Spark is up, says what went wrong
        load(None, resolve(LoadConfig(transform=f"{name}.steps:enrich")))


def test_the_flags_and_the_toml_keys_are_one_table(tmp_path):
    plan = plan_from_args(["--sql", "SELECT counter FROM events", "--output-mode", "update", "--check",
                           "--event-time-column", "window.end", "--source", "nexmark"])
    config = plan.scenarios[0].config
    assert (config.sql, config.output_mode, config.check, config.event_time_column, config.source) == (
        "SELECT counter FROM events", "update", True, "window.end", "nexmark")
    file = tmp_path / "mine.toml"
    file.write_text(textwrap.dedent(f"""\
        sink = "redis-sink"
        transform = "{PIPELINES}:evens"
        check = true
        output-mode = "append"
        [options]
        keyPrefix = "x:"
    """))
    config = load_plan(file).scenarios[0].config
    assert (config.transform, config.check, config.output_mode) == (f"{PIPELINES}:evens", True, "append")
    for argv, words in ((["--output-mode", "sometimes"], "--output-mode 'sometimes': Spark's output modes are append, "
                                                          "update, complete"),
                        (["--source", "kafka"], "--source 'kafka': the sources are impulse, nexmark"),
                        (["--sql", "SELECT 1", "--transform", "a:b"], "give one of them"),
                        (["--check", "--ramp", "1k:1k:2k"], "--check reads back a single run")):
        with pytest.raises(LoadError, match=re.escape(words)):
            plan_from_args(argv)


def test_check_refuses_a_target_it_cannot_read_back_before_any_load():
    for sink, options, mode, words in (
            ("noop", {}, "append", "--check cannot read noop back"),
            ("webhook-sink", {"url": "http://127.0.0.1:1/x"}, "append", "from the embedded receiver only"),
            ("redis-sink", {"url": "redis://127.0.0.1:1"}, "append", "set keyPrefix=NAME"),
            ("redis-sink", {"url": "redis://127.0.0.1:1", "keyPrefix": "k:", "valueColumn": "v"}, "append",
             "no valueColumn"),
            ("redis-sink", {"url": "redis://127.0.0.1:1", "keyPrefix": "k:", "target": "list"}, "update",
             "final state per key"),
            ("kafka-sink", {"topic": "t"}, "complete", "final state per key")):
        with pytest.raises(LoadError, match=re.escape(words)):
            readback(sink, options, mode)


def test_the_check_line_and_its_json():
    passed = CheckResult(10, 10, 0, 0, 0)
    assert passed.line() == "check: pass" and passed.to_json() == {
        "passed": True, "expected": 10, "delivered": 10, "lost": 0, "duplicated": 0, "unexpected": 0}
    failed = CheckResult(1_000, 1_002, 3, 4, 1, {"lost": ['{"counter":1}']})
    assert failed.line() == "check: FAIL: expected 1,000, delivered 1,002: 3 lost, 4 duplicated, 1 unexpected"
    assert '  lost: {"counter":1}' in failed.lines() and not failed.to_json()["passed"]


# ------------------------------------------------------------------------------------------- runs


def _run(capsys, tmp_path: Path, *argv: str) -> tuple[int, str, dict | None]:
    return run_cli(capsys, tmp_path, *RUN, *argv)


@pytest.mark.integration
@pytest.mark.webhook
def test_sql_filter_into_the_embedded_receiver_passes_the_check(spark, tmp_path, capsys):
    code, out, report = _run(capsys, tmp_path, "--sql", "SELECT counter, subtask_index, timestamp FROM events "
                                                        "WHERE counter % 3 = 0", "--check")
    assert code == 0, out
    expected = sum(len(range(0, n, 3)) for n in split_limit(1_600, 2))
    assert report["summary"]["events"] == 1_600 and report["summary"]["outputRows"] == expected
    assert report["check"] == {"passed": True, "expected": expected, "delivered": expected, "lost": 0,
                               "duplicated": 0, "unexpected": 0}
    assert report["summary"]["latencyDefinition"] == "end-to-end"  # the output keeps timestamp
    assert re.search(rf"output rows\s+{expected:,}", out) and "check: pass" in out


@pytest.mark.integration
@pytest.mark.redis
def test_an_enrichment_join_from_the_working_directory_into_redis_passes_the_check(spark, redis_server, tmp_path,
                                                                                    capsys, monkeypatch):
    """A user's module in the working directory, with a Python UDF (the tasks import the module: it was shipped)
    and a join with a static table."""
    name = f"enrich_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent("""\
        from pyspark.sql import functions as F

        @F.udf("string")
        def label(counter):
            return "even" if counter % 2 == 0 else "odd"

        def enrich(events):
            names = events.sparkSession.createDataFrame([(0, "left"), (1, "right")], "subtask_index BIGINT, side STRING")
            return events.join(names, "subtask_index").select("subtask_index", "counter", "side",
                                                              label("counter").alias("parity"))
    """))
    monkeypatch.chdir(tmp_path)
    prefix = f"enrich-{uuid.uuid4().hex[:8]}:"
    code, out, report = _run(capsys, tmp_path, "--transform", f"{name}:enrich", "--check", "--sink", "redis-sink",
                             "-o", f"url={redis_server.url}", "-o", f"keyPrefix={prefix}")
    assert code == 0, out
    assert report["check"]["passed"] and report["check"]["expected"] == 1_600
    assert report["summary"]["latencyDefinition"] == "micro-batch"  # no timestamp, no event-time column
    value = json.loads(redis_server.client().get(f"{prefix}1:7"))
    assert value == {"subtask_index": 1, "counter": 7, "side": "right", "parity": "odd"}


@pytest.mark.integration
@pytest.mark.kafka
def test_a_windowed_aggregation_into_kafka_counts_the_final_windows(spark, kafka_broker, tmp_path, capsys):
    topic = f"windows-{uuid.uuid4().hex[:8]}"
    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:per_second", "--event-time-column",
                             "window_end", "--check", "--sink", "kafka-sink", "-o",
                             f"kafka.bootstrap.servers={kafka_broker.bootstrap}", "-o", f"topic={topic}",
                             "--create-topic", "2", "--duration", "6s")
    assert code == 0, out
    check = report["check"]
    assert check["passed"] and check["expected"] > 0, out  # some windows closed under the watermark
    rows = [json.loads(m.value()) for m in kafka_broker.consume_all(topic)]
    assert len(rows) == check["delivered"] == report["summary"]["outputRows"]
    assert report["summary"]["latencyDefinition"] == "event-time" and "latency: event-time" in out
    assert re.search(r"^\s+event-time(\s+[\d,.]+){6}$", out, re.MULTILINE), out
    assert report["latencyMs"]["p50"] > 0


@pytest.mark.integration
@pytest.mark.webhook
def test_a_stream_stream_join_passes_the_check(spark, tmp_path, capsys):
    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:joined_with_itself", "--check")
    assert code == 0, out
    assert report["check"]["expected"] == sum(len(range(0, n, 6)) for n in split_limit(1_600, 2))
    assert report["check"]["passed"], out


@pytest.mark.integration
@pytest.mark.redis
def test_complete_mode_compares_the_final_state_per_key(spark, redis_server, tmp_path, capsys):
    prefix = f"counts-{uuid.uuid4().hex[:8]}:"
    code, out, report = _run(capsys, tmp_path, "--sql", "SELECT subtask_index, count(*) AS events FROM events "
                                                        "GROUP BY subtask_index", "--output-mode", "complete", "--check",
                             "--sink", "redis-sink", "-o", f"url={redis_server.url}", "-o", f"keyPrefix={prefix}",
                             "-o", "keyColumn=subtask_index")
    assert code == 0, out
    assert report["check"] == {"passed": True, "expected": 2, "delivered": 2, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    assert json.loads(redis_server.client().get(f"{prefix}0")) == {"subtask_index": 0, "events": 800}


@pytest.mark.integration
@pytest.mark.redis
def test_a_pipeline_that_loses_and_duplicates_fails_the_check_with_exit_99_and_the_right_counts(spark, redis_server,
                                                                                                tmp_path, capsys):
    prefix = f"lossy-{uuid.uuid4().hex[:8]}"  # a list: every row written is kept, duplicates too
    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:loses_and_duplicates", "--check",
                             "--sink", "redis-sink", "-o", f"url={redis_server.url}", "-o", f"keyPrefix={prefix}",
                             "-o", "target=list")
    assert code == 99, out
    # the counts, from the list read here and the events' identities, without the harness
    rows = [json.loads(v) for v in redis_server.client().lrange(prefix, 0, -1)]
    got = Counter((row["subtask_index"], row["counter"]) for row in rows)
    expected = Counter((p, c) for p, n in enumerate(split_limit(1_600, 2)) for c in range(n))
    missing = expected - got
    extra = got - expected
    duplicated = sum(n for key, n in extra.items() if key in expected)
    assert report["check"] == {"passed": False, "expected": 1_600, "delivered": len(rows),
                               "lost": sum(missing.values()), "duplicated": duplicated,
                               "unexpected": sum(extra.values()) - duplicated}
    assert report["check"]["lost"] == 64 and report["check"]["duplicated"] == 32 == report["check"]["unexpected"]
    assert "check: FAIL: expected 1,600, delivered 1,600: 64 lost, 32 duplicated, 32 unexpected" in out
    assert re.search(r"^\s+lost: \{\"subtask_index\":\d,\"counter\":\d+\}", out, re.MULTILINE)


@pytest.mark.integration
@pytest.mark.webhook
def test_a_nexmark_query_is_a_transform(spark, tmp_path, capsys):
    code, out, report = _run(capsys, tmp_path, "--source", "nexmark", "--transform", "nexmark:q2", "--check",
                             "--rate", "2000")
    assert code == 0, out
    assert report["summary"]["events"] == 8_000 and report["check"]["passed"]
    assert 0 < report["check"]["expected"] == report["summary"]["outputRows"] < 8_000


@pytest.mark.integration
@pytest.mark.webhook
def test_nexmark_q6_s_update_stream_into_the_embedded_receiver_passes_the_check_on_its_last_row_per_seller(
        spark, tmp_path, capsys):
    code, out, report = _run(capsys, tmp_path, "--source", "nexmark", "--transform", "nexmark:q6", "--check",
                             "--rate", "1000", "--duration", "8s")
    assert code == 0, out
    check = report["check"]
    assert check["passed"] and check["expected"] > 0, out   # some sellers' auctions closed under the watermark
    # the receiver keeps every update of a seller; the check compared the last one of each
    assert report["summary"]["outputRows"] >= check["delivered"] == check["expected"]
    assert "the final row per seller" in out


@pytest.mark.integration
@pytest.mark.webhook
def test_nexmark_q15_s_updates_are_appended_into_the_embedded_receiver_and_pass_the_check_on_the_last_row_per_day(
        spark, tmp_path, capsys):
    code, out, report = _run(capsys, tmp_path, "--source", "nexmark", "--transform", "nexmark:q15", "--check",
                             "--rate", "1000", "--duration", "4s")
    assert code == 0, out
    check = report["check"]
    assert check["passed"] and 1 <= check["expected"] == check["delivered"] <= 2, out   # 4 s of events: a day (two
    # across midnight UTC)
    assert report["summary"]["outputRows"] >= 1 and "the final row per day" in out


@pytest.mark.integration
@pytest.mark.redis
def test_nexmark_q4_runs_in_complete_mode_into_redis_and_passes_the_check_on_the_final_state_per_category(
        spark, redis_server, tmp_path, capsys):
    prefix = f"q4-{uuid.uuid4().hex[:8]}:"
    code, out, report = _run(capsys, tmp_path, "--source", "nexmark", "--transform", "nexmark:q4", "--check",
                             "--sink", "redis-sink", "-o", f"url={redis_server.url}", "-o", f"keyPrefix={prefix}",
                             "-o", "keyColumn=category", "--rate", "1000", "--duration", "8s")
    assert code == 0, out
    check = report["check"]
    assert check["passed"] and check["expected"] > 0, out   # some categories have a closed auction
    assert check["delivered"] == check["expected"] and "complete: q4's batch answer under the last watermark" in out


@pytest.mark.integration
@pytest.mark.webhook
def test_a_toml_scenario_with_transform_and_check(spark, tmp_path, capsys):
    file = tmp_path / "pipeline.toml"
    file.write_text(textwrap.dedent(f"""\
        transform = "{PIPELINES}:evens"
        check = true
        rate = 400
        duration = "3s"
        trigger = "500ms"
    """))
    code = main(["run", str(file), "--output", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    section = report["scenarios"][0]
    assert section["check"]["passed"] and section["check"]["expected"] == 600
    assert "check: pass" in out


@pytest.mark.integration
@pytest.mark.webhook
def test_bad_queries_exit_2_naming_the_flag_with_spark_s_reason_and_no_java_stack(spark, capsys):
    for argv, words in (
            (["--sql", "SELEC counter FROM events"], r"--sql SELEC counter FROM events: Spark cannot run it: \[PARSE_SYNTAX_ERROR\]"),
            (["--sql", "SELECT nope FROM events"], r"--sql SELECT nope FROM events: Spark cannot run it: .*nope"),
            (["--transform", f"{PIPELINES}:raises"], r"the function raised: ZeroDivisionError: division by zero"),
            (["--transform", f"{PIPELINES}:returns_a_number"], r"returned int, not a DataFrame"),
            (["--transform", f"{PIPELINES}:returns_a_batch_frame"], r"returned a batch DataFrame"),
            (["--sql", "SELECT subtask_index, count(*) AS n FROM events GROUP BY subtask_index"],
             r"--output-mode append: Spark refuses to start the query: .*STREAMING_OUTPUT_MODE.*without watermark"),
            (["--sql", "SELECT subtask_index, count(*) AS n FROM events GROUP BY subtask_index", "--output-mode",
              "update"], r"--output-mode update: Spark refuses it: webhook-sink does not support Update mode"),
            (["--transform", f"{PIPELINES}:evens", "--event-time-column", "counter"],
             r"--event-time-column counter: a long column, not a timestamp")):
        assert main([*RUN, *argv]) == 2, argv
        captured = capsys.readouterr()
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and re.search(words, err[0]), (argv, captured.err)
        assert "\tat org.apache" not in captured.err and "Traceback" not in captured.err + captured.out


@pytest.mark.integration
@pytest.mark.redis
def test_the_readme_pipeline_runs_and_passes_its_check(spark, redis_server, tmp_path, capsys, monkeypatch):
    """The README's "Load-testing your own pipeline" module, as my_pipeline.py in the working directory, with the
    README's flags (a small rate, this test's Redis and a fresh keyPrefix)."""
    module = python_block("## Your pipeline between the events and the sink", page=DOCS / "tutorial" / "index.md")
    assert python_block("## A five-minute tour", 0) == module, "the README's tour shows the tutorial's module"
    (tmp_path / "my_pipeline.py").write_text(module)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(__import__("sys").modules, "my_pipeline", raising=False)
    prefix = f"regions-{uuid.uuid4().hex[:8]}:"
    code, out, report = _run(capsys, tmp_path, "--transform", "my_pipeline:per_region", "--event-time-column",
                             "window_end", "--check", "--sink", "redis-sink", "-o", f"url={redis_server.url}",
                             "-o", f"keyPrefix={prefix}", "--duration", "6s")
    assert code == 0, out
    assert report["check"]["passed"] and report["check"]["expected"] > 0, out
    assert report["summary"]["latencyDefinition"] == "event-time" and "check: pass" in out
    assert re.search(r"output rows\s+[\d,]+", out)


@pytest.mark.integration
@pytest.mark.webhook
def test_a_ramp_runs_the_query_at_each_step(spark, tmp_path, capsys):
    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:evens", "--ramp", "200:200:400",
                             "--step-duration", "5s")
    assert code in (0, 99), out   # 99: a step short of its rate on a busy machine fails the ramp's gate, not the query
    assert code == 0 or "no step sustained" in out or "< min-sustained" in out, out
    assert report["mode"] == "ramp" and [s["summary"]["targetRate"] for s in report["steps"]][:1] == [200]
    for step in report["steps"]:
        assert step["summary"]["outputRows"] == step["summary"]["events"] // 2, step["summary"]
    assert f"query: impulse events → --transform {PIPELINES}:evens (append)" in out
    assert re.search(r"highest sustained rate: ", out)
