"""Load tests as files: one table of keys for flags and files, precedence, secrets from the environment, and a bad
file refused (exit 2, one line naming the file, the scenario, the key and what is allowed) before Spark starts.

No Spark and no server: a file is read and checked like the command line, and the sinks' pre-flight refuses a
missing option before it connects anywhere.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from impulse.loadtest.cli import main
from impulse.loadtest.scenario import KEYS, build_parser, keys_table, load_plan, plan_from_args
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.units import LoadError


def _file(tmp_path: Path, text: str, name: str = "load.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_key_is_a_flag_and_every_flag_a_key():
    parser = build_parser()
    flags = {option for action in parser._actions for option in action.option_strings if option.startswith("--")}
    assert flags == {key.option for key in KEYS} | {"--help", "--set"}
    assert len({key.name for key in KEYS}) == len(KEYS)
    defaults = {key.name: key.default for key in KEYS}  # the table's defaults are the run's: one list of them
    for name in ("sink", "rate", "partitions", "trigger", "master", "schema", "remote"):
        assert defaults[name] == getattr(LoadConfig(), name)


def test_a_file_and_the_same_flags_give_the_same_run(tmp_path):
    path = _file(tmp_path, """
        sink = "redis-sink"
        rate = "5k"
        duration = 12
        partitions = 3
        payload-bytes = 100
        trigger = "500ms"
        max-latency = "2s"
        thresholds = ["p99<1s", "rate>=95%"]
        abort-on-fail = true
        options = { url = "redis://127.0.0.1:6379", keyPrefix = "t:" }
        source = { seed = 7, "fields.user_id.kind" = "zipf" }
        schema = "user_id BIGINT"
        name = "same"
    """)
    from_file = load_plan(path).scenarios[0]
    from_flags = plan_from_args(["--sink", "redis-sink", "--rate", "5000", "--duration", "12s", "--partitions", "3",
                                 "--payload-bytes", "100", "--trigger", "500ms", "--max-latency", "2s",
                                 "--threshold", "p99<1s", "--threshold", "rate>=95%", "--abort-on-fail",
                                 "-o", "url=redis://127.0.0.1:6379", "-o", "keyPrefix=t:", "--source-option", "seed=7",
                                 "--source-option", "fields.user_id.kind=zipf", "--schema", "user_id BIGINT",
                                 "--name", "same"]).scenarios[0]
    assert from_file == from_flags
    assert from_file.config.rate == 5000 and from_file.config.duration_s == 12
    assert from_file.config.source_options == {"seed": "7", "fields.user_id.kind": "zipf"}


def test_scenarios_inherit_the_top_level_and_set_and_flags_override_in_that_order(tmp_path):
    path = _file(tmp_path, """
        sink = "noop"
        rate = 1000
        duration = "10s"
        options = { a = "top", b = "top" }
        master = "local[2]"
        output = "out"

        [[scenario]]
        name = "first"

        [[scenario]]
        name = "second"
        rate = "2k"
        options = { b = "second" }
    """, "steps.toml")
    plan = load_plan(path)
    first, second = plan.scenarios
    assert (first.name, first.config.rate, second.config.rate) == ("first", 1000, 2000)
    assert second.config.options == {"a": "top", "b": "second"} and first.config.options == {"a": "top", "b": "top"}
    assert plan.output == "out" and {s.config.master for s in plan.scenarios} == {"local[2]"}

    plan = load_plan(path, sets=["scenario.second.rate=3k", "duration=20", "scenario.first.options.a=set"])
    first, second = plan.scenarios
    assert (second.config.rate, first.config.duration_s, first.config.options["a"]) == (3000, 20, "set")

    plan = plan_from_args(["run", str(path), "--rate", "500", "-o", "b=flag", "--set", "scenario.second.rate=3k"])
    assert [s.config.rate for s in plan.scenarios] == [500, 500]  # a flag applies to every scenario, over --set
    assert [s.config.options["b"] for s in plan.scenarios] == ["flag", "flag"]


def test_secrets_come_from_the_environment_never_from_the_file(tmp_path):
    path = _file(tmp_path, """
        sink = "webhook-sink"
        options = { url = "${ENV:HOOK_URL}", "header.Authorization" = "Bearer ${ENV:HOOK_TOKEN}" }
    """)
    plan = load_plan(path, environ={"HOOK_URL": "https://example.com/in", "HOOK_TOKEN": "s3cr3t"})
    assert plan.scenarios[0].config.options == {"url": "https://example.com/in",
                                                "header.Authorization": "Bearer s3cr3t"}
    with pytest.raises(LoadError, match=re.escape("environment variable HOOK_TOKEN is not set")):
        load_plan(path, environ={"HOOK_URL": "x"})
    for literal in ('options = { "kafka.sasl.password" = "hunter2" }', 'options = { url = "redis://u:pw@h:6379" }'):
        with pytest.raises(LoadError, match=r"put it in the environment"):
            load_plan(_file(tmp_path, literal, "secret.toml"), environ={})


def _refused(capsys, tmp_path, text: str, *extra: str) -> str:
    path = _file(tmp_path, text)
    assert main(["run", str(path), *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"impulse-load: error: {path}"), captured.err
    assert "starting Spark" not in captured.out and "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize("text, words", [
    # an unknown key: the keys allowed are listed, a flag's spelling points to its key
    ('[[scenario]]\nname = "a"\nrat = 10', ["scenario 'a': unknown key 'rat'", "the keys are sink, options, create-topic, rate"]),
    ("threshold = ['p99<1s']", ["unknown key 'threshold'", "the flag --threshold"]),
    ("payload_bytes = 10", ["did you mean 'payload-bytes'?"]),
    # a wrong type, a bad duration, a bad rate, a bad threshold, a range
    ('partitions = "four"', ["key 'partitions': 'four' is not a whole number ≥ 1"]),
    ('abort-on-fail = "yes"', ["key 'abort-on-fail': 'yes' is not true or false"]),
    ('[[scenario]]\nname = "s"\nduration = "soon"', ["scenario 's': key 'duration': 'soon' is not a duration"]),
    ('rate = "fast"', ["key 'rate': 'fast' is not a rate"]),
    ("thresholds = ['p99<500']", ["key 'thresholds'", "give the duration a unit"]),
    ('sink = "noop"\nrate = 0', ["key 'rate' must be > 0"]),
    # a key of the whole run inside a scenario; stages with a rate; a sink missing a required option
    ('[[scenario]]\nname = "x"\nmaster = "local[1]"', ["scenario 'x': key 'master' applies to the whole run"]),
    ('sink = "noop"\nrate = 5\nsource = { rateStages = "5s:100" }', ["key 'source' rateStages sets the rate",
                                                                     "leave out key 'rate'"]),
    ('[[scenario]]\nname = "k"\nsink = "kafka-sink"\noptions = { "kafka.bootstrap.servers" = "127.0.0.1:9" }',
     ["scenario 'k': kafka-sink", "option 'topic'"]),
    ("rate = [", ["not valid TOML"]),
    ('[[scenario]]\nname = "a"\n[[scenario]]\nname = "a"', ["two scenarios are named 'a'"]),
])
def test_a_bad_file_exits_2_before_spark_naming_the_file_the_key_and_what_is_allowed(capsys, tmp_path, text, words):
    line = _refused(capsys, tmp_path, 'sink = "noop"\n' + text if not text.startswith("sink") else text)
    for word in words:
        assert word in line, line


def test_set_names_a_missing_scenario_or_key(capsys, tmp_path):
    text = '[[scenario]]\nname = "a"\nsink = "noop"'
    assert "--set scenario.b.rate: no scenario named 'b' (its scenarios: a)" in _refused(capsys, tmp_path, text, "--set",
                                                                       "scenario.b.rate=1")
    assert "unknown key 'rat'" in _refused(capsys, tmp_path, text, "--set", "rat=1")


def test_a_prefix_of_a_flag_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--sink", "noop", "--rat", "10k"])
    assert exit_.value.code == 2 and "unrecognized arguments: --rat" in capsys.readouterr().err


def test_every_help_example_line_that_ends_in_a_backslash_is_continued(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    examples = lines[lines.index("examples:") + 1:]
    continued = [i for i, line in enumerate(examples) if line.split("  # ")[0].rstrip().endswith("\\")]
    assert continued, "the examples have no continued line: the test checks nothing"
    for i in continued:
        assert examples[i + 1].startswith(" " * 15) and examples[i + 1].strip().startswith("--"), examples[i:i + 2]
    for line in examples:  # a backslash-newline in the source joins two lines into one with a gap of spaces
        assert not re.search(r"\S {8,}--", line.split("  # ")[0]), f"a collapsed continuation: {line!r}"


def test_the_docs_point_to_the_generated_table_of_keys_instead_of_a_copy():
    """The load-test files guide links the reference page docs/hooks.py generates from `KEYS` (tests/test_docs.py
    checks that page names every key), and holds no hand-made copy of a row that could drift from it."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "load-files.md").read_text(encoding="utf-8")
    assert "(../reference/impulse-load.md#flags-and-toml-keys)" in page
    assert "python3 -m impulse.loadtest.scenario" in page  # the same table in a terminal
    rows = keys_table().splitlines()[2:]
    assert len(rows) == len(KEYS)
    assert not [row for row in rows if row in page], "docs/how-to/load-files.md: link the reference, copy no key"
