"""A driver SIGKILLed mid-run and rerun from its checkpoint: Spark's file sink (and Delta, where it runs) still
holds every expected row once by ``--check``'s comparison, and a deliberately non-idempotent ``foreachBatch`` is
caught by it, its replayed batch counted as duplicates.

The driver is tests/loadtest/crash_child.py in a process group of its own (its Python and Spark's JVM), killed
with SIGKILL once its target holds a committed micro-batch, then rerun on the same checkpoint to the end of the
schedule, followed by the check (`impulse.loadtest.check.judge.judge`, the comparison ``impulse-load --check``
makes).
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


def _spec(tmp_path: Path, **given) -> Path:
    spec = {"target": str(tmp_path / "target"), "checkpoint": str(tmp_path / "checkpoint"), "rate": RATE,
            "events": EVENTS, **given}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def _child(mode: str, spec: Path, env: dict | None = None) -> subprocess.Popen:
    environ = {**os.environ, **(env or {}),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "tests.loadtest.crash_child", mode, str(spec)], env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _kill_once(child: subprocess.Popen, committed, timeout_s: float = 300) -> None:
    """SIGKILL the child's process group as soon as `committed()` holds (mid-run: the schedule goes on)."""
    deadline = time.monotonic() + timeout_s
    while not committed():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "no micro-batch committed in time"
        time.sleep(0.05)  # polling the target's directory for the condition above
    os.killpg(child.pid, signal.SIGKILL)
    child.communicate(timeout=60)


def _finish(spec: Path, env: dict | None = None) -> dict:
    """The rerun on the same checkpoint to the end, and the check's result."""
    child = _child("finish", spec, env)
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _spark_commits(target: Path) -> int:
    return len([p for p in (target / "_spark_metadata").glob("[0-9]*")]) if (target / "_spark_metadata").is_dir() else 0


@pytest.mark.integration
def test_a_parquet_target_passes_the_check_after_a_sigkill_and_a_rerun(tmp_path):
    spec = _spec(tmp_path, sink="parquet")
    target = tmp_path / "target"
    _kill_once(_child("run", spec), lambda: _spark_commits(target) >= 1)
    killed_at = _spark_commits(target)
    result = _finish(spec)
    assert result == {"passed": True, "expected": EVENTS // 2, "delivered": EVENTS // 2, "lost": 0,
                      "duplicated": 0, "unexpected": 0}, result
    assert _spark_commits(target) > killed_at  # killed mid-run: the rerun committed the rest


@pytest.mark.integration
@pytest.mark.delta
@pytest.mark.skipif(not DELTA_RUNS_HERE, reason="Delta 4.4.0 runs on PySpark 4.2 only (bash tests/run --lowest)")
def test_a_delta_target_passes_the_check_after_a_sigkill_and_a_rerun(tmp_path):
    packages, ivy = delta_flags()[1], delta_flags()[3].split("=", 1)[1]
    spec = _spec(tmp_path, sink="delta", packages=packages, ivy=ivy)
    log = tmp_path / "target" / "_delta_log"
    _kill_once(_child("run", spec), lambda: log.is_dir() and len(list(log.glob("*.json"))) >= 2)
    result = _finish(spec)
    assert result == {"passed": True, "expected": EVENTS // 2, "delivered": EVENTS // 2, "lost": 0,
                      "duplicated": 0, "unexpected": 0}, result


@pytest.mark.integration
def test_a_non_idempotent_foreach_batch_replayed_after_a_crash_fails_the_check_with_its_duplicates(tmp_path):
    target = tmp_path / "target"
    spec = _spec(tmp_path, sink="foreachBatch", writer=f"{PIPELINES}:append_then_die",
                 reader=f"{PIPELINES}:read_parquet")
    env = {"IMPULSE_TEST_FOREACH_TARGET": str(target)}
    died = _child("run", spec, {**env, "IMPULSE_TEST_DIE": "1"})
    died.communicate(timeout=600)
    assert died.returncode != 0 and target.is_dir()   # it killed itself after appending a batch with rows
    result = _finish(spec, env)
    assert not result["passed"] and result["lost"] == result["unexpected"] == 0, result
    assert result["expected"] == EVENTS // 2 and 0 < result["duplicated"] < EVENTS // 2, result
    assert result["delivered"] == result["expected"] + result["duplicated"], result
