"""``--check`` of a query Spark runs on streams only (its expected answer: the query as one micro-batch), and
``--expect MODULE:FUNCTION`` (the user's own reference rows as the expected answer).

The runs call ``main()`` in-process on the shared session, small like tests/loadtest/test_transform.py; the
detection, the conversions of ``--expect``'s rows and the refusals are checked on their functions.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql.pandas.utils import require_minimum_pyarrow_version

from impulse.loadtest.check.expect import Oracle, as_frame, resolve
from impulse.loadtest.check.judge import Expectation, batch_events, stream_events
from impulse.loadtest.check.stream_twin import batch_refusal, one_micro_batch, streaming_only
from impulse.loadtest.scenario import KEYS, load_plan, plan_from_args
from impulse.loadtest.settings.units import LoadError
from impulse.options import split_limit
from tests.loadtest import pipelines
from tests.loadtest.helpers import run_cli

PIPELINES = "tests.loadtest.pipelines"
RUN = ["--rate", "400", "--duration", "4s", "--partitions", "2", "--trigger", "500ms", "--drain-timeout", "5m"]
EVENTS = split_limit(1_600, 2)   # the runs' events per partition: counters 0 … n-1
OPTIONS = {"eventsPerSecond": "400.0", "numPartitions": "2", "limit": "1600", "payloadBytes": "64"}


# ------------------------------------------------------------------------------------------- no Spark


def test_spark_s_refusal_of_a_streaming_only_operator_is_told_from_any_other_error():
    dedup = AnalysisException(message="dropDuplicatesWithinWatermark is not supported with batch DataFrames/DataSets;"
                                      "\nDeduplicateWithinWatermark [k#1L]")
    assert batch_refusal(dedup) == "dropDuplicatesWithinWatermark"
    stateful = AnalysisException(message="applyInPandasWithState is unsupported in batch query. Use applyInPandas "
                                         "instead.")
    assert batch_refusal(stateful) == "applyInPandasWithState"
    assert batch_refusal(AnalysisException(message="[UNRESOLVED_COLUMN] A column `nope` cannot be resolved")) is None
    # the same words raised by something other than Spark are not Spark's refusal
    assert batch_refusal(ValueError("dropDuplicatesWithinWatermark is not supported with batch DataFrames")) is None


def test_the_basis_says_how_the_expected_answer_was_computed():
    assert Expectation().way == "batch"
    assert Expectation().describe() == "the expected answer: the query over a batch read of the same events"
    stream = Expectation(operator="dropDuplicatesWithinWatermark")
    assert stream.way == "stream" and stream.describe() == (
        "the expected answer: the query run as one micro-batch over the same events (Spark runs "
        "dropDuplicatesWithinWatermark on streams only)")
    oracle = Expectation(oracle=Oracle("mine:reference", len))
    assert oracle.way == "expect" and "--expect mine:reference's rows" in oracle.describe()


def test_expect_is_a_flag_and_a_toml_key_and_needs_check(tmp_path):
    assert "--expect" in {key.option for key in KEYS}
    config = plan_from_args(["--check", "--expect", f"{PIPELINES}:in_kilometres_expected"]).scenarios[0].config
    assert (config.check, config.expect) == (True, f"{PIPELINES}:in_kilometres_expected")
    file = tmp_path / "mine.toml"
    file.write_text(f'check = true\nexpect = "{PIPELINES}:in_kilometres_expected"\n')
    assert load_plan(file).scenarios[0].config.expect == f"{PIPELINES}:in_kilometres_expected"
    with pytest.raises(LoadError, match=re.escape("--expect m:f gives --check its expected rows: add --check")):
        plan_from_args(["--expect", "m:f"])


# ------------------------------------------------------------------------------------------- Spark, no stream


def test_the_batch_twin_of_a_streaming_only_operator_is_refused_by_spark_and_named(spark):
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    events = batch_events(spark, "impulse", OPTIONS, 1_700_000_000_000_000)
    assert streaming_only(pipelines.pairs_once(events)) == "dropDuplicatesWithinWatermark"
    assert streaming_only(pipelines.evens(events)) is None
    assert streaming_only(pipelines.per_second(events)) is None   # a watermark alone is fine in a batch
    try:  # PySpark's pandas functions need a newer pyarrow than impulse's own floor (the lowest-versions run's)
        require_minimum_pyarrow_version()
    except ImportError as exc:
        pytest.skip(f"applyInPandasWithState cannot be built here: {exc}")

    def count(key, frames, state):
        yield pd.DataFrame({"k": [key[0]], "n": [sum(len(f) for f in frames)]})

    stateful = events.groupBy("subtask_index").applyInPandasWithState(count, "k long, n long", "n long", "append",
                                                                       GroupStateTimeout.NoTimeout)
    assert streaming_only(stateful) == "applyInPandasWithState"


def test_one_micro_batch_holds_every_event_and_refuses_a_source_that_splits_them(spark):
    # the run's own pace (maxEventsPerTrigger) is left out: every event in one micro-batch
    events = stream_events(spark, "impulse", {**OPTIONS, "maxEventsPerTrigger": "500"}, 1_700_000_000_000_000)
    with one_micro_batch(spark, pipelines.pairs_once_forgetting(events), "append") as answer:
        assert sorted(row.k for row in answer.collect()) == list(range(10))   # each key once: no state forgotten
        name = next(t.name for t in spark.catalog.listTables() if t.name.startswith("impulse_check_"))
    assert name not in {t.name for t in spark.catalog.listTables()}
    split = spark.readStream.format("impulse").options(**OPTIONS, maxEventsPerTrigger="500",
                                                       startTime="2024-01-01T00:00:00+00:00").load()
    with pytest.raises(RuntimeError, match=re.escape("read the run's events in 4 micro-batches ([500, 500, 500, "
                                                     "100] rows) with availableNow, not in one")):
        with one_micro_batch(spark, pipelines.pairs_once(split), "append"):
            pass


def test_expect_s_rows_are_converted_with_the_output_s_schema(spark):
    import pandas as pd
    from pyspark.sql import Row

    schema = spark.createDataFrame([], "subtask_index BIGINT, counter BIGINT, km DOUBLE").schema
    want = [Row(subtask_index=0, counter=1500, km=1.5), Row(subtask_index=1, counter=0, km=0.0)]

    def rows(result):
        frame = as_frame(spark, result, schema, "--expect m:f")
        assert frame.schema.simpleString() == "struct<subtask_index:bigint,counter:bigint,km:double>"
        return sorted(frame.collect())

    assert rows(pd.DataFrame({"km": [1.5, 0.0], "counter": [1500, 0], "subtask_index": [0, 1]})) == sorted(want)
    assert rows([{"km": 1.5, "counter": 1500, "subtask_index": 0}, {"subtask_index": 1, "counter": 0, "km": 0.0}]) \
        == sorted(want)
    assert rows([(0, 1500, 1.5), [1, 0, 0.0]]) == sorted(want)
    assert rows(iter(want)) == sorted(want)
    ints = spark.createDataFrame([(1.5, 0, 1500), (0.0, 1, 0)], "km DOUBLE, subtask_index INT, counter INT")
    assert rows(ints) == sorted(want)                          # by name, cast to the output's types
    assert rows([]) == []


@pytest.mark.parametrize("result, words", [
    ([{"subtask_index": 0, "metres": 1}],
     "returned the columns (subtask_index, metres); the output's are (subtask_index, counter, km): missing counter, "
     "km; not in the output: metres"),
    ([(0, 1)], "a row of 2 values, (0, 1); the output has 3 columns (subtask_index, counter, km)"),
    ([(0, 1, "far")], "its rows do not fit the output's schema (struct<subtask_index:bigint,counter:bigint,"
                      "km:double>)"),
    (42, "returned int, not rows"),
    ({"subtask_index": 0}, "returned dict, not rows"),
    ([7], "a row is 7 (int); give dicts, Rows or tuples"),
])
def test_expect_s_rows_that_do_not_fit_the_output_are_refused_naming_the_flag(spark, result, words):
    schema = spark.createDataFrame([], "subtask_index BIGINT, counter BIGINT, km DOUBLE").schema
    with pytest.raises(LoadError, match=re.escape(f"--expect m:f: {words}")):
        as_frame(spark, result, schema, "--expect m:f")


def test_expect_s_spark_dataframe_must_be_a_batch_with_the_output_s_columns(spark):
    schema = spark.createDataFrame([], "counter BIGINT, km DOUBLE").schema
    with pytest.raises(LoadError, match=re.escape("--expect m:f: returned the columns (counter); the output's are "
                                                  "(counter, km): missing km")):
        as_frame(spark, spark.createDataFrame([(1,)], "counter BIGINT"), schema, "--expect m:f")
    with pytest.raises(LoadError, match=r"--expect m:f: its columns cannot be cast to the output's schema"):
        as_frame(spark, spark.createDataFrame([(1, [1.0])], "counter BIGINT, km ARRAY<DOUBLE>"), schema,
                 "--expect m:f")
    stream = spark.readStream.format("impulse").options(**OPTIONS).load().select("counter")
    with pytest.raises(LoadError, match="--expect m:f: returned a streaming DataFrame"):
        as_frame(spark, stream, schema, "--expect m:f")


def test_an_expect_that_cannot_be_used_is_refused_naming_the_flag(spark):
    for text, words in (
            ("just_a_name", "--expect 'just_a_name': write MODULE:FUNCTION"),
            ("no_such_module_q7:f", "--expect no_such_module_q7:f: cannot import module 'no_such_module_q7' .*"
                                    "ModuleNotFoundError"),
            (f"{PIPELINES}:nope", rf"--expect {PIPELINES}:nope: module '{PIPELINES}' .* has no 'nope'"),
            (f"{PIPELINES}:__doc__", r"is a str, not a function")):
        with pytest.raises(LoadError, match=words):
            resolve(spark, text)
    assert resolve(spark, None) is None
    assert resolve(spark, f"{PIPELINES}:in_kilometres_expected").function is pipelines.in_kilometres_expected


# ------------------------------------------------------------------------------------------- runs


def _run(capsys, tmp_path: Path, *argv: str) -> tuple[int, str, dict | None]:
    return run_cli(capsys, tmp_path, *RUN, *argv)


@pytest.mark.integration
@pytest.mark.webhook
def test_a_deduplication_spark_runs_on_streams_only_passes_the_check_against_one_micro_batch(spark, tmp_path,
                                                                                            capsys):
    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:pairs_once", "--check")
    assert code == 0, out
    keys = len({c // 2 for n in EVENTS for c in range(n)})       # 400: each key's four events written once
    assert report["summary"]["events"] == 1_600 and report["summary"]["outputRows"] == keys
    assert report["check"] == {"passed": True, "expected": keys, "delivered": keys, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    basis = report["checkDetail"]["basis"]
    assert basis == ("append: every row of the answer, as a multiset; the expected answer: the query run as one "
                     "micro-batch over the same events (Spark runs dropDuplicatesWithinWatermark on streams only)")
    assert f"check: pass ({keys} rows: {basis})" in out and "Traceback" not in out
    assert not [t.name for t in spark.catalog.listTables() if t.name.startswith("impulse_check_")]  # dropped


@pytest.mark.integration
@pytest.mark.redis
def test_a_deduplication_that_forgets_keys_between_micro_batches_fails_the_check_with_the_right_counts(
        spark, redis_server, tmp_path, capsys):
    prefix = f"forgets-{uuid.uuid4().hex[:8]}"  # a list: every row written is kept, duplicates too
    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:pairs_once_forgetting", "--check",
                             "--sink", "redis-sink", "-o", f"url={redis_server.url}", "-o", f"keyPrefix={prefix}",
                             "-o", "target=list")
    assert code == 99, out
    written = Counter(json.loads(v)["k"] for v in redis_server.client().lrange(prefix, 0, -1))
    expected = Counter(range(10))                   # one micro-batch holding every event: each key once
    assert report["check"] == {"passed": False, "expected": 10, "delivered": sum(written.values()),
                               "lost": sum((expected - written).values()),
                               "duplicated": sum((written - expected).values()), "unexpected": 0}
    assert report["check"]["duplicated"] >= 10, report["check"]   # the stream wrote the keys again
    assert "one micro-batch" in report["checkDetail"]["basis"]
    assert re.search(r"^\s+duplicated: \{\"k\":\d\} \(expected 1, delivered \d+\)", out, re.MULTILINE), out


@pytest.mark.integration
@pytest.mark.webhook
def test_a_bug_the_batch_run_shares_passes_without_expect_and_fails_with_it(spark, tmp_path, capsys):
    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:in_kilometres", "--check")
    assert code == 0 and report["check"]["passed"], out   # the stream equals its batch run: the same bug
    assert report["checkDetail"]["basis"].endswith("the query over a batch read of the same events")

    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:in_kilometres", "--check",
                             "--expect", f"{PIPELINES}:in_kilometres_expected")
    assert code == 99, out
    wrong = sum(1 for n in EVENTS for c in range(n) if c / 100 != c / 1000)   # all but counter 0 of each partition
    assert report["check"] == {"passed": False, "expected": 1_600, "delivered": 1_600, "lost": wrong,
                               "duplicated": 0, "unexpected": wrong}
    assert report["checkDetail"]["basis"].endswith(
        f"the expected answer: --expect {PIPELINES}:in_kilometres_expected's rows over a batch read of the same events")
    assert re.search(r'^\s+unexpected: \{"subtask_index":\d,"counter":\d+,"km":[\d.]+\}', out, re.MULTILINE), out


@pytest.mark.integration
@pytest.mark.redis
def test_a_correct_transform_passes_against_a_pandas_expect(spark, redis_server, tmp_path, capsys):
    prefix = f"km-{uuid.uuid4().hex[:8]}:"
    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:in_kilometres_fixed", "--check",
                             "--expect", f"{PIPELINES}:in_kilometres_expected", "--sink", "redis-sink",
                             "-o", f"url={redis_server.url}", "-o", f"keyPrefix={prefix}")
    assert code == 0, out
    assert report["check"] == {"passed": True, "expected": 1_600, "delivered": 1_600, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    assert json.loads(redis_server.client().get(f"{prefix}1:750")) == {"subtask_index": 1, "counter": 750,
                                                                        "km": 0.75}
    assert f"--expect {PIPELINES}:in_kilometres_expected's rows" in out


@pytest.mark.integration
@pytest.mark.webhook
def test_bad_expect_values_exit_2_naming_the_flag(spark, tmp_path, capsys):
    for argv, words in (
            (["--expect", f"{PIPELINES}:in_kilometres_expected"], "--expect .* gives --check its expected rows: "
                                                                   "add --check"),
            (["--check", "--expect", "no_such_module_q7:f"], "--expect no_such_module_q7:f: cannot import module"),
            (["--check", "--expect", f"{PIPELINES}:nope"], rf"--expect {PIPELINES}:nope: module .* has no 'nope'")):
        code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:in_kilometres_fixed", *argv)
        assert code == 2 and report is None, (argv, out)      # refused before any load: no report
        assert re.search(words, out) and "Traceback" not in out, (argv, out)
    # rows that do not fit the output are found once the run is over, and said as clearly
    code, out, report = _run(capsys, tmp_path, "--transform", f"{PIPELINES}:in_kilometres_fixed", "--check",
                             "--expect", f"{PIPELINES}:in_kilometres_wrong_columns")
    assert code == 2, out
    assert (f"--expect {PIPELINES}:in_kilometres_wrong_columns: returned the columns (subtask_index, metres); the "
            "output's are (subtask_index, counter, km)") in out and "Traceback" not in out


@pytest.mark.integration
@pytest.mark.connect
def test_a_deduplication_over_spark_connect_passes_the_check_against_one_micro_batch(spark_connect, tmp_path,
                                                                                    capsys):
    """The batch twin planned by the server (which refuses it), the one micro-batch in the server's memory sink."""
    code, out, report = _run(capsys, tmp_path, "--remote", spark_connect.url, "--transform",
                             f"{PIPELINES}:pairs_once", "--check")
    assert code == 0, out
    keys = len({c // 2 for n in EVENTS for c in range(n)})
    assert report["check"] == {"passed": True, "expected": keys, "delivered": keys, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    assert "one micro-batch" in report["checkDetail"]["basis"]


# ------------------------------------------------------------------------------------------- through Kafka

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def via_runs(kafka_broker, tmp_path_factory) -> dict:
    """The results of `tests.loadtest.check_streaming_via_runs` (one subprocess, one Spark session with Kafka)."""
    import os
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("check-via") / "runs.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "tests.loadtest.check_streaming_via_runs", kafka_broker.bootstrap,
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0 and out.exists(), done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(out.read_text())


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("name", ["dedup", "records"])
def test_a_deduplication_through_kafka_passes_the_check_against_one_micro_batch_of_the_input_topic(via_runs, name):
    """``dedup`` sees the decoded events, ``records`` the Kafka source's columns (its one micro-batch reads the
    input topic from the pipeline's starting offsets)."""
    run = via_runs[name]
    assert run["summary"]["outcome"] == "completed" and run["summary"]["events"] == 1_600, run["summary"]
    keys = {c // 2 for n in EVENTS for c in range(n)}
    assert Counter(row["k"] for row in run["output"]) == Counter(keys)   # each key written once
    assert run["check"] == {"passed": True, "expected": len(keys), "delivered": len(keys), "lost": 0,
                            "duplicated": 0, "unexpected": 0}
    assert run["basis"].endswith("the query run as one micro-batch over the same events (Spark runs "
                                 "dropDuplicatesWithinWatermark on streams only)"), run["basis"]


@pytest.mark.integration
@pytest.mark.kafka
@pytest.mark.slow
def test_expect_through_kafka_catches_the_bug_the_batch_run_shares(via_runs):
    run = via_runs["expect"]
    assert run["summary"]["outcome"] == "completed", run["summary"]
    wrong = sum(1 for row in run["output"] if row["km"] != row["counter"] / 1000)
    assert wrong == 1_600 - 2   # every row but counter 0 of each partition
    assert run["check"] == {"passed": False, "expected": 1_600, "delivered": 1_600, "lost": wrong, "duplicated": 0,
                            "unexpected": wrong}
    assert "--expect tests.loadtest.pipelines:in_kilometres_expected's rows" in run["basis"]
