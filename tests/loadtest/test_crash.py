"""``impulse-load`` SIGKILLed mid-run and rerun on its ``--checkpoint``: Spark's file sink (and Delta, where it
runs) still holds every expected row once by the rerun's ``--check``, and a deliberately non-idempotent
``foreachBatch`` is caught by it, its replayed batch counted as duplicates (exit 99).

Each run is ``python -m impulse.loadtest`` in a process group of its own (its Python and Spark's JVM), killed with
SIGKILL once its target holds a committed micro-batch (polled), then the same command again on the same
checkpoint (`impulse.loadtest.load.resume`): it resumes the query, the source keeping its schedule, and checks
the target against every event of the schedule, those of both runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.loadtest.test_delta import DELTA_RUNS_HERE, ROOT, delta_flags

PIPELINES = "tests.loadtest.pipelines"
EVENTS, RATE = 1_000, 200          # 5 s of schedule: 500 even counters


def _impulse_load(tmp_path: Path, argv: list[str], env: dict | None = None) -> subprocess.Popen:
    """``python -m impulse.loadtest ARGV --output DIR`` in a process group of its own (its Python and Spark's JVM)."""
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}"
    environ = {**os.environ, **(env or {}),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "impulse.loadtest", *argv, "--output", str(out)], cwd=tmp_path,
                            env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def _kill_once(child: subprocess.Popen, committed, timeout_s: float = 300) -> None:
    """SIGKILL the child's process group as soon as `committed()` holds (mid-run: the schedule goes on)."""
    deadline = time.monotonic() + timeout_s
    while not committed():
        assert child.poll() is None, child.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "no micro-batch committed in time"
        time.sleep(0.05)  # polling the target's directory for the condition above
    os.killpg(child.pid, signal.SIGKILL)
    child.communicate(timeout=60)


def _rerun(tmp_path: Path, argv: list[str], env: dict | None = None) -> tuple[int, str, dict | None]:
    """The same command again, to its end: (exit code, output, its report.json or None)."""
    child = _impulse_load(tmp_path, argv, env)
    out_dir = Path(child.args[child.args.index("--output") + 1])
    out, _ = child.communicate(timeout=900)
    report = out_dir / "report.json"
    return child.returncode, out, json.loads(report.read_text()) if report.exists() else None


def _argv(tmp_path: Path, *target: str) -> list[str]:
    """``evens`` into `target` on the checkpoint tmp_path/checkpoint, with --check: 1,000 events, at most 100 a
    micro-batch, so that a kill after the first commit is mid-run however late the query started."""
    return ["--rate", str(RATE), "--duration", f"{EVENTS // RATE}s", "--partitions", "2", "--trigger", "300ms",
            "--max-events-per-trigger", str(EVENTS // 10), "--drain-timeout", "5m", "--master", "local[2]",
            "--transform", f"{PIPELINES}:evens", "--check", "--checkpoint", str(tmp_path / "checkpoint"), *target]


def _spark_commits(target: Path) -> int:
    return len([p for p in (target / "_spark_metadata").glob("[0-9]*")]) if (target / "_spark_metadata").is_dir() else 0


def _passed_after_the_kill(tmp_path: Path, code: int, out: str, report: dict | None) -> None:
    assert code == 0, out[-3000:]
    assert report["check"] == {"passed": True, "expected": EVENTS // 2, "delivered": EVENTS // 2, "lost": 0,
                               "duplicated": 0, "unexpected": 0}, report["check"]
    resumed = report["summary"]["resumed"]
    assert resumed["checkpoint"] == str(tmp_path / "checkpoint") and 0 < resumed["eventsBefore"] < EVENTS, resumed
    assert report["summary"]["events"] == EVENTS and "resumed from --checkpoint" in out


@pytest.mark.integration
@pytest.mark.slow
def test_impulse_load_sigkilled_mid_run_and_rerun_on_its_checkpoint_passes_the_check_of_a_parquet_target(tmp_path):
    target = tmp_path / "target"
    argv = _argv(tmp_path, "--sink", "parquet", "-o", f"path={target}")
    _kill_once(_impulse_load(tmp_path, argv), lambda: _spark_commits(target) >= 1)
    killed_at = _spark_commits(target)
    _passed_after_the_kill(tmp_path, *_rerun(tmp_path, argv))
    assert _spark_commits(target) > killed_at  # killed mid-run: the rerun committed the rest
    # a third run on the finished checkpoint has nothing to resume: refused before any load
    code, out, report = _rerun(tmp_path, argv)
    assert code == 2 and "its query already committed all 1,000 events" in out and report is None, out[-3000:]


@pytest.mark.integration
@pytest.mark.delta
@pytest.mark.slow
@pytest.mark.skipif(not DELTA_RUNS_HERE, reason="Delta 4.4.0 runs on PySpark 4.2 only (bash tests/run --lowest)")
def test_impulse_load_sigkilled_mid_run_and_rerun_on_its_checkpoint_passes_the_check_of_a_delta_target(tmp_path):
    log = tmp_path / "target" / "_delta_log"
    # no warm-up (the Parquet test has it): it warms Python's workers, not Delta, and costs each run ~40 s in CI
    argv = _argv(tmp_path, "--sink", "delta", "-o", f"path={tmp_path / 'target'}", "--no-warmup", *delta_flags())
    _kill_once(_impulse_load(tmp_path, argv), lambda: log.is_dir() and len(list(log.glob("*.json"))) >= 2)
    _passed_after_the_kill(tmp_path, *_rerun(tmp_path, argv))


@pytest.mark.integration
@pytest.mark.slow
def test_impulse_load_rerun_after_a_non_idempotent_foreach_batch_died_mid_batch_fails_the_check_with_exit_99(
        tmp_path):
    target = tmp_path / "target"
    argv = _argv(tmp_path, "--foreach-batch", f"{PIPELINES}:append_then_die",
                 "--check-read", f"{PIPELINES}:read_parquet")
    env = {"IMPULSE_TEST_FOREACH_TARGET": str(target)}
    died = _impulse_load(tmp_path, argv, {**env, "IMPULSE_TEST_DIE": "1"})
    died.communicate(timeout=600)
    try:
        os.killpg(died.pid, signal.SIGKILL)   # what is left of its group (Spark's JVM exits with its Python)
    except ProcessLookupError:
        pass
    assert died.returncode == -signal.SIGKILL and target.is_dir()   # it killed itself after appending a batch
    code, out, report = _rerun(tmp_path, argv, env)
    assert code == 99, out[-3000:]
    check = report["check"]
    assert not check["passed"] and check["lost"] == check["unexpected"] == 0, check
    assert check["expected"] == EVENTS // 2 and 0 < check["duplicated"] < EVENTS // 2, check
    assert check["delivered"] == check["expected"] + check["duplicated"], check
