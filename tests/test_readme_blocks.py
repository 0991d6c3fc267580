"""Every shell and Python block of the README and of the documentation's pages (docs/**/*.md) is run by a named test
or says just above it why it is not run in CI; a new block that is neither fails here. (The runners themselves are
the tests named in `RUN` and `DOCS_RUN`.)"""

from __future__ import annotations

import re
from pathlib import Path

from tests.readme import blocks

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CODE = {"python", "bash", "sh", "shell"}

#: (heading, ordinal under it) → the test that runs the README's block as written (addresses filled by its fixtures)
RUN = {
    ("## A five-minute tour: your own pipeline under load", 0):
        "tests/loadtest/test_transform.py::test_the_readme_pipeline_runs_and_passes_its_check",
}

_COOKBOOK = "tests/impulse/test_generated.py::test_the_readme_cookbook_runs"

#: (page under docs/, heading, ordinal under it) → the test that runs the block as written, reading it from that page
#: (`tests.readme.python_block` or `section` with ``page=``); the pages the hooks generate from the code have no
#: blocks to run
DOCS_RUN: dict[tuple[str, str, int], str] = {
    ("how-to/profile-and-replay.md", "## Replay a recording", 0):
        "tests/replay/test_replay.py::test_the_how_to_block_defines_a_replay_stream",
    ("how-to/install.md", "## Register the formats", 0): _COOKBOOK,
    ("how-to/impulse-source.md", "## A stream at a fixed rate", 0): _COOKBOOK,
    ("how-to/impulse-source.md", "## Rates that change: `rateStages`", 0):
        "tests/impulse/test_stages_stream.py::test_the_readme_spike_test_counts_the_integral_of_its_stages",
    ("how-to/impulse-source.md", "## A daily cycle and bursts: `rateCurve`, `bursts.*`", 0):
        "tests/impulse/test_curve_stream.py::test_the_how_to_day_counts_the_curve_s_integral_per_second",
    ("how-to/realistic-events.md", "## Typed columns", 0): _COOKBOOK,
    ("how-to/realistic-events.md", "### Cookbook", 0): _COOKBOOK,
    ("how-to/realistic-events.md", "### Cookbook", 1): _COOKBOOK,
    ("how-to/realistic-events.md", "## Nested events and realistic text: ARRAY, MAP, STRUCT and `kind=faker`", 0):
        "tests/impulse/test_nested_stream.py::test_the_readme_order_block_runs_and_its_stream_equals_the_batch_read",
    ("how-to/related-streams.md", "## References between streams: `kind=ref`", 0):
        "tests/impulse/test_ref_join.py::test_every_order_joins_its_customer_exactly_once_in_the_stream_and_the_batch_read",
    ("how-to/related-streams.md", "## Changelogs: `changelog.key`", 0):
        "tests/sinks/test_changelog_redis.py::test_the_accounts_cookbook_killed_and_restarted_leaves_exactly_the_final_state",
    ("how-to/nexmark.md", "## Read the events", 0): _COOKBOOK,
    ("how-to/dedup-stage.md", "## A dedup stage, checked", 0):
        "tests/impulse/test_dedup_howto.py::test_the_dedup_howto_block_leaves_each_event_once",
    ("how-to/cdc-pipeline.md", "## Debezium change events to Kafka", 0):
        "tests/sinks/test_cdc_howto.py::test_the_cdc_howto_blocks_run_and_the_compacted_topic_is_the_expected_table",
    ("how-to/cdc-pipeline.md", "## The expected table", 0):
        "tests/sinks/test_cdc_howto.py::test_the_cdc_howto_blocks_run_and_the_compacted_topic_is_the_expected_table",
    ("how-to/redis-sink.md", "## A list per query", 0): "tests/sinks/test_redis.py::test_the_readme_redis_block_runs",
    ("how-to/redis-sink.md", "## A leaderboard: a sorted set per key", 0):
        "tests/sinks/test_redis.py::test_the_readme_leaderboard_block_keeps_each_games_ten_best_scores",
    ("how-to/redis-cluster.md", "## Point the sink at any node", 0):
        "tests/sinks/test_redis_cluster_sink.py::test_the_readme_cluster_block_runs",
    ("how-to/kafka-sink.md", "## A stream into a topic", 0): "tests/sinks/test_kafka.py::test_the_readme_kafka_blocks_run",
    ("how-to/kafka-sink.md", "## Create the topic", 0): "tests/sinks/test_kafka.py::test_the_readme_kafka_blocks_run",
    ("how-to/kafka-sink.md", "## Record formats and the Schema Registry", 0):
        "tests/sinks/test_kafka_sink_registry.py::test_the_readme_avro_block_runs",
    ("how-to/webhook-sink.md", "## Send a stream to an endpoint", 0):
        "tests/sinks/test_webhook_readme.py::test_the_readme_webhook_block_runs",
    ("how-to/batch-writes.md", "# Batch writes", 0):
        "tests/sinks/test_sql.py::test_readme_batch_writes_run_and_rerun_writes_nothing_twice",
    ("how-to/sql.md", "# SQL", 0): "tests/sinks/test_sql.py::test_readme_sql_runs",
    ("tutorial/index.md", "## Your pipeline between the events and the sink", 0):
        "tests/loadtest/test_transform.py::test_the_readme_pipeline_runs_and_passes_its_check",
    ("tutorial/profile-to-load-test.md", "## The sample", 0):
        "tests/profile/test_keys.py::test_the_tutorial_profiles_two_tables_and_the_join_keeps_its_match_rate",
    ("tutorial/profile-to-load-test.md", "## Run your pipeline on the generated stream", 1):
        "tests/profile/test_keys.py::test_the_tutorial_profiles_two_tables_and_the_join_keeps_its_match_rate",
    ("tutorial/index.md", "## A pipeline with a Python UDF under a ramp", 0):
        "tests/loadtest/test_before_the_load.py::test_a_module_with_a_top_level_udf_runs_each_ramp_step_warm",
}


def test_every_code_block_is_run_or_says_why_not():
    code = [(h, i, lang, line, reason) for h, i, lang, line, reason in blocks() if lang in CODE]
    assert len(code) >= 3, "the README's blocks were not found: the test checks nothing"
    unaccounted = [f"README.md:{line} ({h!r}, block {i}, {lang})" for h, i, lang, line, reason in code
                   if (h, i) not in RUN and reason is None]
    assert not unaccounted, ("run these blocks in a test (and add them to RUN) or put <!-- not run in CI: reason --> "
                             f"just above them: {unaccounted}")
    doubly = [(h, i) for h, i, _, _, reason in code if reason is not None and (h, i) in RUN]
    assert not doubly, f"marked as not run, yet listed as run: {doubly}"


def test_each_listed_block_exists_and_its_runner_reads_that_section():
    present = {(h, i) for h, i, lang, _, _ in blocks() if lang in CODE}
    assert not set(RUN) - present, f"listed blocks the README no longer has: {set(RUN) - present}"
    for (heading, _), runner in RUN.items():
        _assert_runner_reads(runner, heading)


def _assert_runner_reads(runner: str, heading: str, page: str | None = None) -> None:
    """`runner` (``path::test``) exists and it, or a tests module it uses, names the section `heading` (and the file
    name of its `page` of docs/, where it reads the block: the README is `python_block`'s default)."""
    path, name = runner.split("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    assert re.search(rf"^def {name}\(", source, re.MULTILINE), f"{runner}: no such test"
    helpers = [ROOT / (m.replace(".", "/") + ".py") for m in re.findall(r"\btests\.[\w.]+", source)]
    texts = [source] + [h.read_text(encoding="utf-8") for h in helpers if h.is_file()]
    title = heading.lstrip("#").strip().split(":")[0]
    assert any(title in text for text in texts), f"{runner} (or a tests module it uses) does not name {heading!r}"
    assert page is None or any(page in text for text in texts), f"{runner} does not read its block from {page}"


def _docs_code_blocks() -> list[tuple[str, str, int, str, int, str | None]]:
    """Every code block of docs/**/*.md: ``(page under docs/, heading, ordinal, language, line, not-run reason)``."""
    return [(page.relative_to(DOCS).as_posix(), h, i, lang, line, reason)
            for page in sorted(DOCS.rglob("*.md")) for h, i, lang, line, reason in blocks(page) if lang in CODE]


def test_every_code_block_of_the_docs_is_run_or_says_why_not():
    pages = sorted(DOCS.rglob("*.md"))
    assert len(pages) >= 5, f"the documentation's pages were not found under {DOCS}: the test checks nothing"
    code = _docs_code_blocks()
    unaccounted = [f"docs/{page}:{line} ({h!r}, block {i}, {lang})" for page, h, i, lang, line, reason in code
                   if (page, h, i) not in DOCS_RUN and reason is None]
    assert not unaccounted, ("run these blocks in a test (and add them to DOCS_RUN) or put <!-- not run in CI: reason "
                             f"--> just above them: {unaccounted}")
    doubly = [(page, h, i) for page, h, i, _, _, reason in code if reason is not None and (page, h, i) in DOCS_RUN]
    assert not doubly, f"marked as not run, yet listed as run: {doubly}"


def test_each_listed_docs_block_exists_and_its_runner_reads_that_section():
    present = {(page, h, i) for page, h, i, _, _, _ in _docs_code_blocks()}
    assert not set(DOCS_RUN) - present, f"listed blocks the docs no longer have: {set(DOCS_RUN) - present}"
    for (page, heading, _), runner in DOCS_RUN.items():
        _assert_runner_reads(runner, heading, Path(page).name)


def test_blocks_finds_fenced_and_indented_blocks_with_their_heading_and_reason(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```bash\necho run\n```\n\n## Part\n\n<!-- not run in CI: needs a cluster -->\n"
                    "```python\nprint(1)\n```\n\n- a step:\n\n    ~~~sh\n    ls\n    ```\n    ~~~\n\n"
                    "```\nplain output\n```\n", encoding="utf-8")
    assert blocks(page) == [("# Title", 0, "bash", 3, None), ("## Part", 0, "python", 10, "needs a cluster"),
                            ("## Part", 1, "sh", 16, None), ("## Part", 2, "", 21, None)]
