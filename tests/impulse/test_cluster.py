"""The restart test on ``local-cluster[2,1,1024]``: two executor JVMs, each with its own Python workers.

A JVM holds one SparkContext and the shared session is ``local[2,2]``, so the job runs in a subprocess
(`restart_job.py`) and prints its findings as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[2]


def test_restart_on_separate_executor_processes(tmp_path):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("restart_job.py")), "local-cluster[2,1,1024]",
                           str(tmp_path / "checkpoint")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"job failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    result = json.loads(lines[-1][len("RESULT "):])
    calls = {int(k): v for k, v in result["calls"].items()}
    assert result["executors"] == 2  # two executors besides the driver

    # the replayed batch: same batch id, same rows (timestamps and payloads included)
    replayed = calls[result["replayed"]]
    assert len(replayed) == 2 and replayed[0] and replayed[0] == replayed[1]

    # counters: 0..499 on each of the 4 partitions, each batch ≤ 200 rows, no gap, no duplicate
    seen: dict[int, list[int]] = {}
    for runs in calls.values():
        assert len(runs[0]) <= 200
        for counter, subtask, ts, payload in runs[0]:
            seen.setdefault(subtask, []).append(counter)
            assert ts == counter * 1000
            assert payload[:32] == f"{counter:016X}{subtask:016X}"
            assert len(payload) == 48
    assert {s: sorted(c) for s, c in seen.items()} == {s: list(range(500)) for s in range(4)}
    offsets = {int(k): v for k, v in result["offsets"].items()}
    assert offsets[max(offsets)]["counters"] == [500, 500, 500, 500]
