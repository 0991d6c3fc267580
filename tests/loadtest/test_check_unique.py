"""``--check-unique COLS``: the target must hold each key once (`impulse.loadtest.check.unique`) — the counting
without Spark, the flag's errors on the plan, and one small run each of a dedup stage and of one that forgets to
dedup, over a source with redelivered copies (``duplicateRate``), into the embedded receiver."""

from __future__ import annotations

import pyarrow as pa
import pytest

from impulse.answer import CheckResult
from impulse.loadtest.check.unique import columns, repeats
from impulse.loadtest.scenario import plan_from_args
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.units import LoadError
from tests.loadtest.helpers import run_cli

PIPELINES = "tests.loadtest.pipelines"
DUPLICATES = ["--source-option", "duplicateRate=0.1", "--source-option", "duplicateDelay=300ms"]
RUN = ["--rate", "300", "--duration", "3s", "--partitions", "2", "--trigger", "500ms", "--drain-timeout", "5m",
       *DUPLICATES]


# ------------------------------------------------------------------------------------------- no Spark


def test_repeats_counts_the_rows_beyond_the_first_of_each_key():
    table = pa.table({"p": [0, 0, 1, 1, 1, 1, 0, None, None], "c": [5, 5, 5, 5, 5, 6, 7, None, None],
                      "other": list(range(9))})
    found = repeats(table, ("p", "c"))
    assert (found.keys, found.extra) == (3, 4)            # (0,5) twice, (1,5) three times, (null,null) twice
    assert found.examples[0] == '{"p": 1, "c": 5, "times": 3}'
    assert (repeats(table, ("p",)).keys, repeats(table, ("p",)).extra) == (3, 6)
    assert repeats(table, ("other",)).extra == 0
    assert repeats(table.slice(0, 0), ("p", "c")).extra == 0


def test_repeats_names_a_column_the_target_does_not_have():
    with pytest.raises(LoadError, match=r"--check-unique: the target's rows have no column kee \(they have p, c\)"):
        repeats(pa.table({"p": [1], "c": [2]}), ("p", "kee"))


def test_the_columns_are_read_from_the_flag_and_bad_lists_name_it():
    assert columns(" subtask_index , counter") == ("subtask_index", "counter") and columns(None) == ()
    with pytest.raises(LoadError, match=r"--check-unique 'a,,b': give column names separated by commas"):
        columns("a,,b")
    with pytest.raises(LoadError, match="--check-unique 'a,a': a column is named twice"):
        columns("a,a")


def test_check_unique_needs_check_and_a_column_list_before_any_load():
    with pytest.raises(LoadError, match="--check-unique counter adds to --check's comparison: add --check"):
        LoadConfig(check_unique="counter").validate()
    with pytest.raises(LoadError, match="--check-unique ','"):
        plan_from_args(["--check", "--check-unique", ","])
    plan = plan_from_args(["--check", "--check-unique", "subtask_index,counter"])
    assert plan.scenarios[0].config.check_unique == "subtask_index,counter"


def test_the_check_line_and_its_json_count_the_repeated_rows():
    failed = CheckResult(100, 110, 0, 0, 0, {"repeated": ['{"c": 1, "times": 2}']}, unique=("c",), repeated=10)
    assert failed.line() == ("check: FAIL: expected 100, delivered 110: 0 lost, 0 duplicated, 0 unexpected, "
                             "10 repeated (c)")
    assert failed.to_json() == {"passed": False, "expected": 100, "delivered": 110, "lost": 0, "duplicated": 0,
                                "unexpected": 0, "unique": ["c"], "repeated": 10}
    assert '  repeated: {"c": 1, "times": 2}' in failed.lines()
    assert CheckResult(5, 5, 0, 0, 0, unique=("c",)).passed


# ------------------------------------------------------------------------------------------- runs


@pytest.mark.integration
@pytest.mark.webhook
def test_a_pipeline_that_forgets_to_dedup_fails_with_the_duplicate_count(spark, tmp_path, capsys):
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:forgets_to_dedup", "--check",
                                "--check-unique", "subtask_index,counter")
    assert code == 99, out
    check, events = report["check"], report["summary"]["events"]
    assert check["lost"] == check["duplicated"] == check["unexpected"] == 0, out   # the batch twin has the copies
    assert check["delivered"] > events and check["repeated"] == check["delivered"] - events, out
    assert f"{check['repeated']:,} repeated (subtask_index, counter)" in out


@pytest.mark.integration
@pytest.mark.webhook
def test_a_dedup_stage_passes(spark, tmp_path, capsys):
    code, out, report = run_cli(capsys, tmp_path, *RUN, "--transform", f"{PIPELINES}:dedups", "--check",
                                "--check-unique", "subtask_index,counter")
    assert code == 0, out
    assert report["check"]["passed"] and report["check"]["repeated"] == 0, out
    assert report["check"]["delivered"] == report["summary"]["events"] > 0, out
