"""The benchmark commands the summary table of bench/README.md names run to their end at a small size in CI, so that
a benchmark cannot rot unseen (the full sizes are for a quiet machine, not CI)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.readme import BENCH, section

ROOT = Path(__file__).resolve().parents[1]

#: script → the flags that shrink its README command (they replace the README's values or are added): each run is
#: the README's command at a size that only proves it runs to its end (rows, batches and rounds tiny; every contender,
#: warm-up and check of the full run still happens once). Each starts its own Spark (and its own servers).
SMALL = {
    "bench/impulse_vs_rate.py": {"--rows-per-batch": "1000", "--batches": "1", "--rounds": "1", "--warmup-batches": "1"},
    "bench/columns.py": {"--rows-per-batch": "1000", "--batches": "1", "--rounds": "1", "--warmup-batches": "1"},
    "bench/redis_sink.py": {"--rows": "2000", "--skip-spark": None},
    "bench/webhook_sink.py": {"--rows": "1000", "--repeat": "1"},
    "bench/kafka_sink.py": {"--rows": "1000", "--batches": "1", "--repeat": "1", "--warmup-rounds": "0"},
    "bench/nexmark.py": {"--rows-per-batch": "1000", "--batches": "1", "--rounds": "1", "--warmup-batches": "1",
                         "--events": "2000"},
    "bench/batch_write.py": {"--rows": "1000", "--repeat": "1", "--warmup-rounds": "0"},
    "bench/nexmark_table.py": {"--queries": "q0", "--rows": "2000", "--per-trigger": "1000", "--step-duration": "2s",
                               "--latency-duration": "2s", "--precision": "50%", "--lo-factor": "0.25",
                               "--hi-factor": "0.5"},
    "bench/nexmark_stateful.py": {"--rows": "4000", "--per-trigger": "1000", "--rounds": "1", "--queries": "q16",
                                  "--variants": "bucket ceiling"},
    "bench/production_e2e.py": {"--rows": "2000", "--rows-per-batch": "2000", "--batches": "1", "--warmup-batches": "1",
                                "--rounds": "1"},
}
#: the servers a script starts itself, as the test's markers (the webhook benches run their own receiver)
NEEDS = {"bench/redis_sink.py": ["redis"], "bench/kafka_sink.py": ["kafka"], "bench/batch_write.py": ["kafka"],
         "bench/production_e2e.py": ["kafka", "schema_registry"]}


def readme_commands() -> dict[str, list[str]]:
    """script → the argv of its command in bench/README.md's Summary section."""
    found = re.findall(r"`python (bench/\w+\.py)([^`]*)`", section("## Summary", BENCH))
    return {script: shlex.split(args) for script, args in found}


def shrunk(argv: list[str], small: dict[str, str | None]) -> list[str]:
    """`argv` with each flag of `small` and its values (all up to the next flag) replaced by `small`'s (a value of
    several words: several values)."""
    out, skipping = [], False
    for arg in argv:
        if arg.startswith("--"):
            skipping = arg in small
        if not skipping:
            out.append(arg)
    for flag, value in small.items():
        out += [flag] if value is None else [flag, *value.split()]
    return out


def test_every_benchmark_the_readme_names_is_run_here():
    commands = readme_commands()
    assert len(commands) >= 5, "bench/README.md's Summary commands were not found: the test checks nothing"
    assert set(commands) <= set(SMALL), f"run these at a small size here: {set(commands) - set(SMALL)}"


def result_of(stdout: str) -> dict:
    """The JSON object a script prints last on stdout (on one line or indented)."""
    lines = stdout.splitlines()
    first = max(i for i, line in enumerate(lines) if line.startswith("{"))
    return json.loads("\n".join(lines[first:]))


def ratios_in(value, key: str = "") -> list:
    """Every value under a key that names a ratio (``ratio``, ``ratios``, ``sink_vs_plain`` …)."""
    if isinstance(value, dict):
        return [r for k, v in value.items() for r in ratios_in(v, k if "ratio" in k or "_vs_" in k else key)]
    if isinstance(value, list):
        return [r for v in value for r in ratios_in(v, key)]
    return [value] if key and not isinstance(value, str) else []


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("script", [pytest.param(s, marks=[getattr(pytest.mark, m) for m in NEEDS.get(s, [])])
                                    for s in SMALL])
def test_each_readme_benchmark_runs_to_its_end_at_a_small_size(script, tmp_path):
    small = SMALL[script]
    argv = shrunk(readme_commands()[script], small)
    if "--output" in argv:  # what a script keeps goes to this test's folder, never into the checkout
        argv = shrunk(argv, {"--output": str(tmp_path / "output")})
    done = subprocess.run([sys.executable, script, *argv, "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = result_of(done.stdout)
    size = int(next(value for flag, value in small.items() if flag.startswith("--rows")))
    assert size in (result.get("rows"), result.get("rows_per_batch")), "the run was not the small one"
    assert result.get("errors", 0) == 0
    ratios = ratios_in(result)
    assert ratios and all(r is not None and r > 0 for r in ratios), ratios


def test_the_figures_script_runs_to_its_end():
    """`bench/figures.py`, whose figures bench/README.md's "Figures behind the code" quotes, at a tiny size."""
    done = subprocess.run([sys.executable, "bench/figures.py", "--json", "--hash-mib", "1", "--latencies", "100",
                           "--repeat", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert set(figures) == {"hash_sha256_gb_per_s", "hash_blake2b_gb_per_s", "gc_objects", "gc_collect_cpu_ms",
                            "histogram_vectorised_ms", "histogram_record_value_ms", "metadata_version_ms"}
    assert figures["gc_objects"] > 1000 and all(value >= 0 for value in figures.values())
    assert "python bench/figures.py" in (ROOT / "bench" / "README.md").read_text()


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.schema_registry
def test_the_record_format_sink_benchmark_runs_to_its_end(schema_registry):
    """bench/README.md's ``bench/kafka_sink.py --value-format avro`` command (not in the README's table: the
    test above runs that script's other mode), tiny, against the test session's registry."""
    [args] = re.findall(r"python bench/kafka_sink.py (--value-format avro[^\n`]*)", (ROOT / "bench" / "README.md")
                        .read_text())
    argv = shrunk(shlex.split(args), {**SMALL["bench/kafka_sink.py"], "--schema-registry-url": schema_registry.url})
    done = subprocess.run([sys.executable, "bench/kafka_sink.py", *argv, "--json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = result_of(done.stdout)
    assert result["rows"] == 1000 and all(r > 0 for r in ratios_in(result))
